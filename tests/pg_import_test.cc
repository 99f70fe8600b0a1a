// The PostgreSQL store's bulk import (include/neardup/pg/pg_import.h)
// against a live PostgreSQL 15 (label needs-postgres): the namespace it
// fills holds, row by row, what the service's checks of the same documents
// in the same order leave (documents with their numbers, blocks, anchors and
// re-check bytes; postings; duplicates; counters; sequence; partitions),
// under several settings; and it refuses, writing nothing, a namespace that
// holds documents or an input with a bad document.
#ifdef NEARDUP_HAVE_PG
#include "neardup/pg/pg_import.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "neardup/pg/pg_engine.h"
#include "util/parity_replay.h"
#include "util/pg_test_server.h"
#include "util/race_trials.h"

namespace neardup {
namespace {

using testing::LocalPostgres;

class PgImportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = LocalPostgres::Start().release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "no PostgreSQL (scripts/postgres.sh)";
    admin_ = PQconnectdb(server_->uri().c_str());
    ASSERT_EQ(PQstatus(admin_), CONNECTION_OK);
  }
  void TearDown() override { PQfinish(admin_); }

  // The rows of a query, one string per row (fields tab-separated).
  std::vector<std::string> Rows(const std::string& sql) {
    PGresult* r = PQexec(admin_, sql.c_str());
    std::vector<std::string> out;
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      out.push_back(std::string("error: ") + PQresultErrorMessage(r));
    } else {
      for (int i = 0; i < PQntuples(r); ++i) {
        std::string row;
        for (int f = 0; f < PQnfields(r); ++f) {
          if (f) row += '\t';
          row += PQgetisnull(r, i, f) ? "NULL" : PQgetvalue(r, i, f);
        }
        out.push_back(std::move(row));
      }
    }
    PQclear(r);
    return out;
  }
  std::string Gen(const std::string& ns) {
    const auto g = Rows("SELECT gen FROM neardup_namespaces WHERE name = '" + ns + "'");
    return g.size() == 1 ? g[0] : "none";
  }
  // Everything the namespace holds, as queries whose rows must be equal
  // between two namespaces (their generation number, part of every table
  // name, left out of the answers).
  std::vector<std::pair<std::string, std::vector<std::string>>> State(const std::string& ns) {
    const std::string t = "nd_" + Gen(ns) + "_";
    return {
        {"documents", Rows("SELECT no, id, ts, fp, ch, hf, b0, b1, b2, b3, anchors, md5(extra) FROM " + t +
                           "docs ORDER BY no")},
        {"postings", Rows("SELECT anchor, shingles, ts, no FROM " + t + "anchors ORDER BY anchor, no")},
        {"duplicates", Rows("SELECT id, ts, kept_no, distance, similarity FROM " + t + "dups ORDER BY id, ts")},
        {"counters", Rows("SELECT sum(checks), sum(duplicates), sum(inserted), sum(deleted), sum(expired) FROM "
                          "neardup_counters WHERE gen = " + Gen(ns))},
        {"sequence", Rows("SELECT nextval('" + t + "no')")},
        {"partitions", Rows("SELECT substr(c.relname, length('" + t + "') + 1) FROM pg_class c WHERE "
                            "starts_with(c.relname, '" + t + "') AND c.relname LIKE '%\\_w%' ORDER BY 1")},
    };
  }

  static LocalPostgres* server_;
  PGconn* admin_ = nullptr;
};
LocalPostgres* PgImportTest::server_ = nullptr;

constexpr int64_t kNow = 1'790'000'000'000;
// The clock of both paths: set before each document is checked (the
// service) or handed over (the import), so both see the same time.
std::atomic<int64_t> g_now{kNow};

// Near-duplicate sets (edited copies, templated texts and extensions of
// them), ids unique across sets, plus re-sent ids: a replay of a kept
// document and a second check of a duplicate's id. With `spread_ms`, each
// document has a timestamp up to that far before the clock at its turn
// (ClockAt).
int64_t ClockAt(size_t i, size_t n, int64_t advance_ms) {
  return kNow + advance_ms * static_cast<int64_t>(i) / static_cast<int64_t>(std::max<size_t>(n, 1));
}
std::vector<DocumentInput> Stream(uint64_t seed, int sets, int64_t spread_ms, int64_t advance_ms) {
  std::mt19937_64 rng(seed);
  std::vector<DocumentInput> docs;
  for (int s = 0; s < sets; ++s) {
    for (auto& d : testing::SequentialSet(rng, s % 2 == 0, 24, 12)) {
      docs.push_back({"s" + std::to_string(s) + d.id, d.text, std::nullopt});
    }
  }
  if (docs.size() < 10) return docs;
  for (int i = 0; i < 20; ++i) docs.push_back(docs[rng() % docs.size()]);  // replays, or re-checks of duplicates
  if (spread_ms > 0) {
    for (size_t i = 0; i < docs.size(); ++i) {
      docs[i].timestamp_ms =
          ClockAt(i, docs.size(), advance_ms) - static_cast<int64_t>(rng() % static_cast<uint64_t>(spread_ms));
    }
  }
  return docs;
}

