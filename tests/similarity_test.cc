// The re-check signature (include/neardup/similarity.h) and the length-aware
// policy of NearDupSet that uses it (include/neardup/near_dup_set.h).
#include "neardup/text/similarity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "neardup/dedup/dedup.h"
#include "neardup/text/fingerprint.h"
#include "neardup/dedup/near_dup_set.h"

namespace neardup {
namespace {

// Sketch scheme v1 golden values (see Sketch.GoldenValues).
constexpr uint32_t kGoldenHello0 = 1224944385u;
constexpr uint32_t kGoldenHello7 = 4286624723u;
constexpr uint32_t kGoldenHelloAnchor0 = 576601800u;
constexpr uint32_t kGoldenZh0 = 1165475179u;
constexpr uint32_t kGoldenZhAnchor0 = 193666322u;

// The similarity shingles of an ASCII normalized text (no CJK): 4-grams.
std::set<std::string> Grams4(const std::string& s) {
  std::set<std::string> g;
  if (s.empty()) return g;
  if (s.size() < 4) {
    g.insert(s);
    return g;
  }
  for (size_t i = 0; i + 4 <= s.size(); ++i) g.insert(s.substr(i, 4));
  return g;
}

double ExactJaccard(const std::string& a, const std::string& b) {
  const auto ga = Grams4(a), gb = Grams4(b);
  std::vector<std::string> inter;
  std::set_intersection(ga.begin(), ga.end(), gb.begin(), gb.end(), std::back_inserter(inter));
  return static_cast<double>(inter.size()) / static_cast<double>(ga.size() + gb.size() - inter.size());
}

bool StrictlyAscending(const std::vector<uint32_t>& v) {
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] <= v[i - 1]) return false;
  }
  return true;
}

TEST(Sketch, EmptyAndTinyTexts) {
  EXPECT_TRUE(ComputeSketch("").empty());
  EXPECT_TRUE(ComputeSketch("").mins.empty());
  // Shorter than one shingle: the whole text is the shingle.
  for (const char* s : {"a", "ab", "abc", "\xE4\xB8\xAD" /* 中 */}) {
    const ShingleSketch k = ComputeSketch(s);
    EXPECT_EQ(k.num_shingles, 1u) << s;
    EXPECT_EQ(k.mins.size(), 1u) << s;
    EXPECT_EQ(k.anchors.size(), 1u) << s;
  }
  EXPECT_NE(ComputeSketch("ab").mins, ComputeSketch("ba").mins);
  EXPECT_EQ(ComputeSketch("abcd").num_shingles, 1u);
  EXPECT_EQ(ComputeSketch("abcde").num_shingles, 2u);
}

TEST(Sketch, CompleteForShortTextsBottomKOtherwise) {
  const ShingleSketch small = ComputeSketch("the quick brown fox");
  EXPECT_EQ(small.num_shingles, Grams4("the quick brown fox").size());
  EXPECT_EQ(small.mins.size(), small.num_shingles);
  EXPECT_TRUE(small.complete());
  EXPECT_TRUE(StrictlyAscending(small.mins));
  std::string big;
  for (int i = 0; i < 100; ++i) big += "word" + std::to_string(i * 7919 % 1000) + " ";
  big.pop_back();
  const ShingleSketch k = ComputeSketch(big);
  EXPECT_EQ(k.num_shingles, Grams4(big).size());
  EXPECT_EQ(k.mins.size(), kSketchSize);
  EXPECT_FALSE(k.complete());
  EXPECT_TRUE(StrictlyAscending(k.mins));
  EXPECT_EQ(k.anchors.size(), kAnchorCount);
  EXPECT_TRUE(StrictlyAscending(k.anchors));
  // Repeated text: the distinct count, not the number of positions.
  EXPECT_EQ(ComputeSketch("abab abab abab abab").num_shingles, Grams4("abab abab abab abab").size());
}

TEST(Sketch, SpacesNextToCjkDoNotCount) {
  // Punctuation between Chinese characters normalizes to a space; the sketch
  // ignores it. Between words of spaced scripts a space is a boundary.
  EXPECT_EQ(ComputeSketch("\xE4\xBD\xA0\xE5\xA5\xBD \xE4\xB8\x96\xE7\x95\x8C"),  // 你好 世界
            ComputeSketch("\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C"));  // 你好世界
  EXPECT_EQ(ComputeSketch("iphone \xE5\x8F\x91\xE5\xB8\x83"), ComputeSketch("iphone\xE5\x8F\x91\xE5\xB8\x83"));
  EXPECT_NE(ComputeSketch("hello world"), ComputeSketch("helloworld"));
}

