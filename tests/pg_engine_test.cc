// The PostgreSQL engine (include/neardup/pg/pg_engine.h) against a live
// PostgreSQL 15 (label needs-postgres): exactly one of concurrent
// near-duplicates kept across engine instances, with stalls and abandoned
// transactions; lost connections; a server crash under load. The Engine
// semantics themselves are the contract suite's (engine_contract_test.cc,
// "PgEngine/...").
#ifdef NEARDUP_HAVE_PG
#include "neardup/pg/pg_engine.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "pg/pg_rule.h"
#include "util/parity_replay.h"
#include "util/pg_test_server.h"
#include "util/race_trials.h"
#include "util/redis_test_cluster.h"

namespace neardup {
namespace {

using testing::kMinRacedTrials;
using testing::LocalPostgres;
using testing::NearDuplicateGroup;
using testing::Race;
using testing::RaceResult;
using testing::ShortGroupKind;
using testing::ShortNearDuplicateGroup;
using testing::Staller;

class PgEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = LocalPostgres::Start().release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr) << "no PostgreSQL (scripts/postgres.sh)"; }

  static PgEngineOptions Options(const std::string& uri = server_ ? server_->uri() : "") {
    PgEngineOptions o;
    o.uri = uri + "?pool_size=8";
    return o;
  }
  static std::unique_ptr<Engine> Open(const PgEngineOptions& o) { return testing::EngineOrFail(OpenPgEngine(o)); }
  static std::string UniqueNs(const std::string& base) { return testing::UniqueNs(base); }
  // Trials of a race test: NEARDUP_PG_TRIALS (the long run) or `dflt`.
  static int Trials(int dflt) {
    const char* t = std::getenv("NEARDUP_PG_TRIALS");
    return t ? std::atoi(t) : dflt;
  }

  static LocalPostgres* server_;
};
LocalPostgres* PgEngineTest::server_ = nullptr;

TEST(PgEngineOptions, UriOptionsAreChecked) {
  PgEngineOptions o;
  o.uri = "postgresql://nobody@127.0.0.1:1/x?pool_size=0";
  EXPECT_EQ(OpenPgEngine(o).status().code(), Status::Code::kInvalidArgument);
  o.uri = "postgresql://nobody@127.0.0.1:1/x?windows_per_retention=abc";
  EXPECT_EQ(OpenPgEngine(o).status().code(), Status::Code::kInvalidArgument);
  o.uri = "postgresql://nobody@127.0.0.1:1/x?pool_size=2&connect_timeout=2";
  EXPECT_EQ(OpenPgEngine(o).status().code(), Status::Code::kUnavailable) << "nothing listens on port 1";
  EXPECT_TRUE(IsPgStoreUri("postgres://u@h/db"));
  EXPECT_FALSE(IsPgStoreUri("redis-cluster://h:1"));
}

// Stream documents that extend a text of the stream by a piece of another
// natural text: anchor candidates of it (they share its smallest n-gram
// hashes) at every length ratio, so that the pair rule's size test
// (ShingleCountsRuleOut) decides many of them. The PostgreSQL store applies
// that test to the n-gram counts of its anchor rows before reading any
// sketch; the answers must still be the embedded store's.
std::vector<testing::ParityDoc> WithExtensions(std::mt19937_64& rng, std::vector<testing::ParityDoc> docs, size_t n) {
  static const std::vector<std::string> pieces = testing::NaturalTexts("zh-short", 10, 150);
  const size_t base = docs.size();
  for (size_t i = 0; i < n && !pieces.empty() && base > 0; ++i) {
    const std::u32string piece = testing::Utf8ToU32(pieces[rng() % pieces.size()]);
    const size_t len = 1 + rng() % piece.size();
    const std::string text = docs[rng() % base].text + testing::U32ToUtf8(piece.substr(0, len));
    const size_t at = 1 + rng() % docs.size();
    docs.insert(docs.begin() + static_cast<std::ptrdiff_t>(at), testing::ParityDoc{"x" + std::to_string(i), text});
  }
  return docs;
}

