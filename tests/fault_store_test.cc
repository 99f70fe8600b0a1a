// The local engine over a store that fails on command (FaultStore): a group
// commit that fails is an error for every answer that depends on it, and
// memory forgets what the disk lacks; the store heals and writes work again.
// Also: the in-memory store, and the retention sweep run synchronously.
#include "neardup/engine/fault_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "neardup/engine/local_engine.h"
#include "neardup/engine/memory_store.h"
#include "neardup/store/rocks_store.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;

const char* kText =
    "The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden porch, "
    "thinking about the harvest, the rain that did not come in spring, and the long drive to the market "
    "in town where prices for grain have fallen for the third year in a row despite every promise made.";
// kText with one word changed: a near-duplicate at k = 3.
std::string NearText() {
  std::string t = kText;
  t.replace(t.find("harvest"), 7, "harvests");
  return t;
}
const char* kOther = "Completely unrelated content about distributed hash tables and consensus protocols.";

class LocalEngineFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("fault_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override {
    engine_.reset();
    fs::remove_all(dir_);
  }

  LocalEngineOptions Options() {
    LocalEngineOptions o;
    o.sync = false;
    o.sweep_interval_ms = 0;
    o.default_settings.retention_seconds = 3600;
    o.clock_ms = [this] { return now_.load(); };
    return o;
  }

  // The engine over FaultStore(RocksDB in dir_); fault_ points at the wrapper.
  void Open() {
    engine_.reset();
    auto rocks = OpenRocksStore(dir_.string(), RocksStoreOptions{.sync = false});
    ASSERT_TRUE(rocks.ok()) << rocks.status().ToString();
    auto fault = std::make_unique<FaultStore>(std::move(rocks).value());
    fault_ = fault.get();
    auto e = OpenLocalEngine(Options(), std::move(fault));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
  }

  Result<CheckOutcome> Check(const std::string& id, const std::string& text,
                             CheckMode mode = CheckMode::kCheckAndInsert) {
    return engine_->Check("n", DocumentInput{id, text, std::nullopt}, mode);
  }

  fs::path dir_;
  std::atomic<int64_t> now_{1'700'000'000'000};
  FaultStore* fault_ = nullptr;
  std::unique_ptr<Engine> engine_;
};

TEST_F(LocalEngineFaultTest, FailedGroupCommitIsAnErrorAndIsForgotten) {
  Open();
  ASSERT_TRUE(Check("first", kOther).ok());  // the namespace exists, its record is written
  fault_->FailNext(StoreOp::kApply, 1, Status::IOError("injected: disk full"));
  auto a = Check("a", kText);
  ASSERT_FALSE(a.ok()) << "an answer whose write failed must be an error";
  EXPECT_EQ(fault_->failures(StoreOp::kApply), 1u);
  // Memory forgot "a": it is not found, and a near-duplicate is not its duplicate.
  EXPECT_EQ(engine_->GetDocument("n", "a").status().code(), Status::Code::kNotFound);
  auto q = Check("q", NearText(), CheckMode::kQueryOnly);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_FALSE(q->duplicate) << "a document whose write failed must never match";
  EXPECT_EQ(engine_->GetNamespace("n")->documents, 1u);

  // The store works again (one failure was asked for): "a" can be stored now.
  auto again = Check("a", kText);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->stored);
  EXPECT_FALSE(again->replay);
  auto b = Check("b", NearText());
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->duplicate);
  ASSERT_FALSE(b->matches.empty());
  EXPECT_EQ(b->matches[0].id, "a");

  // After a restart the store agrees with what was answered.
  Open();
  EXPECT_EQ(engine_->GetNamespace("n")->documents, 2u);
  EXPECT_TRUE(engine_->GetDocument("n", "a").ok());
}