struct Setting {
  const char* name;
  NamespaceSettings settings;
  int64_t spread_ms;   // timestamps up to this far before the clock (0: none, the clock's time)
  int64_t advance_ms;  // the clock moves this far over the stream
};

std::vector<Setting> Settings() {
  NamespaceSettings stop_keys;
  stop_keys.recheck.anchor_max_postings = 2;
  // Retention 60 s in 60 s windows; timestamps up to 75 s old and a clock
  // that moves 59 s (less than the service's pause between partition
  // drops, so neither path drops one): documents past retention when
  // checked, and stored ones (their postings too) that expire later on.
  NamespaceSettings retention;
  retention.recheck.threshold = 0.85;
  retention.recheck.anchor_max_postings = 4;
  retention.retention_seconds = 60;
  return {{"default", NamespaceSettings{}, 0, 0},
          {"stop keys (2 postings)", stop_keys, 0, 0},
          {"threshold 0.85, 4 postings, retention 60 s, moving clock", retention, 75'000, 59'000}};
}

PgImportOptions ImportOptions(const std::string& uri, const std::string& ns, const NamespaceSettings& s) {
  PgImportOptions o;
  o.uri = uri;
  o.ns = ns;
  o.create_settings = s;
  o.clock_ms = [] { return g_now.load(); };
  return o;
}

PgDocumentSource From(const std::vector<DocumentInput>& docs, int64_t advance_ms = 0) {
  auto at = std::make_shared<size_t>(0);
  return [&docs, at, advance_ms](DocumentInput* d) -> Result<bool> {
    if (*at >= docs.size()) return false;
    g_now = ClockAt(*at, docs.size(), advance_ms);
    *d = docs[(*at)++];
    return true;
  };
}

// The service's checks one after another, and the import of the same
// stream: the same rows in every table.
TEST_F(PgImportTest, FillsTheNamespaceAsTheServicesChecksWould) {
  PgEngineOptions eo;
  eo.uri = server_->uri() + "?pool_size=2";
  eo.clock_ms = [] { return g_now.load(); };
  auto engine = testing::EngineOrFail(OpenPgEngine(eo));
  ASSERT_TRUE(engine);
  for (const Setting& s : Settings()) {
    const std::vector<DocumentInput> docs = Stream(1900, 80, s.spread_ms, s.advance_ms);
    ASSERT_GT(docs.size(), 2000u) << "data/natural/dev is missing";
    const std::string checked = testing::UniqueNs("checked"), imported = testing::UniqueNs("imported");
    ASSERT_TRUE(engine->PutNamespace(checked, s.settings, nullptr).ok());
    for (size_t i = 0; i < docs.size(); ++i) {
      g_now = ClockAt(i, docs.size(), s.advance_ms);
      auto r = engine->Check(checked, docs[i], CheckMode::kCheckAndInsert);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
    auto stats = ImportIntoPg(ImportOptions(server_->uri(), imported, s.settings), From(docs, s.advance_ms));
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_TRUE(stats->created);
    EXPECT_EQ(stats->documents, docs.size());
    EXPECT_GT(stats->duplicates, docs.size() / 10) << s.name << ": the stream should hold near-duplicates";
    EXPECT_GT(stats->replays, 0u) << s.name;
    if (s.spread_ms > 0) {
      EXPECT_GT(stats->not_stored, 0u) << s.name;
    }
    const auto want = State(checked), got = State(imported);
    for (size_t i = 0; i < want.size(); ++i) {
      const auto& [what, rows] = want[i];
      EXPECT_GT(rows.size(), 0u) << s.name << ": " << what;
      ASSERT_EQ(rows.size(), got[i].second.size()) << s.name << ": " << what << " rows";
      for (size_t r = 0; r < rows.size(); ++r) {
        ASSERT_EQ(rows[r], got[i].second[r]) << s.name << ": " << what << ", row " << r;
      }
    }
    std::printf("pg-import parity, %s: %zu documents, %llu kept, %llu duplicates, %zu postings\n", s.name,
                docs.size(), static_cast<unsigned long long>(stats->kept),
                static_cast<unsigned long long>(stats->duplicates), want[1].second.size());
    // The service goes on where the import stopped: the same answers.
    const DocumentInput more{"after", docs[3].text + "!", std::nullopt};
    auto a = engine->Check(checked, more, CheckMode::kCheckAndInsert);
    auto b = engine->Check(imported, more, CheckMode::kCheckAndInsert);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(testing::AnswerDiff(*a, *b), "") << s.name;
  }
}

// A namespace that holds a document is refused, and so is a stream with a
// bad document: nothing is written either way.
TEST_F(PgImportTest, RefusesAFullNamespaceAndABadDocumentWritingNothing) {
  PgEngineOptions eo;
  eo.uri = server_->uri() + "?pool_size=2";
  auto engine = testing::EngineOrFail(OpenPgEngine(eo));
  ASSERT_TRUE(engine);
  g_now = kNow;
  const std::vector<DocumentInput> docs = Stream(7, 3, 0, 0);
  const std::string full = testing::UniqueNs("full");
  ASSERT_TRUE(engine->PutNamespace(full, NamespaceSettings{}, nullptr).ok());
  ASSERT_TRUE(engine->Check(full, {"one", "今天北京的天气非常好，我们一起去公园散步吧。", std::nullopt},
                            CheckMode::kCheckAndInsert)
                  .ok());
  auto r = ImportIntoPg(ImportOptions(server_->uri(), full, NamespaceSettings{}), From(docs));
  EXPECT_EQ(r.status().code(), Status::Code::kFailedPrecondition) << r.status().ToString();
  EXPECT_EQ(Rows("SELECT count(*) FROM nd_" + Gen(full) + "_docs"), std::vector<std::string>{"1"});

  std::vector<DocumentInput> bad = docs;
  bad[bad.size() / 2].text.clear();
  const std::string empty = testing::UniqueNs("bad");
  r = ImportIntoPg(ImportOptions(server_->uri(), empty, NamespaceSettings{}), From(bad));
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("document " + std::to_string(bad.size() / 2 + 1)), std::string::npos)
      << r.status().message();
  EXPECT_EQ(Rows("SELECT count(*) FROM nd_" + Gen(empty) + "_docs"), std::vector<std::string>{"0"});
  EXPECT_EQ(Rows("SELECT count(*) FROM neardup_counters WHERE gen = " + Gen(empty)), std::vector<std::string>{"0"});
  // The same stream, mended, then fills it.
  r = ImportIntoPg(ImportOptions(server_->uri(), empty, NamespaceSettings{}), From(docs));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Rows("SELECT count(*) FROM nd_" + Gen(empty) + "_docs"), std::vector<std::string>{std::to_string(r->kept)});

  PgImportOptions missing = ImportOptions(server_->uri(), testing::UniqueNs("missing"), NamespaceSettings{});
  missing.create_settings.reset();
  EXPECT_EQ(ImportIntoPg(missing, From(docs)).status().code(), Status::Code::kNotFound);
}


