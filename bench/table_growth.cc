// A SegmentedTable (util/segmented_table.h) grown one insert at a time, as
// the batch job and the service grow NearDupSet's tables: the longest
// inserts (a segment's growth runs inside one, under the namespace's lock
// in the service), the bytes per entry over the whole growth, and the mean
// probe lengths (slots read by a lookup of a present key and by one of an
// absent key, the exact-match table's usual case) at ten points.
//
//   ./build/table_growth [N=20000000] [SLOT_BYTES=16|24] [LIMIT_MS=5]
//
// Keys 0..N-1 hashed as the sketch-slot table hashes ids. Wall time per
// insert (steady_clock): run it on a quiet machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "util/hash.h"
#include "util/segmented_table.h"

namespace {

using neardup::Murmur3Fmix64;

// The batch job's two flat tables: the exact-match table's 16-byte slots
// and the sketch slots' 24.
struct Slot16 {
  uint64_t key = 0;
  uint64_t value = UINT64_MAX;
};
struct Slot24 {
  uint64_t key = 0;
  uint64_t value = UINT64_MAX;
  uint64_t counts = 0;
};
template <typename Slot>
struct Ops {
  static uint64_t Hash(const Slot& s) { return Murmur3Fmix64(s.key); }
  static bool Empty(const Slot& s) { return s.value == UINT64_MAX; }
};

// Mean slots read: by Find for present keys [0, n), by a whole run for
// absent ones.
template <typename Table>
void PrintProbes(const Table& t, uint64_t n) {
  constexpr uint64_t kSample = 200000;
  uint64_t hit = 0, miss = 0;
  for (uint64_t i = 0; i < kSample; ++i) {
    const uint64_t key = i * (n / kSample + 1) % n;
    t.Find(Murmur3Fmix64(key), [&](const auto& s) {
      ++hit;
      return s.key == key;
    });
    t.ForEachInRun(Murmur3Fmix64(n + i), [&](const auto&) { ++miss; });
  }
  std::printf("  %llu entries, %.1f B/entry: probe present %.2f slots, absent %.2f slots (+1 empty)\n",
              static_cast<unsigned long long>(n), static_cast<double>(t.MemoryBytes()) / static_cast<double>(n),
              static_cast<double>(hit) / kSample, static_cast<double>(miss) / kSample);
}

template <typename Slot>
int Run(uint64_t n, double limit_ms) {
  using Table = neardup::internal::SegmentedTable<Slot, Ops<Slot>>;
  auto t = std::make_unique<Table>();
  double worst = 0, total = 0, low = 1e9, high = 0;
  uint64_t worst_at = 0, pauses = 0;
  for (uint64_t i = 0; i < n; ++i) {
    Slot s;
    s.key = i;
    s.value = i;
    const auto t0 = std::chrono::steady_clock::now();
    t->Insert(Murmur3Fmix64(i), s);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    total += ms;
    if (ms > limit_ms) ++pauses;
    if (ms > worst) {
      worst = ms;
      worst_at = i;
    }
    // Bytes per entry past the first million (every 1/1000 of the way).
    if (i + 1 >= 1000000 && (i + 1) % std::max<uint64_t>(n / 1000, 1) == 0) {
      const double per = static_cast<double>(t->MemoryBytes()) / static_cast<double>(i + 1);
      low = std::min(low, per);
      high = std::max(high, per);
    }
    if ((i + 1) % (n / 10) == 0) PrintProbes(*t, i + 1);
  }
  std::printf("%zu-byte slots: %llu inserts, %.1f s; over %.1f ms: %llu, worst %.2f ms at %llu entries; "
              "bytes per entry from 1M on: %.1f to %.1f\n",
              sizeof(Slot), static_cast<unsigned long long>(n), total / 1000, limit_ms,
              static_cast<unsigned long long>(pauses), worst, static_cast<unsigned long long>(worst_at), low, high);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000000;
  const int slot_bytes = argc > 2 ? std::atoi(argv[2]) : 16;
  const double limit_ms = argc > 3 ? std::atof(argv[3]) : 5.0;
  if (n < 10) return std::fprintf(stderr, "table_growth: N must be at least 10\n"), 1;
  if (slot_bytes == 24) return Run<Slot24>(n, limit_ms);
  return Run<Slot16>(n, limit_ms);
}
