// AnchorTable: anchor (u32) -> the kept document ids indexed under it
// (internal to the library; NearDupSet's candidate source of step 2).
//
// A key that receives more than `cap` ids becomes a stop key for good: its
// list is freed and Collect reports it (false), so the caller can skip it and
// probe the next anchor.
//
// Why this layout (issue 17): under anchor scheme 2 a kept document is
// indexed under up to 16 anchors, so this is the set's largest structure.
// On 1M short documents it held, per kept document, 4.1 keys (3.0 of them
// with one id) and 6.4 ids in lists: 190 B when a slot was 16 bytes and a
// list a std::vector (24 bytes in a deque, plus a heap block with its malloc
// header and doubling slack). Now, while every id fits 31 bits, a slot is 8
// bytes (the key and one word: empty, stop, an id, or where its list is) and
// the lists are blocks of 4-byte words carved from 1 MB chunks, in classes
// of 4, 6, 8, 12, 16, ... words (at most 1.5x slack, no allocation per
// list): 86 B on the same input, the same output.
//
// Ids of 31 bits and more (a namespace of the service that has stored 2^31
// documents in its life; the batch job past 2^31 input lines) do not fit:
// the first such id moves every key to the same layout with 8-byte words,
// once (a pause proportional to the table), and the table stays so. A list
// pool past 2^31 words, or a list past 2^26 ids, does the same. Both layouts
// are one template, checked against a std::map oracle
// (tests/anchor_table_test.cc), the move included. Ids must be below 2^63 - 1.
//
// Thread-safety: const methods may run concurrently; the others need
// exclusive access.
#ifndef NEARDUP_SRC_DEDUP_ANCHOR_TABLE_H_
#define NEARDUP_SRC_DEDUP_ANCHOR_TABLE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "util/hash.h"
#include "util/segmented_table.h"

namespace neardup::internal {

// Lists of W-wide ids in blocks of Words(c) words (4, 6, 8, 12, 16, 24, ...:
// at most 1.5x slack), each [header, ids...]; the header holds the count
// and the class c. A block is named by the offset of its first word. Blocks
// of up to a chunk live in shared chunks; a larger one is its own
// allocation, at the start of the chunk-aligned range of offsets it names.
template <typename W>
class ListPool {
 public:
  static constexpr int kClassBits = 6, kCountBits = 8 * sizeof(W) - kClassBits;
  static constexpr int kClasses = 1 << kClassBits;
  static constexpr uint64_t Words(int c) { return uint64_t{2u + (c & 1u)} << (c / 2 + 1); }
  static constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
  static constexpr uint64_t kMaxCount = std::min(kCountMask, Words(kClasses - 1) - 1);
  // Offsets below this (the caller's tag bit is above).
  static constexpr uint64_t kMaxOffset = uint64_t{1} << (8 * sizeof(W) - 1);

  // An empty list for at least n ids, or false when a count or an offset
  // does not fit W.
  bool New(uint64_t n, W* list) {
    if (n > kMaxCount) return false;
    int c = 0;
    while (Words(c) - 1 < n) ++c;
    if (!free_[c].empty()) {
      *list = free_[c].back();
      free_[c].pop_back();
    } else if (!Carve(c, list)) {
      return false;
    }
    *Block(*list) = static_cast<W>(W(c) << kCountBits);
    return true;
  }
  void Free(W list) { free_[ClassOf(list)].push_back(list); }

  uint64_t Count(W list) const { return *Block(list) & kCountMask; }
  void SetCount(W list, uint64_t n) { *Block(list) = static_cast<W>((*Block(list) & ~W(kCountMask)) | n); }
  uint64_t Capacity(W list) const { return Words(ClassOf(list)) - 1; }
  W* Ids(W list) { return Block(list) + 1; }
  const W* Ids(W list) const { return Block(list) + 1; }

  size_t MemoryBytes() const {
    size_t free_bytes = 0;
    for (const auto& f : free_) free_bytes += f.capacity() * sizeof(W);
    return words_ * sizeof(W) + chunks_.capacity() * sizeof(chunks_[0]) + free_bytes;
  }

 private:
  // 1 MB of 4-byte words, the granularity of a small set's pool: 200k long
  // texts whose anchors are mostly stop keys (bench_recheck's en_long) hold
  // 6.2 B per document in anchors with 1 MB chunks, 21.9 B with 4 MB (7.9 B
  // before the pool).
  static constexpr int kChunkBits = 18;
  static constexpr uint64_t kChunkWords = uint64_t{1} << kChunkBits;
  static constexpr uint64_t kChunkMask = kChunkWords - 1;