// `neardup pg-import`: a file imported (the summary counts it), then the
// exit codes of docs/cli.md: a full namespace 1, a bad command line 2, a bad
// document line 3 (nothing written).
TEST_F(PgImportTest, CommandLineImportsAndMapsErrorsToExitCodes) {
  const std::string dir = ::testing::TempDir() + "pg_import_cli_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string good = dir + "/good.jsonl", bad = dir + "/bad.jsonl", err = dir + "/err.txt";
  {
    std::ofstream g(good), b(bad);
    g << R"({"id": 1, "text": "今天北京的天气非常好，我们一起去公园散步吧，顺便看看新开的图书馆。"})" << "\n\n"
      << R"({"id": "2", "text": "今天北京的天气非常好，我们一起去公园散步吧，顺便看看新开的图书馆!"})" << "\n"
      << R"({"id": "3", "text": "明天上海会下大雨，出门记得带伞，地铁二号线早高峰可能会延误。"})" << "\n";
    b << R"({"id": "a", "text": "这家餐厅的红烧肉做得特别地道，价格也不贵，周末人很多要排队。"})" << "\n"
      << R"({"id": "b", "txt": "a misspelt field"})" << "\n";
  }
  auto run = [&](const std::string& args) {
    const std::string cmd = std::string(NEARDUP_CLI_PATH) + " pg-import " + args + " 2>" + err;
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  auto said = [&] {
    std::ifstream in(err);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string store = "--store '" + server_->uri() + "'";
  const std::string ns = testing::UniqueNs("cli");
  ASSERT_EQ(run(store + " --namespace " + ns + " -i " + good), 0) << said();
  EXPECT_NE(said().find("3 documents, 2 kept, 1 duplicates"), std::string::npos) << said();
  EXPECT_EQ(Rows("SELECT id FROM neardup_documents('" + ns + "') ORDER BY 1"),
            (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_EQ(run(store + " --namespace " + ns + " -i " + good), 1) << "the namespace is full now";
  EXPECT_NE(said().find("already holds documents"), std::string::npos) << said();
  EXPECT_EQ(run("--store redis-cluster://127.0.0.1:1 --namespace x -i " + good), 2);
  EXPECT_EQ(run(store + " --namespace 'bad name' -i " + good), 2);
  EXPECT_EQ(run(store + " --namespace x --settings '{\"k\": 99}' -i " + good), 2);
  const std::string ns2 = testing::UniqueNs("cli");
  EXPECT_EQ(run(store + " --namespace " + ns2 + " -i " + bad), 3);
  EXPECT_NE(said().find("line 2"), std::string::npos) << said();
  EXPECT_EQ(Rows("SELECT count(*) FROM nd_" + Gen(ns2) + "_docs"), std::vector<std::string>{"0"});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace neardup
#endif  // NEARDUP_HAVE_PG