TEST(Sketch, GoldenValues) {
  // Sketch scheme v1 is persisted (EncodeSignatureExtra): these must never
  // change under kSketchVersion = 1.
  const ShingleSketch k = ComputeSketch("hello world");
  ASSERT_EQ(k.num_shingles, 8u);
  ASSERT_EQ(k.mins.size(), 8u);
  const ShingleSketch z = ComputeSketch("\xE5\xBA\x8A\xE5\x89\x8D\xE6\x98\x8E\xE6\x9C\x88\xE5\x85\x89");  // 床前明月光
  ASSERT_EQ(z.num_shingles, 4u);
  EXPECT_EQ(k.mins[0], kGoldenHello0);
  EXPECT_EQ(k.mins[7], kGoldenHello7);
  EXPECT_EQ(k.anchors[0], kGoldenHelloAnchor0);
  EXPECT_EQ(z.mins[0], kGoldenZh0);
  EXPECT_EQ(z.anchors[0], kGoldenZhAnchor0);
}

TEST(Similarity, ExactForSmallSets) {
  // 4-grams {abcd, bcde, cdef} vs {abcd, bcde, cdeg}: J = 2/4.
  SimilarityEstimate e = EstimateSimilarity(ComputeSketch("abcdef"), ComputeSketch("abcdeg"));
  EXPECT_TRUE(e.exact);
  EXPECT_DOUBLE_EQ(e.jaccard, 0.5);
  EXPECT_DOUBLE_EQ(e.containment, 2.0 / 3.0);
  // Bigrams of 一二三四 vs 一二三五: {一二, 二三, 三四} / {一二, 二三, 三五}.
  e = EstimateSimilarity(ComputeSketch("\xE4\xB8\x80\xE4\xBA\x8C\xE4\xB8\x89\xE5\x9B\x9B"),
                         ComputeSketch("\xE4\xB8\x80\xE4\xBA\x8C\xE4\xB8\x89\xE4\xBA\x94"));
  EXPECT_DOUBLE_EQ(e.jaccard, 0.5);
  // Identical, disjoint, contained.
  e = EstimateSimilarity(ComputeSketch("same text here"), ComputeSketch("same text here"));
  EXPECT_DOUBLE_EQ(e.jaccard, 1.0);
  EXPECT_DOUBLE_EQ(e.containment, 1.0);
  e = EstimateSimilarity(ComputeSketch("aaaaaaa"), ComputeSketch("bbbbbbb"));
  EXPECT_DOUBLE_EQ(e.jaccard, 0.0);
  e = EstimateSimilarity(ComputeSketch("the cat sat"), ComputeSketch("the cat sat on the mat"));
  EXPECT_DOUBLE_EQ(e.containment, 1.0);
  EXPECT_NEAR(e.jaccard, ExactJaccard("the cat sat", "the cat sat on the mat"), 1e-12);
  // Empty sketches give zeros.
  e = EstimateSimilarity(ShingleSketch{}, ComputeSketch("x"));
  EXPECT_EQ(e.jaccard, 0.0);
  EXPECT_FALSE(e.exact);
}

TEST(Similarity, EstimatesLargeSetsWithinTolerance) {
  // Random word texts with controlled overlap; the estimate stays within
  // about 4 standard errors of the exact Jaccard of the 4-gram sets.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> word(0, 5000);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::string> words;
    for (int i = 0; i < 120; ++i) words.push_back("w" + std::to_string(word(rng)));
    std::string a, b;
    const int changed = trial * 3;
    for (int i = 0; i < 120; ++i) {
      a += words[i] + " ";
      b += (i < changed ? "x" + std::to_string(word(rng)) : words[i]) + " ";
    }
    a.pop_back();
    b.pop_back();
    const double exact = ExactJaccard(a, b);
    const SimilarityEstimate e = EstimateSimilarity(ComputeSketch(a), ComputeSketch(b));
    EXPECT_FALSE(e.exact);
    const double se = std::sqrt(std::max(exact * (1 - exact), 0.01) / static_cast<double>(kSketchSize));
    EXPECT_NEAR(e.jaccard, exact, 4 * se + 1e-9) << "trial " << trial;
    EXPECT_GE(e.containment_sample, 32u);
  }
}

