// Output files compressed by their name: "x.gz" is written as gzip, "x.zst"
// as zstd, anything else as is. The result is a plain FILE* (a glibc
// fopencookie stream over the compressor), so the commands write with
// fprintf/fwrite whatever the format; fclose finishes the compressed stream
// and returns EOF if any of it could not be written.
#ifndef NEARDUP_IO_OUTPUT_FILE_H_
#define NEARDUP_IO_OUTPUT_FILE_H_

#include <cstdio>
#include <string>

#include "neardup/util/status.h"

namespace neardup {

enum class OutputCompression { kNone, kGzip, kZstd };

// By the file name's ending.
OutputCompression OutputCompressionOf(const std::string& path);

// Creates (truncates) `path`, or with `append` adds to its end (a
// compressed file then gets a new gzip member / zstd frame, which readers
// take as one stream); kIOError if it cannot be opened.
Result<std::FILE*> OpenOutputFile(const std::string& path, bool append = false);

}  // namespace neardup

#endif  // NEARDUP_IO_OUTPUT_FILE_H_
