// RocksDB DocumentStore: round trips, key-layout isolation, atomicity,
// corruption handling, format versioning, concurrency and durability across
// SIGKILL.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "store/acked_sequence.h"
#include "neardup/store/rocks_store.h"

extern char** environ;

namespace neardup {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

// A deterministic document for number n (binary extra, both signs of time).
StoredDocument MakeDoc(const std::string& id, uint64_t n, size_t extra_bytes = 7) {
  StoredDocument d;
  d.id = id;
  d.number = n;
  d.signature.content_hash = n * 0x9E3779B97F4A7C15ull + 1;
  d.signature.fingerprint = ~n * 0xC2B2AE3D27D4EB4Full;
  d.signature.has_features = n % 3 != 0;
  d.timestamp_ms = (n % 2 == 0 ? 1 : -1) * static_cast<int64_t>(1'700'000'000'000 + n);
  for (size_t i = 0; i < extra_bytes; ++i) d.extra.push_back(static_cast<char>((n + i * 37) & 0xff));
  return d;
}

// prefix + decimal n (spelled out: g++ 12 -O3 gives a false -Wrestrict
// warning for a string literal + std::to_string(n)).
std::string Id(std::string_view prefix, uint64_t n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

// StoredDocument's defaulted operator== is unusable while DocSignature has
// none, so compare field by field.
bool SameDoc(const StoredDocument& a, const StoredDocument& b) {
  return a.id == b.id && a.number == b.number && a.signature.content_hash == b.signature.content_hash &&
         a.signature.fingerprint == b.signature.fingerprint &&
         a.signature.has_features == b.signature.has_features && a.timestamp_ms == b.timestamp_ms &&
         a.extra == b.extra;
}

StoreWrite Put(const std::string& ns, StoredDocument doc) {
  StoreWrite w;
  w.op = StoreWrite::Op::kPut;
  w.ns = ns;
  w.doc = std::move(doc);
  return w;
}

StoreWrite Del(const std::string& ns, const std::string& id) {
  StoreWrite w;
  w.op = StoreWrite::Op::kDelete;
  w.ns = ns;
  w.doc.id = id;
  return w;
}

// ---- SIGKILL durability: the child side -------------------------------------
// The durability test forks and execs this same binary with kChildEnv set to
// "<pipe fd>:<store dir>". The hook below runs during static initialization,
// before gtest's main, and never returns: it applies documents one at a time
// with sync=true and reports each acknowledged number on the pipe until it is
// killed. (Exec rather than a bare fork: the parent has RocksDB background
// threads, and a forked copy of a multi-threaded process must not use them.)
constexpr char kChildEnv[] = "NEARDUP_ROCKS_STORE_TEST_KILL_CHILD";
constexpr char kKillNs[] = "killed";

std::string KillDocId(uint64_t n) { return "doc-"s + std::to_string(n) + "\x00\xff"s; }

[[noreturn]] void RunKillChild(const char* spec) {
  char* end = nullptr;
  const long fd = std::strtol(spec, &end, 10);
  if (end == nullptr || *end != ':') _exit(2);
  RocksStoreOptions options;
  options.sync = true;
  auto store = OpenRocksStore(end + 1, options);
  if (!store.ok()) _exit(3);
  for (uint64_t n = 0; n < 50'000'000; ++n) {
    if (!(*store)->Apply({Put(kKillNs, MakeDoc(KillDocId(n), n))}).ok()) _exit(4);
    const uint64_t ack = n;
    if (write(static_cast<int>(fd), &ack, sizeof ack) != static_cast<ssize_t>(sizeof ack)) _exit(5);
  }
  _exit(0);
}

[[maybe_unused]] const bool kKillChildHook = [] {
  if (const char* spec = std::getenv(kChildEnv)) RunKillChild(spec);
  return true;
}();

// ---- fixture ----------------------------------------------------------------
class RocksStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(::testing::TempDir()) /
            ("rocks_store_"s + info->name() + "_" + std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override {
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  DocumentStore& Open(RocksStoreOptions options = {}) {
    store_.reset();
    auto r = OpenRocksStore(dir_, options);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) throw std::runtime_error("open failed");
    store_ = std::move(r).value();
    return *store_;
  }

  std::map<std::string, StoredDocument> ScanAll(const std::string& ns) {
    std::map<std::string, StoredDocument> out;
    Status st = store_->Scan(ns, [&](StoredDocument&& d) {
      EXPECT_TRUE(out.emplace(d.id, d).second) << "id scanned twice";
      return Status::OK();
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  // Writes raw key/values straight into the RocksDB database (store closed).
  void RawPut(const std::vector<std::pair<std::string, std::string>>& kvs) {
    store_.reset();
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir_, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    for (const auto& [k, v] : kvs) ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), k, v).ok());
  }

  std::string RawGet(const std::string& key) {
    store_.reset();
    rocksdb::DB* raw = nullptr;
    EXPECT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string v;
    EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), key, &v).ok());
    return v;
  }

  std::string dir_;
  std::unique_ptr<DocumentStore> store_;
};

// Documented key layout (docs/storage.md).
std::string DocKey(const std::string& ns, const std::string& id) { return "\x02"s + ns + '\0' + id; }

