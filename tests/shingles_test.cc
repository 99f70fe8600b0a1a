// The similarity's definition (text/shingles.h), the exact stream oracle
// against brute force, and the MinHash-LSH baseline's parameters.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "neardup/dedup/exact_stream.h"
#include "neardup/dedup/minhash_lsh.h"
#include "neardup/text/shingles.h"
#include "text/normalize.h"
#include "text/shingle_hash.h"

#include <unicode/uchar.h>

namespace neardup {
namespace {

std::vector<uint64_t> Set(const std::string& text, int n = 3) {
  std::vector<uint64_t> s;
  ShingleHashes(text, n, &s);
  return s;
}

TEST(SimilarityText, NfkcCasefoldCollapsedSpacesPunctuationKept) {
  EXPECT_EQ(SimilarityText("  Hello,\t\n World!  "), "hello, world!");
  EXPECT_EQ(SimilarityText("ＡＢＣ　１２３"), "abc 123");           // full width, ideographic space
  EXPECT_EQ(SimilarityText("Stra\xC3\x9F" "e \xEF\xAC\x81"), "strasse fi");  // ß, ﬁ ligature
  EXPECT_EQ(SimilarityText("a\xE2\x80\x8B" "b"), "ab");               // zero-width space: ignorable
  EXPECT_EQ(SimilarityText("仅允许插入、删除或旋转页面。"), "仅允许插入、删除或旋转页面。");
  EXPECT_EQ(SimilarityText("a\xC2\xA0\xE2\x80\x83" "b"), "a b");      // NBSP, em space
  EXPECT_EQ(SimilarityText("\xFF" "a"), "\xEF\xBF\xBD" "a");           // ill-formed -> U+FFFD
  EXPECT_EQ(SimilarityText(" \t "), "");
}

TEST(SimilarityText, AsciiFastPathEqualsTheGeneralPath) {
  // "é" forces the ICU path; the ASCII part must come out the same.
  for (const std::string s : {"Mixed CASE text, with\tTABS  and  spaces.", "A-Z 0-9 [x] {y} ~!@#$%^&*()"}) {
    EXPECT_EQ(SimilarityText(s + "\xC3\xA9"), SimilarityText(s) + "\xC3\xA9") << s;
  }
}

TEST(Shingles, NGramsOfCodePointsAndTheWholeShortText) {
  EXPECT_EQ(Set("abcd").size(), 2u);          // abc, bcd
  EXPECT_EQ(Set("abcabc").size(), 3u);        // abc, bca, cab (distinct)
  EXPECT_EQ(Set("ab").size(), 1u);            // shorter than n: the whole text
  EXPECT_TRUE(Set("").empty());
  EXPECT_TRUE(Set("   ").empty());
  EXPECT_EQ(Set("今天天气").size(), 2u);
  EXPECT_NE(Set("ab"), Set("abc"));           // the whole-text shingle is not a 3-gram
  EXPECT_EQ(Set("Hello World"), Set("hello   world"));
  EXPECT_NE(Set("hello, world"), Set("hello world"));  // punctuation counts
}

// The similarity text's white space test without ICU is ICU's, everywhere.
TEST(SimilarityText, NonAsciiWhiteSpaceIsIcusForEveryCodePoint) {
  int spaces = 0;
  for (uint32_t c = 0x80; c <= 0x10FFFF; ++c) {
    const bool icu = u_isUWhiteSpace(static_cast<UChar32>(c));
    ASSERT_EQ(internal::IsNonAsciiWhiteSpace(c), icu) << std::hex << c;
    spaces += icu;
  }
  EXPECT_EQ(spaces, 19);  // the set the fast test names
  EXPECT_FALSE(internal::IsNonAsciiWhiteSpace(0x110000));
}

// The n-gram loop's fixed sizes hash as ShingleHash does, for every size.
TEST(Shingles, TopHashesOfEverySizeAreShingleHashsTopBits) {
  std::vector<uint32_t> cps;
  std::mt19937 rng(5);
  for (int i = 0; i < 64; ++i) cps.push_back(rng() % 0x30000);
  for (size_t n = kMinShingleSize; n <= kMaxShingleSize; ++n) {
    const size_t count = cps.size() - n + 1;
    std::vector<uint32_t> top(count);
    internal::TopShingleHashes(cps.data(), n, count, top.data());
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(top[i], static_cast<uint32_t>(ShingleHash(cps.data() + i, n) >> 32)) << n << " " << i;
    }
  }
}

TEST(Shingles, JaccardOfKnownPairs) {
  // 0 shared of 4 + 4 = 0; identical = 1; empty pairs.
  EXPECT_DOUBLE_EQ(Jaccard(Set("abcdef"), Set("uvwxyz")), 0.0);
  EXPECT_DOUBLE_EQ(Jaccard(Set("abcdef"), Set("ABCDEF")), 1.0);
  EXPECT_DOUBLE_EQ(Jaccard(Set(""), Set("")), 1.0);
  EXPECT_DOUBLE_EQ(Jaccard(Set(""), Set("abc")), 0.0);
  // abcde: abc bcd cde; abcdx: abc bcd cdx -> 2 / 4.
  EXPECT_DOUBLE_EQ(Jaccard(Set("abcde"), Set("abcdx")), 0.5);
  // Containment of an excerpt.
  EXPECT_DOUBLE_EQ(Containment(Set("bcd"), Set("abcde")), 1.0);
}

// Random streams of edited variants of a few templates: many pairs near
// every threshold.
std::vector<std::vector<uint64_t>> RandomStream(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  const std::vector<std::string> bases = {
      "the quick brown fox jumps over the lazy dog and runs away",
      "library to integrate with Cyrus SASL authentication",
      "library to integrate with Google Maps service API",
      "可以输入字符「A-Z」。如果输入了小写字母，将被自动转换成大写字母。",
      "仅允许插入、删除或旋转页面。",
      "x"};
  const std::string alphabet = "abcdefghij ,.";
  std::vector<std::vector<uint64_t>> out;
  for (size_t i = 0; i < n; ++i) {
    std::string s = bases[rng() % bases.size()];
    const int edits = static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t pos = rng() % s.size();
      if (rng() % 2) s.insert(pos, 1, alphabet[rng() % alphabet.size()]);
      else s.erase(pos, 1);
    }
    std::vector<uint64_t> set;
    ShingleHashes(s, 1 + static_cast<int>(rng() % 4), &set);  // sizes vary widely
    out.push_back(std::move(set));
  }
  return out;
}

