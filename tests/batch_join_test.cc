// DecideByJoin (include/neardup/dedup/batch_join.h) against a brute-force
// oracle of the same rule: every earlier document tried as a candidate, one
// document at a time, with the kept ones tracked per document.
#include "neardup/dedup/batch_join.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dedup/sketch_record.h"
#include "util/rule_variants.h"
#include "util/sample_texts.h"
#include "util/sanitized.h"

namespace neardup {
namespace {

using testing::SampleTexts;

// Natural text (templated: many anchors become stop keys), the sample, and
// repeats made the ways reposts are: exact, with a suffix, with punctuation
// changed (equal normalized text, another sketch), and texts without
// features.
std::vector<std::string> JoinTexts(size_t per_file) {
  std::vector<std::string> texts;
  for (const char* b : {"zh-short", "en-short", "zh-long", "en-long"}) {
    std::vector<std::string> file = SampleTexts(std::string(NEARDUP_SOURCE_DIR "/data/natural/dev/") + b + ".jsonl");
    if (file.size() > per_file) file.resize(per_file);
    for (std::string& t : file) texts.push_back(std::move(t));
  }
  std::vector<std::string> sample = SampleTexts();
  if (sample.size() > per_file) sample.resize(per_file);
  for (std::string& t : sample) texts.push_back(std::move(t));
  const size_t distinct = texts.size();
  for (size_t i = 0; i < distinct / 4; ++i) {
    const std::string& t = texts[(i * 7919) % distinct];
    switch (i % 4) {
      case 0: texts.push_back(t); break;
      case 1: texts.push_back(t + " (via)"); break;
      case 2: texts.push_back(t + "!!"); break;
      default: texts.push_back(i % 8 == 3 ? "!!!" : "???"); break;
    }
  }
  return texts;
}

std::vector<DocSignature> Sign(const std::vector<std::string>& texts, const DedupOptions& options) {
  auto d = Deduplicator::Create(options);
  EXPECT_TRUE(d.ok());
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<DocSignature> sigs;
  d.value()->Analyze(views, &sigs, 2);
  return sigs;
}

// The rule of batch_join.h, spelled out document by document.
class Oracle {
 public:
  Oracle(const std::vector<DocSignature>& sigs, const DedupOptions& o) : sigs_(sigs), o_(o) {
    pair_.k = o.k;
    pair_.exact_fast_path = o.exact_fast_path;
    pair_.recheck = o.recheck;
    LiveAnchors();
  }

  std::vector<DedupDecision> Decide() {
    std::vector<DedupDecision> out(sigs_.size());
    kept_.assign(sigs_.size(), false);
    for (size_t d = 0; d < sigs_.size(); ++d) {
      const DocSignature& s = sigs_[d];
      std::optional<DuplicateMatch> m;
      if (o_.exact_fast_path || !s.has_features) m = Exact(d);
      if (!m && s.has_features) m = Near(d);
      out[d].has_features = s.has_features;
      if (m) out[d] = DuplicateDecision(*m, s.has_features);
      kept_[d] = !m;
    }
    return out;
  }

 private:
  bool Keeps(size_t d) const {
    return sigs_[d].has_sketch() && sigs_[d].num_chars <= static_cast<uint32_t>(o_.recheck.sketch_max_chars);
  }
  bool UsesAnchors(size_t d) const {
    return o_.recheck.enabled && o_.recheck.anchors > 0 && sigs_[d].has_sketch();
  }

