// The local engine with a real RocksDB store in a temp directory.
#include "neardup/engine/local_engine.h"
#include "neardup/store/rocks_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <filesystem>
#include <set>
#include <thread>

#include "neardup/text/fingerprint.h"
#include "neardup/text/shingles.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

class LocalEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("engine_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(getpid()));
    fs::remove_all(dir_);
    now_ = 1'700'000'000'000;
  }
  void TearDown() override {
    engine_.reset();
    fs::remove_all(dir_);
  }

  void Open(int64_t retention_seconds = 48 * 3600, int64_t commit_delay_us = 0) {
    engine_.reset();
    LocalEngineOptions o;
    o.commit_delay_us = commit_delay_us;
    o.data_dir = dir_.string();
    o.sync = false;  // durability across kill -9 is tested in serve tests; this is logic
    o.default_settings.retention_seconds = retention_seconds;
    o.sweep_interval_ms = 0;  // no sweeper thread: sweeps run when a test asks
    o.clock_ms = [this] { return now_.load(); };
    o.rebuild_run_docs = rebuild_run_docs_;
    auto e = OpenLocalEngine(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
  }

  CheckOutcome Check(const std::string& ns, const std::string& id, const std::string& text,
                     CheckMode mode = CheckMode::kCheckAndInsert, std::optional<int64_t> ts = std::nullopt) {
    auto r = engine_->Check(ns, DocumentInput{id, text, ts}, mode);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : CheckOutcome{};
  }

  uint64_t Docs(const std::string& ns) {
    auto s = engine_->GetNamespace(ns);
    return s.ok() ? s->documents : 0;
  }

  void RaceRounds(int first_round, int rounds);

  fs::path dir_;
  std::atomic<int64_t> now_;
  size_t rebuild_run_docs_ = 1000000;
  std::unique_ptr<Engine> engine_;
};

// A distinct pseudo-random English-like text per seed.
std::string RandomText(uint64_t seed, int words = 40) {
  static const char* kWords[] = {"river", "market", "signal", "engine", "quiet", "yellow", "garden", "winter",
                                 "paper", "silver", "north", "window", "forest", "number", "castle", "planet",
                                 "coffee", "bridge", "mirror", "rocket", "pencil", "valley", "thunder", "island"};
  std::string out;
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (int i = 0; i < words; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out += kWords[x % 24];
    out += std::to_string(x % 97);
    out += ' ';
  }
  return out;
}

const char* kLong =
    "The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden porch, "
    "thinking about the harvest, the rain that did not come in spring, and the long drive to the market "
    "in town where prices for grain have fallen for the third year in a row despite every promise made.";

TEST_F(LocalEngineTest, CheckAndInsertKeepsFirstAndNamesIt) {
  Open();
  auto a = Check("news", "a", kLong);
  EXPECT_FALSE(a.duplicate);
  EXPECT_TRUE(a.stored);
  auto b = Check("news", "b", std::string(kLong) + "!!");  // same normalized text
  EXPECT_TRUE(b.duplicate);
  EXPECT_FALSE(b.stored);
  ASSERT_EQ(b.matches.size(), 1u);
  EXPECT_EQ(b.matches[0].id, "a");
  EXPECT_TRUE(b.matches[0].exact);
  // The similarity is the defined one: the "!!" counts (shingles.h).
  std::vector<uint64_t> sa, sb;
  ShingleHashes(kLong, 3, &sa);
  ShingleHashes(std::string(kLong) + "!!", 3, &sb);
  EXPECT_DOUBLE_EQ(b.matches[0].similarity, Jaccard(sa, sb));
  EXPECT_LT(b.matches[0].similarity, 1.0);
  EXPECT_TRUE(b.matches[0].similarity_exact);
  // The same text again: similarity 1.
  auto c = Check("news", "c", kLong);
  ASSERT_TRUE(c.duplicate);
  EXPECT_TRUE(c.matches[0].exact);
  EXPECT_DOUBLE_EQ(c.matches[0].similarity, 1.0);
  EXPECT_EQ(Docs("news"), 1u);
}