TEST_F(RocksStoreTest, RoundTripBinaryIdsAndExtra) {
  DocumentStore& s = Open();
  EXPECT_EQ(s.Describe(), "rocksdb:" + dir_);

  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte.push_back(static_cast<char>(c));
  std::vector<StoredDocument> docs = {
      MakeDoc("plain", 1),
      MakeDoc("a\0b"s, 2),
      MakeDoc("\0"s, 3),
      MakeDoc("\0\0\xff"s, 4),
      MakeDoc("\xff\xff\xff"s, 5),
      MakeDoc("\x01"s, 6, 0),                     // empty extra
      MakeDoc(every_byte + every_byte, 7, 300),  // 512-byte id, 2-byte varint length
      MakeDoc("big", UINT64_MAX, 100'000),
  };
  docs.back().timestamp_ms = INT64_MIN;
  docs.back().extra[5] = '\0';

  std::vector<StoreWrite> writes;
  for (const auto& d : docs) writes.push_back(Put("ns", d));
  ASSERT_TRUE(s.Apply(writes).ok());

  for (const auto& d : docs) {
    StoredDocument got;
    Status st = s.Get("ns", d.id, &got);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(SameDoc(got, d));
  }
  auto all = ScanAll("ns");
  ASSERT_EQ(all.size(), docs.size());
  for (const auto& d : docs) EXPECT_TRUE(SameDoc(all.at(d.id), d));

  // Overwrite keeps one record.
  StoredDocument updated = MakeDoc("plain", 99, 3);
  ASSERT_TRUE(s.Apply({Put("ns", updated)}).ok());
  StoredDocument got;
  ASSERT_TRUE(s.Get("ns", "plain", &got).ok());
  EXPECT_TRUE(SameDoc(got, updated));
  EXPECT_EQ(ScanAll("ns").size(), docs.size());

  // Empty batch is a no-op.
  EXPECT_TRUE(s.Apply({}).ok());
}

TEST_F(RocksStoreTest, NamespacesIsolatedAndDeleteDoc) {
  DocumentStore& s = Open();
  // Names that share prefixes and neighbouring separator bytes.
  const std::vector<std::string> names = {"a", "ab", "a\x01"s, "a\xff"s, "b", ""};
  std::vector<StoreWrite> writes;
  for (size_t i = 0; i < names.size(); ++i) {
    writes.push_back(Put(names[i], MakeDoc("x", i)));
    writes.push_back(Put(names[i], MakeDoc("y"s + names[i], 100 + i)));
  }
  ASSERT_TRUE(s.Apply(writes).ok());
  for (size_t i = 0; i < names.size(); ++i) {
    StoredDocument got;
    ASSERT_TRUE(s.Get(names[i], "x", &got).ok());
    EXPECT_EQ(got.number, i);
    auto all = ScanAll(names[i]);
    ASSERT_EQ(all.size(), 2u) << "namespace #" << i;
    EXPECT_EQ(all.at("x").number, i);
    EXPECT_EQ(all.at("y"s + names[i]).number, 100 + i);
  }

  ASSERT_TRUE(s.Apply({Del("a", "x")}).ok());
  StoredDocument got;
  EXPECT_EQ(s.Get("a", "x", &got).code(), Status::Code::kNotFound);
  EXPECT_EQ(ScanAll("a").size(), 1u);
  for (const char* other : {"ab", "b"}) {
    ASSERT_TRUE(s.Get(other, "x", &got).ok()) << other;
  }
  // Deleting an absent document is fine.
  EXPECT_TRUE(s.Apply({Del("a", "never-there")}).ok());
}

TEST_F(RocksStoreTest, GetMissingIsNotFound) {
  DocumentStore& s = Open();
  StoredDocument got;
  EXPECT_EQ(s.Get("ns", "nope", &got).code(), Status::Code::kNotFound);
  ASSERT_TRUE(s.Apply({Put("ns", MakeDoc("yes", 1))}).ok());
  EXPECT_EQ(s.Get("ns", "nope", &got).code(), Status::Code::kNotFound);
  EXPECT_EQ(s.Get("other", "yes", &got).code(), Status::Code::kNotFound);
  EXPECT_EQ(s.Get("ns", "ye", &got).code(), Status::Code::kNotFound);
  EXPECT_TRUE(ScanAll("other").empty());
}

TEST_F(RocksStoreTest, NamespaceWithNulIsRejected) {
  DocumentStore& s = Open();
  const std::string bad = "a\0b"s;
  StoredDocument got;
  std::vector<std::pair<std::string, std::string>> list;
  EXPECT_EQ(s.PutNamespace(bad, "{}").code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.DeleteNamespace(bad).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.Get(bad, "x", &got).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.Scan(bad, [](StoredDocument&&) { return Status::OK(); }).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.Compact(bad).code(), Status::Code::kInvalidArgument);
  // One bad write fails the whole batch: nothing is applied.
  EXPECT_EQ(s.Apply({Put("a", MakeDoc("x", 1)), Put(bad, MakeDoc("x", 2))}).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(s.Get("a", "x", &got).code(), Status::Code::kNotFound);
  ASSERT_TRUE(s.ListNamespaces(&list).ok());
  EXPECT_TRUE(list.empty());
}

TEST_F(RocksStoreTest, ListNamespacesAndDeleteNamespace) {
  DocumentStore& s = Open();
  ASSERT_TRUE(s.PutNamespace("a", R"({"k":3})").ok());
  ASSERT_TRUE(s.PutNamespace("ab", R"({"k":4})").ok());
  ASSERT_TRUE(s.PutNamespace("a\xff"s, "").ok());
  ASSERT_TRUE(s.PutNamespace("a", R"({"k":5})").ok());  // overwrite

  std::vector<std::pair<std::string, std::string>> list = {{"stale", "entry"}};
  ASSERT_TRUE(s.ListNamespaces(&list).ok());
  std::vector<std::pair<std::string, std::string>> want = {
      {"a", R"({"k":5})"}, {"a\xff"s, ""}, {"ab", R"({"k":4})"}};
  std::sort(want.begin(), want.end());
  std::sort(list.begin(), list.end());
  EXPECT_EQ(list, want);

  std::vector<StoreWrite> writes;
  for (uint64_t i = 0; i < 300; ++i) {
    writes.push_back(Put("a", MakeDoc(Id("d", i), i)));
    writes.push_back(Put("ab", MakeDoc(Id("d", i), i)));
    writes.push_back(Put("a\xff"s, MakeDoc(Id("d", i), i)));
  }
  ASSERT_TRUE(s.Apply(writes).ok());

  ASSERT_TRUE(s.DeleteNamespace("a").ok());
  EXPECT_TRUE(ScanAll("a").empty());
  StoredDocument got;
  EXPECT_EQ(s.Get("a", "d7", &got).code(), Status::Code::kNotFound);
  EXPECT_EQ(ScanAll("ab").size(), 300u);
  EXPECT_EQ(ScanAll("a\xff"s).size(), 300u);
  ASSERT_TRUE(s.ListNamespaces(&list).ok());
  std::sort(list.begin(), list.end());
  want.erase(want.begin());
  EXPECT_EQ(list, want);

  EXPECT_TRUE(s.DeleteNamespace("a").ok());         // idempotent
  EXPECT_TRUE(s.DeleteNamespace("missing").ok());

  // The namespace can be recreated after its range tombstone.
  ASSERT_TRUE(s.PutNamespace("a", "{}").ok());
  ASSERT_TRUE(s.Apply({Put("a", MakeDoc("d7", 7))}).ok());
  ASSERT_TRUE(s.Get("a", "d7", &got).ok());
  EXPECT_TRUE(SameDoc(got, MakeDoc("d7", 7)));
  EXPECT_EQ(ScanAll("a").size(), 1u);
}

TEST_F(RocksStoreTest, ReopenKeepsEverything) {
  for (bool sync : {true, false}) {
    SCOPED_TRACE(sync ? "sync" : "no sync");
    store_.reset();
    fs::remove_all(dir_);
    RocksStoreOptions o;
    o.sync = sync;
    {
      DocumentStore& s = Open(o);
      ASSERT_TRUE(s.PutNamespace("ns", "settings\0bytes"s).ok());
      std::vector<StoreWrite> writes;
      for (uint64_t i = 0; i < 1000; ++i) writes.push_back(Put("ns", MakeDoc("id\0"s + std::to_string(i), i)));
      ASSERT_TRUE(s.Apply(writes).ok());
      ASSERT_TRUE(s.Apply({Del("ns", "id\0"s + "5")}).ok());
    }
    store_.reset();  // closes the database
    o.create_if_missing = false;
    DocumentStore& s = Open(o);
    std::vector<std::pair<std::string, std::string>> list;
    ASSERT_TRUE(s.ListNamespaces(&list).ok());
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].second, "settings\0bytes"s);
    auto all = ScanAll("ns");
    EXPECT_EQ(all.size(), 999u);
    EXPECT_EQ(all.count("id\0"s + "5"), 0u);
    EXPECT_TRUE(SameDoc(all.at("id\0"s + "999"), MakeDoc("id\0"s + "999", 999)));
  }
}