// The early-stopping form answers "estimate >= t" exactly as the full
// estimate does, at every threshold, for complete and incomplete sketches
// with every degree of overlap, and fills the same estimate when it accepts.
TEST(Similarity, AtLeastAgreesWithTheFullEstimate) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> word(0, 3000);
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 3 + trial % 60;  // 3..62 words: complete and incomplete sketches
    std::string a, b;
    const int changed = static_cast<int>(rng() % static_cast<unsigned>(n + 1));
    for (int i = 0; i < n; ++i) {
      const std::string w = "w" + std::to_string(word(rng));
      a += w + " ";
      b += (i < changed ? "x" + std::to_string(word(rng)) : w) + " ";
    }
    const ShingleSketch sa = ComputeSketch(a), sb = ComputeSketch(b);
    const SimilarityEstimate full = EstimateSimilarity(sa, sb);
    for (double t : {0.0, 0.1, 0.35, 0.5, 0.75, full.jaccard, 1.0}) {
      SimilarityEstimate e;
      const bool at_least = EstimateSimilarityAtLeast(sa.mins.data(), sa.mins.size(), sa.num_shingles, sb.mins.data(),
                                                      sb.mins.size(), sb.num_shingles, t, &e);
      ASSERT_EQ(at_least, full.jaccard >= t) << "trial " << trial << " t " << t;
      if (at_least) {
        EXPECT_EQ(e.jaccard, full.jaccard);
        EXPECT_EQ(e.containment, full.containment);
        ++accepted;
      } else {
        ++rejected;
      }
    }
  }
  EXPECT_GT(accepted, 200);
  EXPECT_GT(rejected, 200);
}

TEST(Similarity, CjkDetection) {
  EXPECT_TRUE(IsCjkCodePoint(0x4E2D));   // 中
  EXPECT_TRUE(IsCjkCodePoint(0x3042));   // あ
  EXPECT_TRUE(IsCjkCodePoint(0x30AB));   // カ
  EXPECT_TRUE(IsCjkCodePoint(0xAC00));   // 가
  EXPECT_TRUE(IsCjkCodePoint(0x20000));  // 𠀀
  EXPECT_FALSE(IsCjkCodePoint('a'));
  EXPECT_FALSE(IsCjkCodePoint(0x00E9));  // é
  EXPECT_FALSE(IsCjkCodePoint(0x0E01));  // Thai
}

TEST(SignatureExtra, RoundTripAndLegacy) {
  auto fp = std::move(Fingerprinter::Create(FingerprintOptions{})).value();
  TextAnalysis a;
  fp.Analyze("Some text, long enough to have a few shingles.", &a);
  const DocSignature sig = MakeSignature(a);
  ASSERT_TRUE(sig.has_sketch());
  EXPECT_EQ(sig.num_chars, a.num_chars);
  const std::string bytes = EncodeSignatureExtra(sig);
  EXPECT_EQ(bytes.size(), 11 + 4 * (sig.sketch.mins.size() + sig.sketch.anchors.size()));
  DocSignature back{sig.content_hash, sig.fingerprint, sig.has_features};
  ASSERT_TRUE(DecodeSignatureExtra(bytes, &back).ok());
  EXPECT_EQ(back, sig);
  // No sketch <-> empty bytes.
  EXPECT_EQ(EncodeSignatureExtra(DocSignature{1, 2, true}), "");
  DocSignature legacy = sig;
  ASSERT_TRUE(DecodeSignatureExtra("", &legacy).ok());
  EXPECT_FALSE(legacy.has_sketch());
  EXPECT_EQ(legacy.num_chars, 0u);
  EXPECT_EQ(legacy.fingerprint, sig.fingerprint);
}

