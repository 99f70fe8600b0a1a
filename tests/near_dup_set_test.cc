#include "neardup/near_dup_set.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "neardup/fingerprint.h"

namespace neardup {
namespace {

std::unique_ptr<NearDupSet> MakeSet(int k = 3, bool fast = true) {
  NearDupOptions o;
  o.k = k;
  o.exact_fast_path = fast;
  return std::move(NearDupSet::Create(o)).value();
}

DocSignature Sig(uint64_t hash, uint64_t fp, bool features = true) { return DocSignature{hash, fp, features}; }

TEST(NearDupSet, NearestFirstThenSmallestIdAndAllMatchesListed) {
  auto set = MakeSet();
  ASSERT_TRUE(set->Insert(5, Sig(1, 0b0111)).ok());  // distance 3 from 0
  ASSERT_TRUE(set->Insert(9, Sig(2, 0b0001)).ok());  // distance 1
  ASSERT_TRUE(set->Insert(7, Sig(3, 0b0010)).ok());  // distance 1
  ASSERT_TRUE(set->Insert(8, Sig(4, 0b1111)).ok());  // distance 4: out
  std::optional<DuplicateMatch> best;
  std::vector<DuplicateMatch> all;
  ASSERT_TRUE(set->FindDuplicate(Sig(99, 0), &best, &all).ok());
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->id, 7u);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].id, 9u);
  EXPECT_EQ(all[2].id, 5u);
  EXPECT_EQ(all[2].distance, 3);
}

TEST(NearDupSet, ExactTextWinsAndIsFlagged) {
  auto set = MakeSet();
  ASSERT_TRUE(set->Insert(1, Sig(100, 0xff)).ok());
  ASSERT_TRUE(set->Insert(2, Sig(200, 0xfe)).ok());
  std::optional<DuplicateMatch> best;
  std::vector<DuplicateMatch> all;
  ASSERT_TRUE(set->FindDuplicate(Sig(200, 0xfe), &best, &all).ok());
  EXPECT_EQ(*best, (DuplicateMatch{2, 0, true}));
  ASSERT_EQ(all.size(), 2u);  // the exact one, then the near one, listed once each
  EXPECT_EQ(all[1], (DuplicateMatch{1, 1, false}));
}

TEST(NearDupSet, FeaturelessTextsMatchOnlyByExactText) {
  auto set = MakeSet(8);
  ASSERT_TRUE(set->Insert(1, Sig(7, 0, false)).ok());
  ASSERT_TRUE(set->Insert(2, Sig(8, 0, true)).ok());  // fingerprint 0 with features
  std::optional<DuplicateMatch> best;
  ASSERT_TRUE(set->FindDuplicate(Sig(9, 0, false), &best).ok());
  EXPECT_FALSE(best.has_value());  // never matched through the index
  ASSERT_TRUE(set->FindDuplicate(Sig(7, 0, false), &best).ok());
  EXPECT_EQ(best->id, 1u);
}

TEST(NearDupSet, RemoveForgetsBothExactAndNear) {
  auto set = MakeSet();
  ASSERT_TRUE(set->Insert(1, Sig(100, 0xff)).ok());
  ASSERT_TRUE(set->Insert(2, Sig(100, 0xff)).ok());  // same text stored twice (insert-always)
  EXPECT_EQ(set->Insert(2, Sig(100, 0xff)).code(), Status::Code::kAlreadyExists);
  EXPECT_TRUE(set->Remove(1, Sig(100, 0xff)));
  EXPECT_FALSE(set->Remove(1, Sig(100, 0xff)));
  std::optional<DuplicateMatch> best;
  ASSERT_TRUE(set->FindDuplicate(Sig(100, 0xff), &best).ok());
  EXPECT_EQ(best->id, 2u);
  EXPECT_TRUE(set->Remove(2, Sig(100, 0xff)));
  ASSERT_TRUE(set->FindDuplicate(Sig(100, 0xff), &best).ok());
  EXPECT_FALSE(best.has_value());
  EXPECT_EQ(set->size(), 0u);
}

TEST(NearDupSet, RejectsBadK) {
  NearDupOptions o;
  o.k = 9;
  EXPECT_EQ(NearDupSet::Create(o).status().code(), Status::Code::kInvalidArgument);
}

// ---- the pair rule, shared with the Redis Cluster store ----------------------

DocSignature Analyzed(const std::string& text) {
  static const Fingerprinter fp = std::move(Fingerprinter::Create(FingerprintOptions{})).value();
  TextAnalysis a;
  fp.Analyze(text, &a);
  return MakeSignature(a);
}