TEST(ExactStream, AgreesWithBruteForceAtEveryThreshold) {
  int duplicates = 0, kept = 0;
  for (double t : {0.2, 0.5, 0.7, 0.8, 0.95, 1.0}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      ExactStream fast(t);
      BruteForceStream slow(t);
      for (const auto& set : RandomStream(seed, 400)) {
        const StreamDecision a = fast.Add(set), b = slow.Add(set);
        ASSERT_EQ(a.duplicate, b.duplicate) << "t=" << t;
        ASSERT_EQ(a.duplicate_of, b.duplicate_of) << "t=" << t;
        ASSERT_DOUBLE_EQ(a.similarity, b.similarity);
        (a.duplicate ? duplicates : kept)++;
      }
    }
  }
  // Both outcomes occur plenty: the comparison is not vacuous.
  EXPECT_GT(duplicates, 1000);
  EXPECT_GT(kept, 1000);
}

TEST(MinHashLsh, BandsAsDatasketchChoosesThem) {
  // datasketch's _optimal_param with equal weights, 128 permutations.
  EXPECT_EQ(OptimalLshBands(0.5, 128).bands, 25);
  EXPECT_EQ(OptimalLshBands(0.5, 128).rows, 5);
  EXPECT_EQ(OptimalLshBands(0.7, 128).bands, 14);
  EXPECT_EQ(OptimalLshBands(0.7, 128).rows, 9);
  EXPECT_EQ(OptimalLshBands(0.8, 128).bands, 9);
  EXPECT_EQ(OptimalLshBands(0.8, 128).rows, 13);
}

TEST(MinHashLsh, FindsIdenticalAndMissesUnrelated) {
  MinHashLsh lsh(0.7);
  EXPECT_FALSE(lsh.Add(Set("the quick brown fox jumps over the lazy dog")).duplicate);
  const StreamDecision d = lsh.Add(Set("The quick brown fox jumps over the lazy dog"));
  EXPECT_TRUE(d.duplicate);
  EXPECT_EQ(d.duplicate_of, 0u);
  EXPECT_FALSE(lsh.Add(Set("completely unrelated words about databases")).duplicate);
}

}  // namespace
}  // namespace neardup