// Regression (found by scripts/history/check.py): equal normalized text of two
// texts with more than kSketchSize distinct n-grams was answered with
// "similarity_exact": true, though the similarity was the sketch's estimate.
TEST_F(LocalEngineTest, EqualTextOfLongTextsIsAnEstimateNotExact) {
  Open();
  const std::string text = RandomText(7, 120);
  ASSERT_TRUE(Check("news", "a", text).stored);
  auto b = Check("news", "b", text + " !!");
  ASSERT_TRUE(b.duplicate);
  ASSERT_EQ(b.matches.size(), 1u);
  EXPECT_TRUE(b.matches[0].exact);
  EXPECT_FALSE(b.matches[0].similarity_exact);
}

TEST_F(LocalEngineTest, ReplayOfStoredIdIsIdempotent) {
  Open();
  EXPECT_TRUE(Check("n", "x", "hello world from neardup").stored);
  auto again = Check("n", "x", "hello world from neardup");
  EXPECT_TRUE(again.replay);
  EXPECT_TRUE(again.stored);
  auto again_insert = Check("n", "x", "something else entirely", CheckMode::kInsertAlways);
  EXPECT_TRUE(again_insert.replay);
  EXPECT_EQ(Docs("n"), 1u);
}

TEST_F(LocalEngineTest, QueryNeverStoresAndInsertAlwaysDoes) {
  Open();
  Check("n", "a", kLong);
  auto q = Check("n", "q", kLong, CheckMode::kQueryOnly);
  EXPECT_TRUE(q.duplicate);
  EXPECT_FALSE(q.stored);
  auto i = Check("n", "i", kLong, CheckMode::kInsertAlways);
  EXPECT_TRUE(i.duplicate);
  EXPECT_TRUE(i.stored);
  EXPECT_EQ(Docs("n"), 2u);
  EXPECT_EQ(engine_->GetDocument("n", "q").status().code(), Status::Code::kNotFound);
}

TEST_F(LocalEngineTest, NamespacesAreIsolated) {
  Open();
  Check("one", "a", kLong);
  auto other = Check("two", "b", kLong);
  EXPECT_FALSE(other.duplicate);
  EXPECT_TRUE(other.stored);
  auto names = engine_->ListNamespaces();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), (std::set<std::string>{"one", "two"}));
}

TEST_F(LocalEngineTest, NearDuplicateWithinKMatches) {
  Open();
  std::string edited = kLong;
  edited.replace(edited.find("harvest"), 7, "harvests");
  auto fp = Fingerprinter::Create({}).value();
  const int d = HammingDistance(fp.Compute(kLong), fp.Compute(edited));
  ASSERT_LE(d, 3) << "test texts must be near-duplicates at k=3";
  ASSERT_GT(d, 0);
  Check("n", "a", kLong);
  auto b = Check("n", "b", edited);
  EXPECT_TRUE(b.duplicate);
  ASSERT_FALSE(b.matches.empty());
  EXPECT_EQ(b.matches[0].distance, d);
  EXPECT_FALSE(b.matches[0].exact);
  EXPECT_LT(b.matches[0].similarity, 1.0);
  EXPECT_GT(b.matches[0].similarity, 0.9);
}

// Many clients send near-duplicates of one text at the same moment: exactly
// one is stored and every other answer names it. Repeated many times.
// Rounds of 8 threads sending normalized-equal variants of one text at once:
// exactly one stored per round, every other answer names it.
void LocalEngineTest::RaceRounds(int first_round, int rounds) {
  constexpr int kThreads = 8;
  for (int round = first_round; round < first_round + rounds; ++round) {
    const std::string base = "The " + RandomText(1000 + round);
    std::vector<CheckOutcome> answers(kThreads);
    std::barrier sync(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        // Variants: punctuation/case/whitespace changes normalize to the same text.
        std::string text = base;
        if (t % 2) text = "  " + text + " !!";
        if (t % 3 == 0) {
          for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));  // case folds away
        }
        sync.arrive_and_wait();
        const std::string id = "r" + std::to_string(round) + "-" + std::to_string(t);
        auto r = engine_->Check("race", DocumentInput{id, text, {}}, CheckMode::kCheckAndInsert);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        answers[t] = *r;
      });
    }
    for (auto& th : threads) th.join();
    int stored = 0;
    std::string kept;
    for (int t = 0; t < kThreads; ++t) {
      if (answers[t].stored) {
        ++stored;
        kept = "r" + std::to_string(round) + "-" + std::to_string(t);
      }
    }
    ASSERT_EQ(stored, 1) << "round " << round;
    for (int t = 0; t < kThreads; ++t) {
      if (answers[t].stored) continue;
      ASSERT_TRUE(answers[t].duplicate);
      EXPECT_EQ(answers[t].matches[0].id, kept);
    }
  }
}