TEST(SignatureExtra, RejectsMalformedBytes) {
  auto fp = std::move(Fingerprinter::Create(FingerprintOptions{})).value();
  TextAnalysis a;
  fp.Analyze("another text with enough characters to sketch", &a);
  const DocSignature sig = MakeSignature(a);
  const std::string good = EncodeSignatureExtra(sig);
  auto decode = [&](std::string bytes) {
    DocSignature out = sig;
    out.sketch.mins.push_back(1);  // marker: must survive a failed decode
    const Status st = DecodeSignatureExtra(bytes, &out);
    if (!st.ok()) {
      EXPECT_EQ(out.sketch.mins.back(), 1u);
    }
    return st.code();
  };
  EXPECT_EQ(decode(good), Status::Code::kOk);
  std::string v = good;
  v[0] = 2;
  EXPECT_EQ(decode(v), Status::Code::kNotSupported);
  EXPECT_EQ(decode(good.substr(0, 5)), Status::Code::kCorruption);
  EXPECT_EQ(decode(good.substr(0, good.size() - 1)), Status::Code::kCorruption);
  EXPECT_EQ(decode(good + "x"), Status::Code::kCorruption);
  std::string swapped = good;  // two mins out of order
  std::swap_ranges(swapped.begin() + 10, swapped.begin() + 14, swapped.begin() + 14);
  EXPECT_EQ(decode(swapped), Status::Code::kCorruption);
  std::string count = good;
  count[9] = static_cast<char>(count[9] + 1);
  EXPECT_EQ(decode(count), Status::Code::kCorruption);
}

// ---- the policy in NearDupSet ------------------------------------------------

class Policy : public ::testing::Test {
 protected:
  Policy() : fp_(std::move(Fingerprinter::Create(FingerprintOptions{})).value()) {}
  DocSignature Sig(const std::string& text) const {
    TextAnalysis a;
    fp_.Analyze(text, &a);
    return MakeSignature(a);
  }
  static std::unique_ptr<NearDupSet> Set(RecheckOptions r = {}, int k = 3) {
    NearDupOptions o;
    o.k = k;
    o.recheck = r;
    return std::move(NearDupSet::Create(o)).value();
  }
  static std::optional<DuplicateMatch> Find(const NearDupSet& set, const DocSignature& sig) {
    std::optional<DuplicateMatch> best;
    EXPECT_TRUE(set.FindDuplicate(sig, &best).ok());
    return best;
  }
  Fingerprinter fp_;
};

TEST_F(Policy, ShortEditedRepostIsFoundBeyondTheFingerprintRadius) {
  const std::string a = "\xE4\xB8\x89\xE5\x8B\xA4\xE4\xB8\x80\xE6\x87\x92\xEF\xBC\x8C\xE6\x83\xB3\xE6\x87\x92"
                        "\xE4\xB8\x8D\xE5\xBE\x97\xE6\x87\x92\xEF\xBC\x9B\xE4\xB8\x89\xE6\x87\x92\xE4\xB8\x80"
                        "\xE5\x8B\xA4\xEF\xBC\x8C\xE6\x83\xB3\xE5\x8B\xA4\xE4\xB8\x8D\xE5\xBE\x97\xE5\x8B\xA4"
                        "\xE3\x80\x82";  // 三勤一懒，想懒不得懒；三懒一勤，想勤不得勤。
  const std::string b = "\xE8\xBD\xAC\xE5\x8F\x91\xEF\xBC\x9A" + a.substr(0, 30) + a.substr(33);  // 转发： + one char dropped
  const DocSignature sa = Sig(a), sb = Sig(b);
  auto set = Set();
  ASSERT_TRUE(set->Insert(1, sa).ok());
  const auto m = Find(*set, sb);
  ASSERT_TRUE(m.has_value()) << "distance " << HammingDistance(sa.fingerprint, sb.fingerprint);
  EXPECT_EQ(m->id, 1u);
  EXPECT_TRUE(m->rechecked);
  EXPECT_FALSE(m->exact);
  EXPECT_NEAR(m->similarity, EstimateSimilarity(sa.sketch, sb.sketch).jaccard, 1e-12);
  EXPECT_GT(m->similarity, 0.5);
  // The plain rule needs the fingerprint within k.
  RecheckOptions off;
  off.enabled = false;
  auto plain = Set(off);
  ASSERT_TRUE(plain->Insert(1, sa).ok());
  EXPECT_EQ(Find(*plain, sb).has_value(), HammingDistance(sa.fingerprint, sb.fingerprint) <= 3);
}

TEST_F(Policy, ShortTextsNeedSimilarityEvenAtDistanceZero) {
  // Same fingerprint, unrelated sketches: rejected for short texts.
  DocSignature kept = Sig("completely different words about gardens");
  DocSignature query = Sig("a sentence on databases and their indexes");
  query.fingerprint = kept.fingerprint;
  auto set = Set();
  ASSERT_TRUE(set->Insert(7, kept).ok());
  EXPECT_FALSE(Find(*set, query).has_value());
  // The plain rule accepts it; so does a signature without a sketch.
  RecheckOptions off;
  off.enabled = false;
  auto plain = Set(off);
  ASSERT_TRUE(plain->Insert(7, kept).ok());
  ASSERT_TRUE(Find(*plain, query).has_value());
  DocSignature legacy{query.content_hash, query.fingerprint, true};
  const auto m = Find(*set, legacy);
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->rechecked);
  EXPECT_DOUBLE_EQ(m->similarity, 1.0);  // from distance 0
}

