#include "neardup/dedup/near_dup_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "neardup/text/fingerprint.h"
#include "neardup/text/shingles.h"

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

// The defined similarity (text/shingles.h) of two texts, n = 3.
double TrueJaccard(const std::string& x, const std::string& y) {
  std::vector<uint64_t> a, b;
  ShingleHashes(x, 3, &a);
  ShingleHashes(y, 3, &b);
  return Jaccard(a, b);
}

// A short edited repost: one word changed. Similarity 0.7949 (>= the default
// threshold 0.7) while the fingerprints are 8 bits apart (> k = 3).
const char* const kShortOriginal = "今天北京的天气非常好，我们一起去公园散步吧，顺便看看新开的图书馆和博物馆。";
const char* const kShortEdited = "今天北京的天气特别好，我们一起去公园散步吧，顺便看看新开的图书馆和博物馆。";

// A text of `n` pseudo-random lower-case words (about 6 * n characters).
std::string Words(int n, uint64_t seed) {
  std::string t;
  for (int i = 0; i < n; ++i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    if (i) t += ' ';
    for (int c = 0; c < 5; ++c) t += static_cast<char>('a' + (seed >> (20 + 5 * c)) % 26);
  }
  return t;
}

// Raw sketch values 1..n (a set of `num_shingles`; complete iff <= kSketchSize).
std::vector<uint32_t> Values(uint32_t n) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = i + 1;
  return v;
}
PairSide Side(const std::vector<uint32_t>& v, uint32_t num_shingles) {
  return PairSide{40, v.data(), v.size(), num_shingles};
}

TEST(DecidePair, TheRuleOfAccept) {
  NearDupOptions o;
  ASSERT_EQ(o.recheck.threshold, 0.7);
  ASSERT_EQ(o.k, 3);
  const DocSignature a = Analyzed(kShortOriginal);
  const DocSignature b = Analyzed(kShortEdited);
  const double sim_ab = TrueJaccard(kShortOriginal, kShortEdited);
  ASSERT_GE(sim_ab, 0.7);
  ASSERT_LT(sim_ab, 0.85);
  ASSERT_GT(HammingDistance(a.fingerprint, b.fingerprint), o.k);
  // Sketches on both sides: similarity >= threshold decides, whatever the
  // distance; both sets fit the sketch, so the similarity is the defined one.
  for (int dist : {0, 3, 8, 40}) {
    const PairDecision d = DecidePair(o, PairSide::Of(a), PairSide::Of(b), dist);
    EXPECT_TRUE(d.duplicate) << dist;
    EXPECT_TRUE(d.rechecked);
    EXPECT_TRUE(d.exact);
    EXPECT_DOUBLE_EQ(d.similarity, sim_ab);
  }
  // The threshold is inclusive, and it is the setting (not a constant).
  o.recheck.threshold = sim_ab;
  EXPECT_TRUE(DecidePair(o, PairSide::Of(a), PairSide::Of(b), 8).duplicate);
  o.recheck.threshold = sim_ab + 0.01;
  EXPECT_FALSE(DecidePair(o, PairSide::Of(a), PairSide::Of(b), 0).duplicate);
  o.recheck.threshold = 0.7;
  // Same words in another order: equal fingerprints, too few shared n-grams
  // (no rule accepts a pair within k any more, short or long).
  const DocSignature r1 = Analyzed("go to it as we do so on my own by an ox");
  const DocSignature r2 = Analyzed("an ox by my own on so do we as it to go");
  ASSERT_EQ(HammingDistance(r1.fingerprint, r2.fingerprint), 0);
  ASSERT_LT(TrueJaccard("go to it as we do so on my own by an ox", "an ox by my own on so do we as it to go"), 0.7);
  PairDecision d = DecidePair(o, PairSide::Of(r1), PairSide::Of(r2), 0);
  EXPECT_FALSE(d.duplicate);
  EXPECT_TRUE(d.rechecked);
  o.recheck.short_max_chars = 5;  // both "long": still the similarity decides
  EXPECT_FALSE(DecidePair(o, PairSide::Of(r1), PairSide::Of(r2), 0).duplicate);
  EXPECT_TRUE(DecidePair(o, PairSide::Of(a), PairSide::Of(b), 8).duplicate);
  o.recheck.short_max_chars = 200;
  // Exactness: a set larger than the sketch makes the similarity an estimate
  // (standard error <= 0.031).
  const std::string big = Words(80, 7);
  std::string big_edited = big;
  big_edited.replace(0, 60, Words(10, 99));
  const double sim_big = TrueJaccard(big, big_edited);
  ASSERT_GT(sim_big, 0.78);
  ASSERT_LT(sim_big, 0.95);
  const DocSignature s1 = Analyzed(big), s2 = Analyzed(big_edited);
  ASSERT_GT(s1.sketch.num_shingles, kSketchSize);
  d = DecidePair(o, PairSide::Of(s1), PairSide::Of(s2), 20);
  EXPECT_TRUE(d.duplicate);
  EXPECT_TRUE(d.rechecked);
  EXPECT_FALSE(d.exact);
  EXPECT_NEAR(d.similarity, sim_big, 0.1);
  // The size bound: |A| < t * |B| rejects without an estimate (the score is
  // the bound |A| / |B|, not exact). These sketches are made up so that an
  // estimate would accept: below the last value of the incomplete one, A's
  // 200 values all lie in B's 256 (estimate 200 / 256 = 0.78).
  const std::vector<uint32_t> v200 = Values(200), v256 = Values(256), v7 = Values(7), v10 = Values(10),
                              v6 = Values(6);
  d = DecidePair(o, Side(v200, 200), Side(v256, 300), 0);
  EXPECT_FALSE(d.duplicate);
  EXPECT_TRUE(d.rechecked);
  EXPECT_FALSE(d.exact);
  EXPECT_DOUBLE_EQ(d.similarity, 200.0 / 300.0);
  EXPECT_EQ(DecidePair(o, Side(v256, 300), Side(v200, 200), 0).duplicate, false) << "symmetric";
  // ... while within the bound the estimate decides (and may accept).
  d = DecidePair(o, Side(v200, 200), Side(v256, 280), 0);
  EXPECT_TRUE(d.duplicate);
  EXPECT_FALSE(d.exact);
  EXPECT_DOUBLE_EQ(d.similarity, 200.0 / 256.0);
  // Exact sets at the boundary: 7 of 10 shared is 0.7 (accepted), 6 of 10 is
  // below (rejected by the bound: 6 < 0.7 * 10).
  d = DecidePair(o, Side(v7, 7), Side(v10, 10), 9);
  EXPECT_TRUE(d.duplicate);
  EXPECT_TRUE(d.exact);
  EXPECT_DOUBLE_EQ(d.similarity, 0.7);
  d = DecidePair(o, Side(v6, 6), Side(v10, 10), 0);
  EXPECT_FALSE(d.duplicate);
  EXPECT_DOUBLE_EQ(d.similarity, 0.6);
  // No sketch on one side (a legacy document, a text kept without its
  // sketch): distance <= k decides, and the score comes from the distance.
  const PairSide none;
  d = DecidePair(o, PairSide::Of(r1), none, 3);
  EXPECT_TRUE(d.duplicate);
  EXPECT_FALSE(d.rechecked);
  EXPECT_FALSE(d.exact);
  EXPECT_EQ(d.similarity, SimilarityFromDistance(3));
  EXPECT_FALSE(DecidePair(o, none, PairSide::Of(a), 4).duplicate);
  EXPECT_FALSE(DecidePair(o, PairSide::Of(a), none, 4).duplicate);
  o.k = 5;
  EXPECT_TRUE(DecidePair(o, none, PairSide::Of(a), 4).duplicate) << "k is the radius, not a constant";
  o.k = 3;
  // Re-check off: the plain rule, distance <= k, sketches or not.
  o.recheck.enabled = false;
  d = DecidePair(o, PairSide::Of(r1), PairSide::Of(r2), 0);
  EXPECT_TRUE(d.duplicate);
  EXPECT_FALSE(d.rechecked);
  EXPECT_TRUE(DecidePair(o, PairSide::Of(a), PairSide::Of(b), 3).duplicate);
  EXPECT_FALSE(DecidePair(o, PairSide::Of(a), PairSide::Of(b), 4).duplicate);
  EXPECT_FALSE(DecidePair(o, PairSide::Of(a), PairSide::Of(b), 8).duplicate);
}