  W* Block(W list) { return chunks_[list >> kChunkBits].get() + (list & kChunkMask); }
  const W* Block(W list) const { return chunks_[list >> kChunkBits].get() + (list & kChunkMask); }
  int ClassOf(W list) const { return static_cast<int>(*Block(list) >> kCountBits); }

  // New words at the end: the last chunk's rest, a new chunk, or (a block
  // larger than a chunk) a range of chunk offsets of its own.
  bool Carve(int c, W* list) {
    const uint64_t words = Words(c);
    const uint64_t end = chunks_.size() * kChunkWords;
    if (words > kChunkWords) {
      const uint64_t chunks = (words + kChunkMask) / kChunkWords;
      if (end + chunks * kChunkWords > kMaxOffset) return false;
      Reserve(chunks);  // nothing below throws once the block is allocated
      std::unique_ptr<W[]> block(new W[words]);
      KeepRest(end);
      *list = static_cast<W>(end);
      chunks_.push_back(std::move(block));
      chunks_.resize(chunks_.size() + chunks - 1);
      words_ += words;
      tail_ = chunks_.size() * kChunkWords;  // the next small block starts a new chunk
      return true;
    }
    if (tail_ + words > end) {
      if (end + kChunkWords > kMaxOffset) return false;
      Reserve(1);
      std::unique_ptr<W[]> chunk(new W[kChunkWords]);
      KeepRest(end);
      chunks_.push_back(std::move(chunk));
      words_ += kChunkWords;
    }
    *list = static_cast<W>(tail_);
    tail_ += words;
    return true;
  }
  void Reserve(uint64_t more) {
    if (chunks_.size() + more > chunks_.capacity()) chunks_.reserve(std::max(2 * chunks_.capacity(), chunks_.size() + more));
  }
  // The last chunk's unused rest goes to the free lists, largest blocks
  // first, rather than being lost.
  void KeepRest(uint64_t end) {
    for (int c = kClasses - 1; c >= 0; --c) {
      for (; tail_ + Words(c) <= end; tail_ += Words(c)) {
        free_[c].push_back(static_cast<W>(tail_));
      }
    }
    tail_ = end;
  }

  std::vector<std::unique_ptr<W[]>> chunks_;
  uint64_t tail_ = 0;   // the next unused offset in the last chunk
  size_t words_ = 0;    // allocated
  std::array<std::vector<W>, kClasses> free_;
};

// The table in one id width (the header says why two).
template <typename W>
class AnchorPostings {
 public:
  static constexpr W kStop = std::numeric_limits<W>::max();
  static constexpr W kListBit = W{1} << (8 * sizeof(W) - 1);
  // Largest id a slot holds (it stores id + 1, below kListBit).
  static constexpr uint64_t kMaxId = uint64_t{kListBit} - 2;

  bool IsStop(uint32_t key) const {
    const Slot* s = Find(key);
    return s != nullptr && s->v == kStop;
  }
  void Prefetch(uint32_t key) const { table_.Prefetch(Murmur3Fmix64(key)); }

  template <typename Out>
  bool Collect(uint32_t key, Out* out) const {
    const Slot* s = Find(key);
    if (s == nullptr) return true;
    if (s->v == kStop) return false;
    AppendIds(s->v, out);
    return true;
  }

  // Collect over keys in order until `live` of them were not stop keys;
  // returns how many were. Two passes: every key's slot first, then the
  // lists, so the lists' misses overlap instead of following one another.
  template <typename Out>
  int CollectFirstLive(const uint32_t* keys, size_t n, int live, Out* out) const {
    std::array<W, kMaxBatch> found;
    int probed = 0;
    for (size_t i = 0; i < n && probed < live; i += kMaxBatch) {
      size_t m = 0;
      for (size_t j = i; j < n && j < i + kMaxBatch && probed < live; ++j) {
        const Slot* s = Find(keys[j]);
        if (s != nullptr && s->v == kStop) continue;
        ++probed;
        if (s == nullptr) continue;
        found[m++] = s->v;
        if (s->v & kListBit) __builtin_prefetch(pool_.Ids(s->v & ~kListBit) - 1);
      }
      for (size_t j = 0; j < m; ++j) AppendIds(found[j], out);
    }
    return probed;
  }