TEST_F(LocalEngineFaultTest, FailAllThenHealWritesWorkAgain) {
  Open();
  ASSERT_TRUE(Check("first", kOther).ok());
  fault_->FailAll(Status::IOError("injected: store gone"));
  for (int i = 0; i < 3; ++i) {
    std::string id = "a";  // not "a" + to_string(i): GCC 12's false -Wrestrict
    id += std::to_string(i);
    auto r = Check(id, kText);
    ASSERT_FALSE(r.ok()) << i;
  }
  std::vector<DocumentInput> docs = {{"b1", kText, std::nullopt}, {"b2", NearText(), std::nullopt}};
  std::vector<Result<CheckOutcome>> out;
  ASSERT_TRUE(engine_->CheckBatch("n", docs, CheckMode::kCheckAndInsert, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  // b1 was stored in memory and its write failed; b2 named b1: both errors,
  // neither says stored.
  EXPECT_FALSE(out[0].ok());
  EXPECT_FALSE(out[1].ok());
  EXPECT_FALSE(engine_->DeleteDocument("n", "first").ok()) << "a delete whose write failed must not report success";
  fault_->Heal();
  auto a = Check("a", kText);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->stored);
  EXPECT_FALSE(a->duplicate) << "none of the failed writes may be a match";
  EXPECT_GT(fault_->failures(StoreOp::kApply), 0u);
}

// Several requests wait on one group commit that is held in the store; it
// then fails. Every answer that depends on it -- the one that stored, the
// ones that named it as their match -- is an error; none says stored.
TEST_F(LocalEngineFaultTest, ConcurrentAnswersNamingAFailedWriteAreErrors) {
  Open();
  ASSERT_TRUE(Check("first", kOther).ok());
  fault_->Hold(StoreOp::kApply);
  std::vector<Result<CheckOutcome>> answers(4, Status::Internal("not answered"));
  std::vector<std::thread> threads;
  threads.emplace_back([&] { answers[0] = Check("a", kText); });
  // "a" is decided (in memory) and its commit is held in Apply.
  ASSERT_TRUE(fault_->WaitUntilHeld(StoreOp::kApply, 1));
  threads.emplace_back([&] { answers[1] = Check("b", NearText()); });
  threads.emplace_back([&] { answers[2] = Check("c", kText, CheckMode::kQueryOnly); });
  threads.emplace_back([&] { answers[3] = Check("a", kText); });  // replay of the unconfirmed "a"
  // Wait until all four are decided (each one is counted when decided).
  for (int i = 0; i < 30000 && engine_->GetNamespace("n")->checks < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(engine_->GetNamespace("n")->checks, 5u);
  fault_->FailNext(StoreOp::kApply, 1, Status::IOError("injected: fsync failed"));
  fault_->Release(StoreOp::kApply);
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_FALSE(answers[i].ok()) << "answer " << i << " depends on a failed write: stored="
                                  << (answers[i].ok() && answers[i]->stored);
  }
  auto after = Check("d", NearText());
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_FALSE(after->duplicate);
  EXPECT_TRUE(after->stored);
}

TEST_F(LocalEngineFaultTest, OpenFailsWhenTheStoreCannotBeRead) {
  Open();
  ASSERT_TRUE(Check("a", kText).ok());
  engine_.reset();
  for (StoreOp op : {StoreOp::kListNamespaces, StoreOp::kScan}) {
    auto rocks = OpenRocksStore(dir_.string(), RocksStoreOptions{.sync = false});
    ASSERT_TRUE(rocks.ok());
    auto fault = std::make_unique<FaultStore>(std::move(rocks).value());
    fault->FailNext(op, 1, Status::IOError("injected: read error"));
    auto e = OpenLocalEngine(Options(), std::move(fault));
    ASSERT_FALSE(e.ok()) << "op " << static_cast<int>(op);
    EXPECT_EQ(e.status().code(), Status::Code::kIOError);
  }
}

TEST_F(LocalEngineFaultTest, SettingsWriteThatFailsIsAnError) {
  Open();
  fault_->FailNext(StoreOp::kPutNamespace, 1, Status::IOError("injected"));
  NamespaceSettings s;
  s.k = 2;
  EXPECT_FALSE(engine_->PutNamespace("m", s, nullptr).ok());
  fault_->FailNext(StoreOp::kDeleteNamespace, 1, Status::IOError("injected"));
  ASSERT_TRUE(Check("a", kText).ok());
  EXPECT_FALSE(engine_->DeleteNamespace("n").ok());
}

// Regression (a tester, 2026-12-02): a namespace delete refused by the
// store (507 on a full disk) had already dropped the namespace from memory:
// it was gone (404) while the store held it, a PUT then made it afresh
// numbering from 0 over the stored documents, and the store no longer
// opened ("id 0 already indexed"). Now memory keeps it, as the store does.
TEST_F(LocalEngineFaultTest, NamespaceDeleteThatFailsKeepsTheNamespace) {
  Open();
  ASSERT_TRUE(Check("a", kText).ok());
  fault_->FailNext(StoreOp::kDeleteNamespace, 1, Status::StorageFull("injected: disk full"));
  EXPECT_EQ(engine_->DeleteNamespace("n").code(), Status::Code::kStorageFull);
  auto expect_kept = [&](const char* when, size_t documents) {
    const auto names = engine_->ListNamespaces();
    EXPECT_EQ(std::count(names.begin(), names.end(), std::string("n")), 1) << when;
    ASSERT_TRUE(engine_->GetNamespace("n").ok()) << when;
    EXPECT_EQ(engine_->GetNamespace("n")->documents, documents) << when;
    auto q = Check("q", NearText(), CheckMode::kQueryOnly);
    ASSERT_TRUE(q.ok()) << when << ": " << q.status().ToString();
    EXPECT_TRUE(q->duplicate) << when << ": the document must still match";
  };
  expect_kept("after the failed delete", 1);
  NamespaceSettings s;
  bool created = true;
  ASSERT_TRUE(engine_->PutNamespace("n", s, &created).ok());
  EXPECT_FALSE(created) << "the namespace was there all along";
  ASSERT_TRUE(Check("b", "an unrelated text about databases and their indexes, long enough").ok());
  fault_->Heal();
  Open();  // restart over the same store: it opens, and memory agrees with it
  expect_kept("after a restart", 2);
  ASSERT_TRUE(engine_->DeleteNamespace("n").ok());
  EXPECT_EQ(engine_->GetNamespace("n").status().code(), Status::Code::kNotFound);
}

// A delete whose write fails changed nothing: the store still holds the
// document, so memory must too (else it would match again only after a restart).
TEST_F(LocalEngineFaultTest, DeleteThatFailsLeavesTheDocumentLive) {
  Open();
  ASSERT_TRUE(Check("a", kText).ok());
  fault_->FailNext(StoreOp::kApply, 1, Status::IOError("injected: disk full"));
  EXPECT_FALSE(engine_->DeleteDocument("n", "a").ok());
  auto expect_live = [&](const char* when) {
    EXPECT_TRUE(engine_->GetDocument("n", "a").ok()) << when;
    EXPECT_EQ(engine_->GetNamespace("n")->documents, 1u) << when;
    auto q = Check("q", NearText(), CheckMode::kQueryOnly);
    ASSERT_TRUE(q.ok()) << when << ": " << q.status().ToString();
    ASSERT_TRUE(q->duplicate) << when << ": the document must still match";
    EXPECT_EQ(q->matches[0].id, "a") << when;
  };
  expect_live("after the failed delete");
  fault_->Heal();
  Open();  // restart over the same store: memory agrees with it
  expect_live("after a restart");
  // The delete works once the store does, and stays done.
  ASSERT_TRUE(engine_->DeleteDocument("n", "a").ok());
  EXPECT_EQ(engine_->GetDocument("n", "a").status().code(), Status::Code::kNotFound);
  Open();
  EXPECT_EQ(engine_->GetDocument("n", "a").status().code(), Status::Code::kNotFound);
}

bool Listed(Engine& engine, const std::string& name) {
  auto names = engine.ListNamespaces();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A namespace whose settings record fails to write was never created.
TEST_F(LocalEngineFaultTest, NamespaceCreationThatFailsIsRolledBack) {
  Open();
  NamespaceSettings s;
  s.k = 2;
  fault_->FailNext(StoreOp::kPutNamespace, 1, Status::IOError("injected"));
  bool created = false;
  EXPECT_FALSE(engine_->PutNamespace("m", s, &created).ok());
  EXPECT_FALSE(Listed(*engine_, "m"));
  EXPECT_EQ(engine_->GetNamespace("m").status().code(), Status::Code::kNotFound);
  fault_->FailNext(StoreOp::kPutNamespace, 1, Status::IOError("injected"));
  EXPECT_FALSE(engine_->UpdateNamespace("u", R"({"k":2})", NamespaceSettings{}, &created).ok());
  EXPECT_FALSE(Listed(*engine_, "u"));
  EXPECT_EQ(engine_->GetNamespace("u").status().code(), Status::Code::kNotFound);

  fault_->Heal();
  created = false;
  ASSERT_TRUE(engine_->PutNamespace("m", s, &created).ok());
  EXPECT_TRUE(created) << "the failed attempt must not count as a creation";
  Open();
  ASSERT_TRUE(engine_->GetNamespace("m").ok());
  EXPECT_EQ(engine_->GetNamespace("m")->settings.k, 2);
  EXPECT_FALSE(Listed(*engine_, "u"));
}

// An update whose settings record fails to write leaves the old settings.
TEST_F(LocalEngineFaultTest, SettingsUpdateThatFailsKeepsTheOldSettings) {
  Open();
  NamespaceSettings s;
  s.k = 2;
  s.max_matches = 5;
  ASSERT_TRUE(engine_->PutNamespace("m", s, nullptr).ok());
  fault_->FailNext(StoreOp::kPutNamespace, 1, Status::IOError("injected"));
  EXPECT_FALSE(engine_->UpdateNamespace("m", R"({"k":4,"max_matches":7})", NamespaceSettings{}, nullptr).ok());
  auto kept = engine_->GetNamespace("m");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->settings.ToJson(), s.ToJson());
  NamespaceSettings other = s;
  other.cjk_ngram = 3;  // a scheme change: the fingerprinter too
  fault_->FailNext(StoreOp::kPutNamespace, 1, Status::IOError("injected"));
  EXPECT_FALSE(engine_->PutNamespace("m", other, nullptr).ok());
  EXPECT_EQ(engine_->GetNamespace("m")->settings.ToJson(), s.ToJson());
  fault_->Heal();
  Open();
  EXPECT_EQ(engine_->GetNamespace("m")->settings.ToJson(), s.ToJson());
}

// The retention sweep, run synchronously with an injected clock: expired
// documents leave memory and the store; younger ones stay.
TEST_F(LocalEngineFaultTest, SweepExpiredForTestingRemovesExpiredFromMemoryAndStore) {
  Open();
  ASSERT_TRUE(Check("old", kText)->stored);
  now_ += 1800 * 1000;
  ASSERT_TRUE(Check("young", kOther)->stored);
  ASSERT_TRUE(SweepExpiredForTesting(*engine_).ok());
  EXPECT_EQ(engine_->GetNamespace("n")->expired, 0u) << "nothing is past retention yet";
  now_ += 1801 * 1000;  // "old" is past the hour, "young" is not
  StoredDocument d;
  ASSERT_TRUE(fault_->base()->Get("n", "old", &d).ok()) << "not yet swept";
  ASSERT_TRUE(SweepExpiredForTesting(*engine_).ok());
  auto stats = engine_->GetNamespace("n");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->expired, 1u);
  EXPECT_EQ(stats->documents, 1u);
  EXPECT_EQ(fault_->base()->Get("n", "old", &d).code(), Status::Code::kNotFound) << "swept from the store";
  EXPECT_TRUE(fault_->base()->Get("n", "young", &d).ok());
  // The id is free again: a new document with it is stored, not a replay.
  auto again = Check("old", kText);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->stored);
  EXPECT_FALSE(again->replay);
}

