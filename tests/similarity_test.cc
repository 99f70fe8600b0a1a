// The re-check signature (include/neardup/text/similarity.h, sketch scheme
// v2) and the similarity policy of NearDupSet that uses it
// (include/neardup/dedup/near_dup_set.h).
#include "neardup/text/similarity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "neardup/dedup/dedup.h"
#include "neardup/dedup/near_dup_set.h"
#include "neardup/text/fingerprint.h"
#include "neardup/text/shingles.h"
#include "util/sample_texts.h"

namespace neardup {
namespace {

// Sketch scheme v2 golden values (see Sketch.GoldenValues).
constexpr uint32_t kGoldenHello0 = 217296496u;
constexpr uint32_t kGoldenHello8 = 4034953134u;
constexpr uint32_t kGoldenZh0 = 504528493u;

bool StrictlyAscending(const std::vector<uint32_t>& v) {
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] <= v[i - 1]) return false;
  }
  return true;
}

// The reference: the distinct upper halves of the n-gram hashes of
// shingles.h, ascending. The sketch must be its first kSketchSize values.
std::vector<uint32_t> Reference(const std::string& text, int n = 3) {
  std::vector<uint64_t> set;
  ShingleHashes(text, n, &set);
  std::vector<uint32_t> v;
  for (uint64_t h : set) v.push_back(static_cast<uint32_t>(h >> 32));
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

double ExactJaccard(const std::string& a, const std::string& b) {
  std::vector<uint64_t> sa, sb;
  ShingleHashes(a, 3, &sa);
  ShingleHashes(b, 3, &sb);
  return Jaccard(sa, sb);
}

std::string RandomWords(std::mt19937& rng, int n, const std::string& prefix = "w") {
  std::string s;
  for (int i = 0; i < n; ++i) s += prefix + std::to_string(rng() % 5000) + " ";
  return s;
}

TEST(Sketch, IsTheBottomKOfTheDefinedNGrams) {
  std::mt19937 rng(3);
  for (const std::string& text :
       {std::string("x"), std::string("ab"), std::string("Hello, World!"), std::string("今天北京天气很好"),
        RandomWords(rng, 20), RandomWords(rng, 200), std::string("ＡＢＣ　ａｂｃ abc")}) {
    for (int n : {1, 2, 3, 5}) {
      const ShingleSketch k = ComputeSketch(text, n);
      const std::vector<uint32_t> ref = Reference(text, n);
      EXPECT_EQ(k.num_shingles, ref.size()) << text;
      ASSERT_EQ(k.mins.size(), std::min(ref.size(), kSketchSize));
      EXPECT_TRUE(std::equal(k.mins.begin(), k.mins.end(), ref.begin())) << text;
      EXPECT_TRUE(StrictlyAscending(k.mins));
      EXPECT_EQ(k.complete(), ref.size() <= kSketchSize);
      std::vector<uint32_t> anchors;
      SketchAnchors(k.mins.data(), k.mins.size(), &anchors);
      EXPECT_EQ(k.anchors, anchors);
    }
  }
  // An empty similarity text is one shingle of its own: it matches only
  // another empty text (regression: it had no sketch, and was then matched
  // by fingerprint distance to every text of empty normalized form).
  EXPECT_EQ(ComputeSketch("", 3).num_shingles, 1u);
  EXPECT_EQ(ComputeSketch(" \t ", 3), ComputeSketch("", 3));
  EXPECT_NE(ComputeSketch("", 3).mins, ComputeSketch("!", 3).mins);
  // The similarity text decides: case, width and white space do not count, punctuation does.
  EXPECT_EQ(ComputeSketch("Hello   WORLD", 3), ComputeSketch("hello world", 3));
  EXPECT_NE(ComputeSketch("hello, world", 3), ComputeSketch("hello world", 3));
}

TEST(Sketch, GoldenValues) {
  // Scheme v2 is persisted: these values may only change with kSketchVersion.
  const ShingleSketch k = ComputeSketch("hello world", 3);
  ASSERT_EQ(k.num_shingles, 9u);
  const ShingleSketch z = ComputeSketch("床前明月光", 3);
  ASSERT_EQ(z.num_shingles, 3u);
  EXPECT_EQ(k.mins[0], kGoldenHello0);
  EXPECT_EQ(k.mins[8], kGoldenHello8);
  EXPECT_EQ(z.mins[0], kGoldenZh0);
}

// The analysis folds a text once for both the fingerprint and the sketch
// (TextAnalysis::folded): the sketch made from its fold, and the analysis
// without its feature list, must be what they were made without them, for
// ASCII, CJK, mixed, ill-formed and ignorable-only texts and natural ones.
TEST(Sketch, FromTheAnalysisFoldIsTheSketchOfTheText) {
  std::vector<std::string> texts = {"", "hello world", "HeLLo  World!", "床前明月光，疑是地上霜", "Ｆｕｌｌ ｗｉｄｔｈ ﬁ",
                                    "caf\xc3\xa9 \xff\xfe broken \xe4\xb8", "\xc2\xad\xe2\x80\x8b",  // ignorables only
                                    "ΣΊΣΥΦΟΣ straße İstanbul", "混合 mixed テキスト 한국어 text"};
  for (const char* file : {"/data/sample/docs.jsonl", "/data/natural/dev/zh-short.jsonl"}) {
    for (std::string& t : testing::SampleTexts(std::string(NEARDUP_SOURCE_DIR) + file)) texts.push_back(std::move(t));
  }
  auto fp = Fingerprinter::Create(FingerprintOptions{});
  ASSERT_TRUE(fp.ok());
  TextAnalysis with, without;  // reused, as the batch analysis reuses one
  for (const std::string& t : texts) {
    fp->Analyze(t, &with);
    fp->Analyze(t, &without, /*with_features=*/false);
    EXPECT_EQ(without.fingerprint, with.fingerprint) << t;
    EXPECT_EQ(without.content_hash, with.content_hash) << t;
    EXPECT_EQ(without.num_chars, with.num_chars) << t;
    EXPECT_EQ(without.invalid_utf8, with.invalid_utf8) << t;
    EXPECT_EQ(without.num_features, with.features.size()) << t;
    EXPECT_TRUE(without.features.empty());
    for (int n : {1, 3, 5}) {
      ShingleSketch folded;
      ComputeSketch(t, n, &folded, &without.folded);
      EXPECT_EQ(folded, ComputeSketch(t, n)) << n << " " << t;
    }
  }
}

TEST(Sketch, AnchorsAreValuesAndNeighbourPairsInTurn) {
  // Anchor scheme 2 is persisted (Redis and PostgreSQL postings): these may
  // only change with kAnchorScheme.
  EXPECT_EQ(AnchorPairKey(1, 2), 0x10b3e08du);
  EXPECT_NE(AnchorPairKey(1, 2), AnchorPairKey(2, 1));
  const ShingleSketch k = ComputeSketch("hello world", 3);
  ASSERT_EQ(k.mins.size(), 9u);
  ASSERT_EQ(k.anchors.size(), 17u);  // 9 values, 8 pairs
  for (size_t i = 0; i < k.mins.size(); ++i) {
    EXPECT_EQ(k.anchors[2 * i], k.mins[i]) << i;
    if (i + 1 < k.mins.size()) {
      EXPECT_EQ(k.anchors[2 * i + 1], AnchorPairKey(k.mins[i], k.mins[i + 1])) << i;
    }
  }
  EXPECT_EQ(ComputeSketch("ab", 3).anchors, std::vector<uint32_t>{ComputeSketch("ab", 3).mins[0]});
  // A long text: kAnchorCount distinct keys from its 16 smallest values.
  std::mt19937 rng(3);
  const ShingleSketch l = ComputeSketch(RandomWords(rng, 200), 3);
  ASSERT_EQ(l.anchors.size(), kAnchorCount);
  EXPECT_EQ(std::set<uint32_t>(l.anchors.begin(), l.anchors.end()).size(), kAnchorCount);
  EXPECT_EQ(l.anchors[kAnchorCount - 1], AnchorPairKey(l.mins[15], l.mins[16]));
  // Repeats are left out, and the turn goes on past them.
  const uint32_t mins[3] = {7, 9, AnchorPairKey(7, 9)};  // 0x72424780: the third value repeats the first pair
  std::vector<uint32_t> out;
  SketchAnchors(mins, 3, &out);
  EXPECT_EQ(out, (std::vector<uint32_t>{7, mins[2], 9, AnchorPairKey(9, mins[2])}));
}

// SketchAnchors against its definition, one search of the list per key:
// random values, many repeated keys (a value that is an earlier pair's key,
// equal top bits, 0) and every length.
TEST(Sketch, AnchorsAsTheDefinitionSaysOnRepeats) {
  auto plain = [](const std::vector<uint32_t>& mins) {
    std::vector<uint32_t> out;
    auto add = [&](uint32_t key) {
      if (out.size() < kAnchorCount && std::find(out.begin(), out.end(), key) == out.end()) out.push_back(key);
    };
    for (size_t i = 0; i < mins.size() && out.size() < kAnchorCount; ++i) {
      add(mins[i]);
      if (i + 1 < mins.size()) add(AnchorPairKey(mins[i], mins[i + 1]));
    }
    return out;
  };
  std::mt19937 rng(41);
  std::vector<uint32_t> mins, got;
  for (int trial = 0; trial < 20000; ++trial) {
    mins.clear();
    const size_t n = rng() % 48;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t r = rng();
      switch (rng() % 6) {
        case 0: mins.push_back(i > 1 ? AnchorPairKey(mins[i - 2], mins[i - 1]) : r); break;  // an earlier pair's key
        case 1: mins.push_back(i > 0 ? mins[rng() % i] : r); break;                          // a repeat (not ascending)
        case 2: mins.push_back(0xFC000000u | (rng() % 64)); break;                           // one slot, the last: wraps
        case 3: mins.push_back(0); break;
        default: mins.push_back(r);
      }
    }
    SketchAnchors(mins.data(), mins.size(), &got);
    ASSERT_EQ(got, plain(mins)) << trial;
  }
}