TEST(NearDupSet, DecidesThroughThePairRule) {
  // FindDuplicate's answer for a kept document equals DecidePair on the two
  // signatures (same similarity, same verdict, same exactness).
  auto set = MakeSet();
  const DocSignature r1 = Analyzed("go to it as we do so on my own by an ox");
  const DocSignature a = Analyzed(kShortOriginal);
  ASSERT_TRUE(set->Insert(1, r1).ok());
  ASSERT_TRUE(set->Insert(2, a).ok());
  std::optional<DuplicateMatch> best;
  // A fingerprint candidate at distance 0 that the rule rejects.
  const DocSignature r2 = Analyzed("an ox by my own on so do we as it to go");
  ASSERT_EQ(HammingDistance(r1.fingerprint, r2.fingerprint), 0);
  ASSERT_FALSE(DecidePair(set->options(), PairSide::Of(r2), PairSide::Of(r1), 0).duplicate);
  ASSERT_TRUE(set->FindDuplicate(r2, &best).ok());
  EXPECT_FALSE(best.has_value());
  // An anchor candidate beyond the radius that the rule accepts.
  const DocSignature b = Analyzed(kShortEdited);
  const int dist = HammingDistance(a.fingerprint, b.fingerprint);
  ASSERT_GT(dist, set->options().recheck.short_k);
  ASSERT_TRUE(set->FindDuplicate(b, &best).ok());
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->id, 2u);
  EXPECT_EQ(best->distance, dist);
  const PairDecision d = DecidePair(set->options(), PairSide::Of(b), PairSide::Of(a), dist);
  ASSERT_TRUE(d.duplicate);
  EXPECT_EQ(best->similarity, d.similarity);
  EXPECT_EQ(best->rechecked, d.rechecked);
  EXPECT_EQ(best->similarity_exact, d.exact);
  EXPECT_TRUE(best->similarity_exact);
  EXPECT_DOUBLE_EQ(best->similarity, TrueJaccard(kShortOriginal, kShortEdited));
  // With a threshold above that similarity the same candidate is rejected.
  RecheckOptions strict = set->options().recheck;
  strict.threshold = d.similarity + 0.01;
  ASSERT_TRUE(set->SetPolicy(strict).ok());
  ASSERT_TRUE(set->FindDuplicate(b, &best).ok());
  EXPECT_FALSE(best.has_value());
}