TEST_F(Policy, LongPairsWithinKNeedNoRecheck) {
  std::string a, b;
  for (int i = 0; i < 60; ++i) a += "alpha" + std::to_string(i) + " ";
  for (int i = 0; i < 60; ++i) b += "omega" + std::to_string(i) + " ";
  DocSignature ka = Sig(a), qb = Sig(b);
  ASSERT_GT(ka.num_chars, 200u);
  ASSERT_GT(qb.num_chars, 200u);
  qb.fingerprint = ka.fingerprint ^ 0b101;  // distance 2
  auto set = Set();
  ASSERT_TRUE(set->Insert(3, ka).ok());
  auto m = Find(*set, qb);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->distance, 2);
  EXPECT_TRUE(m->rechecked);
  EXPECT_LT(m->similarity, 0.3);  // reported honestly
  // Beyond k a long pair must pass the re-check.
  qb.fingerprint = ka.fingerprint ^ 0b1111;
  EXPECT_FALSE(Find(*set, qb).has_value());
}

TEST_F(Policy, MostSimilarCandidateWins) {
  const std::string base = "the early bird catches the worm but the second mouse gets the cheese";
  const DocSignature far = Sig(base + " and some more words appended here");
  const DocSignature near = Sig(base + " today");
  auto set = Set();
  ASSERT_TRUE(set->Insert(1, far).ok());
  ASSERT_TRUE(set->Insert(2, near).ok());
  std::optional<DuplicateMatch> best;
  std::vector<DuplicateMatch> all;
  ASSERT_TRUE(set->FindDuplicate(Sig(base), &best, &all).ok());
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->id, 2u);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, 2u);
  EXPECT_GE(all[0].similarity, all[1].similarity);
}

TEST_F(Policy, SmallTextsUseTheLowerThreshold) {
  // Two 14-shingle texts sharing 7: J = 7/21.
  const DocSignature a = Sig("abcdefghijklmnopq");
  const DocSignature b = Sig("abcdefghijXYZWVUT");
  const double j = EstimateSimilarity(a.sketch, b.sketch).jaccard;
  ASSERT_NEAR(j, 7.0 / 21.0, 1e-12);
  RecheckOptions r;
  r.min_similarity_small = 0.3;
  auto set = Set(r);
  ASSERT_TRUE(set->Insert(1, a).ok());
  EXPECT_TRUE(Find(*set, b).has_value());
  r.small_text_shingles = 10;  // now "not small": needs min_similarity
  ASSERT_TRUE(set->SetPolicy(r).ok());
  EXPECT_FALSE(Find(*set, b).has_value());
}

TEST_F(Policy, RemoveForgetsSketchAndAnchors) {
  const DocSignature a = Sig("a short post about the weather in the city today");
  const DocSignature b = Sig("RT: a short post about the weather in the city today!!");
  auto set = Set();
  ASSERT_TRUE(set->Insert(5, a).ok());
  EXPECT_EQ(set->sketches(), 1u);
  EXPECT_TRUE(Find(*set, b).has_value());
  EXPECT_TRUE(set->Remove(5, a));
  EXPECT_EQ(set->sketches(), 0u);
  EXPECT_FALSE(Find(*set, b).has_value());
  // Many inserts and removes keep the tables consistent.
  std::vector<DocSignature> sigs;
  for (int i = 0; i < 3000; ++i) {
    sigs.push_back(Sig("message number " + std::to_string(i * 7919) + " about topic " + std::to_string(i % 97)));
    ASSERT_TRUE(set->Insert(100 + i, sigs.back()).ok());
  }
  const size_t with_all = set->MemoryBytes();
  for (int i = 0; i < 3000; i += 2) ASSERT_TRUE(set->Remove(100 + i, sigs[i]));
  for (int i = 0; i < 3000; ++i) {
    const auto m = Find(*set, sigs[i]);
    if (i % 2 == 1) {
      ASSERT_TRUE(m.has_value()) << i;
      EXPECT_EQ(m->id, 100u + i);
    } else if (m.has_value()) {
      EXPECT_NE(m->id, 100u + i);
    }
  }
  EXPECT_EQ(set->sketches(), 1500u);
  EXPECT_GT(with_all, 0u);
}