TEST_F(RocksStoreTest, OpenMissingWithoutCreateIsNotFound) {
  RocksStoreOptions o;
  o.create_if_missing = false;
  auto r = OpenRocksStore(dir_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound) << r.status().ToString();
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(RocksStoreTest, SecondOpenOfSameDirFails) {
  Open();
  auto r = OpenRocksStore(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kIOError) << r.status().ToString();
}

TEST_F(RocksStoreTest, ScanStopsOnCallbackError) {
  DocumentStore& s = Open();
  std::vector<StoreWrite> writes;
  for (uint64_t i = 0; i < 10; ++i) writes.push_back(Put("ns", MakeDoc(std::to_string(i), i)));
  ASSERT_TRUE(s.Apply(writes).ok());
  int calls = 0;
  Status st = s.Scan("ns", [&](StoredDocument&&) {
    ++calls;
    return calls == 3 ? Status::ResourceExhausted("enough") : Status::OK();
  });
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(st.message(), "enough");
  EXPECT_EQ(calls, 3);
}

// Every Scan, taken while batches of 50 are applied and removed, sees whole
// batches only.
TEST_F(RocksStoreTest, ApplyIsAtomic) {
  DocumentStore& s = Open();
  constexpr int kBatch = 50, kBatches = 30;
  std::atomic<bool> done{false};
  std::atomic<int> scans{0};
  std::thread reader([&] {
    while (!done.load()) {
      size_t n = 0;
      Status st = s.Scan("ns", [&](StoredDocument&&) {
        ++n;
        return Status::OK();
      });
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(n % kBatch, 0u) << "scan saw a partial batch: " << n;
      scans.fetch_add(1);
    }
  });
  for (int b = 0; b < kBatches; ++b) {
    std::vector<StoreWrite> writes;
    for (int i = 0; i < kBatch; ++i) writes.push_back(Put("ns", MakeDoc(std::to_string(b * kBatch + i), b)));
    ASSERT_TRUE(s.Apply(writes).ok());
  }
  for (int b = 0; b < kBatches; ++b) {
    std::vector<StoreWrite> writes;
    for (int i = 0; i < kBatch; ++i) writes.push_back(Del("ns", std::to_string(b * kBatch + i)));
    // A batch mixing kinds: delete 50 old ones and put 50 new ones nets zero.
    if (b % 2 == 0) {
      for (int i = 0; i < kBatch; ++i) writes.push_back(Put("ns", MakeDoc(Id("new", b * kBatch + i), b)));
    }
    ASSERT_TRUE(s.Apply(writes).ok());
  }
  done.store(true);
  reader.join();
  EXPECT_GT(scans.load(), 0);
  EXPECT_EQ(ScanAll("ns").size(), static_cast<size_t>(kBatch * kBatches / 2));
}

TEST_F(RocksStoreTest, ConcurrentApplyFromFourThreads) {
  DocumentStore& s = Open();  // sync=true: concurrent writers share fsyncs
  constexpr int kThreads = 4, kDocs = 500;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kDocs; ++i) {
        const uint64_t n = static_cast<uint64_t>(t) * kDocs + i;
        if (!s.Apply({Put("ns", MakeDoc(Id(Id("t", t) + "/", i), n))}).ok()) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto all = ScanAll("ns");
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kDocs));
  std::set<uint64_t> numbers;
  for (const auto& [id, d] : all) {
    EXPECT_TRUE(SameDoc(d, MakeDoc(id, d.number)));
    numbers.insert(d.number);
  }
  EXPECT_EQ(numbers.size(), static_cast<size_t>(kThreads * kDocs));
}

