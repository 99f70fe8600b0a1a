// The re-check policy in the Redis Cluster store: the same stream through the
// embedded store (LocalEngine -> NearDupSet) and through RedisClusterEngine
// gets the same decisions, matches, distances and similarities; the pairs
// only anchors find and only the re-check rejects; per-namespace settings
// (PUT), the layout's limit on short_k, and metadata written before sketches.
// Live local cluster (tests/redis_test_cluster.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "neardup/text/fingerprint.h"
#include "neardup/text/shingles.h"
#include "neardup/engine/local_engine.h"
#include "neardup/store/rocks_store.h"
#include "neardup/redis/redis_engine.h"
#include "redis/redis_cluster.h"
#include "util/redis_test_cluster.h"

namespace neardup {
namespace {

namespace fs = std::filesystem;
using testing::LocalRedisCluster;
using testing::SharedRedisClusterTest;

// An edited repost (one word changed): similarity 31/39 = 0.7949 >= the
// default threshold 0.7, fingerprints 8 bits apart: found only through anchors.
const char* kPost = "今天北京的天气非常好，我们一起去公园散步吧，顺便看看新开的图书馆和博物馆。";
const char* kRepost = "今天北京的天气特别好，我们一起去公园散步吧，顺便看看新开的图书馆和博物馆。";
constexpr int kRepostDistance = 8;
// The same words in another order: equal fingerprints, shingle Jaccard 0.26.
const char* kWords = "go to it as we do so on my own by an ox";
const char* kShuffled = "an ox by my own on so do we as it to go";

struct Doc {
  std::string id, text;
};

class RedisRecheckTest : public SharedRedisClusterTest {
 protected:

  void SetUp() override {
    ASSERT_NE(cluster_, nullptr) << "could not start a local redis cluster";
    RedisEngineOptions ro;
    ro.uri = cluster_->uri() + "?layout=pigeonhole";
    ro.lease_ms = 300;
    auto r = OpenRedisClusterEngine(ro);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    redis_ = std::move(r).value();
    local_ = testing::OpenReferenceEngine("redis_recheck_", &dir_);
    ASSERT_NE(local_, nullptr);
  }
  void TearDown() override {
    local_.reset();
    redis_.reset();
    fs::remove_all(dir_);
  }

  static std::string UniqueNs(const std::string& base) {
    static std::atomic<int> n{0};
    return base + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
  }