TEST(Similarity, ExactForSetsThatFitTheSketch) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    const std::string a = RandomWords(rng, 1 + trial % 30);
    std::string b = a;
    for (int e = 0; e < trial % 5; ++e) b.insert(rng() % (b.size() + 1), 1, static_cast<char>('a' + rng() % 26));
    const ShingleSketch sa = ComputeSketch(a, 3), sb = ComputeSketch(b, 3);
    if (!sa.complete() || !sb.complete()) continue;
    const SimilarityEstimate e = EstimateSimilarity(sa, sb);
    EXPECT_TRUE(e.exact);
    // Equal to the definition up to 32-bit collisions, which these sizes never have.
    EXPECT_NEAR(e.jaccard, ExactJaccard(a, b), 1e-12) << a << " | " << b;
  }
  SimilarityEstimate e = EstimateSimilarity(ShingleSketch{}, ComputeSketch("x", 3));
  EXPECT_EQ(e.jaccard, 0.0);
}

TEST(Similarity, EstimatesLargeSetsWithinTolerance) {
  // Random word texts with controlled overlap; the estimate stays within
  // about 4 standard errors of the exact Jaccard of the n-gram sets.
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
    const SimilarityEstimate e = EstimateSimilarity(ComputeSketch(a, 3), ComputeSketch(b, 3));
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
    const int n = 3 + trial % 120;  // complete and incomplete sketches
    std::string a, b;
    const int changed = static_cast<int>(rng() % static_cast<unsigned>(n + 1));
    for (int i = 0; i < n; ++i) {
      const std::string w = "w" + std::to_string(word(rng));
      a += w + " ";
      b += (i < changed ? "x" + std::to_string(word(rng)) : w) + " ";
    }
    const ShingleSketch sa = ComputeSketch(a, 3), sb = ComputeSketch(b, 3);
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

DocSignature SignatureOf(const std::string& text) {
  static const Fingerprinter fp = std::move(Fingerprinter::Create(FingerprintOptions{})).value();
  TextAnalysis a;
  fp.Analyze(text, &a);
  return MakeSignature(a, text, 3);
}

TEST(SignatureExtra, RoundTripAndLegacy) {
  std::mt19937 rng(1);
  for (const std::string& text : {std::string("Some text, long enough to have a few shingles."), RandomWords(rng, 300)}) {
    const DocSignature sig = SignatureOf(text);
    ASSERT_TRUE(sig.has_sketch());
    const std::string bytes = EncodeSignatureExtra(sig);
    EXPECT_EQ(bytes.size(), 11 + 4 * sig.sketch.mins.size());
    DocSignature back{sig.content_hash, sig.fingerprint, sig.has_features};
    ASSERT_TRUE(DecodeSignatureExtra(bytes, &back).ok());
    EXPECT_EQ(back, sig);
  }
  const DocSignature sig = SignatureOf("abc def");
  // No sketch <-> empty bytes; scheme v1 bytes (other shingles) read as no sketch.
  EXPECT_EQ(EncodeSignatureExtra(DocSignature{1, 2, true}), "");
  for (const std::string& legacy_bytes : {std::string(), std::string("\x01garbage-of-v1")}) {
    DocSignature legacy = sig;
    ASSERT_TRUE(DecodeSignatureExtra(legacy_bytes, &legacy).ok());
    EXPECT_FALSE(legacy.has_sketch());
    EXPECT_EQ(legacy.num_chars, 0u);
    EXPECT_EQ(legacy.fingerprint, sig.fingerprint);
  }
}

TEST(SignatureExtra, RejectsMalformedBytes) {
  const DocSignature sig = SignatureOf("another text with enough characters to sketch");
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
  v[0] = 3;
  EXPECT_EQ(decode(v), Status::Code::kNotSupported);
  EXPECT_EQ(decode(good.substr(0, 5)), Status::Code::kCorruption);
  EXPECT_EQ(decode(good.substr(0, good.size() - 1)), Status::Code::kCorruption);
  EXPECT_EQ(decode(good + "x"), Status::Code::kCorruption);
  std::string swapped = good;  // two mins out of order
  std::swap_ranges(swapped.begin() + 11, swapped.begin() + 15, swapped.begin() + 15);
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
    return MakeSignature(a, text, RecheckOptions{}.shingle_size);
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
  // One word changed (非常 -> 特别): similarity 0.7949 >= 0.7, fingerprints 8
  // bits apart (> k and > short_k): only an anchor can bring the candidate.
  const std::string a = "今天北京的天气非常好，我们一起去公园散步吧，顺便看看新开的图书馆和博物馆。";
  const std::string b = "今天北京的天气特别好，我们一起去公园散步吧，顺便看看新开的图书馆和博物馆。";
  const double truth = ExactJaccard(a, b);
  ASSERT_GE(truth, RecheckOptions{}.threshold);
  ASSERT_LT(truth, 0.85);
  const DocSignature sa = Sig(a), sb = Sig(b);
  const int dist = HammingDistance(sa.fingerprint, sb.fingerprint);
  ASSERT_GT(dist, RecheckOptions{}.short_k);
  ASSERT_GT(dist, 3);
  auto set = Set();
  ASSERT_TRUE(set->Insert(1, sa).ok());
  const auto m = Find(*set, sb);
  ASSERT_TRUE(m.has_value()) << "distance " << dist;
  EXPECT_EQ(m->id, 1u);
  EXPECT_EQ(m->distance, dist);
  EXPECT_TRUE(m->rechecked);
  EXPECT_FALSE(m->exact);
  EXPECT_TRUE(m->similarity_exact);
  EXPECT_DOUBLE_EQ(m->similarity, truth);
  // Without anchors the fingerprint radius cannot reach it.
  RecheckOptions no_anchors;
  no_anchors.anchors = 0;
  auto fp_only = Set(no_anchors);
  ASSERT_TRUE(fp_only->Insert(1, sa).ok());
  EXPECT_FALSE(Find(*fp_only, sb).has_value());
  // The plain rule needs the fingerprint within k.
  RecheckOptions off;
  off.enabled = false;
  auto plain = Set(off);
  ASSERT_TRUE(plain->Insert(1, sa).ok());
  EXPECT_FALSE(Find(*plain, sb).has_value());
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

TEST_F(Policy, LongPairsWithinKAreDecidedBySimilarityToo) {
  // The old rule accepted any two long texts within k; the similarity decides now.
  std::string a, b;
  for (int i = 0; i < 60; ++i) a += "alpha" + std::to_string(i) + " ";
  for (int i = 0; i < 60; ++i) b += "omega" + std::to_string(i) + " ";
  DocSignature ka = Sig(a), qb = Sig(b);
  ASSERT_GT(ka.num_chars, 200u);
  qb.fingerprint = ka.fingerprint ^ 0b101;  // distance 2
  auto set = Set();
  ASSERT_TRUE(set->Insert(3, ka).ok());
  EXPECT_FALSE(Find(*set, qb).has_value());
  // The plain rule still accepts it.
  RecheckOptions off;
  off.enabled = false;
  auto plain = Set(off);
  ASSERT_TRUE(plain->Insert(3, ka).ok());
  EXPECT_TRUE(Find(*plain, qb).has_value());
}

TEST_F(Policy, MostSimilarCandidateWins) {
  // Two candidates above the threshold: the more similar one wins although
  // it is farther (7 bits vs 2) and newer (larger id); a third below the
  // threshold is not a match at all.
  const std::string base = "the early bird catches the worm but the second mouse gets the cheese";
  const std::string nearer = base + " today";                                               // J 0.9180, d 2
  const std::string similar = "the early bird catches a worm but the second mouse gets the cheese";  // J 0.9322, d 7
  const std::string below = base + " and some more words appended here";                   // J 0.6667
  const DocSignature q = Sig(base), s1 = Sig(nearer), s2 = Sig(similar), s3 = Sig(below);
  const double j1 = ExactJaccard(base, nearer), j2 = ExactJaccard(base, similar);
  ASSERT_GE(j1, 0.7);
  ASSERT_GT(j2, j1);
  ASSERT_LT(ExactJaccard(base, below), 0.7);
  ASSERT_LT(HammingDistance(q.fingerprint, s1.fingerprint), HammingDistance(q.fingerprint, s2.fingerprint));
  auto set = Set();
  ASSERT_TRUE(set->Insert(1, s1).ok());
  ASSERT_TRUE(set->Insert(2, s2).ok());
  ASSERT_TRUE(set->Insert(3, s3).ok());
  std::optional<DuplicateMatch> best;
  std::vector<DuplicateMatch> all;
  ASSERT_TRUE(set->FindDuplicate(q, &best, &all).ok());
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->id, 2u);
  EXPECT_DOUBLE_EQ(best->similarity, j2);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, 2u);
  EXPECT_EQ(all[1].id, 1u);
  EXPECT_DOUBLE_EQ(all[1].similarity, j1);
  // The plain rule ranks by distance instead (and only within k).
  RecheckOptions off;
  off.enabled = false;
  auto plain = Set(off);
  ASSERT_TRUE(plain->Insert(1, s1).ok());
  ASSERT_TRUE(plain->Insert(2, s2).ok());
  const auto p = Find(*plain, q);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->id, 1u);
}