// Garbage under document keys: Get and Scan report kCorruption naming the
// document, never crash or read out of bounds (run under ASan to be sure).
TEST_F(RocksStoreTest, CorruptedRecordIsCorruption) {
  DocumentStore& s = Open();
  ASSERT_TRUE(s.Apply({Put("good", MakeDoc("doc", 42, 3))}).ok());
  const std::string valid = RawGet(DocKey("good", "doc"));
  ASSERT_GT(valid.size(), 34u);

  std::vector<std::string> garbage = {
      "",
      "garbage",
      "\x07"s + valid.substr(1),                        // unknown record version
      valid + "x",                                      // trailing byte
      valid.substr(0, 25) + "\x02"s + valid.substr(26),  // has_features = 2
      valid.substr(0, 34) + std::string(10, '\xff') + "\x01"s,  // varint past 64 bits
      valid.substr(0, 34) + "\xff\xff\xff\xff\xff\xff\xff\xff\x7f"s,  // huge extra length
      valid.substr(0, 34) + "\x80"s,                    // truncated varint
  };
  for (size_t len = 0; len < valid.size(); ++len) garbage.push_back(valid.substr(0, len));
  std::vector<std::pair<std::string, std::string>> kvs;
  for (size_t i = 0; i < garbage.size(); ++i) kvs.emplace_back(DocKey(Id("bad", i), "id\xff"s), garbage[i]);
  RawPut(kvs);

  DocumentStore& s2 = Open();
  for (size_t i = 0; i < garbage.size(); ++i) {
    SCOPED_TRACE(Id("garbage #", i));
    const std::string ns = Id("bad", i);
    StoredDocument got;
    Status st = s2.Get(ns, "id\xff"s, &got);
    EXPECT_EQ(st.code(), Status::Code::kCorruption) << st.ToString();
    EXPECT_NE(st.message().find(ns), std::string::npos) << st.message();
    int calls = 0;
    st = s2.Scan(ns, [&](StoredDocument&&) {
      ++calls;
      return Status::OK();
    });
    EXPECT_EQ(st.code(), Status::Code::kCorruption) << st.ToString();
    EXPECT_EQ(calls, 0);
  }
  StoredDocument got;
  ASSERT_TRUE(s2.Get("good", "doc", &got).ok());
  EXPECT_TRUE(SameDoc(got, MakeDoc("doc", 42, 3)));
}

TEST_F(RocksStoreTest, UnknownFormatVersionRefusesToOpen) {
  Open();
  EXPECT_EQ(RawGet("\x00meta/format"s), "1");
  RawPut({{"\x00meta/format"s, "2"}});
  auto r = OpenRocksStore(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kFailedPrecondition) << r.status().ToString();

  // A RocksDB database that is not a neardup store at all.
  fs::remove_all(dir_);
  RawPut({{"some", "thing"}});
  r = OpenRocksStore(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kFailedPrecondition) << r.status().ToString();
}