TEST_F(LocalEngineTest, ConcurrentNearDuplicatesKeepExactlyOne) {
  Open();
  RaceRounds(0, 60);
  EXPECT_EQ(Docs("race"), 60u);
}

// The group-commit delay only changes when the committer wakes: every
// decision still holds, namespace changes are not held back by it, and
// everything acknowledged is in the store after a restart.
TEST_F(LocalEngineTest, GroupCommitDelayKeepsEveryDecisionAndWrite) {
  Open(48 * 3600, /*commit_delay_us=*/20000);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Check("seq", "d" + std::to_string(i), RandomText(i)).stored);
  RaceRounds(0, 20);
  bool created = false;
  NamespaceSettings s;
  s.k = 4;
  ASSERT_TRUE(engine_->PutNamespace("tuned", s, &created).ok());
  RaceRounds(20, 10);
  Open(48 * 3600, 20000);
  EXPECT_EQ(Docs("seq"), 20u);
  EXPECT_EQ(Docs("race"), 30u);
  EXPECT_EQ(engine_->GetNamespace("tuned")->settings.k, 4);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(engine_->GetDocument("seq", "d" + std::to_string(i)).ok()) << i;
}

TEST_F(LocalEngineTest, BatchDecidesInOrderIncludingWithinTheBatch) {
  Open();
  std::vector<DocumentInput> docs = {{"1", kLong, {}}, {"2", "completely different text about cats", {}},
                                     {"3", std::string(kLong) + ".", {}}, {"4", "", {}}};
  std::vector<Result<CheckOutcome>> out;
  ASSERT_TRUE(engine_->CheckBatch("b", docs, CheckMode::kCheckAndInsert, &out).ok());
  ASSERT_EQ(out.size(), 4u);
  EXPECT_TRUE(out[0]->stored);
  EXPECT_TRUE(out[1]->stored);
  EXPECT_TRUE(out[2]->duplicate);
  EXPECT_EQ(out[2]->matches[0].id, "1");
  EXPECT_EQ(out[3].status().code(), Status::Code::kInvalidArgument);
}

TEST_F(LocalEngineTest, RetentionExpiresMatchesAndReclaims) {
  Open(/*retention_seconds=*/3600);
  Check("n", "old", kLong);
  now_ += 1800 * 1000;
  EXPECT_TRUE(Check("n", "dup", kLong, CheckMode::kQueryOnly).duplicate);
  now_ += 1801 * 1000;  // "old" is now past retention, not yet swept
  auto late = Check("n", "new", kLong);
  EXPECT_FALSE(late.duplicate) << "an expired document must never match";
  EXPECT_TRUE(late.stored);
  static_cast<void>(engine_->GetDocument("n", "old"));
  EXPECT_EQ(engine_->GetDocument("n", "old").status().code(), Status::Code::kNotFound);
  // A document whose own timestamp is already past retention is answered, not stored.
  auto stale = Check("n", "stale", "an old story nobody tells anymore", CheckMode::kCheckAndInsert, now_ - 7200 * 1000);
  EXPECT_FALSE(stale.stored);
  // Restart: the expired document is gone from the store too.
  Open(3600);
  auto stats = engine_->GetNamespace("n");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->documents, 1u);
}

// Regression (a tester, 2026-12-02): the sweeper pops documents in arrival
// order and stopped at one dated a year ahead, so no document after it
// expired from memory or disk. A time past the arrival now counts as the
// arrival.
TEST_F(LocalEngineTest, AFutureTimestampCountsAsTheArrivalTime) {
  Open(/*retention_seconds=*/3600);
  const int64_t arrival = now_;
  ASSERT_TRUE(Check("n", "future", kLong, CheckMode::kCheckAndInsert, arrival + int64_t{365} * 86400 * 1000).stored);
  EXPECT_EQ(engine_->GetDocument("n", "future")->timestamp_ms, arrival);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Check("n", "d" + std::to_string(i), RandomText(i)).stored);
  now_ += 3601 * 1000;
  ASSERT_TRUE(SweepExpiredForTesting(*engine_).ok());
  EXPECT_EQ(Docs("n"), 0u);
  EXPECT_EQ(engine_->GetNamespace("n")->expired, 21u);
  EXPECT_FALSE(Check("n", "again", kLong, CheckMode::kQueryOnly).duplicate);
}

