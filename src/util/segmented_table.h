// An open-addressing hash table split into 256 segments that grow on their
// own (internal to the library).
//
// Why segments: a hash table grows by rehashing everything it holds, and the
// service grows its tables under a namespace's lock. Whole, at 10M documents,
// that was a pause of every request of the namespace: 10-20 s for the anchor
// table (~90M anchors), up to ~1 s for a node-based std::unordered_map
// (which also costs a pointer chase per lookup). A segment holds 1/256 of the
// entries, so a growth moves tens of milliseconds' worth and the segments
// grow at different moments.
//
// Layout: linear probing with backward-shift deletion (no tombstones), load
// at most 4/5. The top 8 bits of a slot's hash pick its segment; the home
// slot is the next bits scaled to the segment's size (a multiply-shift), so
// a segment can have any size.
//
// Why any size: a segment that doubles holds its entries at 35-70 % load, so
// a table's bytes per entry swing 2x with the count, and every segment
// doubles at about the same count (hashes are uniform). At 50M documents the
// batch job's exact-match and sketch-slot tables had just doubled: 45 and 67
// bytes per kept document where their slots are 16 and 24 (issue 17). A
// large segment grows by 1/4 instead (64-80 % load: at most 1.56 slots per
// entry); small ones double, as their bytes do not matter and fewer steps
// then cost less.
//
// Why the slots of a large segment come straight from mmap: a growth frees
// an array of megabytes (at 10M+ entries), and glibc keeps such a block in
// its heap once it has raised its mmap threshold (it does after freeing a
// mapped block), where the next, larger arrays cannot reuse it. A mapping is
// returned to the kernel whole when the growth is done.
//
#ifndef NEARDUP_SRC_SEGMENTED_TABLE_H_
#define NEARDUP_SRC_SEGMENTED_TABLE_H_

#include <sys/mman.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace neardup::internal {