TEST_F(RocksStoreTest, CompactAndDeleteNamespaceReclaimDisk) {
  RocksStoreOptions o;
  o.sync = false;
  DocumentStore& s = Open(o);
  std::mt19937_64 rng(7);
  std::vector<StoreWrite> writes;
  for (uint64_t i = 0; i < 20000; ++i) {
    StoredDocument d = MakeDoc(Id("doc", i), i, 0);
    for (int b = 0; b < 200; ++b) d.extra.push_back(static_cast<char>(rng()));  // incompressible
    writes.push_back(Put(i % 2 == 0 ? "big" : "gone", std::move(d)));
    if (writes.size() == 500) {
      ASSERT_TRUE(s.Apply(writes).ok());
      writes.clear();
    }
  }
  ASSERT_TRUE(s.Compact("big").ok());
  const uint64_t full = s.ApproximateDiskBytes();
  EXPECT_GT(full, 20000u * 200);

  ASSERT_TRUE(s.DeleteNamespace("gone").ok());
  const uint64_t half = s.ApproximateDiskBytes();
  EXPECT_LT(half, full * 3 / 4) << full << " -> " << half;

  for (uint64_t i = 0; i < 20000; i += 2) {
    if (i % 100 != 0) writes.push_back(Del("big", Id("doc", i)));
  }
  ASSERT_TRUE(s.Apply(writes).ok());
  ASSERT_TRUE(s.Compact("big").ok());
  const uint64_t small = s.ApproximateDiskBytes();
  EXPECT_LT(small, half / 4) << half << " -> " << small;
  EXPECT_EQ(ScanAll("big").size(), 200u);
  std::cout << "[          ] disk bytes: " << full << " full, " << half << " after DeleteNamespace, " << small
            << " after deletes + Compact\n";
}

// ---- damaged write-ahead log (issue 15) ---------------------------------------
// Each test writes kWalDocs documents with synced Apply()s and closes the
// store. Closing does not flush the memtable (RocksDB flushes on close only
// writes made with the WAL disabled), so the documents are only in the newest
// .log file; the next open replays it (and then writes them to an SST). The
// test damages that file in between.
constexpr uint64_t kWalDocs = 300;
constexpr char kWalNs[] = "wal";

class RocksStoreWalTest : public RocksStoreTest {
 protected:
  fs::path WriteDocsAndClose() {
    DocumentStore& s = Open();
    for (uint64_t n = 0; n < kWalDocs; ++n) {
      EXPECT_TRUE(s.Apply({Put(kWalNs, MakeDoc(Id("d", n), n, 100))}).ok());
    }
    store_.reset();
    fs::path newest;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".log" && (newest.empty() || e.path().filename() > newest.filename())) {
        newest = e.path();
      }
    }
    EXPECT_FALSE(newest.empty());
    // Every document is in it (~150 bytes each), none was flushed.
    EXPECT_GT(fs::file_size(newest), kWalDocs * 100);
    return newest;
  }

  // Reopens and returns the numbers of the documents found (the store stays open).
  std::set<uint64_t> Present(bool accept_wal_loss) {
    RocksStoreOptions o;
    o.accept_wal_loss = accept_wal_loss;
    Open(o);
    std::set<uint64_t> out;
    for (const auto& [id, d] : ScanAll(kWalNs)) {
      EXPECT_TRUE(SameDoc(d, MakeDoc(Id("d", d.number), d.number, 100))) << id;
      out.insert(d.number);
    }
    return out;
  }

  // The open must fail with the explanatory kCorruption.
  void ExpectRefused() {
    store_.reset();
    auto r = OpenRocksStore(dir_);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << r.status().ToString();
    const std::string m = r.status().message();
    EXPECT_NE(m.find(dir_), std::string::npos) << m;
    EXPECT_NE(m.find("write-ahead log"), std::string::npos) << m;
    EXPECT_NE(m.find("acknowledged documents"), std::string::npos) << m;
    EXPECT_NE(m.find("--accept-wal-loss"), std::string::npos) << m;
  }

  // Every document before the first missing one, none after: a prefix.
  static void ExpectPrefix(const std::set<uint64_t>& got) {
    if (!got.empty()) {
      EXPECT_EQ(*got.rbegin() + 1, got.size()) << "not a prefix";
    }
  }
};