  // Creates `ns` with `settings` in both engines.
  void Create(const std::string& ns, const NamespaceSettings& settings) {
    ASSERT_TRUE(local_->PutNamespace(ns, settings, nullptr).ok());
    const Status s = redis_->PutNamespace(ns, settings, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // Checks `docs` in order through both engines and requires the same
  // answers. Returns the Redis answers. With the re-check off the cluster
  // store writes no sketches, so its similarity comes from the distance
  // (docs/cluster.md) while the embedded store still estimates it from the
  // sketches it keeps anyway: `similarities` = false skips that field.
  std::vector<CheckOutcome> Both(const std::string& ns, const std::vector<Doc>& docs,
                                 CheckMode mode = CheckMode::kCheckAndInsert, bool similarities = true) {
    std::vector<CheckOutcome> out;
    for (const Doc& d : docs) {
      auto l = local_->Check(ns, {d.id, d.text, std::nullopt}, mode);
      auto r = redis_->Check(ns, {d.id, d.text, std::nullopt}, mode);
      EXPECT_TRUE(l.ok() && r.ok()) << d.id << ": " << l.status().ToString() << " / " << r.status().ToString();
      if (!l.ok() || !r.ok()) return out;
      ExpectSame(*l, *r, d.id, similarities);
      out.push_back(*r);
    }
    return out;
  }

  static void ExpectSame(const CheckOutcome& l, const CheckOutcome& r, const std::string& what, bool similarities) {
    EXPECT_EQ(l.stored, r.stored) << what;
    EXPECT_EQ(l.duplicate, r.duplicate) << what;
    EXPECT_EQ(l.fingerprint, r.fingerprint) << what;
    ASSERT_EQ(l.matches.size(), r.matches.size()) << what;
    for (size_t i = 0; i < l.matches.size(); ++i) {
      EXPECT_EQ(l.matches[i].id, r.matches[i].id) << what << " match " << i;
      EXPECT_EQ(l.matches[i].distance, r.matches[i].distance) << what << " match " << i;
      EXPECT_EQ(l.matches[i].exact, r.matches[i].exact) << what << " match " << i;
      if (similarities) {
        EXPECT_DOUBLE_EQ(l.matches[i].similarity, r.matches[i].similarity) << what << " match " << i;
      }
    }
  }

  std::unique_ptr<Engine> redis_, local_;
  fs::path dir_;
};


std::vector<Doc> LoadSample() {
  std::ifstream in(std::string(NEARDUP_SOURCE_DIR) + "/data/sample/eval_small.jsonl");
  std::vector<Doc> docs;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    docs.push_back(Doc{j["id"].get<std::string>(), j["text"].get<std::string>()});
  }
  return docs;
}

TEST_F(RedisRecheckTest, LabelledSampleDecidedAsTheEmbeddedStore) {
  // data/sample/eval_small.jsonl (zh/en, short/long, edited reposts): every
  // answer equal, with the default policy and with the plain rule.
  const std::vector<Doc> docs = LoadSample();
  ASSERT_GT(docs.size(), 800u);
  for (const bool enabled : {true, false}) {
    NamespaceSettings s;
    s.recheck.enabled = enabled;
    const std::string ns = UniqueNs(enabled ? "sample" : "sample-plain");
    Create(ns, s);
    const auto out = Both(ns, docs, CheckMode::kCheckAndInsert, enabled);
    ASSERT_EQ(out.size(), docs.size());
    int dups = 0, beyond_k = 0;
    for (const CheckOutcome& o : out) {
      dups += o.duplicate;
      beyond_k += o.duplicate && o.matches[0].distance > 3;
    }
    std::printf("[          ] recheck %s: %d of %zu duplicates, %d of them more than 3 bits away\n",
                enabled ? "on" : "off", dups, docs.size(), beyond_k);
    // The stream holds what only the policy finds (anchors: short_k = k here).
    if (enabled) {
      EXPECT_GT(beyond_k, 50);
    } else {
      EXPECT_EQ(beyond_k, 0);
    }
  }
}

TEST_F(RedisRecheckTest, PairsOnlyAnchorsFindAndOnlyTheRecheckRejects) {
  std::mt19937_64 rng(3);
  const auto wide_pair = testing::ShortNearDuplicateGroup(rng, 2, testing::ShortGroupKind::kWideRadiusOnly);
  ASSERT_EQ(wide_pair.size(), 2u);
  struct Case {
    const char* name;
    NamespaceSettings settings;
    bool repost_dup, shuffled_dup, wide_dup;
  };
  NamespaceSettings plain, no_anchors, wide, all_stop;
  plain.recheck.enabled = false;
  no_anchors.recheck.anchors = 0;
  wide.recheck.anchors = 0;
  wide.recheck.short_k = 5;
  all_stop.recheck.anchor_max_postings = 0;  // every anchor a stop key
  const std::vector<Case> cases = {
      {"default", NamespaceSettings{}, true, false, true},  // the short pair also shares anchors
      {"plain", plain, false, true, false},
      {"anchors off", no_anchors, false, false, false},
      {"anchors off, short_k 5", wide, false, false, true},
      {"anchors all stop keys", all_stop, false, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string ns = UniqueNs("pairs");
    Create(ns, c.settings);
    const auto out = Both(ns, {{"post", kPost},
                               {"repost", kRepost},
                               {"words", kWords},
                               {"shuffled", kShuffled},
                               {"w1", wide_pair[0]},
                               {"w2", wide_pair[1]}},
                          CheckMode::kCheckAndInsert, c.settings.recheck.enabled);
    ASSERT_EQ(out.size(), 6u);
    EXPECT_EQ(out[1].duplicate, c.repost_dup);
    EXPECT_EQ(out[3].duplicate, c.shuffled_dup);
    EXPECT_EQ(out[5].duplicate, c.wide_dup);
    if (c.repost_dup && out[1].duplicate) {
      EXPECT_EQ(out[1].matches[0].id, "post");
      EXPECT_EQ(out[1].matches[0].distance, kRepostDistance);
      std::vector<uint64_t> a, b;
      ShingleHashes(kPost, 3, &a);
      ShingleHashes(kRepost, 3, &b);
      EXPECT_DOUBLE_EQ(out[1].matches[0].similarity, Jaccard(a, b));
      EXPECT_TRUE(out[1].matches[0].similarity_exact);
    }
  }
}

TEST_F(RedisRecheckTest, SettingsTakeEffectPerNamespaceAndOnPut) {
  // "off" gets the plain rule by a PUT while still empty; "on" keeps the defaults.
  const std::string ns = UniqueNs("put"), off_ns = UniqueNs("put-off");
  Create(ns, NamespaceSettings{});
  Create(off_ns, NamespaceSettings{});
  NamespaceSettings off;
  off.recheck.enabled = false;
  ASSERT_TRUE(redis_->PutNamespace(off_ns, off, nullptr).ok());
  ASSERT_TRUE(local_->PutNamespace(off_ns, off, nullptr).ok());
  for (const std::string& n : {ns, off_ns}) Both(n, {{"post", kPost}, {"words", kWords}});
  auto query = [&](const std::string& n, const char* text) {
    return Both(n, {{"q", text}}, CheckMode::kQueryOnly, false).at(0).duplicate;
  };
  EXPECT_TRUE(query(ns, kRepost));
  EXPECT_FALSE(query(ns, kShuffled));
  EXPECT_FALSE(query(off_ns, kRepost));
  EXPECT_TRUE(query(off_ns, kShuffled));
  // Holding documents, both engines refuse to switch the rule (409) and keep deciding as before.
  EXPECT_EQ(redis_->PutNamespace(off_ns, NamespaceSettings{}, nullptr).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(local_->PutNamespace(off_ns, NamespaceSettings{}, nullptr).code(), Status::Code::kFailedPrecondition);
  EXPECT_FALSE(query(off_ns, kRepost));
  EXPECT_TRUE(query(off_ns, kShuffled));

  // short_k searches the same tables as k: not past the layout's radius.
  NamespaceSettings s;
  s.recheck.short_k = 6;
  EXPECT_EQ(redis_->PutNamespace(ns, s, nullptr).code(), Status::Code::kFailedPrecondition);
  // A namespace created with it gets a layout for it.
  const std::string ns2 = UniqueNs("put-wide");
  s.recheck.short_k = 5;
  ASSERT_TRUE(redis_->PutNamespace(ns2, s, nullptr).ok());
  s.k = 5;
  EXPECT_TRUE(redis_->PutNamespace(ns2, s, nullptr).ok());
  s.recheck.short_k = 6;
  EXPECT_EQ(redis_->PutNamespace(ns2, s, nullptr).code(), Status::Code::kFailedPrecondition);
}

TEST_F(RedisRecheckTest, MetadataWithoutSketchIsMatchedByDistance) {
  // Documents stored before sketches were written have metadata without
  // them: the pair rule then decides by distance <= k, as NearDupSet does
  // for documents without a sketch.
  const std::string ns = UniqueNs("legacy");
  ASSERT_TRUE(redis_->Check(ns, {"post", kPost, std::nullopt}, CheckMode::kCheckAndInsert)->stored);
  ASSERT_TRUE(redis_->Check(ns, {"words", kWords, std::nullopt}, CheckMode::kCheckAndInsert)->stored);
  auto repost = redis_->Check(ns, {"q", kRepost, std::nullopt}, CheckMode::kQueryOnly);
  auto shuffled = redis_->Check(ns, {"q", kShuffled, std::nullopt}, CheckMode::kQueryOnly);
  ASSERT_TRUE(repost.ok() && shuffled.ok());
  EXPECT_TRUE(repost->duplicate);
  EXPECT_FALSE(shuffled->duplicate);

  // Rewrite both metadata keys the way the previous version wrote them.
  RedisClusterOptions co;
  co.seeds = cluster_->seeds();
  auto client = RedisClusterClient::Connect(co);
  ASSERT_TRUE(client.ok());
  auto record = (*client)->Command({"GET", "nd:ns:" + ns});
  ASSERT_TRUE(record.ok() && record->is_string());
  const std::string P = ns + ":" + nlohmann::json::parse(record->str)["gen"].get<std::string>();
  for (const char* id : {"post", "words"}) {
    auto iid = (*client)->Command({"GET", "nd:id:" + P + ":" + id});
    ASSERT_TRUE(iid.ok() && iid->is_string()) << id;
    const std::string key = "nd:m:" + P + ":{" + iid->str + "}";
    auto meta = (*client)->Command({"GET", key});
    ASSERT_TRUE(meta.ok() && meta->is_string());
    const size_t mark = meta->str.find('\xFF');
    ASSERT_NE(mark, std::string::npos) << "the sketch rides in the metadata";
    ASSERT_TRUE((*client)->Command({"SET", key, meta->str.substr(0, mark), "KEEPTTL"}).ok());
  }

  repost = redis_->Check(ns, {"q", kRepost, std::nullopt}, CheckMode::kQueryOnly);
  shuffled = redis_->Check(ns, {"q", kShuffled, std::nullopt}, CheckMode::kQueryOnly);
  ASSERT_TRUE(repost.ok() && shuffled.ok());
  EXPECT_FALSE(repost->duplicate) << kRepostDistance << " bits apart, no sketch: beyond k";
  ASSERT_TRUE(shuffled->duplicate) << "0 bits apart, no sketch: within k";
  EXPECT_EQ(shuffled->matches[0].id, "words");
  EXPECT_EQ(shuffled->matches[0].distance, 0);
  EXPECT_EQ(shuffled->matches[0].similarity, SimilarityFromDistance(0));
  EXPECT_FALSE(shuffled->matches[0].exact);
  auto info = redis_->GetDocument(ns, "post");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->id, "post");
}

}  // namespace
}  // namespace neardup
