// SelfJoin against an O(n^2) double loop (the oracle), on data built to hit
// every path: planted pairs at distance 0..k+1, exact duplicates, and a
// cluster of equal block keys big enough for the run-collapsing scan.
#include "neardup/index/self_join.h"

#include <gtest/gtest.h>

#include <bit>
#include <random>

#include "util/sanitized.h"

namespace neardup {
namespace {

uint64_t Flip(uint64_t fp, int n, std::mt19937_64& rng) {
  uint64_t mask = 0;
  while (std::popcount(mask) < n) mask |= uint64_t{1} << (rng() % 64);
  return fp ^ mask;
}

// n fingerprints: random ones, near copies at 0..k+1 bits, a few values
// repeated many times, and (when `cluster`) 1,500 fingerprints within 3 bits
// of one centre, three in four exact copies, so several blocks see a group of more
// than 1,024 equal keys (the run path), and 400 fingerprints sharing their low
// 40 bits, a quarter with a near copy, so the blocks there see groups of
// ~450 (the bucketed path).
std::vector<uint64_t> MakeData(size_t n, int k, uint64_t seed, bool cluster) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out;
  if (cluster) {
    const uint64_t centre = rng();
    for (int i = 0; i < 1500; ++i) out.push_back(i % 4 == 0 ? Flip(centre, static_cast<int>(rng() % 4), rng) : centre);
    const uint64_t low = rng() & ((uint64_t{1} << 40) - 1);
    for (int i = 0; i < 400; ++i) {
      out.push_back((rng() << 40) | low);
      if (i % 4 == 0) out.push_back(Flip(out.back(), static_cast<int>(rng() % (k + 2)), rng));
    }
  }
  while (out.size() < n) {
    const uint64_t base = rng();
    out.push_back(base);
    switch (rng() % 4) {
      case 0:
        out.push_back(Flip(base, static_cast<int>(rng() % (k + 2)), rng));
        break;
      case 1:
        for (int c = 0; c < 5; ++c) out.push_back(base);
        break;
      default:
        break;
    }
  }
  out.resize(n);
  for (size_t i = n - 1; i > 0; --i) std::swap(out[i], out[rng() % (i + 1)]);
  return out;
}

std::vector<JoinPair> Oracle(const std::vector<uint64_t>& fps, int k) {
  std::vector<JoinPair> out;
  for (uint32_t i = 0; i < fps.size(); ++i) {
    for (uint32_t j = i + 1; j < fps.size(); ++j) {
      const int d = std::popcount(fps[i] ^ fps[j]);
      if (d <= k) out.push_back({i, j, static_cast<uint32_t>(d)});
    }
  }
  return out;
}

std::vector<JoinPair> Join(const std::vector<uint64_t>& fps, int k, int threads, SelfJoinStats* stats = nullptr) {
  std::vector<JoinPair> out;
  SelfJoinOptions o;
  o.threads = threads;
  const Status s = SelfJoin(fps, k, o, &out, stats);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(SelfJoinTest, BlocksCoverAllBitsInNearEqualWidths) {
  for (int k = 0; k <= kMaxSelfJoinK; ++k) {
    const auto blocks = SelfJoinBlocks(k);
    ASSERT_EQ(blocks.size(), static_cast<size_t>(k + 1));
    int next = 0;
    for (const auto& b : blocks) {
      EXPECT_EQ(b.offset, next);
      EXPECT_LE(b.width, 64 / (k + 1) + 1);
      EXPECT_GE(b.width, 64 / (k + 1));
      next += b.width;
    }
    EXPECT_EQ(next, 64);
  }
  EXPECT_TRUE(SelfJoinBlocks(kMaxSelfJoinK + 1).empty());
}

TEST(SelfJoinTest, MatchesBruteForceForEveryK) {
  for (int k = 0; k <= kMaxSelfJoinK; ++k) {
    for (bool cluster : {false, true}) {
      const auto fps = MakeData(3000, k, 1000 + k, cluster);
      SelfJoinStats stats;
      const auto got = Join(fps, k, 1, &stats);
      const auto want = Oracle(fps, k);
      ASSERT_EQ(got.size(), want.size()) << "k=" << k << " cluster=" << cluster;
      EXPECT_TRUE(got == want) << "k=" << k << " cluster=" << cluster;
      if (cluster) {
        EXPECT_GT(stats.largest_group, 1024u) << "k=" << k;  // the run path ran
      }
    }
  }
}

TEST(SelfJoinTest, ThreadCountsGiveIdenticalOutput) {
  for (int k : {0, 1, 3, 6}) {
    const auto fps = MakeData(testing::kSanitized ? 1500 : 3000, k, 77 + k, true);
    const auto one = Join(fps, k, 1);
    EXPECT_FALSE(one.empty());
    EXPECT_TRUE(Join(fps, k, 2) == one) << "k=" << k;
    EXPECT_TRUE(Join(fps, k, 3) == one) << "k=" << k;
  }
}

TEST(SelfJoinTest, AllIdenticalFingerprintsGiveEveryPairOnce) {
  const std::vector<uint64_t> fps(2000, 0x0123456789abcdefULL);
  SelfJoinStats stats;
  const auto got = Join(fps, 3, 2, &stats);
  ASSERT_EQ(got.size(), 2000u * 1999 / 2);
  EXPECT_EQ(got.front(), (JoinPair{0, 1, 0}));
  EXPECT_EQ(got.back(), (JoinPair{1998, 1999, 0}));
  // One distinct value: no fingerprint comparison at all, whatever the group.
  EXPECT_EQ(stats.comparisons, 0u);
}

TEST(SelfJoinTest, EdgeCases) {
  std::vector<JoinPair> out{{1, 2, 3}};
  EXPECT_TRUE(SelfJoin({}, 3, {}, &out).ok());
  EXPECT_TRUE(out.empty());
  const std::vector<uint64_t> one{42};
  EXPECT_TRUE(SelfJoin(one, 3, {}, &out).ok());
  EXPECT_TRUE(out.empty());
  const std::vector<uint64_t> two{0, 0xF};  // distance 4
  EXPECT_TRUE(SelfJoin(two, 3, {}, &out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(SelfJoin(two, 4, {}, &out).ok());
  EXPECT_EQ(out, (std::vector<JoinPair>{{0, 1, 4}}));
}

TEST(SelfJoinTest, RejectsBadKAndBoundsThePairs) {
  const std::vector<uint64_t> fps(100, 7);
  std::vector<JoinPair> out;
  EXPECT_EQ(SelfJoin(fps, -1, {}, &out).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(SelfJoin(fps, kMaxSelfJoinK + 1, {}, &out).code(), Status::Code::kInvalidArgument);
  SelfJoinOptions o;
  o.max_pairs = 100;
  EXPECT_EQ(SelfJoin(fps, 3, o, &out).code(), Status::Code::kResourceExhausted);
  EXPECT_TRUE(out.empty());
  o.max_pairs = 4950;  // exactly 100 * 99 / 2
  EXPECT_TRUE(SelfJoin(fps, 3, o, &out).ok());
  EXPECT_EQ(out.size(), 4950u);
}

}  // namespace
}  // namespace neardup
