// A live local Redis Cluster (3 masters + 3 replicas) for tests, started by
// scripts/redis_cluster.sh on a port base derived from the pid (tests run in
// parallel under ctest -j2, one process per test) and stopped by pid when the
// object dies. Start() tries a few bases before giving up.
#ifndef NEARDUP_TESTS_REDIS_TEST_CLUSTER_H_
#define NEARDUP_TESTS_REDIS_TEST_CLUSTER_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "neardup/text/fingerprint.h"
#include "neardup/dedup/near_dup_set.h"
#include "neardup/store/rocks_store.h"

namespace neardup::testing {

// The embedded store that cluster tests compare against: an unsynced local
// engine (decisions are compared, not durability) in a scratch directory
// named after the running test, emptied first. nullptr if it cannot open
// (the test's failure says why).
inline std::unique_ptr<Engine> OpenReferenceEngine(const std::string& prefix, std::filesystem::path* dir) {
  *dir = std::filesystem::path(::testing::TempDir()) /
         (prefix + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(*dir);
  LocalEngineOptions lo;
  lo.data_dir = dir->string();
  lo.sync = false;
  auto l = OpenLocalEngine(lo);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? std::move(l).value() : nullptr;
}

class LocalRedisCluster {
 public:
  // nullptr if no cluster could be started (the log says why).
  static std::unique_ptr<LocalRedisCluster> Start() {
    for (int attempt = 0; attempt < 4; ++attempt) {
      // Ports 10000..15999 (bus ports 20000..25999): below the usual ephemeral range.
      const int base = 10000 + static_cast<int>((static_cast<unsigned>(getpid()) * 7919u + attempt * 131u) % 1000u) * 6;
      std::unique_ptr<LocalRedisCluster> c(new LocalRedisCluster(base));
      if (c->Run("start")) return c;
      c->Run("stop");
      c->stopped_ = true;
    }
    return nullptr;
  }

  ~LocalRedisCluster() { Stop(); }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    Run("stop");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  int base() const { return base_; }
  std::string dir() const { return dir_; }
  std::vector<std::string> seeds() const {
    std::vector<std::string> s;
    for (int i = 0; i < 6; ++i) s.push_back("127.0.0.1:" + std::to_string(base_ + i));
    return s;
  }
  std::string uri() const {
    std::string u = "redis-cluster://";
    for (const std::string& s : seeds()) {
      if (u.back() != '/') u += ',';
      u += s;
    }
    return u;
  }
  // Starts the node on `port` again (after a kill -9) from its nodes.conf and AOF.
  bool RestartNode(int port) const {
    std::string arg = " ";
    arg += std::to_string(port);
    return Run("start-node", arg);
  }
  // The pid of the node on `port` (0 if unknown).
  pid_t Pid(int port) const {
    std::ifstream in(dir_ + "/" + std::to_string(port) + "/redis.pid");
    long pid = 0;
    in >> pid;
    return static_cast<pid_t>(pid);
  }

 private:
  explicit LocalRedisCluster(int base)
      : base_(base),
        dir_((std::filesystem::temp_directory_path() /
              ("neardup-redis-" + std::to_string(getpid()) + "-" + std::to_string(base)))
                 .string()) {}

  bool Run(const char* what, const std::string& extra = "") const {
    const std::string cmd = std::string(NEARDUP_SOURCE_DIR) + "/scripts/redis_cluster.sh " + what + " " + dir_ + " " +
                            std::to_string(base_) + extra + " >/dev/null";
    return std::system(cmd.c_str()) == 0;
  }

  int base_;
  std::string dir_;
  bool stopped_ = false;
};

// Up to `want` texts whose fingerprints are pairwise within k = 3 (so every
// pair is a near-duplicate), built from one random base.
inline std::vector<std::string> NearDuplicateGroup(std::mt19937_64& rng, size_t want) {
  static const char* words[] = {"alpha", "bravo", "charlie", "delta", "echo",  "foxtrot", "golf",  "hotel",
                                "india", "juliet", "kilo",   "lima",  "mike",  "november", "oscar", "papa",
                                "quebec", "romeo", "sierra", "tango", "umbra", "victor",  "whisky", "xray"};
  std::string base;
  for (int i = 0; i < 60; ++i) base += std::string(words[rng() % 24]) + std::to_string(rng() % 50) + " ";
  FingerprintOptions fo;
  auto fper = Fingerprinter::Create(fo);
  std::vector<std::string> group = {base};
  std::vector<uint64_t> fps = {fper->Compute(base)};
  for (int tries = 0; tries < 200 && group.size() < want; ++tries) {
    std::string v = base;
    v += std::string(words[rng() % 24]) + std::to_string(rng() % 50);
    const uint64_t f = fper->Compute(v);
    bool ok = true;
    for (uint64_t g : fps) ok = ok && HammingDistance(f, g) <= 3;
    if (ok) {
      group.push_back(v);
      fps.push_back(f);
    }
  }
  while (group.size() < want) group.push_back(base);  // identical texts are near-duplicates too
  return group;
}

enum class ShortGroupKind {
  // Every pair more than `wide` bits apart: only a shared anchor finds it.
  kAnchorsOnly,
  // Every pair more than k and at most `wide` bits apart: with anchors off,
  // only the short-text radius finds it.
  kWideRadiusOnly,
};

// Up to `want` short Chinese texts (a random base and edited copies), every
// pair a near-duplicate under the default pair rule (DecidePair) but beyond
// plain simhash's k, found only the way `kind` says. Fewer than `want` (at
// least one) when the bounded search fails.
inline std::vector<std::string> ShortNearDuplicateGroup(std::mt19937_64& rng, size_t want, ShortGroupKind kind,
                                                        int k = 3, int wide = 5) {
  static const std::u32string pool =
      U"的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都"
      U"然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回";
  static const Fingerprinter fper = std::move(Fingerprinter::Create(FingerprintOptions{})).value();
  auto to_utf8 = [](const std::u32string& u) {
    std::string out;
    for (char32_t c : u) {  // the pool is BMP CJK: three bytes each
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
    return out;
  };
  auto sig_of = [&](const std::string& text) {
    TextAnalysis a;
    fper.Analyze(text, &a);
    return MakeSignature(a, text, RecheckOptions{}.shingle_size);
  };
  auto shares_anchor = [](const DocSignature& a, const DocSignature& b) {
    for (size_t i = 0; i < 8 && i < a.sketch.anchors.size(); ++i)
      for (size_t j = 0; j < 8 && j < b.sketch.anchors.size(); ++j)
        if (a.sketch.anchors[i] == b.sketch.anchors[j]) return true;
    return false;
  };
  auto fits = [&](const DocSignature& a, const DocSignature& b) {
    const int d = HammingDistance(a.fingerprint, b.fingerprint);
    if (kind == ShortGroupKind::kAnchorsOnly ? (d <= wide || !shares_anchor(a, b)) : (d <= k || d > wide)) return false;
    return DecidePair(NearDupOptions{}, PairSide::Of(a), PairSide::Of(b), d).duplicate;
  };
  std::vector<std::string> best;
  for (int base_try = 0; base_try < 20 && best.size() < want; ++base_try) {
    std::u32string base;
    const size_t len = 24 + rng() % 16;
    for (size_t i = 0; i < len; ++i) base += pool[rng() % pool.size()];
    std::vector<std::string> group = {to_utf8(base)};
    std::vector<DocSignature> sigs = {sig_of(group[0])};
    for (int tries = 0; tries < 400 && group.size() < want; ++tries) {
      std::u32string v = base;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % v.size();
        switch (rng() % 3) {
          case 0: v[at] = pool[rng() % pool.size()]; break;
          case 1: v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), pool[rng() % pool.size()]); break;
          default: v.erase(v.begin() + static_cast<std::ptrdiff_t>(at)); break;
        }
      }
      const std::string text = to_utf8(v);
      const DocSignature s = sig_of(text);
      bool ok = true;
      for (const DocSignature& g : sigs) ok = ok && fits(s, g);
      if (ok) {
        group.push_back(text);
        sigs.push_back(s);
      }
    }
    if (group.size() > best.size()) best = group;
  }
  return best;
}

// A test suite that shares one local cluster: started before the suite's
// first test, stopped after its last (suites run one after another).
class SharedRedisClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = LocalRedisCluster::Start().release(); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  inline static LocalRedisCluster* cluster_ = nullptr;
};

}  // namespace neardup::testing

#endif  // NEARDUP_TESTS_REDIS_TEST_CLUSTER_H_
