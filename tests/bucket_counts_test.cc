// The word-at-a-time bucket bound (src/dedup/bucket_counts.h) against the
// plain per-bucket loop it replaced: every pair of values in one bucket
// (with the other buckets random), then random words with many 15s; and the
// 32 buckets of a text's counts, both words, against the definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <vector>

#include "dedup/bucket_counts.h"

namespace neardup::internal {
namespace {

// The definition, one bucket at a time.
bool PlainBound(uint64_t x, uint64_t y, uint32_t* bound) {
  uint32_t sum = 0;
  for (int b = 0; b < 16; ++b) {
    const uint32_t u = (x >> (4 * b)) & 15, v = (y >> (4 * b)) & 15;
    if (u == 15 && v == 15) return false;
    sum += std::min(u, v);
  }
  *bound = sum;
  return true;
}

// The word bound, and the expanded bound of x and y as the low words of
// two texts' counts (other words random), against the plain loop.
void ExpectSame(uint64_t x, uint64_t y) {
  uint32_t want = 0, got = 0;
  const bool want_ok = PlainBound(x, y, &want);
  ASSERT_EQ(SharedBucketBound(x, y, &got), want_ok) << std::hex << x << " " << y;
  if (want_ok) {
    ASSERT_EQ(got, want) << std::hex << x << " " << y;
  }
  static std::mt19937_64 rng(23);
  const BucketCounts a{{x, rng() & rng()}}, b{{y, rng() | rng()}};
  uint32_t high = 0;
  const bool words_ok = want_ok && PlainBound(a.words[1], b.words[1], &high);
  ASSERT_EQ(SharedBucketBound(Expand(a), Expand(b), &got), words_ok) << std::hex << x << " " << y;
  if (words_ok) {
    ASSERT_EQ(got, want + high) << std::hex << x << " " << y;
  }
}

// Random 4-bit counts, 15 with probability p15.
uint64_t RandomCounts(std::mt19937_64& rng, double p15) {
  std::bernoulli_distribution full(p15);
  uint64_t c = 0;
  for (int b = 0; b < 16; ++b) c |= uint64_t{full(rng) ? 15u : static_cast<unsigned>(rng() % 15)} << (4 * b);
  return c;
}

TEST(BucketCounts, BoundMatchesThePlainLoopForEveryPairInEveryBucket) {
  std::mt19937_64 rng(17);
  for (int bucket = 0; bucket < 16; ++bucket) {
    for (uint64_t u = 0; u < 16; ++u) {
      for (uint64_t v = 0; v < 16; ++v) {
        const uint64_t mask = ~(uint64_t{15} << (4 * bucket));
        const uint64_t x = (RandomCounts(rng, 0.1) & mask) | u << (4 * bucket);
        const uint64_t y = (RandomCounts(rng, 0.1) & mask) | v << (4 * bucket);
        ExpectSame(x, y);
        ExpectSame(u << (4 * bucket), v << (4 * bucket));  // the rest empty
      }
    }
  }
}

TEST(BucketCounts, BoundMatchesThePlainLoopOnRandomWords) {
  std::mt19937_64 rng(18);
  for (double p15 : {0.0, 0.05, 0.3, 0.9}) {
    for (int i = 0; i < 100000; ++i) ExpectSame(RandomCounts(rng, p15), RandomCounts(rng, p15));
  }
  ExpectSame(0, 0);
  ExpectSame(~uint64_t{0}, 0);               // all 15 against none: bound 0
  ExpectSame(~uint64_t{0}, ~uint64_t{0});    // no bound
  ExpectSame(0xEEEEEEEEEEEEEEEEULL, ~uint64_t{0});  // the largest bound, 16 * 14
}

TEST(BucketCounts, CountsSaturateAtFifteen) {
  std::vector<uint32_t> hashes;
  for (uint32_t i = 0; i < 40; ++i) hashes.push_back(32 * i + 3);  // all in bucket 3
  for (uint32_t i = 0; i < 5; ++i) hashes.push_back(32 * i + 9);
  for (uint32_t i = 0; i < 7; ++i) hashes.push_back(32 * i + 16 + 9);  // bucket 25: the second word's 9
  const BucketCounts c = CountBuckets(hashes.data(), hashes.size());
  EXPECT_EQ(c.words[0], uint64_t{15} << 12 | uint64_t{5} << 36);
  EXPECT_EQ(c.words[1], uint64_t{7} << 36);
  EXPECT_EQ(CountBuckets(hashes.data(), 0), BucketCounts{});
}

// The definition over 32 buckets: min per bucket of the true counts capped
// at 15, no bound when a bucket is 15 in both.
bool PlainTextBound(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, uint32_t* bound) {
  uint32_t sum = 0;
  for (uint32_t bucket = 0; bucket < 32; ++bucket) {
    auto count = [&](const std::vector<uint32_t>& h) {
      return std::min<uint32_t>(15, static_cast<uint32_t>(std::count_if(h.begin(), h.end(), [&](uint32_t x) {
                                  return (x & 31) == bucket;
                                })));
    };
    const uint32_t u = count(a), v = count(b);
    if (u == 15 && v == 15) return false;
    sum += std::min(u, v);
  }
  *bound = sum;
  return true;
}

TEST(BucketCounts, TextBoundMatchesTheDefinitionAndBoundsTheIntersection) {
  std::mt19937_64 rng(19);
  for (int trial = 0; trial < 20000; ++trial) {
    // Two texts of up to 300 hashes from a small universe, so they share some.
    const uint32_t universe = 64 + static_cast<uint32_t>(rng() % 2000);
    std::vector<uint32_t> a(rng() % 300), b(rng() % 300);
    for (auto& x : a) x = static_cast<uint32_t>(rng() % universe) * 2654435761u;
    for (auto& x : b) x = static_cast<uint32_t>(rng() % universe) * 2654435761u;
    std::sort(a.begin(), a.end()), a.erase(std::unique(a.begin(), a.end()), a.end());
    std::sort(b.begin(), b.end()), b.erase(std::unique(b.begin(), b.end()), b.end());
    uint32_t want = 0, got = 0;
    const bool want_ok = PlainTextBound(a, b, &want);
    const BucketCounts ca = CountBuckets(a.data(), a.size()), cb = CountBuckets(b.data(), b.size());
    const bool got_ok = SharedBucketBound(ca, cb, &got);
    ASSERT_EQ(got_ok, want_ok) << trial;
    uint32_t expanded = 0;
    ASSERT_EQ(SharedBucketBound(Expand(ca), Expand(cb), &expanded), want_ok) << trial;
    if (want_ok) {
      ASSERT_EQ(expanded, want) << trial;
    }
    if (!got_ok) continue;
    ASSERT_EQ(got, want) << trial;
    std::vector<uint32_t> shared;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(shared));
    ASSERT_GE(got, shared.size()) << trial;
  }
}

}  // namespace
}  // namespace neardup::internal