  // Classes in order of their first document; an anchor is a stop key for
  // a class once anchor_max_postings earlier classes hold it.
  void LiveAnchors() {
    const size_t n = sigs_.size();
    probes_.resize(n);
    found_.resize(n);
    std::vector<size_t> firsts;
    std::map<uint32_t, int> holders;
    for (size_t d = 0; d < n; ++d) {
      auto same = std::find_if(firsts.begin(), firsts.end(), [&](size_t f) { return sigs_[f] == sigs_[d]; });
      if (same != firsts.end()) {
        probes_[d] = probes_[*same];
        found_[d] = found_[*same];
        continue;
      }
      firsts.push_back(d);
      if (!UsesAnchors(d)) continue;
      const int founds = std::max(o_.recheck.anchors, RecheckOptions{}.anchors);
      for (uint32_t a : sigs_[d].sketch.anchors) {
        if (holders[a] >= o_.recheck.anchor_max_postings) continue;
        if (static_cast<int>(probes_[d].size()) < o_.recheck.anchors) probes_[d].push_back(a);
        if (Keeps(d) && static_cast<int>(found_[d].size()) < founds) found_[d].push_back(a);
        if (static_cast<int>(std::max(probes_[d].size(), found_[d].size())) >= founds) break;
      }
      if (Keeps(d)) {
        for (uint32_t a : sigs_[d].sketch.anchors) ++holders[a];
      }
    }
  }

  PairDecision Rule(size_t d, size_t e, int distance) const {
    const PairSide side = sigs_[d].has_sketch() && Keeps(e) ? PairSide::Of(sigs_[e]) : PairSide{};
    return DecidePair(pair_, PairSide::Of(sigs_[d]), side, distance);
  }

  std::optional<DuplicateMatch> Exact(size_t d) const {
    for (size_t e = 0; e < d; ++e) {
      if (!kept_[e] || sigs_[e].content_hash != sigs_[d].content_hash) continue;
      const PairDecision pd = Rule(d, e, 0);
      if (pd.duplicate) return DuplicateMatch{e, 0, true, pd.similarity, pd.rechecked, pd.exact};
    }
    return std::nullopt;
  }

  bool SharesAnchor(size_t d, size_t e) const {
    if (!UsesAnchors(d)) return false;
    for (uint32_t a : probes_[d]) {
      if (std::find(found_[e].begin(), found_[e].end(), a) != found_[e].end()) return true;
    }
    return false;
  }

  std::optional<DuplicateMatch> Near(size_t d) const {
    const DocSignature& s = sigs_[d];
    const RecheckOptions& r = o_.recheck;
    const int radius = r.enabled && s.has_sketch() && IsShortText(r, s.num_chars) ? std::max(o_.k, r.short_k) : o_.k;
    std::optional<DuplicateMatch> best;
    for (size_t e = 0; e < d; ++e) {
      if (!kept_[e]) continue;
      const int distance = std::popcount(s.fingerprint ^ sigs_[e].fingerprint);
      const bool by_fingerprint = sigs_[e].has_features && distance <= radius;
      if (!by_fingerprint && !SharesAnchor(d, e)) continue;
      const PairDecision pd = Rule(d, e, distance);
      if (!pd.duplicate) continue;
      const DuplicateMatch m{e, distance, s.content_hash == sigs_[e].content_hash, pd.similarity, pd.rechecked,
                             pd.exact};
      if (!best || RanksBefore(sketch_record::RankOf(m), sketch_record::RankOf(*best), r.enabled)) best = m;
    }
    return best;
  }