  // False (and nothing changed) when this width cannot hold it: an id past
  // kMaxId, or no room for a longer list.
  bool Add(uint32_t key, uint64_t id, uint64_t cap) {
    if (id > kMaxId) return false;
    Slot* s = Find(key);
    if (s == nullptr) {
      s = table_.Insert(Murmur3Fmix64(key), Slot{key, static_cast<W>(id + 1)});
      if (cap == 0) MakeStop(s);
      return true;
    }
    if (s->v == kStop) return true;
    if (Count(*s) + 1 > cap) {
      MakeStop(s);
      return true;
    }
    return Append(s, static_cast<W>(id));
  }

  void AddStop(uint32_t key) {
    Slot* s = Find(key);
    if (s == nullptr) s = table_.Insert(Murmur3Fmix64(key), Slot{key, 1});
    if (s->v != kStop) MakeStop(s);
  }

  void Remove(uint32_t key, uint64_t id) {
    Slot* s = Find(key);
    if (s == nullptr || s->v == kStop) return;
    if (!(s->v & kListBit)) {
      if (s->v - 1 == id) table_.Erase(s);
      return;
    }
    const W list = s->v & ~kListBit;
    W* ids = pool_.Ids(list);
    const uint64_t n = pool_.Count(list);
    W* it = std::find(ids, ids + n, static_cast<W>(id));
    if (it == ids + n) return;
    std::copy(it + 1, ids + n, it);
    pool_.SetCount(list, n - 1);
    if (n - 1 == 1) {
      s->v = ids[0] + 1;
      pool_.Free(list);
    } else if (n - 1 <= pool_.Capacity(list) / 3) {
      // Under a retention window a list shrinks as often as it grows: a
      // block that kept its largest size would make memory follow the
      // history, not the live ids. (A third, not a half: no move back and
      // forth at one boundary.)
      (void)MoveList(s, n - 1, n - 1);  // no block to be had: it stays where it is
    }
  }

  // fn(key, stop, ids, n) for every key (for the move to a wider table).
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    const_cast<Table&>(table_).ForEach([&](const Slot& s) {
      if (s.v == kStop) {
        fn(s.key, true, static_cast<const W*>(nullptr), uint64_t{0});
      } else if (!(s.v & kListBit)) {
        const W id = s.v - 1;
        fn(s.key, false, &id, uint64_t{1});
      } else {
        const W list = s.v & ~kListBit;
        fn(s.key, false, pool_.Ids(list), pool_.Count(list));
      }
    });
  }

  uint64_t stops_made() const { return stops_made_; }
  void set_stops_made(uint64_t n) { stops_made_ = n; }
  size_t MemoryBytes() const { return table_.MemoryBytes() + pool_.MemoryBytes(); }

 private:
  // v: 0 empty; kStop; id + 1 (below kListBit); or kListBit | list offset.
  struct Slot {
    uint32_t key = 0;
    W v = 0;
  };
  struct Ops {
    static uint64_t Hash(const Slot& s) { return Murmur3Fmix64(s.key); }
    static bool Empty(const Slot& s) { return s.v == 0; }
  };
  using Table = SegmentedTable<Slot, Ops>;
  static_assert(ListPool<W>::kMaxOffset <= kListBit, "a list offset must fit below the tag bit");

  const Slot* Find(uint32_t key) const {
    return table_.Find(Murmur3Fmix64(key), [key](const Slot& s) { return s.key == key; });
  }
  Slot* Find(uint32_t key) {
    return table_.Find(Murmur3Fmix64(key), [key](const Slot& s) { return s.key == key; });
  }
  uint64_t Count(const Slot& s) const { return (s.v & kListBit) ? pool_.Count(s.v & ~kListBit) : 1; }

  static constexpr size_t kMaxBatch = 32;
  // The ids of a live slot's value v (one id, or a list).
  template <typename Out>
  void AppendIds(W v, Out* out) const {
    if (!(v & kListBit)) {
      out->push_back(v - 1);
      return;
    }
    const W list = v & ~kListBit;
    const W* ids = pool_.Ids(list);
    const uint64_t n = pool_.Count(list);
    for (uint64_t i = 0; i < n; ++i) out->push_back(ids[i]);
  }