TEST(DecidePair, IsSymmetric) {
  const std::vector<std::string> texts = {
      "今天北京的天气非常好，我们一起去公园散步吧", "转发：今天北京的天气特别好，我们一起去公园散步吧！",
      "go to it as we do so on my own by an ox", "an ox by my own on so do we as it to go",
      std::string(300, 'a') + " tail words here", std::string(300, 'a') + " tail words there", "短"};
  NearDupOptions o;
  o.recheck.short_max_chars = 30;  // some pairs long-long, some mixed
  for (const auto& a : texts) {
    for (const auto& b : texts) {
      const DocSignature sa = Analyzed(a), sb = Analyzed(b);
      for (int d : {0, 3, 4, 15}) {
        const PairDecision x = DecidePair(o, PairSide::Of(sa), PairSide::Of(sb), d);
        const PairDecision y = DecidePair(o, PairSide::Of(sb), PairSide::Of(sa), d);
        EXPECT_EQ(x.duplicate, y.duplicate) << a << " / " << b << " d=" << d;
        EXPECT_EQ(x.similarity, y.similarity) << a << " / " << b;
        EXPECT_EQ(x.rechecked, y.rechecked);
      }
    }
  }
}

TEST(DecidePair, TheRuleOfAccept) {
  NearDupOptions o;
  const DocSignature a = Analyzed("今天北京的天气非常好，我们一起去公园散步吧");
  const DocSignature b = Analyzed("转发：今天北京的天气特别好，我们一起去公园散步吧！");
  // Short pair: decided on the sketches whatever the distance.
  PairDecision d = DecidePair(o, PairSide::Of(a), PairSide::Of(b), 15);
  EXPECT_TRUE(d.duplicate);
  EXPECT_TRUE(d.rechecked);
  EXPECT_NEAR(d.similarity, 0.667, 0.001);
  // Same words in another order: equal fingerprints, too few shared shingles.
  const DocSignature r1 = Analyzed("go to it as we do so on my own by an ox");
  const DocSignature r2 = Analyzed("an ox by my own on so do we as it to go");
  ASSERT_EQ(HammingDistance(r1.fingerprint, r2.fingerprint), 0);
  EXPECT_FALSE(DecidePair(o, PairSide::Of(r1), PairSide::Of(r2), 0).duplicate);
  // No sketch on one side (a legacy document): distance <= k decides.
  const PairSide none;
  d = DecidePair(o, PairSide::Of(r1), none, 0);
  EXPECT_TRUE(d.duplicate);
  EXPECT_FALSE(d.rechecked);
  EXPECT_EQ(d.similarity, SimilarityFromDistance(0));
  EXPECT_FALSE(DecidePair(o, none, PairSide::Of(a), 4).duplicate);
  // Two long texts within k: duplicates without a look at the sketches.
  o.recheck.short_max_chars = 5;
  EXPECT_TRUE(DecidePair(o, PairSide::Of(r1), PairSide::Of(r2), 3).duplicate);
  EXPECT_FALSE(DecidePair(o, PairSide::Of(r1), PairSide::Of(r2), 4).duplicate);
  // Re-check off: the plain rule.
  o.recheck.enabled = false;
  o.recheck.short_max_chars = 200;
  EXPECT_TRUE(DecidePair(o, PairSide::Of(r1), PairSide::Of(r2), 0).duplicate);
  EXPECT_FALSE(DecidePair(o, PairSide::Of(a), PairSide::Of(b), 15).duplicate);
}

TEST(NearDupSet, DecidesThroughThePairRule) {
  // FindDuplicate's answer for a kept document equals DecidePair on the two
  // signatures (same similarity, same verdict).
  auto set = MakeSet();
  const DocSignature r1 = Analyzed("go to it as we do so on my own by an ox");
  const DocSignature a = Analyzed("今天北京的天气非常好，我们一起去公园散步吧");
  ASSERT_TRUE(set->Insert(1, r1).ok());
  ASSERT_TRUE(set->Insert(2, a).ok());
  std::optional<DuplicateMatch> best;
  ASSERT_TRUE(set->FindDuplicate(Analyzed("an ox by my own on so do we as it to go"), &best).ok());
  EXPECT_FALSE(best.has_value());
  const DocSignature b = Analyzed("转发：今天北京的天气特别好，我们一起去公园散步吧！");
  ASSERT_TRUE(set->FindDuplicate(b, &best).ok());
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->id, 2u);
  const PairDecision d =
      DecidePair(set->options(), PairSide::Of(b), PairSide::Of(a), HammingDistance(a.fingerprint, b.fingerprint));
  EXPECT_EQ(best->similarity, d.similarity);
  EXPECT_EQ(best->rechecked, d.rechecked);
}

}  // namespace
}  // namespace neardup