  const std::vector<DocSignature>& sigs_;
  const DedupOptions o_;
  NearDupOptions pair_;
  std::vector<std::vector<uint32_t>> probes_, found_;
  std::vector<bool> kept_;
};

const std::vector<testing::RuleVariant> kVariants = testing::RuleVariants();

// Sanitizer builds run the same comparison on fewer texts.
constexpr size_t kPerFile = testing::kSanitized ? 250 : 700;

TEST(BatchJoinTest, DecidesAsTheBruteForceOracleOfItsRule) {
  const std::vector<std::string> texts = JoinTexts(kPerFile);
  for (const testing::RuleVariant& v : kVariants) {
    SCOPED_TRACE(v.name);
    DedupOptions options;
    v.set(&options);
    const std::vector<DocSignature> sigs = Sign(texts, options);
    std::vector<DedupDecision> got;
    JoinStats stats;
    ASSERT_TRUE(DecideByJoin(sigs, options, 2, &got, &stats).ok());
    const std::vector<DedupDecision> want = Oracle(sigs, options).Decide();
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0, dups = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      dups += want[i].duplicate;
      if (got[i] == want[i]) continue;
      if (++differ <= 3) {
        ADD_FAILURE() << "document " << i << ": join duplicate=" << got[i].duplicate << " of " << got[i].duplicate_of
                      << ", oracle duplicate=" << want[i].duplicate << " of " << want[i].duplicate_of;
      }
    }
    EXPECT_EQ(differ, 0u);
    EXPECT_GT(dups, got.size() / 10);
    EXPECT_LT(stats.classes, got.size());  // the repeats share classes
  }
}

// Close to the stream rule: the stop keys are the only difference.
TEST(BatchJoinTest, FindsWhatTheStreamRuleFindsWithinAFewPercent) {
  const std::vector<std::string> texts = JoinTexts(kPerFile);
  const DedupOptions options;
  const std::vector<DocSignature> sigs = Sign(texts, options);
  std::vector<DedupDecision> join;
  ASSERT_TRUE(DecideByJoin(sigs, options, 1, &join).ok());
  auto stream = Deduplicator::Create(options);
  ASSERT_TRUE(stream.ok());
  std::vector<DedupDecision> want;
  ASSERT_TRUE(stream.value()->DecideBatch(sigs, &want, 1).ok());
  size_t both = 0, join_dups = 0, stream_dups = 0;
  for (size_t i = 0; i < sigs.size(); ++i) {
    join_dups += join[i].duplicate;
    stream_dups += want[i].duplicate;
    both += join[i].duplicate && want[i].duplicate;
  }
  EXPECT_GE(both, stream_dups * 98 / 100) << join_dups << " " << stream_dups;
  EXPECT_GE(both, join_dups * 98 / 100) << join_dups << " " << stream_dups;
}

TEST(BatchJoinTest, ThreadCountsGiveIdenticalDecisions) {
  const std::vector<std::string> texts = JoinTexts(kPerFile);
  for (const testing::RuleVariant& v : {kVariants[0], kVariants[1]}) {
    SCOPED_TRACE(v.name);
    DedupOptions options;
    v.set(&options);
    const std::vector<DocSignature> sigs = Sign(texts, options);
    std::vector<DedupDecision> reference;
    ASSERT_TRUE(DecideByJoin(sigs, options, 1, &reference).ok());
    for (int threads : {2, 3}) {
      std::vector<DedupDecision> got;
      ASSERT_TRUE(DecideByJoin(sigs, options, threads, &got).ok());
      EXPECT_EQ(got, reference) << "threads=" << threads;
    }
  }
}

// A later copy of a document that was a duplicate is decided against the
// documents kept since its first copy too: here one nearer than the first
// copy's match, found by fingerprint only (signatures without sketches).
TEST(BatchJoinTest, ALaterCopySeesWhatWasKeptAfterItsFirstCopy) {
  auto sig = [](uint64_t content, uint64_t fp) {
    DocSignature s;
    s.content_hash = content;
    s.fingerprint = fp;
    s.has_features = true;
    return s;
  };
  // z kept; x 3 bits from z: its duplicate; y 4 bits from z: kept; x again:
  // 1 bit from y, which ranks first.
  const std::vector<DocSignature> sigs = {sig(1, 0b0000), sig(2, 0b0111), sig(3, 0b1111), sig(2, 0b0111)};
  for (bool recheck : {true, false}) {
    DedupOptions options;
    options.recheck.enabled = recheck;
    std::vector<DedupDecision> out;
    ASSERT_TRUE(DecideByJoin(sigs, options, 1, &out).ok());
    EXPECT_EQ(out, Oracle(sigs, options).Decide());
    ASSERT_TRUE(out[1].duplicate && out[3].duplicate);
    EXPECT_EQ(out[1].duplicate_of, 0u);
    EXPECT_FALSE(out[2].duplicate);
    EXPECT_EQ(out[3].duplicate_of, 2u);
    EXPECT_EQ(out[3].distance, 1);
  }
}

TEST(BatchJoinTest, CornerCases) {
  std::vector<DedupDecision> out;
  DedupOptions options;
  ASSERT_TRUE(DecideByJoin({}, options, 2, &out).ok());
  EXPECT_TRUE(out.empty());
  // One text, many copies: one class, every copy an exact duplicate of the first.
  const std::vector<DocSignature> same = Sign(std::vector<std::string>(50, "the quick brown fox"), options);
  JoinStats stats;
  ASSERT_TRUE(DecideByJoin(same, options, 2, &out, &stats).ok());
  EXPECT_EQ(stats.classes, 1u);
  EXPECT_FALSE(out[0].duplicate);
  for (size_t i = 1; i < out.size(); ++i) {
    EXPECT_TRUE(out[i].duplicate && out[i].exact && out[i].duplicate_of == 0) << i;
  }
  DedupStats counted;
  CountDecisions(out, &counted);
  EXPECT_EQ(counted.kept, 1u);
  EXPECT_EQ(counted.exact_duplicates, 49u);
  // Many distinct texts of one normalized text (punctuation variants: one
  // fingerprint, distinct sketches) are compared with the kept ones while
  // deciding, not paired with each other by the join.
  std::vector<std::string> variants;
  const char* words[] = {"we", "moved", "to", "a", "new", "office", "right", "down", "town"};
  for (int i = 0; i < 400; ++i) {  // a comma after word b iff bit b of i
    std::string t;
    for (int b = 0; b < 9; ++b) t += std::string(words[b]) + (i >> b & 1 ? ", " : " ");
    variants.push_back(t);
  }
  const std::vector<DocSignature> punct = Sign(variants, options);
  ASSERT_TRUE(DecideByJoin(punct, options, 2, &out, &stats).ok());
  EXPECT_GT(stats.classes, 300u);
  EXPECT_EQ(out, Oracle(punct, options).Decide());
  DedupOptions no_anchors;  // the anchors pair them, up to the stop keys; the fingerprint does not
  no_anchors.recheck.anchors = 0;
  ASSERT_TRUE(DecideByJoin(punct, no_anchors, 2, &out, &stats).ok());
  EXPECT_EQ(stats.pairs, 0u);
  EXPECT_EQ(out, Oracle(punct, no_anchors).Decide());
  // A radius the fingerprint join does not cover.
  options.recheck.short_k = 8;
  EXPECT_EQ(DecideByJoin(same, options, 1, &out).code(), Status::Code::kNotSupported);
  EXPECT_TRUE(out.empty());
  options.recheck.short_k = 3;
  options.k = -1;
  EXPECT_EQ(DecideByJoin(same, options, 1, &out).code(), Status::Code::kInvalidArgument);
}

// Many distinct texts on two fingerprints a bit apart: the join would pair
// each text of one with each of the other, past JoinPairLimit, so it refuses
// (the stream rule takes such input). The limit counts documents, not
// classes: texts that are one class without sketches (--no-recheck: a
// tester's run failed there and passed with --save-index, 2026-12-02) count
// as many as they are.
TEST(BatchJoinTest, PairsPastTheLimitAreRefusedAndTheLimitCountsDocuments) {
  constexpr uint64_t kFingerprint = 0x0123456789ABCDEFull;
  constexpr uint32_t kPerValue = 4100;  // 4100^2 pairs > 2^24
  std::vector<DocSignature> sigs;
  for (uint32_t i = 0; i < 2 * kPerValue; ++i) {
    sigs.push_back(DocSignature{1000 + i, i < kPerValue ? kFingerprint : kFingerprint ^ 1, true});
  }
  DedupOptions options;
  options.recheck.enabled = false;
  std::vector<DedupDecision> out;
  EXPECT_EQ(DecideByJoin(sigs, options, 2, &out).code(), Status::Code::kResourceExhausted);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(JoinPairLimit(sigs.size()), uint64_t{1} << 24);
  // Texts without features or sketches: one class however many they are.
  const uint64_t enough = (uint64_t{kPerValue} * kPerValue) / 64 + 1;
  EXPECT_GT(JoinPairLimit(enough), uint64_t{kPerValue} * kPerValue);
  if (testing::kSanitized) return;  // 16.8M pairs to decide: Release only
  sigs.resize(enough, DocSignature{7, 0, false});
  JoinStats stats;
  ASSERT_TRUE(DecideByJoin(sigs, options, 2, &out, &stats).ok());
  EXPECT_EQ(stats.classes, 2 * kPerValue + 1);
  // The plain rule: everything within k of the first text is its duplicate;
  // the texts without features are the first such text's.
  ASSERT_EQ(out.size(), sigs.size());
  EXPECT_FALSE(out[0].duplicate);
  EXPECT_FALSE(out[2 * kPerValue].duplicate);
  for (size_t i = 1; i < sigs.size(); ++i) {
    if (i == 2 * kPerValue) continue;
    const bool featured = i < 2 * kPerValue;
    ASSERT_TRUE(out[i].duplicate) << i;
    ASSERT_EQ(out[i].duplicate_of, featured ? 0 : 2 * kPerValue) << i;
    ASSERT_EQ(out[i].distance, i >= kPerValue && featured ? 1 : 0) << i;
  }
}

// Regression (adversarial test, 2026-12-02): with anchor_max_postings
// raised far (--anchor-max-postings), texts sharing common n-grams made
// anchor groups whose pairs grow with the square of their size, with no
// limit: a run grew to 23 GB and was killed by the kernel. Past its limit
// (by default a quarter of the machine's memory, here set low) the join now
// refuses, as it does for fingerprint pairs; with the default cap the same
// texts decide.
TEST(BatchJoinTest, AnchorPairsPastTheLimitAreRefused) {
  DedupOptions options;
  options.recheck.anchor_max_postings = kMaxAnchorPostings;
  options.join_max_anchor_pairs = uint64_t{1} << 20;
  std::vector<std::string> texts;
  for (int i = 0; i < 600; ++i) {
    texts.push_back("the same long notice for every resident of the block, about the water, number " +
                    std::to_string(i));
  }
  const std::vector<DocSignature> sigs = Sign(texts, options);
  std::vector<DedupDecision> out;
  JoinStats stats;
  const Status st = DecideByJoin(sigs, options, 2, &out, &stats);
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted) << st.ToString();
  EXPECT_NE(st.message().find("--anchor-max-postings"), std::string::npos) << st.ToString();
  EXPECT_TRUE(out.empty());
  options.recheck.anchor_max_postings = RecheckOptions{}.anchor_max_postings;
  ASSERT_TRUE(DecideByJoin(sigs, options, 2, &out, &stats).ok());
  EXPECT_EQ(out.size(), sigs.size());
  EXPECT_LT(stats.pairs, options.join_max_anchor_pairs);
  // The default: JoinPairLimit's floor, or a quarter of the memory in pairs
  // of 24 bytes, whichever is larger.
  EXPECT_EQ(JoinAnchorPairLimit(1000, uint64_t{24} << 30), (uint64_t{24} << 30) / 96);
  EXPECT_EQ(JoinAnchorPairLimit(1000, 1 << 20), JoinPairLimit(1000));
  EXPECT_EQ(JoinAnchorPairLimit(uint64_t{1} << 30, uint64_t{24} << 30), JoinPairLimit(uint64_t{1} << 30));
  EXPECT_GT(MemoryBytesAllowed(), 0u);
}

// The decider hands out DecideByJoin's decisions one at a time, in order,
// and refuses one past the last.
TEST(BatchJoinTest, DeciderGivesTheDecisionsInOrder) {
  DedupOptions options;
  std::vector<std::string> texts;
  for (int i = 0; i < 60; ++i) texts.push_back("notice " + std::to_string(i % 20) + " for the residents of block " + std::to_string(i % 7));
  const std::vector<DocSignature> sigs = Sign(texts, options);
  std::vector<DedupDecision> want;
  ASSERT_TRUE(DecideByJoin(sigs, options, 2, &want).ok());
  auto decider = JoinDecider::Create(sigs, options, 2);
  ASSERT_TRUE(decider.ok());
  ASSERT_EQ((*decider)->size(), sigs.size());
  for (size_t i = 0; i < sigs.size(); ++i) {
    auto d = (*decider)->Next();
    ASSERT_TRUE(d.ok()) << i;
    EXPECT_EQ(*d, want[i]) << i;
  }
  EXPECT_EQ((*decider)->Next().status().code(), Status::Code::kFailedPrecondition);
  options.k = 99;
  EXPECT_EQ(JoinDecider::Create(sigs, options, 1).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace neardup
