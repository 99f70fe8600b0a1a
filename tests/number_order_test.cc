// NumberOrder (src/engine/number_order.h): the rebuild's sort by number, in
// memory and through runs spilled to unnamed files, gives back every
// document exactly as added, by increasing number.
#include "engine/number_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace neardup {
namespace {

std::vector<StoredDocument> Documents(size_t n) {
  std::vector<StoredDocument> docs;
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < n; ++i) {
    StoredDocument d;
    d.number = i * 3 + 1;
    d.id = "id-" + std::to_string(rng() % 1000000) + std::string(rng() % 40, 'x');
    d.timestamp_ms = static_cast<int64_t>(rng() >> 1) * (i % 2 ? 1 : -1);
    d.signature.content_hash = rng();
    d.signature.fingerprint = rng();
    d.signature.has_features = rng() % 2;
    d.extra = std::string(rng() % 3000, static_cast<char>(i));  // some past the 1 MiB buffer in all
    docs.push_back(d);
  }
  std::shuffle(docs.begin(), docs.end(), rng);
  return docs;
}

void ExpectSortedCopy(size_t run_docs, bool spill, size_t n) {
  std::string dir = std::filesystem::temp_directory_path() / "neardup_number_order_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::vector<StoredDocument> docs = Documents(n);
  NumberOrder order(spill ? dir : "", run_docs);
  for (StoredDocument d : docs) ASSERT_TRUE(order.Add(std::move(d)).ok());
  if (spill) {
    EXPECT_EQ(order.spilled_runs(), n / run_docs);
  }
  std::vector<StoredDocument> out;
  ASSERT_TRUE(order.Drain([&](StoredDocument&& d) {
    out.push_back(std::move(d));
    return Status::OK();
  }).ok());
  std::vector<StoredDocument> want = docs;
  std::sort(want.begin(), want.end(), [](const auto& a, const auto& b) { return a.number < b.number; });
  ASSERT_EQ(out.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(out[i], want[i]) << i;
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "runs are unnamed files";
  std::filesystem::remove_all(dir);
}

TEST(NumberOrderTest, InMemory) { ExpectSortedCopy(100, false, 1000); }
TEST(NumberOrderTest, ThroughSpilledRuns) { ExpectSortedCopy(97, true, 2000); }
TEST(NumberOrderTest, OneRunBiggerThanTheReadBuffer) { ExpectSortedCopy(1500, true, 3000); }

TEST(NumberOrderTest, AnErrorOfTheCallbackStopsTheDrain) {
  std::string dir = std::filesystem::temp_directory_path() / "neardup_number_order_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  NumberOrder order(dir, 10);
  for (StoredDocument d : Documents(100)) ASSERT_TRUE(order.Add(std::move(d)).ok());
  int calls = 0;
  const Status s = order.Drain([&](StoredDocument&&) {
    return ++calls == 5 ? Status::Corruption("bad record") : Status::OK();
  });
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_EQ(calls, 5);
  std::filesystem::remove_all(dir);
}

TEST(NumberOrderTest, AMissingDirectoryIsAnError) {
  NumberOrder order("/nonexistent/neardup", 2);
  Status s;
  for (StoredDocument d : Documents(10)) {
    s = order.Add(std::move(d));
    if (!s.ok()) break;
  }
  EXPECT_EQ(s.code(), Status::Code::kIOError);
}

}  // namespace
}  // namespace neardup
