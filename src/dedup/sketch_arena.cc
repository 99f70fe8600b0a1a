#include "dedup/sketch_arena.h"

#include "util/temp_file.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace neardup::internal {

namespace {

constexpr size_t kChunkBytes = SketchArena::kChunkWords * sizeof(uint32_t);

}  // namespace

SketchArena::SketchArena() = default;
SketchArena::SketchArena(int fd) : fd_(fd) {}

SketchArena::~SketchArena() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<SketchArena>> SketchArena::InFile(const std::string& dir) {
  const int fd = OpenUnnamedFile(dir);
  if (fd < 0) {
    return Status::IOError("cannot create the sketch file in " + dir + ": " + std::strerror(errno));
  }
  // Reads are single records at random places: read-ahead would only push
  // other records out of the page cache.
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  return std::unique_ptr<SketchArena>(new SketchArena(fd));
}

Status SketchArena::Append(const uint32_t* rec, size_t n, uint64_t* offset) {
  if (chunks_.empty() || chunks_[tail_].end + n > kChunkWords) NewTail();
  Chunk& c = chunks_[tail_];
  const uint64_t at = (tail_ << kChunkBits) | c.end;
  if (fd_ >= 0) {
    const size_t bytes = n * sizeof(uint32_t);
    const off_t pos = static_cast<off_t>(at * sizeof(uint32_t));
    const ssize_t w = ::pwrite(fd_, rec, bytes, pos);
    if (w != static_cast<ssize_t>(bytes)) return FileWriteError("sketch file write failed", w < 0 ? errno : ENOSPC);
  } else {
    std::copy(rec, rec + n, c.words.get() + c.end);
  }
  c.end += n;
  c.live += n;
  *offset = at;
  return Status::OK();
}

Status SketchArena::Read(uint64_t offset, size_t n, uint32_t* buf, const uint32_t** rec) const {
  if (fd_ < 0) {
    *rec = chunks_[offset >> kChunkBits].words.get() + (offset & (kChunkWords - 1));
    return Status::OK();
  }
  const size_t bytes = n * sizeof(uint32_t);
  const ssize_t r = ::pread(fd_, buf, bytes, static_cast<off_t>(offset * sizeof(uint32_t)));
  if (r != static_cast<ssize_t>(bytes)) {
    return Status::IOError(std::string("sketch file read failed: ") + (r < 0 ? std::strerror(errno) : "short read"));
  }
  *rec = buf;
  return Status::OK();
}

void SketchArena::Prefetch(uint64_t offset) const {
  if (fd_ >= 0) return;
  const uint32_t* p = chunks_[offset >> kChunkBits].words.get() + (offset & (kChunkWords - 1));
  __builtin_prefetch(p);
  __builtin_prefetch(p + 16);
}

int64_t SketchArena::Release(uint64_t offset, size_t n) {
  const uint64_t c = offset >> kChunkBits;
  chunks_[c].live -= n;
  return c != tail_ && chunks_[c].live * 2 < kChunkWords ? static_cast<int64_t>(c) : -1;
}

Status SketchArena::Evacuate(uint64_t c, size_t (*size_of)(const uint32_t*), const MoveFn& move) {
  // c is not the tail, so move's appends go elsewhere; it is reusable only
  // afterwards (an old offset must never name a moved record).
  const size_t end = chunks_[c].end;
  std::unique_ptr<uint32_t[]> copy;
  const uint32_t* words = chunks_[c].words.get();
  if (fd_ >= 0) {
    copy = std::make_unique_for_overwrite<uint32_t[]>(end);
    NEARDUP_RETURN_IF_ERROR(Read(c << kChunkBits, end, copy.get(), &words));
  }
  for (size_t i = 0; i < end;) {
    const uint32_t* rec = words + i;
    const int64_t moved = move((c << kChunkBits) | i, rec);
    if (moved < 0) return Status::IOError("a sketch record could not be moved; its chunk stays");
    chunks_[c].live -= static_cast<size_t>(moved);
    i += size_of(rec);
  }
  FreeChunk(c);
  return Status::OK();
}

void SketchArena::FreeChunk(uint64_t c) {
  if (fd_ >= 0) {
    // Best effort: a file system without hole punching keeps the blocks
    // until the chunk is reused.
    ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(c * kChunkBytes),
                static_cast<off_t>(kChunkBytes));
  }
  chunks_[c] = Chunk{};
  free_.push_back(c);
}

void SketchArena::NewTail() {
  if (!free_.empty()) {
    tail_ = free_.back();
    free_.pop_back();
  } else {
    tail_ = chunks_.size();
    chunks_.emplace_back();
  }
  if (fd_ < 0) chunks_[tail_].words = std::make_unique_for_overwrite<uint32_t[]>(kChunkWords);
}

size_t SketchArena::MemoryBytes() const {
  const size_t buffers = fd_ >= 0 ? 0 : (chunks_.size() - free_.size()) * kChunkBytes;
  return chunks_.capacity() * sizeof(Chunk) + buffers + free_.capacity() * sizeof(uint64_t);
}

size_t SketchArena::FileBytes() const { return fd_ >= 0 ? (chunks_.size() - free_.size()) * kChunkBytes : 0; }

}  // namespace neardup::internal
