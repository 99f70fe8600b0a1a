// Tokenization rules (docs/fingerprint.md, "Tokenization", "Features").
#include "text/tokenizer.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <string>
#include <utility>
#include <vector>

#include "text/normalize.h"

namespace neardup::internal {
namespace {

using Tokens = std::vector<std::pair<std::string, uint32_t>>;  // token, tf

Tokens Collect(const FeatureCounter& c) {
  Tokens t;
  for (const auto& e : c.entries()) {
    EXPECT_EQ(e.hash, XXH3_64bits(c.token(e).data(), c.token(e).size()));
    t.emplace_back(std::string(c.token(e)), e.tf);
  }
  return t;
}

Tokens Mixed(std::string_view normalized, int n = 2) {
  FeatureCounter c;
  TokenizeMixed(normalized, n, &c);
  return Collect(c);
}

Tokens Icu(std::string_view normalized) {
  FeatureCounter c;
  EXPECT_TRUE(TokenizeIcuWords(normalized, &c));
  return Collect(c);
}

Tokens Ones(std::initializer_list<const char*> toks) {
  Tokens t;
  for (const char* s : toks) t.emplace_back(s, 1);
  return t;
}

TEST(TokenizeMixedTest, BriefExample) {
  EXPECT_EQ(Mixed("iphone15发布会在北京"),
            Ones({"iphone15", "发布", "布会", "会在", "在北", "北京"}));
}

TEST(TokenizeMixedTest, WordsAndCounts) {
  EXPECT_EQ(Mixed(""), Tokens{});
  EXPECT_EQ(Mixed("hello world"), Ones({"hello", "world"}));
  EXPECT_EQ(Mixed("b a b c a b"), (Tokens{{"b", 3}, {"a", 2}, {"c", 1}}));
  EXPECT_EQ(Mixed("café naïve"), Ones({"café", "naïve"}));
  EXPECT_EQ(Mixed("нейронные сети"), Ones({"нейронные", "сети"}));
  EXPECT_EQ(Mixed("สวัสดีครับ"), Ones({"สวัสดีครับ"}));  // no CJK: one word
}

TEST(TokenizeMixedTest, CjkNgrams) {
  EXPECT_EQ(Mixed("北京", 2), Ones({"北京"}));
  EXPECT_EQ(Mixed("北", 2), Ones({"北"}));          // shorter than n: whole sub-run
  EXPECT_EQ(Mixed("北京", 3), Ones({"北京"}));
  EXPECT_EQ(Mixed("北京市", 3), Ones({"北京市"}));
  EXPECT_EQ(Mixed("北京市长", 3), Ones({"北京市", "京市长"}));
  EXPECT_EQ(Mixed("北京市", 1), Ones({"北", "京", "市"}));
  EXPECT_EQ(Mixed("一二三四五", 4), Ones({"一二三四", "二三四五"}));
  EXPECT_EQ(Mixed("哈哈哈", 2), (Tokens{{"哈哈", 2}}));
  // Runs split at spaces; digits/latin between CJK make separate sub-runs.
  EXPECT_EQ(Mixed("北京 上海"), Ones({"北京", "上海"}));
  EXPECT_EQ(Mixed("2023年5月"), Ones({"2023", "年", "5", "月"}));
  EXPECT_EQ(Mixed("用python写代码"), Ones({"用", "python", "写代", "代码"}));
}

TEST(TokenizeMixedTest, KanaHangulAndMarks) {
  EXPECT_EQ(Mixed("コーヒー"), Ones({"コー", "ーヒ", "ヒー"}));  // ー counts as kana
  EXPECT_EQ(Mixed("ひらがなカタカナ", 4),
            Ones({"ひらがな", "らがなカ", "がなカタ", "なカタカ", "カタカナ"}));
  EXPECT_EQ(Mixed("안녕하세요 세계"), Ones({"안녕", "녕하", "하세", "세요", "세계"}));
  // A mark extends the preceding unit (here a Han character + U+0301).
  EXPECT_EQ(Mixed("北\u0301京市"), Ones({"北\u0301京", "京市"}));
  // ... or the preceding non-CJK word.
  EXPECT_EQ(Mixed("e\u0301t\u0301"), Ones({"e\u0301t\u0301"}));
}

TEST(TokenizeMixedTest, NonNormalizedInputDoesNotCrash) {
  // Internal contract is normalized input, but any bytes must be safe.
  const std::string junk = "\xFF\xC3 ab\xE4\xB8 中\x80文";
  Tokens t = Mixed(junk);
  EXPECT_FALSE(t.empty());
}

TEST(TokenizeMixedTest, ManyDistinctTokens) {
  std::string text;
  for (int i = 0; i < 100000; ++i) {
    text += 'w';
    text += std::to_string(i % 30000);
    text += ' ';
  }
  FeatureCounter c;
  TokenizeMixed(text, 2, &c);
  ASSERT_EQ(c.entries().size(), 30000u);
  for (size_t i = 0; i < c.entries().size(); ++i) {
    std::string want(1, 'w');
    want += std::to_string(i);
    ASSERT_EQ(c.token(c.entries()[i]), want);
    ASSERT_EQ(c.entries()[i].tf, i < 10000 ? 4u : 3u);
  }
  // Reuse with a small text after a big one.
  TokenizeMixed("a b a", 2, &c);
  EXPECT_EQ(Collect(c), (Tokens{{"a", 2}, {"b", 1}}));
}

TEST(TokenizeIcuTest, Words) {
  EXPECT_EQ(Icu(""), Tokens{});
  EXPECT_EQ(Icu("the quick brown fox the end"),
            (Tokens{{"the", 2}, {"quick", 1}, {"brown", 1}, {"fox", 1}, {"end", 1}}));
  // Dictionary segmentation for Chinese and Japanese.
  EXPECT_EQ(Icu("iphone15发布会在北京"), Ones({"iphone15", "发布", "会", "在", "北京"}));
  EXPECT_EQ(Icu("コーヒーを飲む"), Ones({"コーヒー", "を", "飲む"}));
  EXPECT_EQ(Icu("2023 年"), Ones({"2023", "年"}));
}

TEST(TokenizeIcuTest, NoSpaceTokens) {
  std::string norm;
  NormalizeText("Hello,   World! 你好，世界。 Ça va? 123", &norm);
  for (const auto& [tok, tf] : Icu(norm)) {
    EXPECT_EQ(tok.find(' '), std::string::npos) << tok;
    EXPECT_FALSE(tok.empty());
  }
}

}  // namespace
}  // namespace neardup::internal