void FlipBytes(const fs::path& p, uint64_t offset, size_t n) {
  const int fd = ::open(p.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::string b(n, '\0');
  ASSERT_EQ(pread(fd, b.data(), n, static_cast<off_t>(offset)), static_cast<ssize_t>(n));
  for (char& c : b) c = static_cast<char>(~c);
  ASSERT_EQ(pwrite(fd, b.data(), n, static_cast<off_t>(offset)), static_cast<ssize_t>(n));
  ::close(fd);
}

// (a) 16 bytes flipped in the middle: a bad checksum that is not the tail.
TEST_F(RocksStoreWalTest, FlippedBytesInTheMiddleRefuseToOpen) {
  const fs::path log = WriteDocsAndClose();
  FlipBytes(log, fs::file_size(log) / 2, 16);
  ExpectRefused();
  ExpectRefused();  // the failed open changed nothing
  const std::set<uint64_t> got = Present(/*accept_wal_loss=*/true);
  EXPECT_GT(got.size(), kWalDocs / 4);
  EXPECT_LT(got.size(), kWalDocs);
  ExpectPrefix(got);
}

// (b) truncated to half. RocksDB alone reads a log cut short as one that
// ends there (no length or end marker); the store's record of its last
// acknowledged write (store/acked_sequence.h) makes it a refusal.
TEST_F(RocksStoreWalTest, TruncatedToHalfRefusesToOpen) {
  const fs::path log = WriteDocsAndClose();
  fs::resize_file(log, fs::file_size(log) / 2);
  ExpectRefused();
  ExpectRefused();  // the failed open changed nothing
  const std::set<uint64_t> got = Present(/*accept_wal_loss=*/true);
  EXPECT_GT(got.size(), kWalDocs / 4);
  EXPECT_LT(got.size(), kWalDocs);
  ExpectPrefix(got);
  // Accepted once: the next open is clean.
  store_.reset();
  EXPECT_EQ(Present(/*accept_wal_loss=*/false), got);
}

// (b') the live log deleted: every unflushed acknowledged write is gone.
// The documents are written twice: the reopen between flushes the first
// round to a table file, so the store is not empty without its log (a store
// that lost everything is refused as "opened empty", RocksStoreTest below).
TEST_F(RocksStoreWalTest, DeletedLogRefusesToOpen) {
  WriteDocsAndClose();
  Open();
  const fs::path log = WriteDocsAndClose();
  fs::remove(log);
  ExpectRefused();
  EXPECT_EQ(Present(/*accept_wal_loss=*/true).size(), kWalDocs);  // the first round's
}

// (c) a torn last record (what kill -9 in the middle of an append leaves):
// that write was never acknowledged (its fsync had not returned), so the
// record of the last acknowledged write is the one before it. Opens without
// the flag, with every earlier document.
TEST_F(RocksStoreWalTest, TornTailOfAnUnacknowledgedWriteOpens) {
  const fs::path log = WriteDocsAndClose();
  fs::resize_file(log, fs::file_size(log) - 5);
  {
    store_internal::AckedSequence acked(dir_);
    auto seq = acked.Read();
    ASSERT_TRUE(seq.ok() && seq->has_value());
    ASSERT_TRUE(acked.Start(**seq - 1).ok());  // as if the process died before the last answer
  }
  const std::set<uint64_t> got = Present(/*accept_wal_loss=*/false);
  EXPECT_EQ(got.size(), kWalDocs - 1);
  ExpectPrefix(got);
}

// The same tear of an acknowledged write is a loss, and is refused.
TEST_F(RocksStoreWalTest, TornTailOfAnAcknowledgedWriteRefusesToOpen) {
  const fs::path log = WriteDocsAndClose();
  fs::resize_file(log, fs::file_size(log) - 5);
  ExpectRefused();
}

// A store that is not synced keeps no record (its log may lag the record
// after a power cut): it removes one left by a synced run.
TEST_F(RocksStoreWalTest, UnsyncedStoreKeepsNoRecord) {
  WriteDocsAndClose();
  ASSERT_TRUE(fs::exists(fs::path(dir_) / "ACKED"));
  RocksStoreOptions o;
  o.sync = false;
  Open(o);
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "ACKED"));
}

// ---- a new store only when asked; damaged MANIFEST, CURRENT, table files ------
// (issue 15). A store is created only with create_if_missing (`serve --init`);
// every damage below is refused at open or reported by the start-up scan
// (ListNamespaces + Scan, what the engine does), never silent.

RocksStoreOptions NoCreate() {
  RocksStoreOptions o;
  o.create_if_missing = false;
  return o;
}

TEST_F(RocksStoreTest, EmptyDirectoryIsRefusedWithoutCreate) {
  fs::create_directories(dir_);
  auto r = OpenRocksStore(dir_, NoCreate());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound) << r.status().ToString();
  EXPECT_NE(r.status().message().find("empty"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("--init"), std::string::npos) << r.status().message();
  EXPECT_TRUE(fs::is_empty(dir_));  // nothing written
}

TEST_F(RocksStoreTest, MissingDirectoryNamesInit) {
  auto r = OpenRocksStore(dir_, NoCreate());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not exist"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("--init"), std::string::npos) << r.status().message();
}