TEST_F(LocalEngineTest, RestartRebuildsEverything) {
  Open();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(Check("n", "d" + std::to_string(i), RandomText(i)).stored);
  ASSERT_TRUE(engine_->DeleteDocument("n", "d5").ok());
  bool created = false;
  NamespaceSettings s;
  s.k = 5;
  ASSERT_TRUE(engine_->PutNamespace("tuned", s, &created).ok());
  EXPECT_TRUE(created);
  Open();
  EXPECT_EQ(Docs("n"), 199u);
  EXPECT_EQ(engine_->GetNamespace("tuned")->settings.k, 5);
  EXPECT_EQ(engine_->GetDocument("n", "d5").status().code(), Status::Code::kNotFound);
  auto again = Check("n", "zz", RandomText(7));
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.matches[0].id, "d7");
  auto fresh = Check("n", "new", "a brand new text that nobody has seen before in this namespace");
  EXPECT_TRUE(fresh.stored);  // numbering continues without colliding
  Open();
  EXPECT_EQ(Docs("n"), 200u);
}

// Past rebuild_run_docs the rebuild sorts through runs on disk: ids in an
// order unrelated to arrival, and every answer the same after the restart.
TEST_F(LocalEngineTest, RestartThroughSpilledRunsAnswersTheSame) {
  rebuild_run_docs_ = 7;
  Open();
  std::vector<std::string> texts;
  for (int i = 0; i < 150; ++i) {
    texts.push_back(RandomText(i));
    const std::string id = "d" + std::to_string((i * 7919) % 1000);  // key order != arrival order
    ASSERT_TRUE(Check("n", id, texts.back()).stored);
  }
  ASSERT_TRUE(engine_->DeleteDocument("n", "d" + std::to_string((5 * 7919) % 1000)).ok());
  auto answers = [&] {
    std::vector<std::string> out;
    for (int i = 0; i < 150; ++i) {
      for (const std::string& t : {texts[i], texts[i] + " x", "y " + texts[(i + 1) % 150]}) {
        const CheckOutcome c = Check("n", "q", t, CheckMode::kQueryOnly);
        std::string a = c.duplicate ? "" : "-";
        for (const auto& m : c.matches) a += m.id + "/" + std::to_string(m.similarity) + " ";
        out.push_back(a);
      }
    }
    return out;
  };
  const auto before = answers();
  Open();
  EXPECT_EQ(Docs("n"), 149u);
  EXPECT_EQ(answers(), before);
  EXPECT_TRUE(Check("n", "new", "a brand new text that nobody has seen before in this namespace").stored);
  Open();
  EXPECT_EQ(Docs("n"), 150u);
}

// A short repost with a few characters changed is usually more than k bits
// away; the re-check finds it, and must still find it after a restart, when
// the sketches come back from the store rather than from the text.
TEST_F(LocalEngineTest, ShortTextRecheckSurvivesRestart) {
  const std::string original = "今天北京的天气非常好，我们一起去公园散步吧，顺便看看新开的图书馆和博物馆。";
  // One word changed: similarity 0.7949 (>= the default threshold 0.7), but
  // the fingerprints are 8 bits apart (> short_k = 3).
  const std::string edited = "今天北京的天气特别好，我们一起去公园散步吧，顺便看看新开的图书馆和博物馆。";
  const std::string unrelated = "股市今日大幅上涨，科技板块领涨，投资者情绪明显回暖，成交量创下新高。";
  Open();
  ASSERT_TRUE(Check("n", "orig", original).stored);
  ASSERT_TRUE(Check("n", "other", unrelated).stored);
  auto before = Check("n", "q1", edited, CheckMode::kQueryOnly);
  Open();
  auto after = Check("n", "q2", edited, CheckMode::kQueryOnly);
  ASSERT_TRUE(before.duplicate);
  ASSERT_TRUE(after.duplicate);
  EXPECT_EQ(after.matches[0].id, "orig");
  EXPECT_EQ(before.matches[0].id, "orig");
  EXPECT_GT(before.matches[0].distance, 3) << "found beyond the fingerprint radius";
  // The same score before and after: it comes from the persisted sketch, and
  // it is the defined similarity, exactly (both texts fit a sketch).
  std::vector<uint64_t> a, b;
  ShingleHashes(original, 3, &a);
  ShingleHashes(edited, 3, &b);
  const double truth = Jaccard(a, b);
  ASSERT_GE(truth, 0.7);
  ASSERT_LT(truth, 0.85);
  EXPECT_DOUBLE_EQ(before.matches[0].similarity, truth);
  EXPECT_TRUE(before.matches[0].similarity_exact);
  EXPECT_EQ(after.matches[0].similarity, before.matches[0].similarity);
  EXPECT_TRUE(after.matches[0].similarity_exact);
  EXPECT_EQ(after.matches[0].distance, before.matches[0].distance);
  EXPECT_EQ(after.matches.size(), 1u);  // never the unrelated text
}

