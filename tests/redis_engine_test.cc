// RedisClusterEngine against a live local cluster: the Engine semantics
// (engine.h), the table layouts, and the fenced protocol's promise: of
// near-duplicates sent at the same moment to two engine instances exactly
// one is kept, with random stalls between protocol steps and check attempts
// abandoned mid-way (a crashed instance) and retried elsewhere; also for
// short texts that only the re-check policy's anchors or its short-text
// radius pair up.
#include "neardup/redis/redis_engine.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <barrier>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "neardup/text/fingerprint.h"
#include "redis/redis_cluster.h"
#include "util/race_trials.h"
#include "util/redis_test_cluster.h"

namespace neardup {
namespace {

using testing::LocalRedisCluster;
using testing::SharedRedisClusterTest;
using testing::NearDuplicateGroup;
using testing::ShortGroupKind;
using testing::ShortNearDuplicateGroup;
using testing::Race;
using testing::RaceResult;
using testing::Staller;
using testing::kMinRacedTrials;

// ---- layouts (no cluster) ----------------------------------------------------

int SharedTables(const RedisTableLayout& l, uint64_t a, uint64_t b) {
  int n = 0;
  for (uint64_t m : l.masks) n += RedisTableLayout::Key(a, m) == RedisTableLayout::Key(b, m);
  return n;
}

TEST(RedisLayout, ShapesMatchTheDesign) {
  auto p = RedisTableLayout::Make("pigeonhole", 3, 0);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->masks.size(), 4u);
  for (size_t t = 0; t < 4; ++t) EXPECT_EQ(p->key_bits(t), 16);
  auto n = RedisTableLayout::Make("nested", 3, 0);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(n->masks.size(), 16u);
  for (size_t t = 0; t < 16; ++t) EXPECT_EQ(n->key_bits(t), 28);
  auto m = RedisTableLayout::Make("manku", 3, 0);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->masks.size(), 20u);
  for (size_t t = 0; t < 20; ++t) EXPECT_GE(m->key_bits(t), 30);
  EXPECT_EQ(RedisTableLayout::Make("auto", 3, 100'000'000)->name, "pigeonhole");
  EXPECT_EQ(RedisTableLayout::Make("auto", 3, 10'000'000'000ULL)->name, "nested");
  EXPECT_FALSE(RedisTableLayout::Make("bogus", 3, 0).ok());
  // Records read per query at 10^10 documents: ~610k for 4 x 16 bits, ~600 for 16 x 28 bits.
  EXPECT_NEAR(p->ExpectedRecordsRead(1e10), 610351, 1);
  EXPECT_LT(n->ExpectedRecordsRead(1e10), 600);
  EXPECT_EQ(RedisTableLayout::Key(0xF0, 0xFF00FF), 0xF0u);
  EXPECT_EQ(RedisTableLayout::Key(0xAB0000, 0xFF00FF), 0xAB00u);
}

TEST(RedisLayout, EveryPairWithinKSharesATable) {
  std::mt19937_64 rng(42);
  for (const char* name : {"pigeonhole", "nested", "manku"}) {
    for (int k : {1, 3, 5}) {
      auto l = RedisTableLayout::Make(name, k, 0);
      ASSERT_TRUE(l.ok());
      for (int i = 0; i < 3000; ++i) {
        const uint64_t a = rng();
        uint64_t b = a;
        const int flips = static_cast<int>(rng() % (k + 1));
        for (int f = 0; f < flips; ++f) b ^= uint64_t{1} << (rng() % 64);
        ASSERT_GE(SharedTables(l.value(), a, b), 1) << name << " k=" << k;
      }
    }
  }
}

TEST(RedisEngineOptions, UriOptionsAreCheckedBeforeConnecting) {
  RedisEngineOptions o;
  o.uri = "redis-cluster://127.0.0.1:1?layout=bogus";
  EXPECT_EQ(OpenRedisClusterEngine(o).status().code(), Status::Code::kInvalidArgument);
  o.uri = "redis-cluster://127.0.0.1:1?lease_ms=-5";
  EXPECT_EQ(OpenRedisClusterEngine(o).status().code(), Status::Code::kInvalidArgument);
  o.uri = "redis-cluster://127.0.0.1:1?colour=red";
  EXPECT_EQ(OpenRedisClusterEngine(o).status().code(), Status::Code::kInvalidArgument);
  // Valid options: the failure is now the unreachable seed.
  o.uri = "redis-cluster://127.0.0.1:1?layout=nested&expected_documents=1e10&lease_ms=500";
  EXPECT_EQ(OpenRedisClusterEngine(o).status().code(), Status::Code::kUnavailable);
}

// ---- engine --------------------------------------------------------------------

class RedisEngineTest : public SharedRedisClusterTest {
 protected:
  void SetUp() override { ASSERT_NE(cluster_, nullptr) << "could not start a local redis cluster"; }

  static RedisEngineOptions Options() {
    RedisEngineOptions o;
    o.uri = cluster_->uri();
    o.lease_ms = 300;
    return o;
  }
  static std::unique_ptr<Engine> Open(const RedisEngineOptions& o) { return testing::EngineOrFail(OpenRedisClusterEngine(o)); }
  static std::string UniqueNs(const std::string& base) { return testing::UniqueNs(base); }

};


const char* kText =
    "The quick brown fox jumps over the lazy dog near the river bank while the farmer watches from his porch "
    "and the children play in the field behind the old red barn on a warm summer afternoon";
const char* kNearText =
    "The quick brown fox jumps over the lazy dog near the river bank while the farmer watches from his porch "
    "and the children play in the field behind the old red barn on a warm summer evening";
const char* kOtherText = "Completely unrelated content about distributed hash tables and consensus protocols in 2026";

TEST_F(RedisEngineTest, CheckInsertReplayQueryAndDelete) {
  auto e = Open(Options());
  ASSERT_NE(e, nullptr);
  const std::string ns = UniqueNs("basic");
  auto a = e->Check(ns, {"a", kText, std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->stored);
  EXPECT_FALSE(a->duplicate);

  auto b = e->Check(ns, {"b", kNearText, std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_LE(HammingDistance(a->fingerprint, b->fingerprint), 3) << "test texts must be near-duplicates";
  EXPECT_TRUE(b->duplicate);
  EXPECT_FALSE(b->stored);
  ASSERT_EQ(b->matches.size(), 1u);
  EXPECT_EQ(b->matches[0].id, "a");

  auto exact = e->Check(ns, {"c", kText, std::nullopt}, CheckMode::kQueryOnly);
  ASSERT_TRUE(exact.ok());
  ASSERT_EQ(exact->matches.size(), 1u);
  EXPECT_TRUE(exact->matches[0].exact);
  EXPECT_EQ(exact->matches[0].distance, 0);
  EXPECT_EQ(exact->matches[0].similarity, 1.0);

  // Re-sending a stored id is a replay, whatever the text.
  auto replay = e->Check(ns, {"a", kOtherText, std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE(replay->replay);
  EXPECT_TRUE(replay->stored);
  EXPECT_EQ(replay->fingerprint, a->fingerprint);

  auto other = e->Check(ns, {"o", kOtherText, std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->stored);
  EXPECT_FALSE(other->duplicate);

  auto info = e->GetDocument(ns, "a");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->fingerprint, a->fingerprint);
  EXPECT_EQ(e->GetDocument(ns, "b").status().code(), Status::Code::kNotFound);

  ASSERT_TRUE(e->DeleteDocument(ns, "a").ok());
  EXPECT_EQ(e->GetDocument(ns, "a").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(e->DeleteDocument(ns, "a").code(), Status::Code::kNotFound);
  auto after = e->Check(ns, {"b", kNearText, std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->stored) << "a deleted document never matches";

  // Texts without features match by exact normalized text only.
  auto p1 = e->Check(ns, {"p1", "!!!", std::nullopt}, CheckMode::kCheckAndInsert);
  auto p2 = e->Check(ns, {"p2", "!!!", std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_TRUE(p1->stored);
  EXPECT_TRUE(p2->duplicate);

  auto stats = e->GetNamespace(ns);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->inserted, 4u);  // a, o, b (after a was deleted), p1
  EXPECT_EQ(stats->deleted, 1u);
  EXPECT_EQ(stats->documents, 3u);
}

// A namespace whose records were filed under another anchor scheme (its
// record has no "anchor_scheme": scheme 1) is refused by every instance.
TEST_F(RedisEngineTest, NamespaceOfAnotherAnchorSchemeIsRefused) {
  auto e = Open(Options());
  ASSERT_NE(e, nullptr);
  const std::string ns = UniqueNs("anchors1");
  ASSERT_TRUE(e->Check(ns, {"a", kText, std::nullopt}, CheckMode::kCheckAndInsert).ok());
  RedisClusterOptions co;
  co.seeds = {cluster_->seeds()[0]};
  auto client = RedisClusterClient::Connect(co);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const std::string key = "nd:ns:" + ns;
  auto got = (*client)->Execute({"GET", key}, key);
  ASSERT_TRUE(got.ok() && !got->str.empty()) << "the namespace record moved from " << key;
  nlohmann::json record = nlohmann::json::parse(got->str);
  ASSERT_TRUE(record.contains("anchor_scheme"));
  record.erase("anchor_scheme");
  ASSERT_TRUE((*client)->Execute({"SET", key, record.dump()}, key).ok());
  auto fresh = Open(Options());  // nothing cached
  ASSERT_NE(fresh, nullptr);
  auto c = fresh->Check(ns, {"b", kNearText, std::nullopt}, CheckMode::kCheckAndInsert);
  EXPECT_EQ(c.status().code(), Status::Code::kFailedPrecondition) << c.status().ToString();
  EXPECT_NE(c.status().message().find("anchor scheme"), std::string::npos) << c.status().ToString();
}

TEST_F(RedisEngineTest, NestedLayoutFromTheUri) {
  RedisEngineOptions o = Options();
  o.uri += "?layout=auto&expected_documents=1e10";
  auto e = Open(o);
  ASSERT_NE(e, nullptr);
  const std::string ns = UniqueNs("nested");
  ASSERT_TRUE(e->Check(ns, {"a", kText, std::nullopt}, CheckMode::kCheckAndInsert)->stored);
  auto b = e->Check(ns, {"b", kNearText, std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->duplicate);
  ASSERT_EQ(b->matches.size(), 1u);
  EXPECT_EQ(b->matches[0].id, "a");
}

TEST_F(RedisEngineTest, NamespacesAreSharedAndSeparate) {
  auto e1 = Open(Options());
  auto e2 = Open(Options());
  ASSERT_TRUE(e1 && e2);
  const std::string ns = UniqueNs("ns"), other = UniqueNs("ns");
  NamespaceSettings s;
  s.k = 2;
  s.retention_seconds = 3600;
  bool created = false;
  ASSERT_TRUE(e1->PutNamespace(ns, s, &created).ok());
  EXPECT_TRUE(created);
  auto got = e2->GetNamespace(ns);  // another instance sees it
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->settings.k, 2);
  const auto names = e2->ListNamespaces();
  EXPECT_NE(std::find(names.begin(), names.end(), ns), names.end());

  ASSERT_TRUE(e1->Check(ns, {"a", kText, std::nullopt}, CheckMode::kCheckAndInsert)->stored);
  // Another namespace never sees it.
  auto elsewhere = e2->Check(other, {"x", kText, std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_TRUE(elsewhere->stored);
  // Settings of an empty namespace: k within the layout is fine, past it refused.
  const std::string empty = UniqueNs("ns");
  NamespaceSettings e;
  e.k = 2;
  ASSERT_TRUE(e1->PutNamespace(empty, e, &created).ok());
  e.k = 3;
  ASSERT_TRUE(e2->PutNamespace(empty, e, &created).ok());
  EXPECT_FALSE(created);
  e.k = 6;
  EXPECT_EQ(e2->PutNamespace(empty, e, &created).code(), Status::Code::kFailedPrecondition);
  // With documents a decision setting (k, tokenizer) is refused; retention may change.
  s.k = 3;
  EXPECT_EQ(e2->PutNamespace(ns, s, &created).code(), Status::Code::kFailedPrecondition);
  s.k = 2;
  s.tokenizer = "icu-words";
  EXPECT_EQ(e2->PutNamespace(ns, s, &created).code(), Status::Code::kFailedPrecondition);
  s.tokenizer = "mixed";
  s.retention_seconds = 7200;
  ASSERT_TRUE(e2->PutNamespace(ns, s, &created).ok());
  EXPECT_EQ(e1->GetNamespace(ns)->settings.retention_seconds, 7200);

  ASSERT_TRUE(e2->DeleteNamespace(ns).ok());
  EXPECT_EQ(e1->GetNamespace(ns).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(e1->DeleteNamespace(ns).code(), Status::Code::kNotFound);
  // Re-created (auto-create on first use): empty, even for the instance that cached the old one.
  auto fresh = e1->Check(ns, {"b", kText, std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_TRUE(fresh->stored);
  EXPECT_FALSE(fresh->duplicate);

  RedisEngineOptions strict = Options();
  strict.auto_create = false;
  auto e3 = Open(strict);
  EXPECT_EQ(e3->Check(UniqueNs("missing"), {"a", kText, std::nullopt}, CheckMode::kCheckAndInsert).status().code(),
            Status::Code::kNotFound);
}

TEST_F(RedisEngineTest, RetentionAndBatches) {
  std::atomic<int64_t> offset{0};
  RedisEngineOptions o = Options();
  o.clock_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
               .count() +
           offset.load();
  };
  auto e = Open(o);
  const std::string ns = UniqueNs("ret");
  NamespaceSettings s;
  s.retention_seconds = 3600;
  ASSERT_TRUE(e->PutNamespace(ns, s, nullptr).ok());
  // A batch decides in order: the second is a duplicate of the first.
  std::vector<DocumentInput> docs = {{"a", kText, std::nullopt}, {"b", kNearText, std::nullopt}};
  std::vector<Result<CheckOutcome>> out;
  ASSERT_TRUE(e->CheckBatch(ns, docs, CheckMode::kCheckAndInsert, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0]->stored);
  EXPECT_TRUE(out[1]->duplicate);
  // Two hours later "a" is past retention: it never matches and is not found.
  offset = 2 * 3600 * 1000;
  auto later = e->Check(ns, {"c", kNearText, std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(later.ok());
  EXPECT_FALSE(later->duplicate);
  EXPECT_TRUE(later->stored);
  EXPECT_EQ(e->GetDocument(ns, "a").status().code(), Status::Code::kNotFound);
  // A document whose own timestamp is past retention is answered, not stored.
  const int64_t old_ts = o.clock_ms() - 2 * 3600 * 1000;
  auto old = e->Check(ns, {"d", kOtherText, old_ts}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->stored);
}

// ---- exactly one kept, across instances ------------------------------------------

TEST_F(RedisEngineTest, ExactlyOneKeptAcrossInstancesWithStalls) {
  RedisEngineOptions o1 = Options(), o2 = Options();
  o1.step_hook = Staller(1, 0.0);
  o2.step_hook = Staller(2, 0.0);
  auto e1 = Open(o1), e2 = Open(o2);
  ASSERT_TRUE(e1 && e2);
  std::mt19937_64 rng(99);
  testing::ExpectExactlyOneInEveryTrial(
      {e1.get(), e2.get()}, 60, std::chrono::seconds(15), [&](int) { return UniqueNs("race"); },
      [&](int t) { return NearDuplicateGroup(rng, 2 + t % 3); });
}

TEST_F(RedisEngineTest, ExactlyOneKeptWhenInstancesDieMidway) {
  // A quarter of the protocol steps "crash": the check stops right there
  // (records left pending, or kept without an answer) and the client retries
  // on the other instance; the peers fence what the dead one left.
  RedisEngineOptions o1 = Options(), o2 = Options();
  o1.step_hook = Staller(3, 0.25);
  o2.step_hook = Staller(4, 0.25);
  auto e1 = Open(o1), e2 = Open(o2);
  ASSERT_TRUE(e1 && e2);
  std::mt19937_64 rng(7);
  testing::ExpectExactlyOneInEveryTrial(
      {e1.get(), e2.get()}, 60, std::chrono::seconds(15), [&](int) { return UniqueNs("crash"); },
      [&](int t) { return NearDuplicateGroup(rng, 2 + t % 2); });
}

// Short texts that plain simhash misses: groups paired up only through
// shared anchors (default settings), or only through the short-text radius
// (short_k = 5, anchors off), over three instances with stalls and, in half
// of the trials, a tenth of the protocol steps abandoned (crashes).
TEST_F(RedisEngineTest, ExactlyOneKeptShortTextsViaAnchorsOrWideRadius) {
  std::vector<std::unique_ptr<Engine>> calm, crashing;
  for (uint64_t seed = 11; seed < 14; ++seed) {
    RedisEngineOptions o = Options();
    o.uri += "?layout=pigeonhole";  // 6 tables for short_k = 5 (auto would pick 36 nested ones)
    o.step_hook = Staller(seed, 0.0);
    calm.push_back(Open(o));
    o.step_hook = Staller(seed + 100, 0.1);
    crashing.push_back(Open(o));
    ASSERT_TRUE(calm.back() && crashing.back());
  }
  NamespaceSettings wide;
  wide.recheck.short_k = 5;
  wide.recheck.anchors = 0;
  std::mt19937_64 rng(2024);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(18);
  int trials = 0, by_kind[2] = {0, 0}, raced_by_kind[2] = {0, 0};
  for (; trials < 120 && std::chrono::steady_clock::now() < deadline; ++trials) {
    const bool anchors = trials % 2 == 0;
    const std::string ns = UniqueNs(anchors ? "short-anchor" : "short-wide");
    auto& engines = trials % 4 < 2 ? calm : crashing;
    if (!anchors) {
      ASSERT_TRUE(engines[0]->PutNamespace(ns, wide, nullptr).ok());
    }
    const auto texts = ShortNearDuplicateGroup(rng, 2 + trials % 3,
                                               anchors ? ShortGroupKind::kAnchorsOnly : ShortGroupKind::kWideRadiusOnly);
    ASSERT_GE(texts.size(), 2u);
    const RaceResult r = Race({engines[0].get(), engines[1].get(), engines[2].get()}, ns, texts);
    ASSERT_TRUE(r.ok) << "trial " << trials << (anchors ? " (anchors)" : " (wide radius)") << ": " << r.why;
    ASSERT_EQ(r.kept, 1) << "trial " << trials << (anchors ? " (anchors)" : " (wide radius)");
    ++by_kind[anchors ? 0 : 1];
    raced_by_kind[anchors ? 0 : 1] += r.raced;
  }
  // Both ways of pairing short texts must have really raced.
  EXPECT_GE(raced_by_kind[0], kMinRacedTrials / 2) << "anchor groups, of " << by_kind[0];
  EXPECT_GE(raced_by_kind[1], kMinRacedTrials / 2) << "short-radius groups, of " << by_kind[1];
  std::printf("[          ] %d trials (%d+%d anchor groups raced, %d+%d short-radius groups raced), exactly one kept "
              "in each\n",
              trials, raced_by_kind[0], by_kind[0] - raced_by_kind[0], raced_by_kind[1], by_kind[1] - raced_by_kind[1]);
}

}  // namespace
}  // namespace neardup
