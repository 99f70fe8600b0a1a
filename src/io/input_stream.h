// A byte source over a file or standard input that undoes gzip and zstd
// compression, recognized by the first bytes (gzip 1f 8b, zstd 28 b5 2f fd or
// a skippable frame 5X 2a 4d 18),
// never by the file name: `neardup dedup -i dump.jsonl.gz` and
// `zcat dump.jsonl.gz | neardup dedup -i -` read the same documents.
//
// Errors are Status values naming the input and what is wrong: a directory
// (kInvalidArgument: a command-line mistake), an unreadable file (kIOError),
// corrupt or truncated compressed data (kCorruption). A truncated stream is
// an error, never a silent short read.
//
// Not thread-safe.
#ifndef NEARDUP_IO_INPUT_STREAM_H_
#define NEARDUP_IO_INPUT_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "neardup/util/status.h"

namespace neardup {

enum class Compression { kNone, kGzip, kZstd };

// How messages name an input: "standard input" for '-', else its path.
std::string InputDisplayName(const std::string& path);

class InputStream {
 public:
  // Opens `path` ('-' = standard input) and looks at its first bytes.
  // Errors of reading it name `name` (default: `path`): a copy's reader
  // names what it copied (the standard input that --memory-limit spools).
  static Result<std::unique_ptr<InputStream>> Open(const std::string& path, std::string name = "");
  // The same over an open FILE* (not owned); `name` appears in errors.
  static std::unique_ptr<InputStream> FromFile(std::FILE* file, std::string name);

  virtual ~InputStream();

  // Reads up to `capacity` decompressed bytes into `buf`; *got = 0 only at
  // the end of the data. Once an error is returned every later call
  // returns it again.
  Status Read(char* buf, size_t capacity, size_t* got);

  Compression compression() const;
  const std::string& name() const { return name_; }
  // Bytes read from the file so far (compressed, if it is): progress
  // against the file's size.
  uint64_t raw_bytes() const { return raw_bytes_; }

  struct Decoder;  // one per compression format (input_stream.cc)

 private:
  InputStream(std::FILE* file, bool owned, std::string name);
  Status Fill();  // refills raw_ from the file
  Status Detect();

  std::FILE* file_;
  bool owned_;
  std::string name_;
  std::unique_ptr<char[]> raw_;  // compressed (or plain) bytes from the file
  size_t raw_pos_ = 0, raw_end_ = 0;
  bool raw_eof_ = false;
  uint64_t raw_bytes_ = 0;
  bool detected_ = false;
  std::unique_ptr<Decoder> decoder_;  // null for plain input
  Status status_;
};

}  // namespace neardup

#endif  // NEARDUP_IO_INPUT_STREAM_H_
