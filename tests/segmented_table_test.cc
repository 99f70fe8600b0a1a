// SegmentedTable (util/segmented_table.h) against std::unordered_multimap,
// across its growth steps: the doubling of small segments, the 1/4 steps of
// large ones, and probe runs that wrap past a segment's last slot.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <new>
#include <random>
#include <unordered_map>
#include <vector>

#include "util/hash.h"
#include "util/segmented_table.h"
#include "util/sanitized.h"

namespace neardup::internal {
namespace {

// Every key in segment 0 (the top 8 hash bits clear), so one segment's
// growth boundaries are reached with few entries.
struct OneSegmentOps {
  static uint64_t Hash(const KeyValueSlot& s) { return Murmur3Fmix64(s.key) >> 8; }
  static bool Empty(const KeyValueSlot& s) { return s.value == KeyValueSlot::kEmptyValue; }
};
// Every key's home is the segment's last slot: one run that wraps.
struct WrappingOps {
  static uint64_t Hash(const KeyValueSlot&) { return (uint64_t{1} << 56) - 1; }
  static bool Empty(const KeyValueSlot& s) { return s.value == KeyValueSlot::kEmptyValue; }
};
// Spread over all segments, as the tables use it.
struct AllSegmentsOps {
  static uint64_t Hash(const KeyValueSlot& s) { return Murmur3Fmix64(s.key); }
  static bool Empty(const KeyValueSlot& s) { return s.value == KeyValueSlot::kEmptyValue; }
};

template <typename Ops>
class Checked {
 public:
  using Table = SegmentedTable<KeyValueSlot, Ops>;

  void Insert(uint64_t key, uint64_t value) {
    table_.Insert(Ops::Hash(KeyValueSlot{key, value}), KeyValueSlot{key, value});
    oracle_.emplace(key, value);
  }
  // Erases one (key, value); false if absent from both.
  bool Erase(uint64_t key, uint64_t value) {
    KeyValueSlot* s = table_.Find(Ops::Hash(KeyValueSlot{key, value}),
                                  [&](const KeyValueSlot& x) { return x.key == key && x.value == value; });
    auto [b, e] = oracle_.equal_range(key);
    auto it = std::find_if(b, e, [&](const auto& kv) { return kv.second == value; });
    EXPECT_EQ(s != nullptr, it != e) << key << " " << value;
    if (s == nullptr || it == e) return false;
    table_.Erase(s);
    oracle_.erase(it);
    return true;
  }
  std::vector<uint64_t> Values(uint64_t key) const {
    std::vector<uint64_t> v;
    table_.ForEachInRun(Ops::Hash(KeyValueSlot{key, 0}), [&](const KeyValueSlot& s) {
      if (s.key == key) v.push_back(s.value);
    });
    std::sort(v.begin(), v.end());
    return v;
  }
  std::vector<uint64_t> OracleValues(uint64_t key) const {
    std::vector<uint64_t> v;
    auto [b, e] = oracle_.equal_range(key);
    for (auto it = b; it != e; ++it) v.push_back(it->second);
    std::sort(v.begin(), v.end());
    return v;
  }
  // Every key of the oracle (and `absent`) has the oracle's values, and
  // the table holds nothing else.
  void ExpectSame(const std::vector<uint64_t>& absent = {}) {
    ASSERT_EQ(table_.size(), oracle_.size());
    for (const auto& [key, value] : oracle_) ASSERT_EQ(Values(key), OracleValues(key)) << "key " << key;
    for (uint64_t key : absent) ASSERT_EQ(Values(key), OracleValues(key)) << "key " << key;
    size_t seen = 0;
    table_.ForEach([&](KeyValueSlot&) { ++seen; });
    ASSERT_EQ(seen, oracle_.size());
  }
  Table& table() { return table_; }
  const std::unordered_multimap<uint64_t, uint64_t>& oracle() const { return oracle_; }

