// SketchArena: the kept documents' sketch records (NearDupSet), appended to
// fixed-size chunks, either in memory or in an unnamed temporary file.
//
// Why chunks: a record never moves while its chunk is more than half live;
// below that the chunk's live records move to the tail and the chunk is
// freed, so space follows the live records under a retention window's
// steady removals while no step copies more than one chunk (a single growing
// vector copied every record, gigabytes at 10M documents, whenever it
// doubled or was compacted).
//
// Why a file: the records are most of what a kept short text costs (up to
// 1 KiB for a long one), while a check reads only its few candidates'. In a
// file they cost page cache, which the kernel reclaims, instead of resident
// memory (issue 14: 50M documents in one 24 GiB service). The file is a
// cache of what the caller can rebuild (the service re-inserts every
// document from its store at start): unnamed (O_TMPFILE), so nothing is left
// behind by a crash, and never synced.
//
// Thread-safety: Read may run concurrently with Read; everything else needs
// exclusive access.
#ifndef NEARDUP_DEDUP_SKETCH_ARENA_H_
#define NEARDUP_DEDUP_SKETCH_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "neardup/util/status.h"

namespace neardup::internal {

class SketchArena {
 public:
  static constexpr int kChunkBits = 16;
  static constexpr size_t kChunkWords = size_t{1} << kChunkBits;  // 256 KiB

  // In memory.
  SketchArena();
  // In an unnamed file in `dir` (kIOError if it cannot be created).
  static Result<std::unique_ptr<SketchArena>> InFile(const std::string& dir);
  ~SketchArena();
  SketchArena(const SketchArena&) = delete;
  SketchArena& operator=(const SketchArena&) = delete;

  bool in_file() const { return fd_ >= 0; }

  // Copies a record of n (<= kChunkWords) words; *offset receives its
  // place. In a file: kStorageFull (no space) or kIOError, and nothing kept.
  Status Append(const uint32_t* rec, size_t n, uint64_t* offset);
  // The n words at offset: a pointer into memory, or (in a file) `buf`
  // (room for n words) after reading them into it. kIOError if a read fails.
  Status Read(uint64_t offset, size_t n, uint32_t* buf, const uint32_t** rec) const;
  // Starts loading a record's first cache lines (memory only).
  void Prefetch(uint64_t offset) const;

  // The record at offset (n words) is dead. Returns the chunk to evacuate
  // (more than half dead, not the tail), or -1.
  int64_t Release(uint64_t offset, size_t n);
  // Calls move(offset, record) for each record ever appended to chunk c
  // (dead ones included: the caller tells them apart and re-appends the live
  // ones). move returns the words it re-appended (0 for a dead record), or
  // -1 if the re-append failed: the chunk is then kept, holding the records
  // not moved, and the error returned. Otherwise the chunk is freed.
  using MoveFn = std::function<int64_t(uint64_t offset, const uint32_t* rec)>;
  Status Evacuate(uint64_t c, size_t (*size_of)(const uint32_t*), const MoveFn& move);

  // Resident bytes (chunk buffers in memory; the bookkeeping in a file).
  size_t MemoryBytes() const;
  // Bytes of live chunks in the file (0 in memory).
  size_t FileBytes() const;

 private:
  struct Chunk {
    std::unique_ptr<uint32_t[]> words;  // memory only
    size_t end = 0;                     // words appended
    size_t live = 0;                    // words of records not released
  };
  explicit SketchArena(int fd);
  void NewTail();
  void FreeChunk(uint64_t c);

  int fd_ = -1;
  std::vector<Chunk> chunks_;
  uint64_t tail_ = 0;
  std::vector<uint64_t> free_;  // chunks freed by evacuation, reused first
};

}  // namespace neardup::internal

#endif  // NEARDUP_DEDUP_SKETCH_ARENA_H_
