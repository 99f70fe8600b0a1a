// Normalization rules (docs/fingerprint.md, "Decoding" and "Normalization").
#include "text/normalize.h"

#include <gtest/gtest.h>
#include <unicode/ustring.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace neardup::internal {
namespace {

std::string Norm(std::string_view s, bool fast = true) {
  std::string out;
  NormalizeText(s, &out, fast);
  return out;
}

// Number of U+FFFD substitutions ICU's converter makes: the reference for
// invalid_utf8 counting.
size_t IcuSubstitutions(std::string_view s) {
  std::vector<UChar> buf(s.size() + 1);
  int32_t len = 0, subs = 0;
  UErrorCode status = U_ZERO_ERROR;
  u_strFromUTF8WithSub(buf.data(), static_cast<int32_t>(buf.size()), &len, s.data(),
                       static_cast<int32_t>(s.size()), 0xFFFD, &subs, &status);
  EXPECT_TRUE(U_SUCCESS(status)) << u_errorName(status);
  return static_cast<size_t>(subs);
}

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

TEST(NormalizeTest, EmptyAndSeparatorsOnly) {
  EXPECT_EQ(Norm(""), "");
  EXPECT_EQ(Norm("   "), "");
  EXPECT_EQ(Norm(" ,.!? \t\r\n…—「」"), "");
  EXPECT_EQ(Norm("🙂🙂"), "");  // symbols are separators
}

TEST(NormalizeTest, CaseFoldingAndCompatibility) {
  EXPECT_EQ(Norm("Hello, World!"), "hello world");
  EXPECT_EQ(Norm("hello world"), "hello world");
  EXPECT_EQ(Norm("ＡＢＣ１２３"), "abc123");      // full-width -> ASCII
  EXPECT_EQ(Norm("ｈｅｌｌｏ　ｗｏｒｌｄ"), "hello world");  // ideographic space
  EXPECT_EQ(Norm("Straße"), "strasse");          // full case folding
  EXPECT_EQ(Norm("ﬁne"), "fine");                // ligature
  EXPECT_EQ(Norm("ΣΊΣΥΦΟΣ"), "σίσυφοσ");
  EXPECT_EQ(Norm("x²"), "x2");                   // superscript -> digit
  EXPECT_EQ(Norm("ｶﾀｶﾅ"), "カタカナ");            // half-width katakana
  EXPECT_EQ(Norm("Ⅻ"), "xii");                   // roman numeral
}

TEST(NormalizeTest, SeparatorsCollapseAndTrim) {
  EXPECT_EQ(Norm("  a  ,, b\t\n\nc  "), "a b c");
  EXPECT_EQ(Norm("a-b_c.d"), "a b c d");
  EXPECT_EQ(Norm("e-mail"), "e mail");
  EXPECT_EQ(Norm("今天，天气。好"), "今天 天气 好");
  EXPECT_EQ(Norm(std::string_view("a\0b", 3)), "a b");  // U+0000 is a control
}

TEST(NormalizeTest, DefaultIgnorablesAreRemoved) {
  EXPECT_EQ(Norm("co\u00ADop"), "coop");    // soft hyphen
  EXPECT_EQ(Norm("ab\u200Dcd"), "abcd");    // zero-width joiner
}

TEST(NormalizeTest, MarksStayAttached) {
  EXPECT_EQ(Norm("e\u0301"), "\u00e9");  // NFKC composes
  // Devanagari vowel signs and virama are marks: one word, unchanged.
  EXPECT_EQ(Norm("नमस्ते दुनिया"), "नमस्ते दुनिया");
  // Thai tone marks are kept; Thai has no spaces, so the run stays whole.
  EXPECT_EQ(Norm("สวัสดีครับ"), "สวัสดีครับ");
  // A mark with nothing to attach to (after a separator or at the start)
  // is a separator.
  EXPECT_EQ(Norm("\u0301abc"), "abc");
  EXPECT_EQ(Norm("a \u0301b"), "a b");
  EXPECT_EQ(Norm("a\u00A8b"), "a b");  // U+00A8 -> space + U+0308 under NFKC
}

TEST(NormalizeTest, InvalidUtf8IsReplacedAndCounted) {
  std::string out;
  NormalizeStats st = NormalizeText("ab\xFF" "cd", &out);
  EXPECT_EQ(out, "ab cd");
  EXPECT_EQ(st.invalid_utf8, 1u);
  st = NormalizeText("\xC3", &out);  // truncated 2-byte sequence
  EXPECT_EQ(out, "");
  EXPECT_EQ(st.invalid_utf8, 1u);
  st = NormalizeText("x\xE4\xB8y", &out);  // truncated 3-byte: one maximal subpart
  EXPECT_EQ(out, "x y");
  EXPECT_EQ(st.invalid_utf8, 1u);
  st = NormalizeText("\xED\xA0\x80", &out);  // surrogate: three subparts
  EXPECT_EQ(st.invalid_utf8, 3u);
  st = NormalizeText("\xC0\xAF", &out);  // overlong
  EXPECT_EQ(st.invalid_utf8, 2u);
  st = NormalizeText("\xEF\xBF\xBD", &out);  // a real U+FFFD is valid, but a separator
  EXPECT_EQ(st.invalid_utf8, 0u);
  EXPECT_EQ(out, "");
}

TEST(NormalizeTest, SanitizeMatchesIcuOnRandomBytes) {
  std::mt19937_64 rng(42);
  std::string in, sanitized, out;
  for (int iter = 0; iter < 10000; ++iter) {
    in.clear();
    const size_t len = rng() % 40;
    for (size_t i = 0; i < len; ++i) {
      // Bias towards interesting bytes: ASCII, lead bytes, continuation bytes.
      const uint64_t r = rng();
      switch (r % 4) {
        case 0: in.push_back(static_cast<char>(r >> 8 & 0x7F)); break;
        case 1: in.push_back(static_cast<char>(0x80 | (r >> 8 & 0x3F))); break;
        case 2: in.push_back(static_cast<char>(0xC0 | (r >> 8 & 0x3F))); break;
        default: in.push_back(static_cast<char>(r >> 8)); break;
      }
    }
    const size_t subs = SanitizeUtf8(in, &sanitized);
    ASSERT_EQ(subs, IcuSubstitutions(in)) << iter;
    ASSERT_EQ(IcuSubstitutions(sanitized), 0u);
    const NormalizeStats st = NormalizeText(in, &out);
    ASSERT_EQ(st.invalid_utf8, subs);
    ASSERT_EQ(st.num_chars, CountCodePoints(out));
    ASSERT_EQ(IcuSubstitutions(out), 0u);
    ASSERT_EQ(out, Norm(in, /*fast=*/false));
  }
}

TEST(NormalizeTest, NumChars) {
  std::string out;
  EXPECT_EQ(NormalizeText("Hello, 世界!", &out).num_chars, 8u);  // "hello 世界"
  EXPECT_EQ(out, "hello 世界");
  EXPECT_EQ(NormalizeText("", &out).num_chars, 0u);
}

std::string ReadSample(const char* name) {
  std::ifstream in(std::string(NEARDUP_SOURCE_DIR) + "/data/sample/" + name, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(NormalizeTest, AsciiFastPathEqualsGeneralPath) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 5000; ++iter) {
    std::string s;
    const size_t len = rng() % 64;
    for (size_t i = 0; i < len; ++i) s.push_back(static_cast<char>(rng() % 128));
    ASSERT_EQ(Norm(s, true), Norm(s, false)) << iter;
    std::string a, b;
    ASSERT_EQ(NormalizeText(s, &a, true).num_chars, NormalizeText(s, &b, false).num_chars);
  }
  // Every ASCII byte, alone and between letters.
  for (int c = 0; c < 128; ++c) {
    std::string s = "A";
    s.push_back(static_cast<char>(c));
    s.push_back('z');
    ASSERT_EQ(Norm(s, true), Norm(s, false)) << c;
  }
  const std::string en = ReadSample("bench_en.txt");
  ASSERT_FALSE(en.empty());
  EXPECT_EQ(Norm(en, true), Norm(en, false));
  const std::string zh = ReadSample("bench_zh.txt");
  ASSERT_FALSE(zh.empty());
  EXPECT_EQ(Norm(zh, true), Norm(zh, false));
}

TEST(NormalizeTest, Idempotent) {
  const std::vector<std::string> pieces = {
      "A", "z", "9", " ", ",", "É", "e\u0301", "\u0301", "ß", "ﬁ", "ＡＢ", "１",
      "汉", "字", "カ", "ｶ", "ﾞ", "ー", "한", "ㄱ", "\u00A8", "ǅ", "Ⅻ", "ก", "\u0E48",
      "न", "\u094D", "🙂", "\u200D", "\u00AD", "\xFF", "İ", "ﷺ", "㍿"};
  std::mt19937_64 rng(3);
  for (int iter = 0; iter < 5000; ++iter) {
    std::string s;
    const size_t n = rng() % 12;
    for (size_t i = 0; i < n; ++i) s += pieces[rng() % pieces.size()];
    const std::string once = Norm(s);
    ASSERT_EQ(Norm(once), once) << s;
  }
}

TEST(NormalizeTest, CharClass) {
  EXPECT_EQ(CharClass('a'), kCharKeep);
  EXPECT_EQ(CharClass('7'), kCharKeep);
  EXPECT_EQ(CharClass(' '), kCharSeparator);
  EXPECT_EQ(CharClass(','), kCharSeparator);
  EXPECT_EQ(CharClass(0x4E2D), kCharKeep | kCharCjk);    // 中
  EXPECT_EQ(CharClass(0x3042), kCharKeep | kCharCjk);    // あ
  EXPECT_EQ(CharClass(0x30AB), kCharKeep | kCharCjk);    // カ
  EXPECT_EQ(CharClass(0x30FC), kCharKeep | kCharCjk);    // ー (Common, scx Hira Kana)
  EXPECT_EQ(CharClass(0x3005), kCharKeep | kCharCjk);    // 々
  EXPECT_EQ(CharClass(0xD55C), kCharKeep | kCharCjk);    // 한
  EXPECT_EQ(CharClass(0x20000), kCharKeep | kCharCjk);   // CJK Ext. B
  EXPECT_EQ(CharClass(0x0301), kCharKeep | kCharMark);
  EXPECT_EQ(CharClass(0x3001), kCharSeparator);          // 、
  EXPECT_EQ(CharClass(0xFFFD), kCharSeparator);
  EXPECT_EQ(CharClass(0x1F600), kCharSeparator);         // emoji
  EXPECT_EQ(CharClass(0xE000), kCharSeparator);          // private use
  EXPECT_EQ(CharClass(-1), kCharSeparator);
  EXPECT_EQ(CharClass(0x110000), kCharSeparator);
}

}  // namespace
}  // namespace neardup::internal
