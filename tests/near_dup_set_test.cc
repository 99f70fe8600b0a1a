#include "neardup/dedup/near_dup_set.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "neardup/text/fingerprint.h"

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
  return MakeSignature(a, text, RecheckOptions{}.shingle_size);
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
// Short texts of CJK ideographs from a pool of 300 (distinct texts, anchors
// mostly rare and some shared, so lists form), and edited copies of them.
class CjkTexts {
 public:
  std::vector<std::string> Text(int min_len, int max_len) {
    const int len = min_len + static_cast<int>(Next() % static_cast<uint64_t>(max_len - min_len + 1));
    std::vector<std::string> chars;
    for (int j = 0; j < len; ++j) chars.push_back(Char());
    return chars;
  }
  // One character replaced.
  std::vector<std::string> Edited(std::vector<std::string> chars) {
    chars[Next() % chars.size()] = Char();
    return chars;
  }
  static std::string Join(const std::vector<std::string>& chars) {
    std::string t;
    for (const auto& c : chars) t += c;
    return t;
  }
  uint64_t Next() {
    x_ ^= x_ << 13;
    x_ ^= x_ >> 7;
    x_ ^= x_ << 17;
    return x_;
  }

 private:
  std::string Char() {
    const uint32_t cp = 0x4E00 + static_cast<uint32_t>(Next() % 300);
    std::string u8;
    u8 += static_cast<char>(0xE0 | (cp >> 12));
    u8 += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    u8 += static_cast<char>(0x80 | (cp & 0x3F));
    return u8;
  }
  uint64_t x_ = 88172645463325252ULL;
};

// Both sets give the same answers (and similarities) to an edited copy of
// every text; returns how many copies of a kept text found something.
int ExpectSameAnswers(const NearDupSet& mutated, const NearDupSet& rebuilt, CjkTexts* gen,
                      const std::vector<std::vector<std::string>>& texts, const std::vector<bool>& removed) {
  int found = 0;
  for (size_t q = 0; q < texts.size(); ++q) {
    const DocSignature query = Analyzed(CjkTexts::Join(gen->Edited(texts[q])));
    std::optional<DuplicateMatch> b1, b2;
    std::vector<DuplicateMatch> a1, a2;
    EXPECT_TRUE(mutated.FindDuplicate(query, &b1, &a1).ok());
    EXPECT_TRUE(rebuilt.FindDuplicate(query, &b2, &a2).ok());
    EXPECT_EQ(a1, a2) << "query " << q;
    for (size_t i = 0; i < a1.size() && i < a2.size(); ++i) EXPECT_EQ(a1[i].similarity, a2[i].similarity);
    if (a1 != a2) return -1;
    found += b1.has_value() && !removed[q];
  }
  return found;
}

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
  CjkTexts gen;
  constexpr int kDocs = 6000;
  std::vector<std::vector<std::string>> texts(kDocs);
  std::vector<DocSignature> sigs;
  for (int i = 0; i < kDocs; ++i) {
    texts[i] = gen.Text(12, 35);
    sigs.push_back(Analyzed(CjkTexts::Join(texts[i])));
  }
  std::vector<bool> removed(kDocs, false);
  for (int i = 0; i < kDocs; ++i) {
    ASSERT_TRUE(mutated->Insert(static_cast<DocId>(i), sigs[i]).ok());
    // Remove an earlier document now and then, while the table grows.
    if (i % 3 == 2) {
      const int victim = static_cast<int>(gen.Next() % static_cast<uint64_t>(i));
      if (!removed[victim]) {
        ASSERT_TRUE(mutated->Remove(static_cast<DocId>(victim), sigs[victim]));
        removed[victim] = true;
      }
    }
  }
  for (int i = 0; i < kDocs; ++i) {
    if (!removed[i]) {
      ASSERT_TRUE(rebuilt->Insert(static_cast<DocId>(i), sigs[i]).ok());
    }
  }
  EXPECT_EQ(mutated->size(), rebuilt->size());
  EXPECT_GT(ExpectSameAnswers(*mutated, *rebuilt, &gen, texts, removed), kDocs / 2);
}

// A retention window: the oldest documents expire while new ones arrive,
// plus random early removals. The kept sketch records live in fixed-size
// chunks; a chunk more than half dead has its live records moved and is
// freed. Whatever moved, the answers are a rebuilt set's, and memory follows
// the window instead of everything ever inserted.
TEST(NearDupSet, SketchRecordsMovedByExpiryAnswerAsARebuiltSet) {
  NearDupOptions o;
  auto mutated = std::move(NearDupSet::Create(o)).value();
  CjkTexts gen;
  constexpr int kDocs = 40000, kWindow = 4000;
  std::vector<std::vector<std::string>> texts(kDocs);
  std::vector<DocSignature> sigs(kDocs);
  std::vector<bool> removed(kDocs, false);
  size_t memory_at_window = 0;
  for (int i = 0; i < kDocs; ++i) {
    // 60-150 characters: full 64-value sketches, ~800 records per chunk.
    texts[i] = gen.Text(60, 150);
    sigs[i] = Analyzed(CjkTexts::Join(texts[i]));
    ASSERT_TRUE(mutated->Insert(static_cast<DocId>(i), sigs[i]).ok());
    if (i >= kWindow && !removed[i - kWindow]) {
      ASSERT_TRUE(mutated->Remove(static_cast<DocId>(i - kWindow), sigs[i - kWindow]));
      removed[i - kWindow] = true;
    }
    if (i % 5 == 0) {
      const int victim = i - static_cast<int>(gen.Next() % std::min<uint64_t>(kWindow, static_cast<uint64_t>(i) + 1));
      if (!removed[victim]) {
        ASSERT_TRUE(mutated->Remove(static_cast<DocId>(victim), sigs[victim]));
        removed[victim] = true;
      }
    }
    if (i == 2 * kWindow) memory_at_window = mutated->MemoryBytes();
  }
  auto rebuilt = std::move(NearDupSet::Create(o)).value();
  for (int i = 0; i < kDocs; ++i) {
    if (!removed[i]) {
      ASSERT_TRUE(rebuilt->Insert(static_cast<DocId>(i), sigs[i]).ok());
    }
  }
  EXPECT_EQ(mutated->size(), rebuilt->size());
  EXPECT_EQ(mutated->sketches(), rebuilt->sketches());
  // Ten windows later the set holds about as much as after two.
  EXPECT_LT(mutated->MemoryBytes(), memory_at_window * 3 / 2);
  // The last windows' texts (the others are long gone from both).
  const std::vector<std::vector<std::string>> recent(texts.end() - 2 * kWindow, texts.end());
  const std::vector<bool> recent_removed(removed.end() - 2 * kWindow, removed.end());
  EXPECT_GT(ExpectSameAnswers(*mutated, *rebuilt, &gen, recent, recent_removed), kWindow / 2);
}

}  // namespace
}  // namespace neardup