// The slots of one segment (trivially copyable Slot): malloc'd when small,
// their own mapping when large (the header says why).
template <typename Slot>
class SlotArray {
 public:
  SlotArray() = default;
  SlotArray(const SlotArray&) = delete;
  SlotArray& operator=(const SlotArray&) = delete;
  SlotArray(SlotArray&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  SlotArray& operator=(SlotArray&& o) noexcept {
    if (this != &o) {
      Free();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~SlotArray() { Free(); }

  // n empty slots (Slot{}). Throws std::bad_alloc.
  explicit SlotArray(size_t n) : size_(n) {
    void* p = Mapped(n) ? ::mmap(nullptr, Bytes(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                        : std::malloc(Bytes(n));
    if (p == MAP_FAILED || p == nullptr) {
      size_ = 0;
      throw std::bad_alloc();
    }
    data_ = static_cast<Slot*>(p);
    std::uninitialized_fill_n(data_, n, Slot{});
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Slot& operator[](size_t i) { return data_[i]; }
  const Slot& operator[](size_t i) const { return data_[i]; }
  Slot* data() { return data_; }
  // Bytes held, including a mapping's page rounding.
  size_t MemoryBytes() const { return size_ == 0 ? 0 : Bytes(size_); }

 private:
  static constexpr size_t kMapBytes = size_t{256} << 10;
  static constexpr size_t kPage = 4096;
  static bool Mapped(size_t n) { return n * sizeof(Slot) >= kMapBytes; }
  static size_t Bytes(size_t n) { return Mapped(n) ? (n * sizeof(Slot) + kPage - 1) / kPage * kPage : n * sizeof(Slot); }
  void Free() {
    if (data_ == nullptr) return;
    if (Mapped(size_)) {
      ::munmap(data_, Bytes(size_));
    } else {
      std::free(data_);
    }
    data_ = nullptr;
    size_ = 0;
  }

  Slot* data_ = nullptr;
  size_t size_ = 0;
};

template <typename Slot, typename Ops>
class SegmentedTable {
  static_assert(std::is_trivially_copyable_v<Slot>, "slots are moved as bytes");

 public:
  // The first occupied slot in h's probe run for which is(slot) holds, or
  // null.
  template <typename Pred>
  const Slot* Find(uint64_t h, Pred&& is) const {
    const Segment& g = segments_[SegmentOf(h)];
    if (g.slots.empty()) return nullptr;
    for (size_t i = g.Home(h);; i = g.Next(i)) {
      const Slot& s = g.slots[i];
      if (Ops::Empty(s)) return nullptr;
      if (is(s)) return &s;
    }
  }
  template <typename Pred>
  Slot* Find(uint64_t h, Pred&& is) {
    return const_cast<Slot*>(static_cast<const SegmentedTable*>(this)->Find(h, is));
  }

  // Calls fn(slot) for every occupied slot of h's probe run (a multimap's
  // equal range is among them; fn filters).
  template <typename Fn>
  void ForEachInRun(uint64_t h, Fn&& fn) const {
    const Segment& g = segments_[SegmentOf(h)];
    if (g.slots.empty()) return;
    for (size_t i = g.Home(h); !Ops::Empty(g.slots[i]); i = g.Next(i)) fn(g.slots[i]);
  }

  // Adds s (Ops::Hash(s) == h) without looking for an equal one; returns
  // where it went. Throws std::bad_alloc when a growth cannot allocate; the
  // table is then unchanged.
  Slot* Insert(uint64_t h, const Slot& s) {
    Segment& g = segments_[SegmentOf(h)];
    if ((g.used + 1) * kLoadDen > g.slots.size() * kLoadNum) Grow(&g);
    size_t i = g.Home(h);
    while (!Ops::Empty(g.slots[i])) i = g.Next(i);
    g.slots[i] = s;
    ++g.used;
    ++size_;
    return &g.slots[i];
  }

  // Removes the slot Find returned.
  void Erase(Slot* s) {
    Segment& g = segments_[SegmentOf(Ops::Hash(*s))];
    // Backward shift: move later members of the probe run into the hole.
    size_t hole = static_cast<size_t>(s - g.slots.data());
    for (size_t j = g.Next(hole); !Ops::Empty(g.slots[j]); j = g.Next(j)) {
      const size_t home = g.Home(Ops::Hash(g.slots[j]));
      // j may move to the hole iff its home is not cyclically within (hole, j].
      const bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!stays) {
        g.slots[hole] = g.slots[j];
        hole = j;
      }
    }
    g.slots[hole] = Slot{};
    --g.used;
    --size_;
  }

  // Requests h's home slot and the line after it into the cache (lookups
  // of many keys overlap their misses when they are prefetched first). At
  // 64-80 % load a lookup reads 2-3 slots, which often run into the next
  // line. (A prefetch past the array does not fault.)
  void Prefetch(uint64_t h) const {
    const Segment& g = segments_[SegmentOf(h)];
    if (g.slots.empty()) return;
    const char* home = reinterpret_cast<const char*>(&g.slots[g.Home(h)]);
    __builtin_prefetch(home);
    __builtin_prefetch(home + 64);
  }

  // fn(Slot&) for every occupied slot (it must not change the slot's hash).
  template <typename Fn>
  void ForEach(Fn&& fn) {
    for (Segment& g : segments_) {
      for (size_t i = 0; i < g.slots.size(); ++i) {
        if (!Ops::Empty(g.slots[i])) fn(g.slots[i]);
      }
    }
  }

  size_t size() const { return size_; }
  size_t MemoryBytes() const {
    size_t bytes = sizeof(*this);
    for (const Segment& g : segments_) bytes += g.slots.MemoryBytes();
    return bytes;
  }

  // The slot count a segment of n slots grows to (public for the tests of
  // the growth boundaries): doubling up to kSmallSlots, then by 1/4.
  static size_t GrownSize(size_t n) { return n == 0 ? 16 : n < kSmallSlots ? 2 * n : n + n / 4; }
  static constexpr size_t kLoadNum = 4, kLoadDen = 5;  // at most 4/5 full
  static constexpr size_t kSmallSlots = 4096;
  static constexpr int kSegmentBits = 8;
  static constexpr size_t kSegments = size_t{1} << kSegmentBits;

 private:
  struct Segment {
    SlotArray<Slot> slots;
    size_t used = 0;

    // The bits below the segment's, scaled to [0, size).
    size_t Home(uint64_t h) const {
      return static_cast<size_t>((static_cast<unsigned __int128>(h << kSegmentBits) * slots.size()) >> 64);
    }
    size_t Next(size_t i) const { return i + 1 == slots.size() ? 0 : i + 1; }
  };

  static size_t SegmentOf(uint64_t h) { return static_cast<size_t>(h >> (64 - kSegmentBits)); }

  // The new slots are allocated before the old ones are let go: when the
  // allocation throws (std::bad_alloc), the segment keeps every entry.
  static void Grow(Segment* g) {
    SlotArray<Slot> grown(GrownSize(g->slots.size()));
    SlotArray<Slot> old = std::move(g->slots);
    g->slots = std::move(grown);
    for (size_t o = 0; o < old.size(); ++o) {
      const Slot& s = old[o];
      if (Ops::Empty(s)) continue;
      size_t i = g->Home(Ops::Hash(s));
      while (!Ops::Empty(g->slots[i])) i = g->Next(i);
      g->slots[i] = s;
    }
  }

  std::array<Segment, kSegments> segments_;
  size_t size_ = 0;
};

// A 64-bit key and a 64-bit value; value kEmptyValue marks an empty slot.
// Keys are hashed (util/hash.h) by the caller's choice of Hash (KeyIsHash: the
// key is already a uniform hash, e.g. a content hash).
struct KeyValueSlot {
  static constexpr uint64_t kEmptyValue = UINT64_MAX;
  uint64_t key = 0;
  uint64_t value = kEmptyValue;
};

}  // namespace neardup::internal

#endif  // NEARDUP_SRC_SEGMENTED_TABLE_H_