// The same streams through the embedded store and the PostgreSQL store,
// one document after another: the same answers (stored, duplicate, matched
// ids, distances, similarities). Default settings; a cap of 2 postings per
// anchor (stop keys counted from the anchor rows and skipped); a threshold
// of 0.85 (more candidates ruled out by their n-gram counts).
TEST_F(PgEngineTest, SequentialVariantsDecidedAsTheEmbeddedStore) {
  std::filesystem::path dir;
  auto local = testing::OpenReferenceEngine("pg_parity_", &dir);
  ASSERT_NE(local, nullptr);
  auto pg = Open(Options());
  struct Case {
    const char* name;
    int cap;
    double threshold;
  };
  int mismatches = 0, docs = 0;
  for (const Case& c : {Case{"default", 64, 0.7}, Case{"stop keys", 2, 0.7}, Case{"threshold 0.85", 64, 0.85}}) {
    NamespaceSettings settings;
    settings.recheck.anchor_max_postings = c.cap;
    settings.recheck.threshold = c.threshold;
    for (int i = 0; i < 4; ++i) {
      std::mt19937_64 rng(1900 + static_cast<uint64_t>(i));
      const bool chinese = i % 2 == 0;
      const auto stream = WithExtensions(rng, testing::SequentialSet(rng, chinese, 24, 12), 24);
      ASSERT_FALSE(stream.empty()) << "data/natural/dev is missing";
      const std::string ns = UniqueNs("parity");
      ASSERT_TRUE(local->PutNamespace(ns, settings, nullptr).ok());
      ASSERT_TRUE(pg->PutNamespace(ns, settings, nullptr).ok());
      const testing::ParityResult r = testing::ReplayBoth(local.get(), pg.get(), ns, stream);
      docs += r.docs;
      mismatches += r.mismatches;
      EXPECT_EQ(r.mismatches, 0) << c.name << ", set " << i << ": kept " << r.kept_reference << " embedded / "
                                 << r.kept_other << " postgresql; first: " << r.first;
    }
  }
  std::printf("pg parity: %d documents, %d answers differ\n", docs, mismatches);
  local.reset();
  std::filesystem::remove_all(dir);
}

// Groups of 2-4 near-duplicates sent at the same moment from one thread
// each to two engine instances (separate connection pools), with random
// stalls inside the transaction: exactly one kept in every trial.
TEST_F(PgEngineTest, ExactlyOneKeptAcrossInstances) {
  PgEngineOptions o1 = Options(), o2 = Options();
  o1.step_hook = Staller(1, 0.0, "started");
  o2.step_hook = Staller(2, 0.0, "started");
  auto e1 = Open(o1), e2 = Open(o2);
  ASSERT_TRUE(e1 && e2);
  std::mt19937_64 rng(99);
  const int want = Trials(150);
  const std::string ns = UniqueNs("race");  // one namespace: it fills up as the trials go
  testing::ExpectExactlyOneInEveryTrial(
      {e1.get(), e2.get()}, want, std::chrono::seconds(want > 150 ? 3600 : 40), [&](int) { return ns; },
      [&](int t) { return NearDuplicateGroup(rng, 2 + t % 3); });
}

// A quarter of the steps "crash": the connection is dropped mid-transaction
// (PostgreSQL rolls it back and releases its locks) and the client retries
// on the other instance.
TEST_F(PgEngineTest, ExactlyOneKeptWhenChecksDieMidTransaction) {
  PgEngineOptions o1 = Options(), o2 = Options();
  o1.step_hook = Staller(3, 0.25, "started");
  o2.step_hook = Staller(4, 0.25, "started");
  auto e1 = Open(o1), e2 = Open(o2);
  ASSERT_TRUE(e1 && e2);
  std::mt19937_64 rng(7);
  const int want = Trials(100);
  testing::ExpectExactlyOneInEveryTrial(
      {e1.get(), e2.get()}, want, std::chrono::seconds(want > 100 ? 3600 : 30), [&](int) { return UniqueNs("crash"); },
      [&](int t) { return NearDuplicateGroup(rng, 2 + t % 2); });
}

