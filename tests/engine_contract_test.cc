// The Engine contract (include/neardup/engine/engine.h), one suite run
// against every implementation: the local engine over RocksDB in a temp
// directory (label unit) and the Redis Cluster engine over a local cluster
// (label needs-redis; its instantiation "RedisEngine/..." is in the
// needs-redis filter of cmake/tests.cmake) and the PostgreSQL engine over a
// local server (label needs-postgres, "PgEngine/..."). A behaviour that differs between
// engines is documented in their headers and is not tested here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <ostream>
#include <string>
#include <vector>

#include "neardup/engine/engine.h"
#include "neardup/engine/local_engine.h"
#include "neardup/redis/redis_engine.h"
#include "neardup/store/rocks_store.h"
#include "neardup/text/fingerprint.h"
#include "util/redis_test_cluster.h"
#ifdef NEARDUP_HAVE_PG
#include "neardup/pg/pg_engine.h"
#include "util/pg_test_server.h"
#endif

namespace neardup {
namespace {

namespace fs = std::filesystem;

// What a test asks of a new engine.
struct EngineSetup {
  std::function<int64_t()> clock_ms;
  bool auto_create = true;
};

struct EngineFactory {
  const char* name;
  // Opens a new engine (nullptr and a test failure if it cannot).
  std::unique_ptr<Engine> (*open)(const EngineSetup& setup);
};

void PrintTo(const EngineFactory& f, std::ostream* os) { *os << f.name; }

std::vector<fs::path>& TempDirs() {
  static std::vector<fs::path> dirs;
  return dirs;
}

std::unique_ptr<Engine> OpenLocal(const EngineSetup& setup) {
  static std::atomic<int> n{0};
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("contract_" + std::to_string(getpid()) + "_" + std::to_string(n++));
  fs::remove_all(dir);
  TempDirs().push_back(dir);
  LocalEngineOptions o;
  o.data_dir = dir.string();
  o.sync = false;
  o.sweep_interval_ms = 0;
  o.auto_create = setup.auto_create;
  o.clock_ms = setup.clock_ms;
  auto e = OpenLocalEngine(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

// One cluster per process, started by the first Redis test that needs it and
// stopped after the suite (EngineContractTest::TearDownTestSuite).
testing::LocalRedisCluster*& Cluster() {
  static testing::LocalRedisCluster* cluster = nullptr;
  return cluster;
}

std::unique_ptr<Engine> OpenRedis(const EngineSetup& setup) {
  if (Cluster() == nullptr) Cluster() = testing::LocalRedisCluster::Start().release();
  if (Cluster() == nullptr) {
    ADD_FAILURE() << "could not start a local redis cluster";
    return nullptr;
  }
  RedisEngineOptions o;
  o.uri = Cluster()->uri();
  o.lease_ms = 300;
  o.auto_create = setup.auto_create;
  o.clock_ms = setup.clock_ms;
  auto e = OpenRedisClusterEngine(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

#ifdef NEARDUP_HAVE_PG
// One server per process (or the ctest fixture's), kept until exit.
testing::LocalPostgres*& Postgres() {
  static testing::LocalPostgres* pg = nullptr;
  return pg;
}

std::unique_ptr<Engine> OpenPg(const EngineSetup& setup) {
  if (Postgres() == nullptr) Postgres() = testing::LocalPostgres::Start().release();
  if (Postgres() == nullptr) {
    ADD_FAILURE() << "could not start or find a local PostgreSQL (scripts/postgres.sh)";
    return nullptr;
  }
  PgEngineOptions o;
  o.uri = Postgres()->uri() + "?pool_size=4";
  o.auto_create = setup.auto_create;
  o.clock_ms = setup.clock_ms;
  auto e = OpenPgEngine(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}
#endif

const char* kText =
    "The quick brown fox jumps over the lazy dog near the river bank while the farmer watches from his porch "
    "and the children play in the field behind the old red barn on a warm summer afternoon";
const char* kNearText =
    "The quick brown fox jumps over the lazy dog near the river bank while the farmer watches from his porch "
    "and the children play in the field behind the old red barn on a warm summer evening";
const char* kOtherText = "Completely unrelated content about distributed hash tables and consensus protocols in 2026";
const char* kThirdText =
    "Quarterly earnings rose sharply as the company shipped its new line of electric bicycles to retailers "
    "across three continents, beating every analyst estimate published since the spring";

class EngineContractTest : public ::testing::TestWithParam<EngineFactory> {
 protected:
  static void TearDownTestSuite() {
    delete Cluster();
    Cluster() = nullptr;
#ifdef NEARDUP_HAVE_PG
    delete Postgres();
    Postgres() = nullptr;
#endif
    for (const fs::path& d : TempDirs()) fs::remove_all(d);
    TempDirs().clear();
  }

  void SetUp() override {
    // Injected time starts at the real time: the Redis engine may give its
    // keys expiry times from this clock, which the server compares with its own.
    now_ = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch()).count();
    setup_.clock_ms = [this] { return now_.load(); };
    engine_ = GetParam().open(setup_);
    ASSERT_NE(engine_, nullptr);
  }
  void TearDown() override {
    if (engine_) (void)engine_->Shutdown();
  }

  // A namespace no other test (or earlier run on a shared cluster) used.
  static std::string NewNs(const std::string& base) {
    static std::atomic<int> n{0};
    return base + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
  }

  CheckOutcome MustCheck(const std::string& ns, const std::string& id, const std::string& text,
                         CheckMode mode = CheckMode::kCheckAndInsert) {
    auto r = engine_->Check(ns, DocumentInput{id, text, std::nullopt}, mode);
    EXPECT_TRUE(r.ok()) << id << ": " << r.status().ToString();
    return r.ok() ? *r : CheckOutcome{};
  }

  static std::vector<std::string> Ids(const CheckOutcome& o) {
    std::vector<std::string> ids;
    for (const MatchedDocument& m : o.matches) ids.push_back(m.id);
    return ids;
  }

  EngineSetup setup_;
  std::atomic<int64_t> now_{0};
  std::unique_ptr<Engine> engine_;
};

TEST_P(EngineContractTest, NearDuplicateOfAStoredDocumentNamesIt) {
  const std::string ns = NewNs("first");
  const CheckOutcome a = MustCheck(ns, "a", kText);
  EXPECT_TRUE(a.stored);
  EXPECT_FALSE(a.duplicate);
  EXPECT_FALSE(a.replay);
  const CheckOutcome b = MustCheck(ns, "b", kNearText);
  ASSERT_LE(HammingDistance(a.fingerprint, b.fingerprint), 3) << "test texts must be near-duplicates";
  EXPECT_TRUE(b.duplicate);
  EXPECT_FALSE(b.stored);
  EXPECT_EQ(Ids(b), std::vector<std::string>{"a"});
  EXPECT_EQ(b.matches[0].distance, HammingDistance(a.fingerprint, b.fingerprint));
  const CheckOutcome exact = MustCheck(ns, "c", kText);
  ASSERT_EQ(exact.matches.size(), 1u);
  EXPECT_TRUE(exact.matches[0].exact);
  EXPECT_EQ(exact.matches[0].similarity, 1.0);
  EXPECT_EQ(engine_->GetDocument(ns, "b").status().code(), Status::Code::kNotFound) << "a duplicate is not stored";
}

TEST_P(EngineContractTest, QueryNeverStores) {
  const std::string ns = NewNs("query");
  MustCheck(ns, "seed", kOtherText);
  const CheckOutcome q = MustCheck(ns, "q", kText, CheckMode::kQueryOnly);
  EXPECT_FALSE(q.stored);
  EXPECT_FALSE(q.duplicate);
  EXPECT_EQ(engine_->GetDocument(ns, "q").status().code(), Status::Code::kNotFound);
  const CheckOutcome after = MustCheck(ns, "a", kText);
  EXPECT_FALSE(after.duplicate) << "the query must not have stored its text";
  EXPECT_TRUE(after.stored);
  const CheckOutcome q2 = MustCheck(ns, "q2", kNearText, CheckMode::kQueryOnly);
  EXPECT_TRUE(q2.duplicate);
  EXPECT_FALSE(q2.stored);
  EXPECT_EQ(Ids(q2), std::vector<std::string>{"a"});
}

TEST_P(EngineContractTest, InsertAlwaysStoresAndReportsMatches) {
  const std::string ns = NewNs("insert");
  MustCheck(ns, "a", kText);
  const CheckOutcome b = MustCheck(ns, "b", kNearText, CheckMode::kInsertAlways);
  EXPECT_TRUE(b.duplicate);
  EXPECT_TRUE(b.stored);
  EXPECT_EQ(Ids(b), std::vector<std::string>{"a"});
  EXPECT_TRUE(engine_->GetDocument(ns, "b").ok());
  const CheckOutcome q = MustCheck(ns, "q", kNearText, CheckMode::kQueryOnly);
  const std::vector<std::string> ids = Ids(q);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()), (std::set<std::string>{"a", "b"}));
}

TEST_P(EngineContractTest, ReplayOfAStoredIdIsIdempotent) {
  const std::string ns = NewNs("replay");
  const CheckOutcome a = MustCheck(ns, "a", kText);
  for (CheckMode mode : {CheckMode::kCheckAndInsert, CheckMode::kInsertAlways}) {
    const CheckOutcome again = MustCheck(ns, "a", kOtherText, mode);  // whatever the text
    EXPECT_TRUE(again.replay);
    EXPECT_TRUE(again.stored);
    EXPECT_EQ(again.fingerprint, a.fingerprint) << "the stored document's, not the re-sent text's";
  }
  auto info = engine_->GetDocument(ns, "a");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->fingerprint, a.fingerprint);
  auto stats = engine_->GetNamespace(ns);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->inserted, 1u);
  // The other text was not stored by the replays.
  EXPECT_FALSE(MustCheck(ns, "o", kOtherText).duplicate);
}

TEST_P(EngineContractTest, BatchAnswersAsSequentialSingles) {
  const std::vector<DocumentInput> docs = {
      {"a", kText, std::nullopt},         {"b", kNearText, std::nullopt},  // b duplicates a, in one batch
      {"c", kOtherText, std::nullopt},    {"", kThirdText, std::nullopt},  // a bad id: that answer only
      {"d", kThirdText, std::nullopt},    {"a", kOtherText, std::nullopt},  // a replay within the batch
      {"e", kOtherText, std::nullopt}};
  for (CheckMode mode : {CheckMode::kCheckAndInsert, CheckMode::kInsertAlways, CheckMode::kQueryOnly}) {
    SCOPED_TRACE(static_cast<int>(mode));
    const std::string batch_ns = NewNs("batch"), single_ns = NewNs("single");
    // The same history in both namespaces first, so queries have something to find.
    MustCheck(batch_ns, "seed", kThirdText);
    MustCheck(single_ns, "seed", kThirdText);
    std::vector<Result<CheckOutcome>> batch;
    ASSERT_TRUE(engine_->CheckBatch(batch_ns, docs, mode, &batch).ok());
    ASSERT_EQ(batch.size(), docs.size());
    for (size_t i = 0; i < docs.size(); ++i) {
      SCOPED_TRACE(i);
      auto single = engine_->Check(single_ns, docs[i], mode);
      ASSERT_EQ(batch[i].ok(), single.ok()) << batch[i].status().ToString() << " vs " << single.status().ToString();
      if (!single.ok()) {
        EXPECT_EQ(batch[i].status().code(), single.status().code());
        continue;
      }
      EXPECT_EQ(batch[i]->duplicate, single->duplicate);
      EXPECT_EQ(batch[i]->stored, single->stored);
      EXPECT_EQ(batch[i]->replay, single->replay);
      EXPECT_EQ(batch[i]->fingerprint, single->fingerprint);
      EXPECT_EQ(Ids(*batch[i]), Ids(*single));
    }
    if (mode == CheckMode::kCheckAndInsert) {
      EXPECT_TRUE(batch[1].ok() && batch[1]->duplicate && !batch[1]->stored);
      EXPECT_EQ(Ids(*batch[1]), std::vector<std::string>{"a"});
      EXPECT_EQ(batch[3].status().code(), Status::Code::kInvalidArgument);
      EXPECT_TRUE(batch[5].ok() && batch[5]->replay);
    }
  }
}

TEST_P(EngineContractTest, NamespacesAreIsolated) {
  const std::string one = NewNs("one"), two = NewNs("two");
  MustCheck(one, "a", kText);
  const CheckOutcome other = MustCheck(two, "b", kText);
  EXPECT_FALSE(other.duplicate);
  EXPECT_TRUE(other.stored);
  // The same id in another namespace is another document.
  const CheckOutcome same_id = MustCheck(two, "a", kOtherText);
  EXPECT_FALSE(same_id.replay);
  EXPECT_TRUE(same_id.stored);
  const auto names = engine_->ListNamespaces();
  const std::set<std::string> set(names.begin(), names.end());
  EXPECT_TRUE(set.count(one) && set.count(two));
  ASSERT_TRUE(engine_->DeleteNamespace(one).ok());
  EXPECT_EQ(engine_->GetNamespace(one).status().code(), Status::Code::kNotFound);
  EXPECT_TRUE(engine_->GetDocument(two, "b").ok()) << "deleting one namespace leaves the other";
}

TEST_P(EngineContractTest, DeletedDocumentNeverMatches) {
  const std::string ns = NewNs("delete");
  MustCheck(ns, "a", kText);
  ASSERT_TRUE(engine_->DeleteDocument(ns, "a").ok());
  EXPECT_EQ(engine_->GetDocument(ns, "a").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(engine_->DeleteDocument(ns, "a").code(), Status::Code::kNotFound);
  const CheckOutcome b = MustCheck(ns, "b", kNearText);
  EXPECT_FALSE(b.duplicate);
  EXPECT_TRUE(b.stored);
  // The id is free again.
  const CheckOutcome again = MustCheck(ns, "a", kOtherText);
  EXPECT_FALSE(again.replay);
  EXPECT_TRUE(again.stored);
}

TEST_P(EngineContractTest, DocumentOlderThanRetentionNeverMatches) {
  const std::string ns = NewNs("retention");
  NamespaceSettings s;
  s.retention_seconds = 3600;
  ASSERT_TRUE(engine_->PutNamespace(ns, s, nullptr).ok());
  MustCheck(ns, "a", kText);
  now_ += 1800 * 1000;
  EXPECT_TRUE(MustCheck(ns, "q", kNearText, CheckMode::kQueryOnly).duplicate) << "half the retention: still matches";
  now_ += 2 * 3600 * 1000;
  const CheckOutcome late = MustCheck(ns, "b", kNearText);
  EXPECT_FALSE(late.duplicate) << "an expired document must never match";
  EXPECT_TRUE(late.stored);
  EXPECT_EQ(engine_->GetDocument(ns, "a").status().code(), Status::Code::kNotFound);
  // A document whose own timestamp is past retention is answered, never stored.
  auto stale = engine_->Check(ns, DocumentInput{"stale", kOtherText, now_.load() - 2 * 3600 * 1000},
                              CheckMode::kCheckAndInsert);
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->stored);
}

TEST_P(EngineContractTest, SettingsRoundTrip) {
  const std::string ns = NewNs("settings");
  NamespaceSettings s;
  s.k = 2;
  s.retention_seconds = 7200;
  s.max_matches = 5;
  s.cjk_ngram = 3;
  bool created = false;
  ASSERT_TRUE(engine_->PutNamespace(ns, s, &created).ok());
  EXPECT_TRUE(created);
  auto got = engine_->GetNamespace(ns);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->name, ns);
  EXPECT_EQ(got->settings, s) << got->settings.ToJson() << " vs " << s.ToJson();
  s.k = 3;
  s.retention_seconds = 0;
  s.max_matches = 1;
  ASSERT_TRUE(engine_->PutNamespace(ns, s, &created).ok());
  EXPECT_FALSE(created);
  got = engine_->GetNamespace(ns);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->settings, s) << got->settings.ToJson() << " vs " << s.ToJson();
  // max_matches applies: two stored matches, one listed.
  MustCheck(ns, "a", kText);
  MustCheck(ns, "b", kNearText, CheckMode::kInsertAlways);
  EXPECT_EQ(MustCheck(ns, "q", kText, CheckMode::kQueryOnly).matches.size(), 1u);
  // A scheme change with documents is refused and changes nothing.
  NamespaceSettings scheme = s;
  scheme.tokenizer = "icu-words";
  EXPECT_EQ(engine_->PutNamespace(ns, scheme, &created).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(engine_->GetNamespace(ns)->settings, s);
  // So is a change of the duplicate rule (k, recheck); retention and max_matches still change.
  for (auto change : {+[](NamespaceSettings& x) { x.k = 4; }, +[](NamespaceSettings& x) { x.recheck.enabled = false; },
                      +[](NamespaceSettings& x) { x.recheck.anchors = 0; }}) {
    NamespaceSettings decision = s;
    change(decision);
    EXPECT_EQ(engine_->PutNamespace(ns, decision, &created).code(), Status::Code::kFailedPrecondition);
  }
  EXPECT_EQ(engine_->GetNamespace(ns)->settings, s);
  s.retention_seconds = 600;
  s.max_matches = 2;
  ASSERT_TRUE(engine_->PutNamespace(ns, s, &created).ok());
  EXPECT_EQ(engine_->GetNamespace(ns)->settings, s);
  // Invalid settings.
  NamespaceSettings bad = s;
  bad.k = 9;
  EXPECT_EQ(engine_->PutNamespace(ns, bad, &created).code(), Status::Code::kInvalidArgument);
}

TEST_P(EngineContractTest, BadNamesIdsAndTextsAreInvalidArgument) {
  const std::string ns = NewNs("errors");
  for (const std::string& bad : {std::string(), std::string("has space"), std::string("slash/"),
                                 std::string(65, 'n'), std::string("caf\xc3\xa9")}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(engine_->Check(bad, {"a", kText, std::nullopt}, CheckMode::kCheckAndInsert).status().code(),
              Status::Code::kInvalidArgument);
    EXPECT_EQ(engine_->PutNamespace(bad, NamespaceSettings{}, nullptr).code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(engine_->GetNamespace(bad).status().code(), Status::Code::kInvalidArgument);
  }
  for (const std::string& bad_id : {std::string(), std::string(513, 'x'), std::string("\xff\xfe")}) {
    EXPECT_EQ(engine_->Check(ns, {bad_id, kText, std::nullopt}, CheckMode::kCheckAndInsert).status().code(),
              Status::Code::kInvalidArgument);
  }
  EXPECT_EQ(engine_->Check(ns, {"a", "", std::nullopt}, CheckMode::kCheckAndInsert).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_TRUE(engine_->Check(ns, {std::string(512, 'x'), kText, std::nullopt}, CheckMode::kCheckAndInsert).ok());
}

TEST_P(EngineContractTest, UnknownNamespaceWithoutAutoCreateIsNotFound) {
  EngineSetup strict = setup_;
  strict.auto_create = false;
  auto e = GetParam().open(strict);
  ASSERT_NE(e, nullptr);
  const std::string ns = NewNs("missing");
  EXPECT_EQ(e->Check(ns, {"a", kText, std::nullopt}, CheckMode::kCheckAndInsert).status().code(),
            Status::Code::kNotFound);
  std::vector<Result<CheckOutcome>> out;
  const std::vector<DocumentInput> docs = {{"a", kText, std::nullopt}};
  const Status batch = e->CheckBatch(ns, docs, CheckMode::kCheckAndInsert, &out);
  EXPECT_TRUE(batch.code() == Status::Code::kNotFound ||
              (batch.ok() && out.size() == 1 && out[0].status().code() == Status::Code::kNotFound))
      << batch.ToString();
  EXPECT_EQ(e->GetNamespace(ns).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(e->GetDocument(ns, "a").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(e->DeleteNamespace(ns).code(), Status::Code::kNotFound);
  // Once created it works.
  bool created = false;
  ASSERT_TRUE(e->PutNamespace(ns, NamespaceSettings{}, &created).ok());
  EXPECT_TRUE(created);
  auto ok = e->Check(ns, {"a", kText, std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(ok->stored);
  (void)e->Shutdown();
}

TEST_P(EngineContractTest, ShutdownRefusesNewCalls) {
  const std::string ns = NewNs("shutdown");
  MustCheck(ns, "a", kText);
  ASSERT_TRUE(engine_->Shutdown().ok());
  EXPECT_TRUE(engine_->Shutdown().ok()) << "idempotent";
  EXPECT_EQ(engine_->Check(ns, {"b", kOtherText, std::nullopt}, CheckMode::kCheckAndInsert).status().code(),
            Status::Code::kUnavailable);
}

std::string FactoryName(const ::testing::TestParamInfo<EngineFactory>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(LocalEngine, EngineContractTest,
                         ::testing::Values(EngineFactory{"rocksdb", &OpenLocal}), FactoryName);
// Label needs-redis: cmake/tests.cmake matches "RedisEngine/*".
INSTANTIATE_TEST_SUITE_P(RedisEngine, EngineContractTest,
                         ::testing::Values(EngineFactory{"cluster", &OpenRedis}), FactoryName);
#ifdef NEARDUP_HAVE_PG
// Label needs-postgres: cmake/tests.cmake matches "PgEngine/*".
INSTANTIATE_TEST_SUITE_P(PgEngine, EngineContractTest,
                         ::testing::Values(EngineFactory{"postgresql", &OpenPg}), FactoryName);
#endif

}  // namespace
}  // namespace neardup