TEST_F(RocksStoreTest, CreateMakesParentsAndThenOpensTheSameStore) {
  const std::string nested = dir_ + "/a/b";
  {
    auto r = OpenRocksStore(nested);  // create_if_missing (the library default, --init)
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE((*r)->PutNamespace("ns", "s").ok());
  }
  for (const RocksStoreOptions& o : {NoCreate(), RocksStoreOptions{}}) {  // --init on a store: harmless
    auto r = OpenRocksStore(nested, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::pair<std::string, std::string>> list;
    ASSERT_TRUE((*r)->ListNamespaces(&list).ok());
    EXPECT_EQ(list.size(), 1u);
  }
}

TEST_F(RocksStoreTest, DirectoryOfOtherFilesIsRefusedEvenWithCreate) {
  fs::create_directories(dir_);
  { std::ofstream(dir_ + "/notes.txt") << "mine"; }
  for (const RocksStoreOptions& o : {NoCreate(), RocksStoreOptions{}}) {
    auto r = OpenRocksStore(dir_, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kFailedPrecondition) << r.status().ToString();
    EXPECT_NE(r.status().message().find("not a neardup store"), std::string::npos);
    EXPECT_NE(r.status().message().find("notes.txt"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(fs::exists(dir_ + "/CURRENT"));
}

constexpr uint64_t kTableDocs = 2000;
constexpr char kTableNs[] = "tbl";

class RocksStoreDamageTest : public RocksStoreTest {
 protected:
  // Writes kTableDocs documents and reopens once: the open replays the WAL
  // into a table file (.sst). Closed at return.
  void MakeStoreWithTable() {
    {
      DocumentStore& s = Open();
      ASSERT_TRUE(s.PutNamespace(kTableNs, "settings").ok());
      std::vector<StoreWrite> writes;
      for (uint64_t n = 0; n < kTableDocs; ++n) writes.push_back(Put(kTableNs, MakeDoc(Id("d", n), n, 100)));
      ASSERT_TRUE(s.Apply(writes).ok());
    }
    Open(NoCreate());
    store_.reset();
    ASSERT_FALSE(Files(".sst").empty()) << "no table file after reopening";
  }

  std::vector<fs::path> Files(const std::string& ext_or_prefix) const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (e.path().extension() == ext_or_prefix || name.starts_with(ext_or_prefix)) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // The largest table file (the one holding the documents).
  fs::path Table() const {
    fs::path best;
    for (const fs::path& p : Files(".sst")) {
      if (best.empty() || fs::file_size(p) > fs::file_size(best)) best = p;
    }
    return best;
  }

  fs::path Manifest() const {
    const auto m = Files("MANIFEST-");
    EXPECT_EQ(m.size(), 1u);
    return m.empty() ? fs::path() : m.back();
  }

  // Opens without creating and reads everything as the engine's start-up
  // does; the first error, or OK with every document.
  Status StartUp() {
    store_.reset();
    auto r = OpenRocksStore(dir_, NoCreate());
    if (!r.ok()) return r.status();
    store_ = std::move(r).value();
    std::vector<std::pair<std::string, std::string>> list;
    NEARDUP_RETURN_IF_ERROR(store_->ListNamespaces(&list));
    size_t docs = 0;
    for (const auto& [ns, settings] : list) {
      NEARDUP_RETURN_IF_ERROR(store_->Scan(ns, [&](StoredDocument&&) {
        ++docs;
        return Status::OK();
      }));
    }
    if (docs != kTableDocs) return Status::Internal("silent loss: " + std::to_string(docs) + " documents");
    return Status::OK();
  }

  // Refused (or reported) as damage naming `file`; never "not a neardup store".
  void ExpectDamage(const fs::path& file, const std::string& kind) {
    for (int attempt = 0; attempt < 2; ++attempt) {  // a failed open changes nothing
      const Status st = StartUp();
      ASSERT_FALSE(st.ok()) << "damage to " << file << " went unnoticed";
      EXPECT_EQ(st.code(), Status::Code::kCorruption) << st.ToString();
      const std::string& m = st.message();
      EXPECT_NE(m.find(file.stem().string()), std::string::npos) << m;  // a table may be named NNNNNN.ldb
      EXPECT_NE(m.find(kind), std::string::npos) << m;
      EXPECT_NE(m.find("lost"), std::string::npos) << m;
      EXPECT_EQ(m.find("not a neardup store"), std::string::npos) << m;
    }
    store_.reset();
  }
};

TEST_F(RocksStoreDamageTest, IntactStoreStartsWithEveryDocument) {
  MakeStoreWithTable();
  const Status st = StartUp();
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST_F(RocksStoreDamageTest, TableFileTruncated) {
  MakeStoreWithTable();
  const fs::path t = Table();
  fs::resize_file(t, fs::file_size(t) / 2);
  ExpectDamage(t, "table file");
}

TEST_F(RocksStoreDamageTest, TableFileBytesFlipped) {
  MakeStoreWithTable();
  const fs::path t = Table();
  FlipBytes(t, fs::file_size(t) / 3, 16);  // in a data block
  ExpectDamage(t, "table file");
}

TEST_F(RocksStoreDamageTest, TableFileDeleted) {
  MakeStoreWithTable();
  const fs::path t = Table();
  fs::remove(t);
  ExpectDamage(t, "table file (.sst) is missing");
}

TEST_F(RocksStoreDamageTest, ManifestTruncated) {
  MakeStoreWithTable();
  const fs::path m = Manifest();
  fs::resize_file(m, fs::file_size(m) / 2);
  ExpectDamage(m, "MANIFEST");
}

TEST_F(RocksStoreDamageTest, ManifestBytesFlipped) {
  MakeStoreWithTable();
  const fs::path m = Manifest();
  FlipBytes(m, fs::file_size(m) / 2, 16);
  ExpectDamage(m, "MANIFEST");
}

TEST_F(RocksStoreDamageTest, ManifestDeleted) {
  MakeStoreWithTable();
  const fs::path m = Manifest();
  fs::remove(m);
  ExpectDamage(m, "MANIFEST is missing");
}

TEST_F(RocksStoreDamageTest, CurrentTruncated) {
  MakeStoreWithTable();
  fs::resize_file(fs::path(dir_) / "CURRENT", 0);
  ExpectDamage(fs::path(dir_) / "CURRENT", "CURRENT");
}

TEST_F(RocksStoreDamageTest, CurrentBytesFlipped) {
  MakeStoreWithTable();
  FlipBytes(fs::path(dir_) / "CURRENT", 4, 4);
  ExpectDamage(fs::path(dir_) / "CURRENT", "CURRENT");
}

// A MANIFEST cut exactly at a record boundary cannot be told from a shorter
// one; if what is left lists nothing, the store opens empty: refused, not
// made a new store. (An empty RocksDB database with a CURRENT is that state.)
TEST_F(RocksStoreDamageTest, DatabaseThatOpensEmptyIsRefused) {
  RawPut({});
  auto r = OpenRocksStore(dir_, NoCreate());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << r.status().ToString();
  EXPECT_NE(r.status().message().find("opened empty"), std::string::npos) << r.status().message();
  r = OpenRocksStore(dir_);  // --init does not make it a new store either
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << r.status().ToString();
}

// A table file the MANIFEST does not list (what a MANIFEST that lost records
// at a boundary leaves, and what a crash in a flush leaves) is named on stderr.
TEST_F(RocksStoreDamageTest, TableFileNotInTheManifestIsReported) {
  MakeStoreWithTable();
  const fs::path orphan = fs::path(dir_) / "000005.sst";
  ASSERT_FALSE(fs::exists(orphan));
  fs::copy_file(Table(), orphan);
  ::testing::internal::CaptureStderr();
  const Status st = StartUp();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(st.ok()) << st.ToString();  // the listed tables are intact
  EXPECT_NE(err.find("000005.sst is not listed in the MANIFEST"), std::string::npos) << err;
}

// RocksDB alone would start a new store here and delete every table file.
TEST_F(RocksStoreDamageTest, CurrentDeletedIsRefusedEvenWithCreate) {
  MakeStoreWithTable();
  const fs::path table = Table();
  fs::remove(fs::path(dir_) / "CURRENT");
  ExpectDamage(fs::path(dir_) / "CURRENT", "CURRENT");
  auto r = OpenRocksStore(dir_);  // create_if_missing, i.e. --init
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << r.status().ToString();
  EXPECT_TRUE(fs::exists(table)) << "the documents' table file was deleted";
}

// Every Apply acknowledged by a process killed with SIGKILL is there after
// reopening (see kKillChildHook for the child side).
TEST_F(RocksStoreTest, AcknowledgedWritesSurviveSigkill) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  // Prepare the child's environment before fork: after fork only
  // async-signal-safe calls are allowed until exec.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, kChildEnv, std::strlen(kChildEnv)) != 0) env_strings.emplace_back(*e);
  }
  env_strings.push_back(std::string(kChildEnv) + "=" + std::to_string(fds[1]) + ":" + dir_);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  char arg0[] = "neardup_tests_kill_child";
  char* argv[] = {arg0, nullptr};

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    execve("/proc/self/exe", argv, envp.data());
    _exit(127);
  }
  close(fds[1]);

  std::vector<uint64_t> acked;
  std::string buf;
  auto read_some = [&](int timeout_ms) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    char chunk[4096];
    const ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
    while (buf.size() >= 8) {
      uint64_t v;
      std::memcpy(&v, buf.data(), 8);
      acked.push_back(v);
      buf.erase(0, 8);
    }
    return true;
  };
  using Clock = std::chrono::steady_clock;
  // Wait (generously) for the child to start acknowledging, then let it run ~200 ms.
  int wstatus = 0;
  bool reaped = false;
  const auto start_deadline = Clock::now() + std::chrono::seconds(30);
  while (acked.empty() && Clock::now() < start_deadline) {
    if (!read_some(100) && waitpid(pid, &wstatus, WNOHANG) == pid) {
      reaped = true;
      break;
    }
  }
  const auto kill_at = Clock::now() + std::chrono::milliseconds(200);
  while (!reaped && Clock::now() < kill_at) read_some(10);
  if (!reaped) {
    kill(pid, SIGKILL);
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  }
  while (read_some(1000)) {
  }  // numbers written just before the kill were acknowledged too
  close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
      << "child ended on its own, status " << wstatus;
  ASSERT_FALSE(acked.empty()) << "child acknowledged nothing";
  EXPECT_TRUE(buf.empty());

  RocksStoreOptions o;
  o.create_if_missing = false;
  DocumentStore& s = Open(o);
  for (size_t i = 0; i < acked.size(); ++i) {
    ASSERT_EQ(acked[i], i);
    StoredDocument got;
    Status st = s.Get(kKillNs, KillDocId(i), &got);
    ASSERT_TRUE(st.ok()) << "acknowledged doc " << i << " of " << acked.size() << ": " << st.ToString();
    EXPECT_TRUE(SameDoc(got, MakeDoc(KillDocId(i), i)));
  }
  // At most one write was applied but not yet acknowledged when the kill came.
  const size_t stored = ScanAll(kKillNs).size();
  EXPECT_GE(stored, acked.size());
  EXPECT_LE(stored, acked.size() + 1);
  std::cout << "[          ] child acknowledged " << acked.size() << " synced Applies before SIGKILL\n";
}

}  // namespace
}  // namespace neardup