// Short texts simhash misses: groups paired only through shared anchors
// (default settings) or only through the short-text radius (short_k = 5,
// anchors off), over three instances.
TEST_F(PgEngineTest, ExactlyOneKeptShortTextsViaAnchorsOrWideRadius) {
  std::vector<std::unique_ptr<Engine>> engines;
  for (uint64_t seed = 11; seed < 14; ++seed) {
    PgEngineOptions o = Options();
    o.step_hook = Staller(seed, seed == 13 ? 0.1 : 0.0, "started");
    engines.push_back(Open(o));
    ASSERT_TRUE(engines.back());
  }
  NamespaceSettings wide;
  wide.recheck.short_k = 5;
  wide.recheck.anchors = 0;
  std::mt19937_64 rng(2024);
  const int want = Trials(80);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(want > 80 ? 3600 : 30);
  int trials = 0, raced_by_kind[2] = {0, 0};
  for (; trials < want && std::chrono::steady_clock::now() < deadline; ++trials) {
    const bool anchors = trials % 2 == 0;
    const std::string ns = UniqueNs(anchors ? "short-anchor" : "short-wide");
    if (!anchors) {
      ASSERT_TRUE(engines[0]->PutNamespace(ns, wide, nullptr).ok());
    }
    const auto texts = ShortNearDuplicateGroup(rng, 2 + trials % 3,
                                               anchors ? ShortGroupKind::kAnchorsOnly : ShortGroupKind::kWideRadiusOnly);
    ASSERT_GE(texts.size(), 2u);
    const RaceResult r = Race({engines[0].get(), engines[1].get(), engines[2].get()}, ns, texts);
    ASSERT_TRUE(r.ok) << "trial " << trials << (anchors ? " (anchors)" : " (wide radius)") << ": " << r.why;
    ASSERT_EQ(r.kept, 1) << "trial " << trials << (anchors ? " (anchors)" : " (wide radius)");
    raced_by_kind[anchors ? 0 : 1] += r.raced;
  }
  EXPECT_GE(raced_by_kind[0], kMinRacedTrials / 2);
  EXPECT_GE(raced_by_kind[1], kMinRacedTrials / 2);
  std::printf("[          ] %d trials (%d anchor, %d short-radius groups raced), exactly one kept in each\n", trials,
              raced_by_kind[0], raced_by_kind[1]);
}

// Checks from 4 threads; every `period` the server's backends of the
// engine are terminated (pg_terminate_backend) or the server is crashed and
// restarted: every answer is a correct one or kUnavailable, and every
// acknowledged document is readable afterwards.
struct LoadResult {
  int stored = 0, unavailable = 0;
  std::vector<std::string> errors;
  std::vector<std::string> acknowledged;
};

LoadResult RunLoad(Engine& e, const std::string& ns, std::chrono::milliseconds length,
                   const std::function<void(int round)>& fault, int rounds) {
  LoadResult out;
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t) + 100);
      for (int i = 0; !stop.load(); ++i) {
        const std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
        std::string text;
        for (int w = 0; w < 40; ++w) text += "w" + std::to_string(rng() % 100000) + " ";
        auto r = e.Check(ns, {id, text, std::nullopt}, CheckMode::kCheckAndInsert);
        std::lock_guard lk(mu);
        if (r.ok()) {
          if (r->stored) out.acknowledged.push_back(id);
          out.stored += r->stored;
        } else if (r.status().code() == Status::Code::kUnavailable) {
          ++out.unavailable;
        } else {
          out.errors.push_back(r.status().ToString());
        }
      }
    });
  }
  for (int round = 0; round < rounds; ++round) {
    std::this_thread::sleep_for(length / (rounds + 1));
    fault(round);
  }
  std::this_thread::sleep_for(length / (rounds + 1));
  stop = true;
  for (auto& t : threads) t.join();
  return out;
}