TEST_F(Policy, CommonAnchorsBecomeStopKeys) {
  // Documents whose only link is one shared anchor, fingerprints far apart:
  // found through that anchor until it is shared by more than
  // anchor_max_postings kept documents.
  RecheckOptions r;
  r.anchor_max_postings = 4;
  r.min_similarity = 0;  // accept whatever the anchors bring
  r.min_similarity_small = 0;
  auto set = Set(r);
  auto doc = [](uint64_t i) {
    DocSignature s{1000 + i, i * 0x9E3779B97F4A7C15ULL, true};
    s.num_chars = 50;
    s.sketch.num_shingles = 2;
    s.sketch.mins = {static_cast<uint32_t>(10 + i), static_cast<uint32_t>(100000 + i)};
    s.sketch.anchors = {7, static_cast<uint32_t>(100 + i)};  // anchor 7 is shared
    return s;
  };
  DocSignature q = doc(999);
  q.fingerprint = ~doc(0).fingerprint;
  ASSERT_TRUE(set->Insert(0, doc(0)).ok());
  ASSERT_TRUE(Find(*set, q).has_value());
  for (uint64_t i = 1; i < 4; ++i) ASSERT_TRUE(set->Insert(i, doc(i)).ok());
  ASSERT_TRUE(Find(*set, q).has_value());
  ASSERT_TRUE(set->Insert(4, doc(4)).ok());  // the fifth: anchor 7 is now a stop key
  EXPECT_FALSE(Find(*set, q).has_value());
}

TEST_F(Policy, ValidatesOptions) {
  NearDupOptions o;
  o.recheck.short_k = 9;
  EXPECT_EQ(NearDupSet::Create(o).status().code(), Status::Code::kInvalidArgument);
  o = NearDupOptions{};
  o.recheck.min_similarity = 1.5;
  EXPECT_EQ(NearDupSet::Create(o).status().code(), Status::Code::kInvalidArgument);
  o = NearDupOptions{};
  o.recheck.anchors = static_cast<int>(kAnchorCount) + 1;
  EXPECT_EQ(NearDupSet::Create(o).status().code(), Status::Code::kInvalidArgument);
  auto set = Set();
  RecheckOptions r;
  r.sketch_max_chars = 10;
  EXPECT_EQ(set->SetPolicy(r).code(), Status::Code::kFailedPrecondition);
  r = RecheckOptions{};
  r.short_k = 8;
  r.min_similarity = 0.7;
  EXPECT_TRUE(set->SetPolicy(r).ok());
  EXPECT_EQ(set->options().recheck.short_k, 8);
  EXPECT_TRUE(set->set_k(5).ok());
  EXPECT_EQ(set->options().k, 5);
}

TEST_F(Policy, SketchesOnlyForTextsUpToSketchMaxChars) {
  RecheckOptions r;
  r.sketch_max_chars = 20;
  auto set = Set(r);
  ASSERT_TRUE(set->Insert(1, Sig("short one here")).ok());
  ASSERT_TRUE(set->Insert(2, Sig("a longer text that exceeds twenty characters")).ok());
  EXPECT_EQ(set->sketches(), 1u);
}

TEST_F(Policy, DeduplicatorPassesThePolicyAndSimilarity) {
  DedupOptions options;
  auto d = std::move(Deduplicator::Create(options)).value();
  std::vector<std::string> texts = {
      "Life is what happens to you while you're busy making other plans. -- John Lennon",
      "RT @user: Life is what happens while you're busy making other plans. -- John Lennon",
      "An unrelated remark about the weather and nothing else at all.",
  };
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<DedupDecision> out;
  ASSERT_TRUE(d->ProcessBatch(views, &out, 1).ok());
  EXPECT_TRUE(out[1].duplicate);
  EXPECT_EQ(out[1].duplicate_of, 0u);
  EXPECT_GT(out[1].similarity, 0.5);
  EXPECT_LT(out[1].similarity, 1.0);
  EXPECT_FALSE(out[2].duplicate);
  options.recheck.enabled = false;
  auto plain = std::move(Deduplicator::Create(options)).value();
  ASSERT_TRUE(plain->ProcessBatch(views, &out, 1).ok());
  if (out[1].duplicate) {
    EXPECT_LE(out[1].distance, 3);
  }
}

}  // namespace
}  // namespace neardup
