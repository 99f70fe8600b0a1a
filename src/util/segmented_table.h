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
// at most 7/10, power-of-two segment sizes. The top 8 bits of a slot's hash
// pick its segment, the low bits its home slot.
//
// Slot requirements (`Ops`):
//   static uint64_t Hash(const Slot&)  the (well-mixed) hash it was inserted under
//   static bool Empty(const Slot&)     true exactly for Slot{}
// The table does not know keys: callers find slots with a predicate over the
// probe run of a hash, so one table serves maps and multimaps alike.
//
// Thread-safety: none (callers lock). Pointers to slots are invalidated by
// Insert (a growth) and Erase (a backward shift).
#ifndef NEARDUP_SRC_SEGMENTED_TABLE_H_
#define NEARDUP_SRC_SEGMENTED_TABLE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace neardup::internal {

template <typename Slot, typename Ops>
class SegmentedTable {
 public:
  // The first occupied slot in h's probe run for which is(slot) holds, or
  // null.
  template <typename Pred>
  const Slot* Find(uint64_t h, Pred&& is) const {
    const Segment& g = segments_[SegmentOf(h)];
    if (g.slots.empty()) return nullptr;
    for (size_t i = h & g.mask;; i = (i + 1) & g.mask) {
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
    for (size_t i = h & g.mask; !Ops::Empty(g.slots[i]); i = (i + 1) & g.mask) fn(g.slots[i]);
  }

  // Adds s (Ops::Hash(s) == h) without looking for an equal one; returns
  // where it went.
  Slot* Insert(uint64_t h, const Slot& s) {
    Segment& g = segments_[SegmentOf(h)];
    if ((g.used + 1) * 10 > g.slots.size() * 7) Grow(&g);
    size_t i = h & g.mask;
    while (!Ops::Empty(g.slots[i])) i = (i + 1) & g.mask;
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
    for (size_t j = (hole + 1) & g.mask; !Ops::Empty(g.slots[j]); j = (j + 1) & g.mask) {
      const size_t home = Ops::Hash(g.slots[j]) & g.mask;
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

  // Requests h's home slot into the cache (lookups of many keys overlap
  // their misses when they are prefetched first).
  void Prefetch(uint64_t h) const {
    const Segment& g = segments_[SegmentOf(h)];
    if (!g.slots.empty()) __builtin_prefetch(&g.slots[h & g.mask]);
  }

  // fn(Slot&) for every occupied slot (it must not change the slot's hash).
  template <typename Fn>
  void ForEach(Fn&& fn) {
    for (Segment& g : segments_) {
      for (Slot& s : g.slots) {
        if (!Ops::Empty(s)) fn(s);
      }
    }
  }

  size_t size() const { return size_; }
  size_t MemoryBytes() const {
    size_t bytes = sizeof(*this);
    for (const Segment& g : segments_) bytes += g.slots.capacity() * sizeof(Slot);
    return bytes;
  }

 private:
  static constexpr int kSegmentBits = 8;
  struct Segment {
    std::vector<Slot> slots;
    size_t mask = 0;
    size_t used = 0;
  };

  static size_t SegmentOf(uint64_t h) { return static_cast<size_t>(h >> (64 - kSegmentBits)); }

  static void Grow(Segment* g) {
    std::vector<Slot> old = std::move(g->slots);
    g->slots.assign(old.empty() ? 16 : old.size() * 2, Slot{});
    g->mask = g->slots.size() - 1;
    for (const Slot& s : old) {
      if (Ops::Empty(s)) continue;
      size_t i = Ops::Hash(s) & g->mask;
      while (!Ops::Empty(g->slots[i])) i = (i + 1) & g->mask;
      g->slots[i] = s;
    }
  }

  std::array<Segment, size_t{1} << kSegmentBits> segments_;
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
