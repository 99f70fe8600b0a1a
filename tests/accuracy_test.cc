// Pins the accuracy of the default policy on the checked-in labeled sample
// (data/sample/eval_small.jsonl, made by scripts/prepare_eval.py --sample),
// so that a regression in normalization, fingerprints, sketches or the
// decision rule shows in CI. The metric is the one of `neardup eval`
// (docs/ACCURACY.md): documents decided in order; a document is a positive
// when an earlier document has its family; a flagged duplicate is a TP when
// the kept document it points at has its family, else an FP; a positive that
// is not a TP is an FN.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "neardup/dedup/dedup.h"
#include "neardup/dedup/exact_stream.h"
#include "neardup/text/shingles.h"

namespace neardup {
namespace {

const std::string kSample = std::string(NEARDUP_SOURCE_DIR) + "/data/sample/eval_small.jsonl";

// F1 of the default policy (similarity >= 0.7 on character trigrams, issue
// 14) per bucket on the sample against the family labels, as measured on
// 2026-11-24 (`neardup eval --truth family --threshold 0.7`): zh-short 0.6818
// (R 0.5172), zh-long 0.9787, en-short 0.9111 (R 0.8366), en-long 1; every
// bucket at precision 1. Floors: those minus a margin of about one error (a
// long bucket has 24 positives, one miss costs 0.02 of F1; a short bucket
// about 0.005). The misses are heavily edited short reposts whose similarity
// is below 0.7: by the definition not near-duplicates at that threshold. The
// issue's F1 >= 0.97 on the synthetic buckets holds against the exact truth
// at the default threshold, and against the family labels at a threshold
// of 0.3 (DefinitionAndFamiliesOnTheSample, docs/ACCURACY.md section 6).
constexpr double kFloorZhShort = 0.675;
constexpr double kFloorZhLong = 0.955;
constexpr double kFloorEnShort = 0.905;
constexpr double kFloorEnLong = 0.975;

// The seed's plain method on the same sample, measured: zh-short 0.3889,
// zh-long 0.7692, en-short 0.3306, en-long 0.8000. The default policy must
// stay ahead of it by at least this much per bucket (measured leads under
// the new default: zh-short 0.293, en-short 0.580, zh-long 0.210, en-long
// 0.200).
constexpr double kMinLeadShort = 0.25;
constexpr double kMinLeadLong = 0.15;

struct Doc {
  std::string text, family, bucket;
};

std::vector<Doc> LoadSample() {
  std::ifstream in(kSample);
  EXPECT_TRUE(in.good()) << kSample;
  std::vector<Doc> docs;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    docs.push_back(Doc{j["text"].get<std::string>(), j["family"].dump(), j["bucket"].get<std::string>()});
  }
  return docs;
}

struct Counts {
  int docs = 0, positives = 0, tp = 0, fp = 0, fn = 0;
  double Precision() const { return tp + fp ? static_cast<double>(tp) / (tp + fp) : 1.0; }
  double Recall() const { return tp + fn ? static_cast<double>(tp) / (tp + fn) : 1.0; }
  double F1() const {
    const double p = Precision(), r = Recall();
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
  }
};

std::map<std::string, Counts> Evaluate(const std::vector<Doc>& docs, const DedupOptions& options) {
  auto d = std::move(Deduplicator::Create(options)).value();
  std::vector<std::string_view> texts;
  for (const Doc& doc : docs) texts.push_back(doc.text);
  std::vector<DedupDecision> out;
  EXPECT_TRUE(d->ProcessBatch(texts, &out, 2).ok());
  std::map<std::string, Counts> by_bucket;
  std::unordered_map<std::string, int> seen;
  for (size_t i = 0; i < docs.size(); ++i) {
    Counts& c = by_bucket[docs[i].bucket];
    ++c.docs;
    const bool positive = seen[docs[i].family]++ > 0;
    c.positives += positive;
    bool right = false;
    if (out[i].duplicate) {
      right = docs[out[i].duplicate_of].family == docs[i].family;
      ++(right ? c.tp : c.fp);
    }
    if (positive && !right) ++c.fn;
  }
  return by_bucket;
}

TEST(Accuracy, SampleHasEveryBucket) {
  const auto docs = LoadSample();
  ASSERT_GT(docs.size(), 800u);
  std::map<std::string, int> n;
  for (const Doc& d : docs) ++n[d.bucket];
  for (const char* b : {"zh-short", "zh-long", "en-short", "en-long"}) EXPECT_GE(n[b], 40) << b;
}

TEST(Accuracy, DefaultPolicyOnTheSample) {
  const auto docs = LoadSample();
  const auto result = Evaluate(docs, DedupOptions{});
  // Measured when the sample was made (docs/ACCURACY.md) minus a small margin:
  // lower means a regression; much higher means the sample or the rule
  // changed and these numbers (and the docs) need an update.
  const std::map<std::string, double> floor = {
      {"zh-short", kFloorZhShort}, {"zh-long", kFloorZhLong}, {"en-short", kFloorEnShort}, {"en-long", kFloorEnLong}};
  for (const auto& [bucket, min_f1] : floor) {
    const Counts& c = result.at(bucket);
    std::printf("%-8s docs %4d positives %4d  P %.4f R %.4f F1 %.4f\n", bucket.c_str(), c.docs, c.positives,
                c.Precision(), c.Recall(), c.F1());
    EXPECT_GE(c.F1(), min_f1) << bucket;
    EXPECT_DOUBLE_EQ(c.Precision(), 1.0) << bucket;
  }
}

// The synthetic target, F1 >= 0.97 per bucket: against the exact
// stream outcome at the default threshold (what the default promises), and
// against the edit families at threshold 0.3 (what a user who wants every
// edited repost flagged sets; measured 0.978 / 1 / 0.990 / 1).
TEST(Accuracy, DefinitionAndFamiliesOnTheSample) {
  const auto docs = LoadSample();
  DedupOptions options;
  std::map<std::string, Counts> exact;
  {
    auto d = std::move(Deduplicator::Create(options)).value();
    ExactStream truth(options.recheck.threshold);
    std::vector<uint64_t> set;
    for (const Doc& doc : docs) {
      ShingleHashes(doc.text, options.recheck.shingle_size, &set);
      const bool positive = truth.Add(set).duplicate;
      const bool flagged = d->ProcessSignature(d->Signature(doc.text)).value().duplicate;
      Counts& c = exact[doc.bucket];
      ++c.docs;
      c.positives += positive;
      c.tp += flagged && positive;
      c.fp += flagged && !positive;
      c.fn += positive && !flagged;
    }
  }
  options.recheck.threshold = 0.3;
  const auto families = Evaluate(docs, options);
  for (const char* b : {"zh-short", "zh-long", "en-short", "en-long"}) {
    EXPECT_GT(exact.at(b).positives, 10) << b;
    EXPECT_GE(exact.at(b).F1(), 0.97) << b << " against the exact truth";
    EXPECT_GE(families.at(b).F1(), 0.97) << b << " against the families at threshold 0.3";
  }
}

TEST(Accuracy, PlainMethodIsWorseInEveryBucket) {
  // The seed's method (ICU words, 64 bits, k = 3, no re-check) misses most
  // edited short texts and a third of the edited long ones; if the lead
  // shrinks, either the default policy regressed or the sample lost its
  // point.
  const auto docs = LoadSample();
  DedupOptions plain;
  plain.fingerprint.tokenizer = TokenizerKind::kIcuWords;
  plain.recheck.enabled = false;
  const auto p = Evaluate(docs, plain);
  const auto d = Evaluate(docs, DedupOptions{});
  for (const char* b : {"zh-short", "en-short", "zh-long", "en-long"}) {
    const bool is_short = std::string(b).ends_with("short");
    std::printf("%-8s plain F1 %.4f default F1 %.4f\n", b, p.at(b).F1(), d.at(b).F1());
    EXPECT_GT(d.at(b).F1(), p.at(b).F1() + (is_short ? kMinLeadShort : kMinLeadLong)) << b;
    // Plain never flags a wrong family on the sample: its loss is recall.
    EXPECT_GE(p.at(b).Precision(), 0.99) << b;
    EXPECT_LT(p.at(b).Recall(), is_short ? 0.3 : 0.75) << b;
  }
}

TEST(Accuracy, EvalCommandReportsTheSameNumbers) {
  // `neardup eval --truth family` scores the same decisions with the same
  // metric as Evaluate() above: the neardup policy at the default threshold
  // is DedupOptions{}, the plain policy is the seed's rule.
  const std::string json_path = ::testing::TempDir() + "/neardup_eval_sample.json";
  const std::string cmd = std::string(NEARDUP_CLI_PATH) + " eval --input " + kSample +
                          " --truth family --threshold 0.7 --policy all --json " + json_path + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(json_path);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["truth"], "family");
  ASSERT_EQ(j["thresholds"].size(), 1u);
  const auto& t = j["thresholds"][0];
  EXPECT_DOUBLE_EQ(t["threshold"].get<double>(), 0.7);
  const auto docs = LoadSample();
  DedupOptions plain;
  plain.fingerprint.tokenizer = TokenizerKind::kIcuWords;
  plain.recheck.enabled = false;
  const std::map<std::string, std::map<std::string, Counts>> mine = {{"neardup", Evaluate(docs, DedupOptions{})},
                                                                     {"plain", Evaluate(docs, plain)}};
  for (const auto& [policy, by_bucket] : mine) {
    for (const auto& [bucket, c] : by_bucket) {
      const auto& b = t["policies"][policy]["buckets"][bucket];
      EXPECT_EQ(b["tp"].get<int>(), c.tp) << policy << " " << bucket;
      EXPECT_EQ(b["fp"].get<int>(), c.fp) << policy << " " << bucket;
      EXPECT_EQ(b["fn"].get<int>(), c.fn) << policy << " " << bucket;
      EXPECT_EQ(b["positives"].get<int>(), c.positives) << policy << " " << bucket;
      EXPECT_EQ(b["docs"].get<int>(), c.docs) << policy << " " << bucket;
    }
  }
  EXPECT_TRUE(t["policies"].contains("minhash"));
  std::remove(json_path.c_str());
}

}  // namespace
}  // namespace neardup
