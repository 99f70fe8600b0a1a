// AnchorTable (src/dedup/anchor_table.h) against a std::map oracle, read by
// Collect and CollectFirstLive: lists that grow through every block class
// and shrink back to one id, stop keys, blocks larger than a pool chunk, and
// the move to 8-byte words when an id does not fit 31 bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <vector>

#include "dedup/anchor_table.h"

namespace neardup::internal {
namespace {

struct Entry {
  bool stop = false;
  std::vector<uint64_t> ids;
};

// The contract in a few lines: a key past `cap` ids is a stop key for good.
class Oracle {
 public:
  void Add(uint32_t key, uint64_t id, uint64_t cap) {
    auto [it, fresh] = map_.try_emplace(key);
    Entry& e = it->second;
    if (e.stop) return;
    if (e.ids.size() + 1 > cap) {
      e.stop = true;
      e.ids.clear();
      ++stops_;
      return;
    }
    e.ids.push_back(id);
  }
  void Remove(uint32_t key, uint64_t id) {
    auto it = map_.find(key);
    if (it == map_.end() || it->second.stop) return;
    auto& ids = it->second.ids;
    auto pos = std::find(ids.begin(), ids.end(), id);
    if (pos == ids.end()) return;
    ids.erase(pos);
    if (ids.empty()) map_.erase(it);
  }
  const std::map<uint32_t, Entry>& map() const { return map_; }
  uint64_t stops() const { return stops_; }