// The re-check policy is a per-namespace setting: turning it off gives the
// plain rule (fingerprint distance <= k) in that namespace only, and the
// setting survives a restart.
TEST_F(LocalEngineTest, RecheckPolicyIsPerNamespace) {
  const std::string original = "今天北京的天气非常好，我们一起去公园散步吧，顺便看看新开的图书馆和博物馆。";
  // One word changed: similarity 0.7949 (>= the default threshold 0.7), but
  // the fingerprints are 8 bits apart (> short_k = 3).
  const std::string edited = "今天北京的天气特别好，我们一起去公园散步吧，顺便看看新开的图书馆和博物馆。";
  Open();
  NamespaceSettings plain;
  plain.recheck.enabled = false;
  bool created = false;
  ASSERT_TRUE(engine_->PutNamespace("plain", plain, &created).ok());
  ASSERT_TRUE(Check("plain", "orig", original).stored);
  ASSERT_TRUE(Check("checked", "orig", original).stored);
  auto with = Check("checked", "q", edited, CheckMode::kQueryOnly);
  auto without = Check("plain", "q", edited, CheckMode::kQueryOnly);
  ASSERT_TRUE(with.duplicate);
  ASSERT_GT(with.matches[0].distance, 3) << "the pair must lie beyond k for the plain rule to differ";
  EXPECT_FALSE(without.duplicate) << "plain rule: within k only";
  EXPECT_TRUE(without.matches.empty());
  Open();
  EXPECT_FALSE(engine_->GetNamespace("plain")->settings.recheck.enabled);
  EXPECT_TRUE(engine_->GetNamespace("checked")->settings.recheck.enabled);
  // Bad policy values are refused like any other setting.
  NamespaceSettings bad;
  bad.recheck.threshold = 1.5;
  EXPECT_EQ(engine_->PutNamespace("plain", bad, &created).code(), Status::Code::kInvalidArgument);
}