TEST_F(PgEngineTest, LostConnectionsAreRetried) {
  // Its connections carry their own application_name: only they are cut.
  const std::string app = "neardup_lost_" + std::to_string(getpid());
  PgEngineOptions o = Options();
  o.uri += "&application_name=" + app;
  auto e = Open(o);
  ASSERT_TRUE(e);
  const std::string ns = UniqueNs("lost");
  ASSERT_TRUE(e->PutNamespace(ns, NamespaceSettings{}, nullptr).ok());
  PGconn* admin = PQconnectdb(server_->uri().c_str());
  ASSERT_EQ(PQstatus(admin), CONNECTION_OK);
  auto kill_backends = [&](int) {
    const std::string sql =
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '" + app + "'";
    PQclear(PQexec(admin, sql.c_str()));
  };
  const LoadResult r = RunLoad(*e, ns, std::chrono::milliseconds(3000), kill_backends, 4);
  PQfinish(admin);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_GT(r.stored, 20);
  for (const std::string& id : r.acknowledged) ASSERT_TRUE(e->GetDocument(ns, id).ok()) << id;
  std::printf("[          ] %d stored, %d answered 503, every acknowledged one readable\n", r.stored, r.unavailable);
}

// A namespace whose record lost `key` (as a record written before that key
// existed) is refused with kFailedPrecondition naming `why`.
void ExpectRefusedWithout(const LocalPostgres& server, Engine* e, const std::string& ns, const std::string& key,
                          const std::string& why, Engine* fresh) {
  ASSERT_TRUE(e->PutNamespace(ns, NamespaceSettings{}, nullptr).ok());
  ASSERT_TRUE(e->Check(ns, {"a", "今天北京的天气非常好，我们一起去公园散步吧。", std::nullopt}, CheckMode::kCheckAndInsert).ok());
  PGconn* admin = PQconnectdb(server.uri().c_str());
  ASSERT_EQ(PQstatus(admin), CONNECTION_OK);
  const std::string sql =
      "UPDATE neardup_namespaces SET record = (record::jsonb - '" + key + "')::text WHERE name = '" + ns + "'";
  PGresult* r = PQexec(admin, sql.c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(admin);
  PQclear(r);
  PQfinish(admin);
  auto c = fresh->Check(ns, {"b", "今天北京的天气非常好，我们一起去公园散步吧！", std::nullopt}, CheckMode::kCheckAndInsert);
  EXPECT_EQ(c.status().code(), Status::Code::kFailedPrecondition) << c.status().ToString();
  EXPECT_NE(c.status().message().find(why), std::string::npos) << c.status().ToString();
  EXPECT_TRUE(fresh->DeleteNamespace(ns).ok());
}

// A namespace of the earlier layout (anchor postings in a GIN-indexed int[]
// of the row; its record has no "layout") is refused, not misread: its
// postings are not in nd_G_anchors, so its anchors would find nothing.
TEST_F(PgEngineTest, NamespaceOfTheEarlierLayoutIsRefused) {
  auto e = Open(Options());
  auto fresh = Open(Options());  // nothing cached when it checks
  ASSERT_TRUE(e && fresh);
  ExpectRefusedWithout(*server_, e.get(), UniqueNs("layout1"), "layout", "GIN index", fresh.get());
}

// A namespace whose postings were filed under another anchor scheme (its
// record has no "anchor_scheme": scheme 1, the sketch values themselves) is
// refused: its postings would never meet this build's keys.
TEST_F(PgEngineTest, NamespaceOfAnotherAnchorSchemeIsRefused) {
  auto e = Open(Options());
  auto fresh = Open(Options());
  ASSERT_TRUE(e && fresh);
  ExpectRefusedWithout(*server_, e.get(), UniqueNs("anchors1"), "anchor_scheme", "anchor scheme", fresh.get());
}

// An admin connection's one-value answer (empty on an error, which fails
// the test).
std::string AdminValue(PGconn* admin, const std::string& sql) {
  PGresult* r = PQexec(admin, sql.c_str());
  const ExecStatusType st = PQresultStatus(r);
  EXPECT_TRUE(st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) << sql << ": " << PQerrorMessage(admin);
  std::string v = st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  return v;
}

// The namespace as the engine decodes it from its record.
std::shared_ptr<pg_internal::NsInfo> NsOf(PGconn* admin, const std::string& ns) {
  PGresult* r = PQexecParams(admin, "SELECT record, gen, version FROM neardup_namespaces WHERE name = $1", 1, nullptr,
                             std::vector<const char*>{ns.c_str()}.data(), nullptr, nullptr, 0);
  EXPECT_EQ(PQntuples(r), 1);
  auto info = pg_internal::DecodeNs(ns, PQgetvalue(r, 0, 0), std::atoll(PQgetvalue(r, 0, 1)),
                                    std::atoll(PQgetvalue(r, 0, 2)));
  PQclear(r);
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  return info.ok() ? info.value() : nullptr;
}

// Every node of an EXPLAIN (FORMAT JSON) plan.
void ForEachPlanNode(const nlohmann::json& plan, const std::function<void(const nlohmann::json&)>& fn) {
  fn(plan);
  if (plan.contains("Plans")) {
    for (const auto& p : plan["Plans"]) ForEachPlanNode(p, fn);
  }
}

// The candidate lookup (pg_rule.h, CandidatesStmt) on a vacuumed namespace
// of 20,000 documents, planned as the engine's prepared statement is
// (generic plan): every block is an index-only scan with no heap fetch (the
// radius test reads fp from the index), and the document within the radius
// is found. On the layout before 3 ((bN) indexes alone), or with fp dropped
// from the INCLUDE, the block scans read the heap row of every entry.
TEST_F(PgEngineTest, LookupIsIndexOnlyOnAVacuumedNamespace) {
  auto e = Open(Options());
  ASSERT_TRUE(e);
  const std::string ns = UniqueNs("indexonly");
  ASSERT_TRUE(e->PutNamespace(ns, NamespaceSettings{}, nullptr).ok());
  const std::string text = "今天北京的天气非常好，我们一起去公园散步吧，顺便看看新开的图书馆。";
  ASSERT_TRUE(e->Check(ns, {"a", text, std::nullopt}, CheckMode::kCheckAndInsert).ok());
  PGconn* admin = PQconnectdb(server_->uri().c_str());
  ASSERT_EQ(PQstatus(admin), CONNECTION_OK);
  auto n = NsOf(admin, ns);
  ASSERT_TRUE(n);
  ASSERT_EQ(n->blocks(), 4);
  const std::string docs = n->Table("docs");
  // Random fingerprints, in the partition of "a" (the bench's synthetic rows).
  AdminValue(admin, "INSERT INTO " + docs + " (no, id, ts, fp, ch, hf, b0, b1, b2, b3) "
                    "SELECT nextval('" + n->Table("no") + "'), 'syn-' || g, (SELECT ts FROM " + docs + " LIMIT 1), f.fp, "
                    "('x' || substr(md5(g || 'c'), 1, 16))::bit(64)::bigint, true, (f.fp & 65535)::int, "
                    "((f.fp >> 16) & 65535)::int, ((f.fp >> 32) & 65535)::int, ((f.fp >> 48) & 65535)::int "
                    "FROM generate_series(1, 20000) g CROSS JOIN LATERAL "
                    "(SELECT ('x' || substr(md5(g || 'f'), 1, 16))::bit(64)::bigint AS fp) f");
  AdminValue(admin, "VACUUM (ANALYZE) " + docs);
  const int64_t now = SystemNowMs();
  const DocumentInput query{"q", text, std::nullopt};
  pg_internal::CheckRun run(*n, query, CheckMode::kQueryOnly, now);
  ASSERT_TRUE(run.sig.has_features);
  const PgStmt st = pg_internal::CandidatesStmt(*n, run, std::to_string(n->Cutoff(now)));
  std::string args;
  for (const auto& p : st.params) {
    char* lit = PQescapeLiteral(admin, p->c_str(), p->size());
    args += (args.empty() ? "" : ", ") + std::string(lit);
    PQfreemem(lit);
  }
  AdminValue(admin, "SET plan_cache_mode = force_generic_plan");
  AdminValue(admin, "PREPARE lookup AS " + st.sql);
  std::string found;  // the ids read, in number order
  PGresult* rows = PQexec(admin, ("EXECUTE lookup(" + args + ")").c_str());
  EXPECT_EQ(PQresultStatus(rows), PGRES_TUPLES_OK) << PQerrorMessage(admin);
  for (int i = 0; i < PQntuples(rows); ++i) found += (i ? "," : "") + std::string(PQgetvalue(rows, i, 1));
  PQclear(rows);
  // A VACUUM marks a page all-visible only when no snapshot can still miss
  // its rows: the other tests' transactions on the same server (ctest -j)
  // may hold one for a moment, and the scan then fetches those pages' heap
  // rows. So: VACUUM again until no heap fetch is left (bounded).
  nlohmann::json plan;
  std::set<int> index_only;
  int64_t heap_fetches = 0;
  std::string other;  // the block scans that are not index-only
  for (int attempt = 0; attempt < 40; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      AdminValue(admin, "VACUUM " + docs);
    }
    plan = nlohmann::json::parse(
        AdminValue(admin, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE lookup(" + args + ")"), nullptr, false);
    ASSERT_TRUE(plan.is_array() && !plan.empty());
    index_only.clear();
    heap_fetches = 0;
    other.clear();
    ForEachPlanNode(plan[0]["Plan"], [&](const nlohmann::json& node) {
      const std::string index = node.value("Index Name", "");
      const std::string cond = node.value("Index Cond", "") + node.value("Recheck Cond", "");
      for (int t = 0; t < n->blocks(); ++t) {
        if (cond.find("b" + std::to_string(t) + " = ") == std::string::npos) continue;
        if (node.value("Node Type", "") == "Index Only Scan") {
          index_only.insert(t);
          heap_fetches += node.value("Heap Fetches", int64_t{0});
        } else {
          other += node.value("Node Type", "") + " " + index + "; ";
        }
      }
    });
    if (heap_fetches == 0 || !other.empty()) break;
  }
  PQfinish(admin);
  EXPECT_EQ(index_only.size(), 4u) << "block scans that are not index-only: " << other << "\n" << plan.dump(1);
  EXPECT_TRUE(other.empty()) << other;
  EXPECT_EQ(heap_fetches, 0) << plan.dump(1);
  EXPECT_EQ(found, "a") << "the stored copy is within the radius";
}

// A namespace created with layout 2 (block indexes (bN) alone, before
// 2026-11-24) is still served, by the same queries (its radius test then
// reads heap rows), and keeps its layout through a settings change; a
// layout newer than this build's is refused.
TEST_F(PgEngineTest, NamespaceOfLayout2IsServedAndNewerRefused) {
  auto e = Open(Options());
  ASSERT_TRUE(e);
  const std::string ns = UniqueNs("layout2");
  ASSERT_TRUE(e->PutNamespace(ns, NamespaceSettings{}, nullptr).ok());
  PGconn* admin = PQconnectdb(server_->uri().c_str());
  ASSERT_EQ(PQstatus(admin), CONNECTION_OK);
  auto n = NsOf(admin, ns);
  ASSERT_TRUE(n);
  const std::string docs = n->Table("docs");
  for (int t = 0; t < n->blocks(); ++t) {  // the tables as layout 2 made them
    const std::string b = "b" + std::to_string(t);
    AdminValue(admin, "DROP INDEX " + docs + "_" + b + "_ts_fp_no_idx; CREATE INDEX ON " + docs + " (" + b + ")");
  }
  const std::string where = " WHERE name = '" + ns + "'";
  AdminValue(admin, "UPDATE neardup_namespaces SET record = jsonb_set(record::jsonb, '{layout}', '2')::text" + where);
  auto fresh = Open(Options());
  ASSERT_TRUE(fresh);
  auto a = fresh->Check(ns, {"a", "今天北京的天气非常好，我们一起去公园散步吧，顺便看看新开的图书馆。", std::nullopt},
                        CheckMode::kCheckAndInsert);
  ASSERT_TRUE(a.ok() && a->stored) << a.status().ToString();
  auto b = fresh->Check(ns, {"b", "今天北京的天气非常好，我们一起去公园散步吧，顺便看看新开的图书馆！", std::nullopt},
                        CheckMode::kCheckAndInsert);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->duplicate);
  ASSERT_FALSE(b->matches.empty());
  EXPECT_EQ(b->matches.front().id, "a");
  ASSERT_TRUE(fresh->PutNamespace(ns, NamespaceSettings{}, nullptr).ok());
  EXPECT_EQ(AdminValue(admin, "SELECT record::jsonb->>'layout' FROM neardup_namespaces" + where), "2");
  AdminValue(admin, "UPDATE neardup_namespaces SET record = jsonb_set(record::jsonb, '{layout}', '4')::text" + where);
  PQfinish(admin);
  auto newer = Open(Options());
  auto c = newer->Check(ns, {"c", "明天上海会下大雨，出门记得带伞。", std::nullopt}, CheckMode::kCheckAndInsert);
  EXPECT_EQ(c.status().code(), Status::Code::kFailedPrecondition) << c.status().ToString();
  EXPECT_NE(c.status().message().find("newer than this build"), std::string::npos) << c.status().ToString();
  EXPECT_TRUE(newer->DeleteNamespace(ns).ok());
}

// Deleting a document deletes its anchor postings too (one statement): a
// posting left behind would still count toward its anchor's stop key.
TEST_F(PgEngineTest, DeleteRemovesTheDocumentsPostings) {
  auto e = Open(Options());
  ASSERT_TRUE(e);
  const std::string ns = UniqueNs("postings");
  ASSERT_TRUE(e->PutNamespace(ns, NamespaceSettings{}, nullptr).ok());
  const std::vector<std::string> texts = {"今天北京的天气非常好，我们一起去公园散步吧，顺便看看新开的图书馆。",
                                          "明天上海会下大雨，出门记得带伞，地铁二号线早高峰可能会延误。",
                                          "这家餐厅的红烧肉做得特别地道，价格也不贵，周末人很多要排队。"};
  for (size_t i = 0; i < texts.size(); ++i) {
    auto c = e->Check(ns, {"d" + std::to_string(i), texts[i], std::nullopt}, CheckMode::kCheckAndInsert);
    ASSERT_TRUE(c.ok() && c->stored) << c.status().ToString();
  }
  PGconn* admin = PQconnectdb(server_->uri().c_str());
  ASSERT_EQ(PQstatus(admin), CONNECTION_OK);
  auto postings = [&] {
    PGresult* g = PQexecParams(admin, "SELECT gen FROM neardup_namespaces WHERE name = $1", 1, nullptr,
                               std::vector<const char*>{ns.c_str()}.data(), nullptr, nullptr, 0);
    const std::string table = "nd_" + std::string(PQgetvalue(g, 0, 0)) + "_anchors";
    PQclear(g);
    PGresult* r = PQexec(admin, ("SELECT count(*) FROM " + table).c_str());
    const int n = PQresultStatus(r) == PGRES_TUPLES_OK ? std::atoi(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return n;
  };
  EXPECT_GE(postings(), 3 * 16);
  for (size_t i = 0; i < texts.size(); ++i) ASSERT_TRUE(e->DeleteDocument(ns, "d" + std::to_string(i)).ok());
  EXPECT_EQ(postings(), 0);
  PQfinish(admin);
}

TEST_F(PgEngineTest, AcknowledgedDocumentsSurviveAServerCrash) {
  // Its own server: crashing the shared one would disturb the other tests.
  auto own = LocalPostgres::StartPrivate("crash");
  ASSERT_NE(own, nullptr);
  PgEngineOptions o = Options(own->uri());
  o.retry_budget_ms = 20000;
  auto e = Open(o);
  ASSERT_TRUE(e);
  const std::string ns = UniqueNs("crash");
  ASSERT_TRUE(e->PutNamespace(ns, NamespaceSettings{}, nullptr).ok());
  auto crash = [&](int) {
    ASSERT_TRUE(own->Crash());
    ASSERT_TRUE(own->Restart());
  };
  const LoadResult r = RunLoad(*e, ns, std::chrono::milliseconds(4000), crash, 2);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_GT(r.stored, 20);
  for (const std::string& id : r.acknowledged) ASSERT_TRUE(e->GetDocument(ns, id).ok()) << id;
  auto stats = e->GetNamespace(ns);
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->inserted, static_cast<uint64_t>(r.stored));
  std::printf("[          ] %d stored, %d answered 503 across 2 crashes, every acknowledged one readable\n", r.stored,
              r.unavailable);
  (void)e->Shutdown();
}

}  // namespace
}  // namespace neardup

#endif  // NEARDUP_HAVE_PG
