// neardup dedup's KeptIds (tools/kept_ids.h) against a std::map: gaps in
// the sequence numbers, ids of every length (empty, across chunk ends,
// longer than a chunk) and lookups before, between and after them.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "../tools/kept_ids.h"

namespace neardup::cli {
namespace {

// Find, and a Walker asked every sequence number in turn, and one asked
// every third, against the oracle.
void ExpectSame(const KeptIds& ids, const std::map<uint64_t, std::string>& oracle, uint64_t last) {
  ASSERT_EQ(ids.size(), oracle.size());
  KeptIds::Walker every(&ids), third(&ids);
  for (uint64_t s = 0; s <= last + 2; ++s) {
    const auto it = oracle.find(s);
    const std::string_view want = it == oracle.end() ? std::string_view() : std::string_view(it->second);
    ASSERT_EQ(ids.Find(s), want) << "sequence " << s;
    ASSERT_EQ(every.Find(s), want) << "walker, sequence " << s;
    if (s % 3 == 0) {
      ASSERT_EQ(third.Find(s), want) << "walker by 3, sequence " << s;
    }
  }
}

TEST(KeptIds, FindsEveryIdAndNothingElse) {
  KeptIds ids;
  std::map<uint64_t, std::string> oracle;
  std::mt19937_64 rng(5);
  uint64_t seq = 3;  // the first kept document need not be sequence 0
  for (int i = 0; i < 20000; ++i) {
    // Mostly consecutive, some gaps (duplicates), a few long ones.
    seq += i == 0 ? 0 : rng() % 4 == 0 ? 1 + rng() % 5 : rng() % 500 == 0 ? 100000 : 1;
    std::string id = "\"doc-" + std::to_string(rng() % 100000000) + "\"";
    if (i % 1000 == 7) id.clear();
    ids.Add(seq, id);
    oracle[seq] = id;
  }
  ExpectSame(ids, oracle, seq);
}

TEST(KeptIds, IdsAcrossAndBeyondAChunk) {
  KeptIds ids;
  std::map<uint64_t, std::string> oracle;
  // 300 KiB ids fill a 1 MiB chunk in a few entries; one is 3 MiB.
  for (uint64_t s = 0; s < 200; ++s) {
    std::string id(s == 100 ? 3u << 20 : s % 3 == 0 ? 300u << 10 : 10, static_cast<char>('a' + s % 26));
    ids.Add(2 * s, id);
    oracle[2 * s] = id;
  }
  ExpectSame(ids, oracle, 400);
  EXPECT_LT(ids.MemoryBytes(), (200 / 3 + 1) * (300u << 10) + (3u << 20) + (4u << 20));
}

TEST(KeptIds, EmptyFindsNothing) {
  KeptIds ids;
  EXPECT_EQ(ids.Find(0), std::string_view());
  EXPECT_EQ(ids.Find(UINT64_MAX), std::string_view());
}

}  // namespace
}  // namespace neardup::cli