  // Adds id to a key that holds one or more: a single id becomes a list of
  // two; a full list moves to a block of the next class.
  bool Append(Slot* s, W id) {
    if (!(s->v & kListBit)) {
      W list;
      if (!pool_.New(2, &list)) return false;
      pool_.Ids(list)[0] = s->v - 1;
      pool_.SetCount(list, 1);
      s->v = kListBit | list;
    }
    const uint64_t n = pool_.Count(s->v & ~kListBit);
    if (n == pool_.Capacity(s->v & ~kListBit) && !MoveList(s, n, n + 1)) return false;
    const W list = s->v & ~kListBit;
    pool_.Ids(list)[n] = id;
    pool_.SetCount(list, n + 1);
    return true;
  }

  // Moves the key's list (its n ids) to a new block for at least `want`
  // ids; false, and nothing changed, when no block can be had.
  bool MoveList(Slot* s, uint64_t n, uint64_t want) {
    const W list = s->v & ~kListBit;
    W moved;
    if (!pool_.New(want, &moved)) return false;
    std::copy(pool_.Ids(list), pool_.Ids(list) + n, pool_.Ids(moved));
    pool_.SetCount(moved, n);
    pool_.Free(list);
    s->v = kListBit | moved;
    return true;
  }

  void MakeStop(Slot* s) {
    if (s->v & kListBit && s->v != kStop) pool_.Free(s->v & ~kListBit);
    s->v = kStop;
    ++stops_made_;
  }

  Table table_;
  ListPool<W> pool_;
  uint64_t stops_made_ = 0;
};

// The table as NearDupSet uses it: narrow words until an id or a list does
// not fit, then wide ones (the header says why).
class AnchorTable {
 public:
  AnchorTable() : narrow_(std::make_unique<AnchorPostings<uint32_t>>()) {}

  bool IsStop(uint32_t key) const { return narrow_ ? narrow_->IsStop(key) : wide_->IsStop(key); }
  void Prefetch(uint32_t key) const { narrow_ ? narrow_->Prefetch(key) : wide_->Prefetch(key); }
  // Appends the ids under key to *out; false (and nothing) for a stop key.
  template <typename Out>
  bool Collect(uint32_t key, Out* out) const {
    return narrow_ ? narrow_->Collect(key, out) : wide_->Collect(key, out);
  }
  // Collect(keys[0]), Collect(keys[1]), ... until `live` keys were not stop
  // keys (or the keys run out); returns how many were. The same ids in the
  // same order as those calls, in less time.
  template <typename Out>
  int CollectFirstLive(const uint32_t* keys, size_t n, int live, Out* out) const {
    return narrow_ ? narrow_->CollectFirstLive(keys, n, live, out) : wide_->CollectFirstLive(keys, n, live, out);
  }
  // A key past `cap` ids becomes a stop key (cap 0: at once).
  void Add(uint32_t key, uint64_t id, uint64_t cap) {
    if (narrow_) {
      if (narrow_->Add(key, id, cap)) return;
      Widen();
    }
    (void)wide_->Add(key, id, cap);  // 8-byte words hold any id below 2^63 - 1 (NearDupSet::Insert checks)
  }
  void Remove(uint32_t key, uint64_t id) { narrow_ ? narrow_->Remove(key, id) : wide_->Remove(key, id); }
  uint64_t stops_made() const { return narrow_ ? narrow_->stops_made() : wide_->stops_made(); }
  size_t MemoryBytes() const { return narrow_ ? narrow_->MemoryBytes() : wide_->MemoryBytes(); }
  bool wide() const { return narrow_ == nullptr; }

 private:
  void Widen() {
    auto wide = std::make_unique<AnchorPostings<uint64_t>>();
    narrow_->ForEach([&](uint32_t key, bool stop, const uint32_t* ids, uint64_t n) {
      if (stop) {
        wide->AddStop(key);
        return;
      }
      for (uint64_t i = 0; i < n; ++i) (void)wide->Add(key, ids[i], UINT64_MAX);
    });
    wide->set_stops_made(narrow_->stops_made());
    narrow_.reset();
    wide_ = std::move(wide);
  }

  std::unique_ptr<AnchorPostings<uint32_t>> narrow_;
  std::unique_ptr<AnchorPostings<uint64_t>> wide_;
};

}  // namespace neardup::internal

#endif  // NEARDUP_SRC_DEDUP_ANCHOR_TABLE_H_
