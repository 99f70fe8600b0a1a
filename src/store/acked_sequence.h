// The last acknowledged write of a store, kept beside RocksDB (the file
// ACKED in the store's directory), so that start-up can tell a write-ahead
// log that lost acknowledged writes from one that merely ends: RocksDB reads
// a log cut at a record boundary, or a deleted live log, as "nothing more was
// written" (its track_and_verify_wals_in_manifest covers closed logs only).
//
// After every synced write the store records RocksDB's latest sequence
// number here: an 8-byte pwrite, not synced. The log's fsync happened
// before, so whatever version of this file reaches the disk never names a
// sequence number the log does not hold: the check can miss a loss (a power
// cut may leave an older value) but never reports one that did not happen.
// Only synced stores keep it (with sync = false the log itself may lag the
// file after a power cut); such a store removes it at open.
//
// Internal to the store layer; docs/storage.md "Damaged files" describes it.
#ifndef NEARDUP_STORE_ACKED_SEQUENCE_H_
#define NEARDUP_STORE_ACKED_SEQUENCE_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "neardup/util/status.h"

namespace neardup::store_internal {

class AckedSequence {
 public:
  explicit AckedSequence(const std::string& dir);
  ~AckedSequence();
  AckedSequence(const AckedSequence&) = delete;
  AckedSequence& operator=(const AckedSequence&) = delete;

  // The recorded sequence number; nullopt if the store has no such file
  // (written by an older build, or by a store with sync = false).
  // kCorruption if the file exists but is not one of ours.
  Result<std::optional<uint64_t>> Read() const;

  // Starts recording at `sequence` (the store's current one): creates or
  // rewrites the file, synced once.
  Status Start(uint64_t sequence);

  // Records `sequence` if it is above what was recorded. Best effort and
  // thread-safe: a failed or reordered write only makes the file lag.
  void Record(uint64_t sequence);

  // Removes the file (a store opened with sync = false).
  Status Remove();

 private:
  const std::string path_;
  int fd_ = -1;
  std::atomic<uint64_t> recorded_{0};
};

}  // namespace neardup::store_internal

#endif  // NEARDUP_STORE_ACKED_SEQUENCE_H_