// Regression (issue 17, the short corpus at 2M): over a small n-gram
// universe every single n-gram value is soon held by more than
// anchor_max_postings kept texts, so anchors that were the values alone
// (anchor scheme 1) all became stop keys and an edited repost beyond the
// fingerprint radius was kept. Neighbour-pair anchors stay selective: each
// repost here is found, and only through them (radius 0, single values all
// stop keys).
TEST(NearDupSet, RepostsAreFoundWhenEverySingleValueIsAStopKey) {
  NearDupOptions o;
  o.k = 0;
  o.recheck.short_k = 0;
  o.recheck.anchor_max_postings = 4;
  auto set = std::move(NearDupSet::Create(o)).value();
  uint64_t state = 42;
  auto text = [&state](size_t len) {  // 12 letters: 1,728 trigrams, about 38 in a text
    std::string t;
    for (size_t i = 0; i < len; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      t.push_back(static_cast<char>('a' + (state >> 32) % 12));
    }
    return t;
  };
  DocId id = 0;
  for (int i = 0; i < 6000; ++i) ASSERT_TRUE(set->Insert(++id, Analyzed(text(40))).ok());
  int found = 0, trials = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const std::string original = text(40);
    std::string repost = original;
    repost[20] = repost[20] == 'a' ? 'b' : 'a';
    const DocSignature a = Analyzed(original), b = Analyzed(repost);
    if (a.fingerprint == b.fingerprint) continue;  // found by the radius: not this test's case
    std::optional<DuplicateMatch> best;
    ASSERT_TRUE(set->FindDuplicate(a, &best).ok());
    if (best.has_value()) continue;  // a duplicate of an earlier random text: not this test's case
    const PairDecision d = DecidePair(set->options(), PairSide::Of(b), PairSide::Of(a), 1);
    if (!d.duplicate) continue;  // the edit took the pair below the threshold
    // The case: every single value among its anchors is a stop key.
    const auto live_value = [&](uint32_t v) {
      return std::binary_search(a.sketch.mins.begin(), a.sketch.mins.end(), v) && !set->IsStopKey(v);
    };
    if (std::any_of(a.sketch.anchors.begin(), a.sketch.anchors.end(), live_value)) continue;
    ASSERT_TRUE(set->Insert(++id, a).ok());
    ASSERT_TRUE(set->FindDuplicate(b, &best).ok());
    ++trials;
    if (best.has_value() && best->id == id) ++found;
  }
  ASSERT_GE(trials, 15);
  EXPECT_EQ(found, trials);
}

// Ids past 31 bits move the anchor table to wide words mid-stream
// (anchor_table.h): a set whose later ids are huge answers as one whose ids
// are small, through anchors alone (radius 0).
TEST(NearDupSet, IdsPast31BitsAnswerAsSmallOnes) {
  NearDupOptions o;
  o.k = 0;
  o.recheck.short_k = 0;
  auto small = std::move(NearDupSet::Create(o)).value();
  auto huge = std::move(NearDupSet::Create(o)).value();
  const DocId shift = NearDupSet::kMaxDocId - 10'000;
  std::mt19937 rng(5);
  auto text = [&rng] {
    std::string t;
    for (int i = 0; i < 60; ++i) t.push_back(static_cast<char>('a' + rng() % 10));
    return t;
  };
  std::vector<std::string> texts;
  int found = 0;
  for (DocId id = 0; id < 2000; ++id) {
    texts.push_back(text());
    std::string repost = texts[rng() % texts.size()];
    repost[30] = static_cast<char>('a' + (repost[30] - 'a' + 1) % 10);
    std::optional<DuplicateMatch> a, b;
    ASSERT_TRUE(small->FindDuplicate(Analyzed(repost), &a).ok());
    ASSERT_TRUE(huge->FindDuplicate(Analyzed(repost), &b).ok());
    ASSERT_EQ(a.has_value(), b.has_value()) << id;
    if (a) {
      ++found;
      EXPECT_EQ(a->id + (a->id >= 1000 ? shift : 0), b->id);
    }
    ASSERT_TRUE(small->Insert(id, Analyzed(texts.back())).ok());
    ASSERT_TRUE(huge->Insert(id + (id >= 1000 ? shift : 0), Analyzed(texts.back())).ok());
  }
  EXPECT_GT(found, 1000);
  EXPECT_EQ(huge->Insert(NearDupSet::kMaxDocId + 1, Analyzed(text())).code(), Status::Code::kInvalidArgument);
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
