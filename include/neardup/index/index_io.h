// Saving and loading a HammingIndex.
//
// The file holds the entries (fingerprint, id), the fingerprint scheme id they
// were computed with, and an XXH3-64 checksum; the tables are rebuilt on load
// (a bulk build, so loading is bounded by memory bandwidth, not by disk
// format). The byte layout is specified in docs/index-format.md.
//
// Errors: kIOError (cannot open/write), kCorruption (bad magic, unknown
// version, truncated file, checksum mismatch), kFailedPrecondition (the file's
// scheme id differs from the expected one: fingerprints of different schemes
// must never be mixed).
#ifndef NEARDUP_INDEX_IO_H_
#define NEARDUP_INDEX_IO_H_

#include <cstdint>
#include <memory>
#include <string>

#include "neardup/index/hamming_index.h"
#include "neardup/index/multi_index.h"

namespace neardup {

// Writes atomically: to `path`.tmp, fsync, then rename over `path`.
Status SaveIndex(const HammingIndex& index, uint64_t scheme_id, const std::string& path);

struct IndexFileInfo {
  uint32_t format_version = 0;
  uint64_t scheme_id = 0;
  uint64_t num_entries = 0;
};

// Reads only the header (no checksum verification of the body).
Result<IndexFileInfo> ReadIndexFileInfo(const std::string& path);

// Loads into a new MultiIndex built with `options`. Pass expected_scheme_id = 0
// to accept any scheme (tools that only inspect files).
Result<std::unique_ptr<HammingIndex>> LoadIndex(const std::string& path, uint64_t expected_scheme_id,
                                                const MultiIndexOptions& options = {});

}  // namespace neardup

#endif  // NEARDUP_INDEX_IO_H_