TEST_F(Policy, TheThresholdIsTheRuleExactlyForSetsThatFit) {
  // abcdefghijklmnopq: 15 trigrams; abcdefghijXYZWVUT shares abc..hij (8): J = 8/22.
  const DocSignature a = Sig("abcdefghijklmnopq");
  const DocSignature b = Sig("abcdefghijXYZWVUT");
  const double j = EstimateSimilarity(a.sketch, b.sketch).jaccard;
  ASSERT_NEAR(j, 8.0 / 22.0, 1e-12);
  RecheckOptions r;
  r.threshold = 8.0 / 22.0;  // reaching the threshold is enough
  auto set = Set(r);
  ASSERT_TRUE(set->Insert(1, a).ok());
  const auto m = Find(*set, b);
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->similarity_exact);
  r.threshold = 8.0 / 22.0 + 1e-9;
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
  // anchor_max_postings kept documents. The sketches are consistent with
  // scheme v2 (anchors = the first values of mins): a query shares exactly
  // the value 7 with each document, similarity 1/3 >= the threshold.
  RecheckOptions r;
  r.anchor_max_postings = 4;
  r.threshold = 0.3;
  auto set = Set(r);
  auto doc = [](uint64_t i) {
    DocSignature s{1000 + i, i * 0x9E3779B97F4A7C15ULL, true};
    s.num_chars = 50;
    s.sketch.num_shingles = 2;
    s.sketch.mins = {7, static_cast<uint32_t>(100 + i)};  // value 7 is shared
    s.sketch.anchors = s.sketch.mins;
    return s;
  };
  DocSignature q = doc(999);
  q.fingerprint = ~doc(0).fingerprint;
  ASSERT_TRUE(set->Insert(0, doc(0)).ok());
  auto m = Find(*set, q);
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->rechecked);
  EXPECT_DOUBLE_EQ(m->similarity, 1.0 / 3.0);
  for (uint64_t i = 1; i < 4; ++i) ASSERT_TRUE(set->Insert(i, doc(i)).ok());
  ASSERT_TRUE(Find(*set, q).has_value());
  ASSERT_TRUE(set->Insert(4, doc(4)).ok());  // the fifth: anchor 7 is now a stop key
  EXPECT_FALSE(Find(*set, q).has_value());
  // Only that key stops: a query sharing doc 4's other anchor still finds it.
  DocSignature q4 = doc(4);
  q4.content_hash = 77;
  q4.fingerprint = ~doc(4).fingerprint;
  m = Find(*set, q4);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->id, 4u);
}

TEST_F(Policy, ValidatesOptions) {
  NearDupOptions o;
  o.recheck.short_k = 9;
  EXPECT_EQ(NearDupSet::Create(o).status().code(), Status::Code::kInvalidArgument);
  o = NearDupOptions{};
  o.recheck.threshold = 1.5;
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
  r.threshold = 0.9;
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
