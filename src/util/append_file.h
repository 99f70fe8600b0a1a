// Continuing a checksummed file that an earlier process was writing: what a
// resumed run (dedup --memory-limit --checkpoint) needs of the writers whose
// files span a checkpoint (stage files, kept-document files).
#ifndef NEARDUP_UTIL_APPEND_FILE_H_
#define NEARDUP_UTIL_APPEND_FILE_H_

#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "neardup/util/status.h"

namespace neardup {

// Reopens `tmp`, which an earlier process had written through `bytes` bytes
// when it recorded them and their XXH3-64 `digest`, for more appends: cuts
// it back to `bytes` (the process may have written more before it died) and
// feeds those bytes to `hash` (reset first). When `tmp` is gone but
// `finished` exists, the earlier process had completed the file after the
// record (its trailer follows the same bytes): it is taken back under `tmp`.
// kCorruption when the file is shorter than `bytes` or its first `bytes` do
// not hash to `digest`; kIOError when it cannot be opened or cut.
// The returned stream is positioned at `bytes`; the caller owns it.
Result<std::FILE*> ReopenForAppend(const std::string& tmp, const std::string& finished, uint64_t bytes,
                                   uint64_t digest, XXH3_state_t* hash);

// fflush, then fsync: what was written so far survives a crash.
Status SyncStream(std::FILE* f, const std::string& name);

}  // namespace neardup

#endif  // NEARDUP_UTIL_APPEND_FILE_H_