TEST(MemoryStoreTest, BehavesLikeAStore) {
  auto s = NewMemoryStore();
  ASSERT_TRUE(s->PutNamespace("n", "{}").ok());
  StoredDocument a{"a", 1, {}, 5, "x"};
  ASSERT_TRUE(s->Apply({{StoreWrite::Op::kPut, "n", a}, {StoreWrite::Op::kPut, "n", StoredDocument{"b", 2}}}).ok());
  StoredDocument got;
  ASSERT_TRUE(s->Get("n", "a", &got).ok());
  EXPECT_EQ(got, a);
  ASSERT_TRUE(s->Apply({{StoreWrite::Op::kDelete, "n", StoredDocument{"b"}}}).ok());
  int n = 0;
  ASSERT_TRUE(s->Scan("n", [&](StoredDocument&&) { ++n; return Status::OK(); }).ok());
  EXPECT_EQ(n, 1);
  EXPECT_EQ(s->Get("n", "b", &got).code(), Status::Code::kNotFound);
  std::vector<std::pair<std::string, std::string>> names;
  ASSERT_TRUE(s->ListNamespaces(&names).ok());
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0].second, "{}");
  EXPECT_EQ(s->PutNamespace(std::string("a\0b", 3), "{}").code(), Status::Code::kInvalidArgument);
  ASSERT_TRUE(s->DeleteNamespace("n").ok());
  ASSERT_TRUE(s->DeleteNamespace("n").ok());
  EXPECT_EQ(s->Get("n", "a", &got).code(), Status::Code::kNotFound);
}