 private:
  std::map<uint32_t, Entry> map_;
  uint64_t stops_ = 0;
};

// CollectFirstLive over random key sequences (known, stop and unknown keys;
// longer than its batch of 32) against the oracle walked key by key.
template <typename Table>
void ExpectSameFirstLive(const Table& t, const Oracle& o, uint32_t key_range) {
  std::mt19937 rng(key_range);
  for (int round = 0; round < 200; ++round) {
    std::vector<uint32_t> keys(rng() % 90);
    for (uint32_t& k : keys) k = static_cast<uint32_t>(rng() % (key_range + 20));
    const int live = static_cast<int>(rng() % 40);
    std::vector<uint64_t> want;
    int probed = 0;
    for (uint32_t k : keys) {
      if (probed == live) break;
      auto it = o.map().find(k);
      if (it != o.map().end() && it->second.stop) continue;
      ++probed;
      if (it != o.map().end()) want.insert(want.end(), it->second.ids.begin(), it->second.ids.end());
    }
    std::vector<uint64_t> got;
    EXPECT_EQ(t.CollectFirstLive(keys.data(), keys.size(), live, &got), probed) << "round " << round;
    EXPECT_EQ(got, want) << "round " << round;
  }
}

// Every key the oracle knows, and keys it does not, read back the same.
template <typename Table>
void ExpectSame(const Table& t, const Oracle& o, uint32_t key_range) {
  for (uint32_t key = 0; key < key_range; ++key) {
    std::vector<uint64_t> got;
    const bool live = t.Collect(key, &got);
    auto it = o.map().find(key);
    if (it == o.map().end()) {
      EXPECT_TRUE(live && got.empty()) << "key " << key;
      EXPECT_FALSE(t.IsStop(key));
      continue;
    }
    EXPECT_EQ(!live, it->second.stop) << "key " << key;
    EXPECT_EQ(t.IsStop(key), it->second.stop) << "key " << key;
    EXPECT_EQ(got, it->second.ids) << "key " << key;  // insertion order, removals closed up
  }
  EXPECT_EQ(t.stops_made(), o.stops());
  ExpectSameFirstLive(t, o, key_range);
}

// Random adds and removes over few keys, so lists grow long, shrink, stop.
template <typename Table>
void RunRandomOps(Table* t, Oracle* o, uint64_t first_id, uint64_t cap, int ops, uint32_t seed) {
  std::mt19937_64 rng(seed);
  constexpr uint32_t kKeys = 300;
  std::vector<std::pair<uint32_t, uint64_t>> added;
  uint64_t next = first_id;
  for (int i = 0; i < ops; ++i) {
    // Skewed keys: a few hot ones reach the cap, most hold one to a few ids.
    const uint32_t key = static_cast<uint32_t>(rng() % 4 == 0 ? rng() % 8 : rng() % kKeys);
    if (!added.empty() && rng() % 3 == 0) {
      const size_t j = rng() % added.size();
      t->Remove(added[j].first, added[j].second);
      o->Remove(added[j].first, added[j].second);
      added[j] = added.back();
      added.pop_back();
    } else {
      t->Add(key, next, cap);
      o->Add(key, next, cap);
      added.emplace_back(key, next++);
    }
  }
  ExpectSame(*t, *o, kKeys);
}

TEST(AnchorTable, MatchesTheOracleUnderRandomAddsAndRemoves) {
  for (uint64_t cap : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{5}, uint64_t{64}, uint64_t{1} << 30}) {
    AnchorTable t;
    Oracle o;
    RunRandomOps(&t, &o, 0, cap, 20000, static_cast<uint32_t>(cap + 7));
    EXPECT_FALSE(t.wide());
  }
}

// Lists carved one after another, then grown in turn: a list that wrote
// past its block would change its neighbour's header or ids.
TEST(AnchorTable, NeighbouringListsGrowInTurnWithoutTouchingEachOther) {
  AnchorTable t;
  Oracle o;
  uint64_t id = 0;
  for (int round = 0; round < 200; ++round) {
    for (uint32_t key = 0; key < 16; ++key) {
      t.Add(key, id, 1000);
      o.Add(key, id++, 1000);
    }
  }
  ExpectSame(t, o, 16);
}

TEST(AnchorTable, NarrowAndWideWordsAgree) {
  AnchorPostings<uint64_t> wide;
  AnchorPostings<uint32_t> narrow;
  Oracle o1, o2;
  RunRandomOps(&wide, &o1, 0, 40, 20000, 3);
  RunRandomOps(&narrow, &o2, 0, 40, 20000, 3);
}

// The first id past 31 bits moves every key to 8-byte words: nothing is
// lost, stop keys stay stop keys, and later ids of any size are held.
TEST(AnchorTable, AnIdPast31BitsWidensTheTableWithEverythingKept) {
  AnchorTable t;
  Oracle o;
  RunRandomOps(&t, &o, 0, 30, 20000, 11);
  ASSERT_FALSE(t.wide());
  const uint64_t big = AnchorPostings<uint32_t>::kMaxId + 1;
  t.Add(5, big, 30);
  o.Add(5, big, 30);
  EXPECT_TRUE(t.wide());
  ExpectSame(t, o, 300);
  RunRandomOps(&t, &o, uint64_t{1} << 40, 30, 20000, 12);
}

TEST(AnchorTable, TheLargestNarrowIdStaysNarrow) {
  AnchorTable t;
  const uint64_t id = AnchorPostings<uint32_t>::kMaxId;
  t.Add(1, id, 64);
  t.Add(1, 0, 64);
  EXPECT_FALSE(t.wide());
  std::vector<uint64_t> got;
  ASSERT_TRUE(t.Collect(1, &got));
  EXPECT_EQ(got, (std::vector<uint64_t>{id, 0}));
}

// A list longer than a pool chunk (2^18 words) is a block of its own; lists
// of every class before and after it stay intact.
TEST(AnchorTable, AListLargerThanAChunkIsKept) {
  AnchorTable t;
  Oracle o;
  const uint64_t cap = uint64_t{1} << 30;
  for (uint64_t id = 0; id < 1'500'000; ++id) {
    const uint32_t key = id % 3 == 0 ? static_cast<uint32_t>(id % 250) : 7;
    t.Add(key, id, cap);
    o.Add(key, id, cap);
  }
  ExpectSame(t, o, 300);
  // Removal closes the list up (linear): every id of the small lists, a
  // sample of the long one.
  for (uint64_t id = 0; id < 1'500'000; id += 3) {
    t.Remove(static_cast<uint32_t>(id % 250), id);
    o.Remove(static_cast<uint32_t>(id % 250), id);
  }
  for (uint64_t id = 1; id < 1'500'000; id += 4999) {
    const uint32_t key = id % 3 == 0 ? static_cast<uint32_t>(id % 250) : 7;
    t.Remove(key, id);
    o.Remove(key, id);
  }
  ExpectSame(t, o, 300);
}

// The service's pattern: a retention window (insert the newest, remove the
// oldest). Freed blocks are reused and shrunk lists move to smaller ones,
// so memory follows the live postings: flat over nine more windows.
TEST(AnchorTable, MemoryStaysBoundedUnderASlidingWindow) {
  AnchorTable t;
  std::mt19937_64 rng(9);
  constexpr uint64_t kWindow = 100'000, kAnchors = 8;
  std::vector<std::array<uint32_t, kAnchors>> keys;
  auto draw = [&rng] {
    std::array<uint32_t, kAnchors> k;
    // Zipf-like: lists of every length up to the cap, most keys with one id.
    for (auto& x : k) x = static_cast<uint32_t>(rng() % 2 == 0 ? rng() % 50'000 : rng());
    return k;
  };
  size_t warm = 0;
  for (uint64_t id = 0; id < 11 * kWindow; ++id) {
    keys.push_back(draw());
    for (uint32_t key : keys[id]) t.Add(key, id, 64);
    if (id >= kWindow) {
      for (uint32_t key : keys[id - kWindow]) t.Remove(key, id - kWindow);
    }
    if (id == 2 * kWindow) warm = t.MemoryBytes();
  }
  // Without the move to a smaller block on removal: +34 %; without reuse of
  // freed blocks: +190 %.
  EXPECT_LT(t.MemoryBytes(), warm * 11 / 10) << warm;
}

TEST(AnchorTable, MemoryIsAboutEightBytesPerPosting) {
  AnchorTable t;
  // 200k keys of one id and 50k of six: 500k postings.
  for (uint64_t id = 0; id < 200'000; ++id) t.Add(static_cast<uint32_t>(id), id, 64);
  for (uint64_t id = 0; id < 300'000; ++id) t.Add(static_cast<uint32_t>(1'000'000 + id / 6), 200'000 + id, 64);
  // Slots at 64-80 % load, lists at most 1.5x their ids, pool chunks of 1 MB.
  EXPECT_LT(t.MemoryBytes(), 250'000 * 8 / 0.6 + 300'000 * 4 * 1.5 + (size_t{8} << 20));
}

}  // namespace
}  // namespace neardup::internal