TEST_F(LocalEngineTest, SettingsChangesThatMixSchemesAreRefused) {
  Open();
  Check("n", "a", kLong);
  NamespaceSettings s;
  s.tokenizer = "icu-words";
  bool created = true;
  EXPECT_EQ(engine_->PutNamespace("n", s, &created).code(), Status::Code::kFailedPrecondition);
  // k and threshold change decisions: refused too; retention and max_matches do not.
  NamespaceSettings k5;
  k5.k = 5;
  EXPECT_EQ(engine_->PutNamespace("n", k5, &created).code(), Status::Code::kFailedPrecondition);
  NamespaceSettings strict;
  strict.recheck.threshold = 0.9;
  EXPECT_EQ(engine_->PutNamespace("n", strict, &created).code(), Status::Code::kFailedPrecondition);
  NamespaceSettings longer;
  longer.retention_seconds = 7 * 86400;
  longer.max_matches = 3;
  EXPECT_TRUE(engine_->PutNamespace("n", longer, &created).ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(engine_->GetNamespace("n")->settings, longer);
  ASSERT_TRUE(engine_->DeleteNamespace("n").ok());
  EXPECT_EQ(engine_->GetNamespace("n").status().code(), Status::Code::kNotFound);
  EXPECT_TRUE(engine_->PutNamespace("n", s, &created).ok());  // empty again: any scheme
  Open();
  EXPECT_EQ(engine_->GetNamespace("n")->settings.tokenizer, "icu-words");
  EXPECT_EQ(Docs("n"), 0u);
}

TEST_F(LocalEngineTest, BadInputIsInvalidArgument) {
  Open();
  EXPECT_EQ(engine_->Check("bad name!", DocumentInput{"a", "x", {}}, CheckMode::kQueryOnly).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(engine_->Check("n", DocumentInput{"", "x", {}}, CheckMode::kQueryOnly).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(engine_->Check("n", DocumentInput{"a", "", {}}, CheckMode::kQueryOnly).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(engine_->Check("n", DocumentInput{std::string(513, 'x'), "t", {}}, CheckMode::kQueryOnly).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(engine_->Check("n", DocumentInput{"\xff", "t", {}}, CheckMode::kQueryOnly).status().code(),
            Status::Code::kInvalidArgument);
  NamespaceSettings s;
  s.k = 9;
  bool created;
  EXPECT_EQ(engine_->PutNamespace("n", s, &created).code(), Status::Code::kInvalidArgument);
}

TEST_F(LocalEngineTest, ShutdownRefusesNewCalls) {
  Open();
  Check("n", "a", kLong);
  ASSERT_TRUE(engine_->Shutdown().ok());
  EXPECT_TRUE(engine_->Shutdown().ok());
  EXPECT_EQ(engine_->Check("n", DocumentInput{"b", "x", {}}, CheckMode::kCheckAndInsert).status().code(),
            Status::Code::kUnavailable);
}

TEST(NamespaceSettingsJson, ParsesSubsetsAndRejectsUnknownFields) {
  auto s = NamespaceSettings::FromJson(R"({"k": 5, "retention_seconds": 60})", NamespaceSettings{});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->k, 5);
  EXPECT_EQ(s->retention_seconds, 60);
  EXPECT_EQ(s->tokenizer, "mixed");
  EXPECT_FALSE(NamespaceSettings::FromJson(R"({"k": 9})", {}).ok());
  EXPECT_FALSE(NamespaceSettings::FromJson(R"({"k": "3"})", {}).ok());
  EXPECT_FALSE(NamespaceSettings::FromJson(R"({"color": 1})", {}).ok());
  EXPECT_FALSE(NamespaceSettings::FromJson(R"([1])", {}).ok());
  EXPECT_FALSE(NamespaceSettings::FromJson("{", {}).ok());
  // A repeated key is refused, not read as its last value (the engine API, not only HTTP).
  auto twice = NamespaceSettings::FromJson(R"({"k": 2, "k": 4})", {});
  EXPECT_EQ(twice.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("\"k\""), std::string::npos) << twice.status().ToString();
  EXPECT_FALSE(NamespaceSettings::FromJson(R"({"recheck": {"anchors": 1}, "recheck": {"anchors": 2}})", {}).ok());
  // Retention near 2^63 s would overflow in milliseconds: capped at 2^40 s.
  EXPECT_FALSE(NamespaceSettings::FromJson(R"({"retention_seconds": 9223372036854775807})", {}).ok());
  EXPECT_FALSE(NamespaceSettings::FromJson(R"({"retention_seconds": 4611686018427387904})", {}).ok());
  EXPECT_TRUE(NamespaceSettings::FromJson(R"({"retention_seconds": 1099511627776})", {}).ok());
  auto round = NamespaceSettings::FromJson(s->ToJson(), {});
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(*round, *s);
  // The re-check policy: any subset of its fields, each checked.
  auto r = NamespaceSettings::FromJson(R"({"recheck": {"enabled": false, "short_k": 6}, "threshold": 0.6})", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->recheck.enabled);
  EXPECT_EQ(r->recheck.short_k, 6);
  EXPECT_DOUBLE_EQ(r->recheck.threshold, 0.6);
  EXPECT_EQ(r->recheck.short_max_chars, RecheckOptions{}.short_max_chars);
  auto r2 = NamespaceSettings::FromJson(r->ToJson(), {});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(*r2, *r);
  EXPECT_FALSE(NamespaceSettings::FromJson(R"({"recheck": {"short_k": 9}})", {}).ok());
  EXPECT_FALSE(NamespaceSettings::FromJson(R"({"threshold": "high"})", {}).ok());
  EXPECT_FALSE(NamespaceSettings::FromJson(R"({"recheck": {"sketch_max_chars": 10}})", {}).ok());
  EXPECT_FALSE(NamespaceSettings::FromJson(R"({"recheck": true})", {}).ok());
}

}  // namespace
}  // namespace neardup
