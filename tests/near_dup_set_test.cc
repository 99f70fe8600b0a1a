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

// The anchor table (split into segments that grow on their own) after many
// inserts and removals answers as a set built from the survivors alone.
// Edited copies of short texts are found through anchors; lists form and shrink;
// anchor_max_postings is high so that no anchor turns into a stop key (stop
// keys stay stop keys after removals, by design, and would differ).
TEST(NearDupSet, AnchorsAfterRemovalsAnswerAsARebuiltSet) {
  NearDupOptions o;
  o.recheck.anchor_max_postings = 100000;
  // k = 0: edited copies are found through their anchors only; one anchor
  // per document, so a lost anchor entry changes an answer.
  o.k = 0;
  o.recheck.short_k = 0;
  o.recheck.anchors = 1;
  auto mutated = std::move(NearDupSet::Create(o)).value();
  auto rebuilt = std::move(NearDupSet::Create(o)).value();
  uint64_t x = 88172645463325252ULL;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  // CJK ideographs from a pool of 300: texts are distinct, anchors mostly
  // rare, and some shared (lists form).
  auto cjk = [&] {
    const uint32_t cp = 0x4E00 + static_cast<uint32_t>(next() % 300);
    std::string u8;
    u8 += static_cast<char>(0xE0 | (cp >> 12));
    u8 += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    u8 += static_cast<char>(0x80 | (cp & 0x3F));
    return u8;
  };
  constexpr int kDocs = 6000;
  std::vector<std::vector<std::string>> texts(kDocs);
  std::vector<DocSignature> sigs;
  auto join = [](const std::vector<std::string>& chars) {
    std::string t;
    for (const auto& c : chars) t += c;
    return t;
  };
  for (int i = 0; i < kDocs; ++i) {
    const int len = 12 + static_cast<int>(next() % 24);
    for (int j = 0; j < len; ++j) texts[i].push_back(cjk());
    sigs.push_back(Analyzed(join(texts[i])));
  }
  std::vector<bool> removed(kDocs, false);
  for (int i = 0; i < kDocs; ++i) {
    ASSERT_TRUE(mutated->Insert(static_cast<DocId>(i), sigs[i]).ok());
    // Remove an earlier document now and then, while the table grows.
    if (i % 3 == 2) {
      const int victim = static_cast<int>(next() % static_cast<uint64_t>(i));
      if (!removed[victim]) {
        ASSERT_TRUE(mutated->Remove(static_cast<DocId>(victim), sigs[victim]));
        removed[victim] = true;
      }
    }
  }
  for (int i = 0; i < kDocs; ++i) {
    if (!removed[i]) ASSERT_TRUE(rebuilt->Insert(static_cast<DocId>(i), sigs[i]).ok());
  }
  EXPECT_EQ(mutated->size(), rebuilt->size());
  int found = 0;
  for (int q = 0; q < kDocs; ++q) {
    // An edited copy (one character replaced) of every document, kept or removed.
    std::vector<std::string> edited = texts[q];
    edited[next() % edited.size()] = cjk();
    const DocSignature query = Analyzed(join(edited));
    std::optional<DuplicateMatch> b1, b2;
    std::vector<DuplicateMatch> a1, a2;
    ASSERT_TRUE(mutated->FindDuplicate(query, &b1, &a1).ok());
    ASSERT_TRUE(rebuilt->FindDuplicate(query, &b2, &a2).ok());
    ASSERT_EQ(a1, a2) << "query " << q;
    found += b1.has_value() && !removed[q];
  }
  EXPECT_GT(found, kDocs / 2);  // the edited copies do reach their kept originals
}

}  // namespace
}  // namespace neardup