 private:
  Table table_;
  std::unordered_multimap<uint64_t, uint64_t> oracle_;
};

// The slot counts a segment passes through up to `limit`.
template <typename Table>
std::vector<size_t> SegmentSizes(size_t limit) {
  std::vector<size_t> sizes;
  for (size_t n = Table::GrownSize(0); n <= limit; n = Table::GrownSize(n)) sizes.push_back(n);
  return sizes;
}

TEST(SegmentedTable, GrowthStepsDoubleSmallSegmentsAndAddAQuarterToLargeOnes) {
  using Table = SegmentedTable<KeyValueSlot, OneSegmentOps>;
  const std::vector<size_t> sizes = SegmentSizes<Table>(20000);
  ASSERT_GE(sizes.size(), 12u);
  EXPECT_EQ(sizes[0], 16u);
  for (size_t i = 1; i < sizes.size(); ++i) {
    if (sizes[i - 1] < Table::kSmallSlots) {
      EXPECT_EQ(sizes[i], 2 * sizes[i - 1]);
    } else {
      EXPECT_EQ(sizes[i], sizes[i - 1] + sizes[i - 1] / 4);
    }
  }
}

// Just before, at and just after every growth step of one segment: the
// contents equal the oracle's, and the slots held are the step's size.
TEST(SegmentedTable, EqualsTheOracleAcrossEveryGrowthStep) {
  using Table = SegmentedTable<KeyValueSlot, OneSegmentOps>;
  Checked<OneSegmentOps> t;
  const size_t base = t.table().MemoryBytes();
  const std::vector<size_t> sizes = SegmentSizes<Table>(20000);  // past 9,000 entries' 12,500
  // The counts around each step: a segment of s slots holds s * 4/5
  // entries; the next insert grows it.
  std::vector<size_t> near_step;
  for (size_t s : sizes) {
    for (size_t d = 0; d < 4; ++d) near_step.push_back(s * 4 / 5 + d - 1);
  }
  std::mt19937_64 rng(7);
  uint64_t key = 0;
  for (size_t n = 1; n <= 9000; ++n) {
    // Some keys repeat (a multimap); values are unique.
    const uint64_t k = n % 7 == 0 ? rng() % key + 1 : ++key;
    t.Insert(k, n);
    // The segment's size is the smallest step holding n entries at <= 4/5.
    const auto want = std::find_if(sizes.begin(), sizes.end(), [n](size_t s) { return n * 5 <= s * 4; });
    ASSERT_NE(want, sizes.end());
    ASSERT_EQ((t.table().MemoryBytes() - base) / sizeof(KeyValueSlot), *want) << "after " << n << " entries";
    if (std::count(near_step.begin(), near_step.end(), n) || n % 1000 == 0) t.ExpectSame({key + 1, key + 2});
  }
}

// Past kSmallSlots a segment is at least 64 % full (the 1/4 step), so a
// slot costs at most 1.57 slots per entry at any count.
TEST(SegmentedTable, LargeSegmentsStayAbove64PercentFull) {
  using Table = SegmentedTable<KeyValueSlot, OneSegmentOps>;
  Table t;
  const size_t base = t.MemoryBytes();
  for (uint64_t n = 1; n <= 60000; ++n) {
    t.Insert(OneSegmentOps::Hash(KeyValueSlot{n, n}), KeyValueSlot{n, n});
    // A mapped segment's bytes are rounded up to a page.
    const size_t bytes = t.MemoryBytes() - base;
    const size_t slots_low = (bytes > 4096 ? bytes - 4096 : bytes) / sizeof(KeyValueSlot);
    if (slots_low > Table::kSmallSlots) {
      ASSERT_GE(n * 100, slots_low * 64) << n << " entries in " << bytes << " B";
    }
    ASSERT_LE(n * 5, bytes / sizeof(KeyValueSlot) * 4);
  }
}

// Erasing keeps every run reachable (the backward shift), through growth
// steps and in a run that wraps past the last slot.
template <typename Ops>
void InsertAndEraseAgainstTheOracle(size_t rounds, size_t keys, uint64_t seed) {
  Checked<Ops> t;
  std::mt19937_64 rng(seed);
  std::vector<std::pair<uint64_t, uint64_t>> live;
  uint64_t value = 0;
  for (size_t r = 0; r < rounds; ++r) {
    // Mostly inserts, so the table grows through its steps while erasing.
    if (live.empty() || rng() % 3 != 0) {
      const uint64_t key = rng() % keys;
      t.Insert(key, ++value);
      live.emplace_back(key, value);
    } else {
      const size_t i = rng() % live.size();
      ASSERT_TRUE(t.Erase(live[i].first, live[i].second));
      live[i] = live.back();
      live.pop_back();
    }
    if (r % 9973 == 0) t.ExpectSame();
  }
  t.ExpectSame();
  std::vector<uint64_t> all;
  for (uint64_t k = 0; k < keys; ++k) all.push_back(k);
  t.ExpectSame(all);
}

TEST(SegmentedTable, InsertAndEraseEqualTheOracleInOneSegment) {
  InsertAndEraseAgainstTheOracle<OneSegmentOps>(30000, 5000, 1);
}

TEST(SegmentedTable, InsertAndEraseEqualTheOracleInAWrappingRun) {
  InsertAndEraseAgainstTheOracle<WrappingOps>(3000, 300, 2);
}

TEST(SegmentedTable, InsertAndEraseEqualTheOracleOverAllSegments) {
  InsertAndEraseAgainstTheOracle<AllSegmentsOps>(200000, 50000, 3);
}

// Erasing everything leaves every segment's slots empty and reusable.
TEST(SegmentedTable, EmptiedTableAcceptsItsKeysAgain) {
  Checked<AllSegmentsOps> t;
  for (uint64_t k = 0; k < 20000; ++k) t.Insert(k, k);
  for (uint64_t k = 0; k < 20000; ++k) ASSERT_TRUE(t.Erase(k, k));
  t.ExpectSame({0, 1, 19999});
  for (uint64_t k = 0; k < 20000; k += 3) t.Insert(k, k + 1);
  t.ExpectSame({0, 1, 2, 3});
}

// Regression (found in review): Grow let go of a segment's slots before
// allocating the larger ones, so a growth that could not allocate lost the
// segment's entries. In a child process with little address space left the
// table is filled until an insert throws; every earlier entry must remain.
// (Sanitizers reserve terabytes of shadow memory: no address-space limit
// there.)
#ifndef NEARDUP_TEST_SANITIZED
// The child's whole run: exit 0 iff every entry inserted before the
// failed growth is still there.
[[noreturn]] void FillUntilAGrowthFails() {
  long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{96} << 20);
  const rlimit lim{limit, limit};
  if (pages == 0 || setrlimit(RLIMIT_AS, &lim) != 0) _exit(3);
  SegmentedTable<KeyValueSlot, AllSegmentsOps> t;
  uint64_t n = 0;
  try {
    for (;; ++n) t.Insert(Murmur3Fmix64(n), KeyValueSlot{n, n});
  } catch (const std::bad_alloc&) {
  }
  for (uint64_t i = 0; i < n; ++i) {
    if (t.Find(Murmur3Fmix64(i), [i](const KeyValueSlot& s) { return s.key == i; }) == nullptr) _exit(1);
  }
  _exit(n == t.size() && n > 100'000 ? 0 : 2);
}

TEST(SegmentedTableDeathTest, AGrowthThatCannotAllocateKeepsEveryEntry) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(FillUntilAGrowthFails(), ::testing::ExitedWithCode(0), "");
}
#endif

}  // namespace
}  // namespace neardup::internal