// The local engine over the in-memory store: a restart loses everything by
// design, but writes and failures behave as over RocksDB.
TEST(MemoryStoreTest, LocalEngineOverFaultyMemoryStore) {
  auto fault = std::make_unique<FaultStore>(NewMemoryStore());
  FaultStore* f = fault.get();
  LocalEngineOptions o;
  o.sweep_interval_ms = 0;
  auto e = OpenLocalEngine(o, std::move(fault));
  ASSERT_TRUE(e.ok());
  Engine& engine = **e;
  ASSERT_TRUE(engine.Check("n", {"x", kOther, std::nullopt}, CheckMode::kCheckAndInsert).ok());
  f->FailNext(StoreOp::kApply, 1, Status::IOError("injected"));
  EXPECT_FALSE(engine.Check("n", {"a", kText, std::nullopt}, CheckMode::kCheckAndInsert).ok());
  auto b = engine.Check("n", {"b", kText, std::nullopt}, CheckMode::kCheckAndInsert);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->stored);
  EXPECT_FALSE(b->duplicate);
  StoredDocument d;
  EXPECT_EQ(f->base()->Get("n", "a", &d).code(), Status::Code::kNotFound);
  EXPECT_TRUE(f->base()->Get("n", "b", &d).ok());
}

}  // namespace
}  // namespace neardup
