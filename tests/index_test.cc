// The fast index against the brute-force oracle, through the one interface.
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include "neardup/index/brute_force_index.h"
#include "neardup/index/index_io.h"
#include "neardup/index/multi_index.h"
#include "util/sanitized.h"

namespace neardup {
namespace {

uint64_t FlipBits(uint64_t fp, int n, std::mt19937_64& rng) {
  uint64_t mask = 0;
  while (std::popcount(mask) < n) mask |= uint64_t{1} << (rng() % 64);
  return fp ^ mask;
}

std::unique_ptr<HammingIndex> Multi(int blocks, uint64_t expected = 0) {
  MultiIndexOptions o;
  o.blocks = blocks;
  o.expected_size = expected;
  auto r = NewMultiIndex(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

// Random and clustered data: cluster centres with members 0..max_flip bits
// away, plus exact repeats under different ids.
std::vector<Entry> MakeData(size_t n, int max_flip, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Entry> out;
  DocId id = 1000;
  while (out.size() < n) {
    const uint64_t centre = rng();
    const int members = static_cast<int>(rng() % 6);
    out.push_back({centre, id++});
    for (int m = 0; m < members && out.size() < n; ++m) {
      out.push_back({FlipBits(centre, static_cast<int>(rng() % (max_flip + 1)), rng), id++});
    }
    if (rng() % 10 == 0 && out.size() < n) out.push_back({centre, id++});  // equal fingerprint
  }
  return out;
}

void ExpectSameResults(const HammingIndex& fast, const HammingIndex& oracle, const std::vector<uint64_t>& queries,
                       int k) {
  std::vector<Match> a, b;
  for (uint64_t q : queries) {
    ASSERT_TRUE(fast.Search(q, k, &a).ok());
    ASSERT_TRUE(oracle.Search(q, k, &b).ok());
    ASSERT_EQ(a, b) << fast.Describe() << " k=" << k << " q=" << q;
    Match first;
    EXPECT_EQ(fast.AnyWithin(q, k, &first), !b.empty());
    if (!b.empty()) {
      EXPECT_LE(first.distance, k);
    }
  }
}

std::vector<uint64_t> MakeQueries(const std::vector<Entry>& data, size_t n, int max_flip, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> q;
  for (size_t i = 0; i < n; ++i) {
    if (i % 3 == 0) {
      q.push_back(rng());
    } else {
      q.push_back(FlipBits(data[rng() % data.size()].fingerprint, static_cast<int>(rng() % (max_flip + 1)), rng));
    }
  }
  return q;
}

class IndexVsOracle : public ::testing::TestWithParam<int> {};

TEST_P(IndexVsOracle, RandomAndClusteredAllK) {
  const int blocks = GetParam();
  auto data = MakeData(20000, 10, 42 + blocks);
  auto fast = Multi(blocks);
  auto oracle = NewBruteForceIndex();
  ASSERT_TRUE(fast->AddBatch(data).ok());
  ASSERT_TRUE(oracle->AddBatch(data).ok());
  auto queries = MakeQueries(data, 300, 10, 7);
  for (int k = 0; k <= kMaxSupportedK; ++k) ExpectSameResults(*fast, *oracle, queries, k);
}

TEST_P(IndexVsOracle, IncrementalAddsThroughRehash) {
  const int blocks = GetParam();
  auto data = MakeData(6000, 8, 99 + blocks);
  auto fast = Multi(blocks);
  auto oracle = NewBruteForceIndex();
  for (const Entry& e : data) {  // one at a time: crosses several bucket-bit rehashes
    ASSERT_TRUE(fast->Add(e.fingerprint, e.id).ok());
    ASSERT_TRUE(oracle->Add(e.fingerprint, e.id).ok());
  }
  EXPECT_EQ(fast->size(), data.size());
  auto queries = MakeQueries(data, 200, 8, 8);
  for (int k : {0, 1, 3, 5, 8}) ExpectSameResults(*fast, *oracle, queries, k);
}

// expected_size large enough that the bucket key is the whole block (4 blocks:
// 16-bit keys, as from 1-2M entries on), so the 16-bit signature holds only bits
// of the following block: the production layout, on test-sized data.
TEST_P(IndexVsOracle, KeyIsWholeBlockAllK) {
  const int blocks = GetParam();
  auto data = MakeData(20000, 10, 142 + blocks);
  auto fast = Multi(blocks, 50000000);
  auto oracle = NewBruteForceIndex();
  ASSERT_TRUE(fast->AddBatch(data).ok());
  ASSERT_TRUE(oracle->AddBatch(data).ok());
  auto queries = MakeQueries(data, 300, 10, 17);
  for (int k = 0; k <= kMaxSupportedK; ++k) ExpectSameResults(*fast, *oracle, queries, k);
  // Expire a third, add new near copies one by one, compare again.
  std::mt19937_64 rng(blocks);
  for (size_t i = 0; i < data.size(); i += 3) {
    ASSERT_TRUE(fast->Remove(data[i].id));
    ASSERT_TRUE(oracle->Remove(data[i].id));
  }
  for (size_t i = 0; i < 4000; ++i) {
    const Entry e{FlipBits(data[rng() % data.size()].fingerprint, static_cast<int>(rng() % 5), rng), 900000 + i};
    ASSERT_TRUE(fast->Add(e.fingerprint, e.id).ok());
    ASSERT_TRUE(oracle->Add(e.fingerprint, e.id).ok());
  }
  for (int k : {0, 2, 3, 4, 8}) ExpectSameResults(*fast, *oracle, queries, k);
}

INSTANTIATE_TEST_SUITE_P(Blocks, IndexVsOracle, ::testing::Values(2, 3, 4, 5, 6, 8));

// Distance exactly k is found and k + 1 is not, with the differing bits
// placed in one chosen block, in the signature bits after the key, or in block
// bits that neither key nor signature hold (2 blocks of 32 bits with few key
// bits: the signature filter is then only a lower bound on the block distance).
TEST(MultiIndex, ExactlyKAndKPlusOneInEveryBitRegion) {
  std::mt19937_64 rng(77);
  for (int blocks : {2, 3, 4, 8}) {
    for (uint64_t expected : {uint64_t{0}, uint64_t{50000000}}) {
      for (int k = 0; k <= kMaxSupportedK; ++k) {
        for (int region = 0; region < 8; ++region) {
          if (!testing::RunsCase(region, 2)) continue;
          auto index = Multi(blocks, expected);
          const uint64_t base = rng();
          // Bits [lo, lo + 8) of the fingerprint, counted from the top.
          const int lo = region * 8;
          auto flip_in_region = [&](int n) {
            uint64_t mask = 0;
            // At most 8 bits fit the region; the rest go anywhere.
            while (std::popcount(mask) < std::min(n, 8)) mask |= uint64_t{1} << (63 - lo - static_cast<int>(rng() % 8));
            while (std::popcount(mask) < n) mask |= uint64_t{1} << (rng() % 64);
            return base ^ mask;
          };
          const uint64_t at_k = flip_in_region(k);
          const uint64_t at_k1 = flip_in_region(k + 1);
          ASSERT_TRUE(index->Add(at_k, 1).ok());
          ASSERT_TRUE(index->Add(at_k1, 2).ok());
          ASSERT_TRUE(index->Add(at_k, 3).ok());  // equal fingerprint, other id
          std::vector<Match> out;
          ASSERT_TRUE(index->Search(base, k, &out).ok());
          ASSERT_EQ(out.size(), 2u) << "blocks=" << blocks << " k=" << k << " region=" << region;
          EXPECT_EQ(out[0].id, 1u);
          EXPECT_EQ(out[1].id, 3u);
          EXPECT_EQ(out[0].distance, k);
          ASSERT_TRUE(index->Search(base, std::min(k + 1, kMaxSupportedK), &out).ok());
          EXPECT_EQ(out.size(), k + 1 <= kMaxSupportedK ? 3u : 2u);
        }
      }
    }
  }
}

// The id -> row map: many ids (random 64-bit and dense), removals in the
// middle of probe runs, re-adds into freed rows, growth with and without
// bulk reserves, checked through Get/Remove against a std::map.
TEST(MultiIndex, IdLookupAgainstReference) {
  std::mt19937_64 rng(5150);
  auto index = Multi(4);
  std::map<DocId, uint64_t> ref;
  auto random_id = [&]() { return rng() % 3 == 0 ? rng() % 50000 : rng(); };
  for (int round = 0; round < 4; ++round) {
    if (round % 2 == 0) {
      std::vector<Entry> batch;
      while (batch.size() < 30000) {
        const DocId id = random_id();
        if (ref.count(id)) continue;
        ref[id] = rng();
        batch.push_back({ref[id], id});
      }
      ASSERT_TRUE(index->AddBatch(batch).ok());
    } else {
      for (int i = 0; i < 20000; ++i) {
        const DocId id = random_id();
        const uint64_t fp = rng();
        const Status st = index->Add(fp, id);
        if (ref.count(id)) {
          EXPECT_EQ(st.code(), Status::Code::kAlreadyExists);
        } else {
          ASSERT_TRUE(st.ok());
          ref[id] = fp;
        }
      }
    }
    // Remove ~40%, including ids never added.
    for (auto it = ref.begin(); it != ref.end();) {
      if (rng() % 5 < 2) {
        ASSERT_TRUE(index->Remove(it->first));
        it = ref.erase(it);
      } else {
        ++it;
      }
    }
    for (int i = 0; i < 1000; ++i) {
      const DocId id = random_id();
      if (!ref.count(id)) {
        EXPECT_FALSE(index->Remove(id));
      }
    }
    ASSERT_EQ(index->size(), ref.size());
    for (const auto& [id, fp] : ref) {
      auto got = index->Get(id);
      ASSERT_TRUE(got.ok()) << id;
      EXPECT_EQ(*got, fp);
    }
    for (int i = 0; i < 1000; ++i) {
      const DocId id = random_id();
      if (!ref.count(id)) {
        EXPECT_EQ(index->Get(id).status().code(), Status::Code::kNotFound);
      }
    }
  }
  size_t seen = 0;
  index->ForEach([&](const Entry& e) {
    ++seen;
    EXPECT_EQ(ref.at(e.id), e.fingerprint);
  });
  EXPECT_EQ(seen, ref.size());
}

TEST(MultiIndex, DistanceExactlyKMatchesAndKPlusOneDoesNot) {
  std::mt19937_64 rng(5);
  for (int k = 0; k <= kMaxSupportedK; ++k) {
    auto index = Multi(4);
    const uint64_t base = rng();
    // Place the flipped bits in every possible block pattern over many trials.
    for (int trial = 0; trial < 200; ++trial) {
      index->Clear();
      const uint64_t at_k = FlipBits(base, k, rng);
      const uint64_t at_k1 = FlipBits(base, k + 1, rng);
      ASSERT_TRUE(index->Add(at_k, 1).ok());
      ASSERT_TRUE(index->Add(at_k1, 2).ok());
      std::vector<Match> out;
      ASSERT_TRUE(index->Search(base, k, &out).ok());
      ASSERT_EQ(out.size(), 1u) << "k=" << k;
      EXPECT_EQ(out[0].id, 1u);
      EXPECT_EQ(out[0].distance, k);
    }
  }
}

TEST(MultiIndex, EqualFingerprintsAllMatchOnceNearestFirst) {
  auto index = Multi(4);
  const uint64_t fp = 0x0123456789abcdefULL;
  for (DocId id = 10; id > 0; --id) ASSERT_TRUE(index->Add(fp, id).ok());
  ASSERT_TRUE(index->Add(fp ^ 1, 100).ok());
  std::vector<Match> out;
  ASSERT_TRUE(index->Search(fp, 3, &out).ok());
  ASSERT_EQ(out.size(), 11u);
  for (DocId i = 0; i < 10; ++i) EXPECT_EQ(out[i].id, i + 1);  // (distance, id) order
  EXPECT_EQ(out[10].id, 100u);
  EXPECT_EQ(out[10].distance, 1);
}

TEST(MultiIndex, RemoveAndReuseAgainstOracle) {
  auto data = MakeData(8000, 6, 3);
  auto fast = Multi(4);
  auto oracle = NewBruteForceIndex();
  ASSERT_TRUE(fast->AddBatch(data).ok());
  ASSERT_TRUE(oracle->AddBatch(data).ok());
  std::mt19937_64 rng(11);
  for (size_t i = 0; i < data.size(); i += 2) {  // expire half, then refill
    EXPECT_TRUE(fast->Remove(data[i].id));
    EXPECT_TRUE(oracle->Remove(data[i].id));
  }
  EXPECT_FALSE(fast->Remove(data[0].id));
  EXPECT_EQ(fast->Get(data[0].id).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(*fast->Get(data[1].id), data[1].fingerprint);
  auto queries = MakeQueries(data, 200, 6, 12);
  for (int k : {0, 3, 6}) ExpectSameResults(*fast, *oracle, queries, k);
  for (size_t i = 0; i < 3000; ++i) {
    const Entry e{FlipBits(data[rng() % data.size()].fingerprint, 2, rng), 500000 + i};
    ASSERT_TRUE(fast->Add(e.fingerprint, e.id).ok());
    ASSERT_TRUE(oracle->Add(e.fingerprint, e.id).ok());
  }
  EXPECT_EQ(fast->size(), oracle->size());
  for (int k : {0, 3, 6}) ExpectSameResults(*fast, *oracle, queries, k);
  size_t seen = 0;
  fast->ForEach([&](const Entry& e) {
    ++seen;
    EXPECT_EQ(*oracle->Get(e.id), e.fingerprint);
  });
  EXPECT_EQ(seen, oracle->size());
}

TEST(MultiIndex, RemoveEverythingThenReuse) {
  auto index = Multi(4);
  for (DocId i = 0; i < 100; ++i) ASSERT_TRUE(index->Add(i * 0x9E3779B97F4A7C15ULL, i).ok());
  for (DocId i = 0; i < 100; ++i) ASSERT_TRUE(index->Remove(i));
  EXPECT_EQ(index->size(), 0u);
  std::vector<Match> out;
  ASSERT_TRUE(index->Search(0, 8, &out).ok());
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(index->Add(5, 5).ok());
  ASSERT_TRUE(index->Search(4, 1, &out).ok());
  ASSERT_EQ(out.size(), 1u);
}

TEST(MultiIndex, DuplicateIdsRejectedAndBatchIsAllOrNothing) {
  auto index = Multi(4);
  ASSERT_TRUE(index->Add(1, 7).ok());
  EXPECT_EQ(index->Add(2, 7).code(), Status::Code::kAlreadyExists);
  std::vector<Entry> batch;
  for (DocId i = 100; i < 10100; ++i) batch.push_back({i, i});
  batch.push_back({3, 7});
  EXPECT_EQ(index->AddBatch(batch).code(), Status::Code::kAlreadyExists);
  EXPECT_EQ(index->size(), 1u);
  batch.back() = {3, 100};  // duplicate inside the batch
  EXPECT_EQ(index->AddBatch(batch).code(), Status::Code::kAlreadyExists);
  EXPECT_EQ(index->size(), 1u);
}

TEST(MultiIndex, RejectsBadArguments) {
  MultiIndexOptions o;
  o.blocks = 1;
  EXPECT_FALSE(NewMultiIndex(o).ok());
  o.blocks = 9;
  EXPECT_FALSE(NewMultiIndex(o).ok());
  o.blocks = 0;
  o.expected_k = 9;
  EXPECT_FALSE(NewMultiIndex(o).ok());
  auto index = Multi(4);
  std::vector<Match> out;
  EXPECT_EQ(index->Search(0, 9, &out).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(index->Search(0, -1, &out).code(), Status::Code::kInvalidArgument);
  EXPECT_FALSE(index->AnyWithin(0, 9));
}

TEST(MultiIndex, BatchSearchMatchesSingleOnAnyThreadCount) {
  auto data = MakeData(5000, 4, 21);
  auto index = Multi(0);
  ASSERT_TRUE(index->AddBatch(data).ok());
  auto queries = MakeQueries(data, 500, 4, 22);
  std::vector<std::vector<Match>> one, two;
  ASSERT_TRUE(index->SearchBatch(queries, 3, &one, 1).ok());
  ASSERT_TRUE(index->SearchBatch(queries, 3, &two, 2).ok());
  EXPECT_EQ(one, two);
  std::vector<Match> single;
  ASSERT_TRUE(index->Search(queries[7], 3, &single).ok());
  EXPECT_EQ(single, one[7]);
}

TEST(MultiIndex, MemoryPerEntryIsBounded) {
  auto data = MakeData(200000, 3, 1);
  auto index = Multi(4);
  ASSERT_TRUE(index->AddBatch(data).ok());
  const double per = static_cast<double>(index->MemoryBytes()) / data.size();
  // 4 tables x 6 B + 8 B fingerprint + 8 B id + ~5 B id lookup (load 4/5
  // after a bulk load); bulk-built tables have no slack. At 200k entries the
  // 4 x 4096 bucket headers and allocations add ~3 B per entry.
  EXPECT_LT(per, 54.0);
  EXPECT_GT(per, 44.0);
}

// Issue 2's target: 40 B per entry plus the 8 B id, at 50M. The marginal cost
// per entry is measured between two sizes with the same bucket count (16-bit
// keys, as from 1-2M entries on), so the fixed per-bucket cost, which 50M entries
// amortize to ~0.2 B, cancels out. Bulk load then 5% single adds, as in
// bench_index.
TEST(MultiIndex, MarginalMemoryPerEntryWithWholeBlockKeys) {
  auto bytes_for = [](size_t n) {
    std::mt19937_64 rng(n);
    std::vector<Entry> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = {rng(), rng()};
    auto index = Multi(4, 50000000);
    const size_t bulk = n - n / 20;
    EXPECT_TRUE(index->AddBatch(std::span<const Entry>(data.data(), bulk)).ok());
    for (size_t i = bulk; i < n; ++i) EXPECT_TRUE(index->Add(data[i].fingerprint, data[i].id).ok());
    EXPECT_EQ(index->Describe(), "multi-index(blocks=4,bucket_bits=16)");
    return static_cast<double>(index->MemoryBytes());
  };
  const double small = bytes_for(1000000), large = bytes_for(3000000);
  const double per = (large - small) / 2000000;
  EXPECT_LT(per, 48.0);
  EXPECT_GT(per, 40.0);
}

// ---- save / load -----------------------------------------------------------

std::string TempPath(const char* name) { return ::testing::TempDir() + "/" + name; }

TEST(IndexIo, RoundTripKeepsEveryEntryAndRefusesOtherSchemes) {
  auto data = MakeData(10000, 4, 31);
  auto index = Multi(4);
  ASSERT_TRUE(index->AddBatch(data).ok());
  ASSERT_TRUE(index->Remove(data[3].id));
  const std::string path = TempPath("roundtrip.ndx");
  ASSERT_TRUE(SaveIndex(*index, 0xabcdefULL, path).ok());
  auto info = ReadIndexFileInfo(path);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->scheme_id, 0xabcdefULL);
  EXPECT_EQ(info->num_entries, data.size() - 1);
  auto loaded = LoadIndex(path, 0xabcdefULL);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->size(), data.size() - 1);
  auto queries = MakeQueries(data, 200, 4, 32);
  ExpectSameResults(**loaded, *index, queries, 3);
  auto other = LoadIndex(path, 0x1234ULL);
  EXPECT_EQ(other.status().code(), Status::Code::kFailedPrecondition);
  std::remove(path.c_str());
}

TEST(IndexIo, CorruptAndTruncatedFilesAreRefused) {
  auto index = Multi(4);
  for (DocId i = 0; i < 1000; ++i) ASSERT_TRUE(index->Add(i * 0x9E3779B97F4A7C15ULL, i).ok());
  const std::string path = TempPath("corrupt.ndx");
  ASSERT_TRUE(SaveIndex(*index, 1, path).ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& b) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
  };
  std::string flipped = bytes;
  flipped[100] ^= 0x10;
  write(flipped);
  EXPECT_EQ(LoadIndex(path, 1).status().code(), Status::Code::kCorruption);
  write(bytes.substr(0, bytes.size() - 20));
  EXPECT_EQ(LoadIndex(path, 1).status().code(), Status::Code::kCorruption);
  write(bytes.substr(0, 10));
  EXPECT_EQ(LoadIndex(path, 1).status().code(), Status::Code::kCorruption);
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  write(bad_magic);
  EXPECT_EQ(LoadIndex(path, 1).status().code(), Status::Code::kCorruption);
  std::string huge_count = bytes;
  huge_count[31] = 0x7f;  // N far beyond the file size: refused before allocating
  write(huge_count);
  EXPECT_EQ(LoadIndex(path, 1).status().code(), Status::Code::kCorruption);
  EXPECT_EQ(LoadIndex(TempPath("missing.ndx"), 1).status().code(), Status::Code::kIOError);
  write(bytes);
  EXPECT_TRUE(LoadIndex(path, 1).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace neardup
