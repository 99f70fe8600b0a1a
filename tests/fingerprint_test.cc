// Fingerprint contract (docs/fingerprint.md): golden vectors, properties,
// thread-safety.
#include "neardup/text/fingerprint.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "neardup/text/idf.h"
#include "text/normalize.h"

namespace neardup {
namespace {

uint64_t H(std::string_view token) { return XXH3_64bits(token.data(), token.size()); }

Fingerprinter Make(TokenizerKind kind = TokenizerKind::kMixedNgram, int n = 2) {
  FingerprintOptions o;
  o.tokenizer = kind;
  o.cjk_ngram = n;
  auto r = Fingerprinter::Create(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

std::string ReadSample(const char* name) {
  std::ifstream in(std::string(NEARDUP_SOURCE_DIR) + "/data/sample/" + name, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Words(const std::string& text) {
  std::string norm;
  internal::NormalizeText(text, &norm);
  std::vector<std::string> w;
  std::istringstream in(norm);
  std::string s;
  while (in >> s) w.push_back(s);
  return w;
}

std::string Join(const std::vector<std::string>& w, size_t from, size_t n) {
  std::string s;
  for (size_t i = from; i < from + n && i < w.size(); ++i) {
    if (!s.empty()) s += ' ';
    s += w[i];
  }
  return s;
}

// ---- scheme -------------------------------------------------------------------

TEST(FingerprintSchemeTest, NamesAndIds) {
  struct Case {
    TokenizerKind kind;
    int n;
    const char* name;
    const char* id;
  };
  const Case cases[] = {
      {TokenizerKind::kMixedNgram, 2, "simhash64-v1/mixed-ngram2/logtf", "e67ec545b22738d2"},
      {TokenizerKind::kMixedNgram, 1, "simhash64-v1/mixed-ngram1/logtf", "2cd40a30089ae622"},
      {TokenizerKind::kMixedNgram, 3, "simhash64-v1/mixed-ngram3/logtf", "c03483d277fcdd9e"},
      {TokenizerKind::kMixedNgram, 4, "simhash64-v1/mixed-ngram4/logtf", "bc0962782ea24ab5"},
      {TokenizerKind::kIcuWords, 2, "simhash64-v1/icu-words/logtf", "1833018c3213b57a"},
  };
  for (const Case& c : cases) {
    Fingerprinter fp = Make(c.kind, c.n);
    EXPECT_EQ(fp.scheme_name(), c.name);
    EXPECT_EQ(fp.scheme_id(), H(c.name));
    EXPECT_EQ(FingerprintToHex(fp.scheme_id()), c.id) << c.name;
  }
  // cjk_ngram is not part of the icu-words scheme.
  EXPECT_EQ(Make(TokenizerKind::kIcuWords, 3).scheme_id(), Make(TokenizerKind::kIcuWords, 2).scheme_id());
  EXPECT_NE(Make(TokenizerKind::kMixedNgram, 3).scheme_id(), Make().scheme_id());
}

TEST(FingerprintSchemeTest, CreateValidatesOptions) {
  for (int n : {0, 5, -1, 100}) {
    FingerprintOptions o;
    o.cjk_ngram = n;
    EXPECT_EQ(Fingerprinter::Create(o).status().code(), Status::Code::kInvalidArgument) << n;
  }
  for (int n : {1, 2, 3, 4}) {
    FingerprintOptions o;
    o.cjk_ngram = n;
    EXPECT_TRUE(Fingerprinter::Create(o).ok()) << n;
  }
  FingerprintOptions o;
  o.tokenizer = static_cast<TokenizerKind>(0);
  EXPECT_EQ(Fingerprinter::Create(o).status().code(), Status::Code::kInvalidArgument);
  o.tokenizer = static_cast<TokenizerKind>(3);
  EXPECT_EQ(Fingerprinter::Create(o).status().code(), Status::Code::kInvalidArgument);
}

TEST(FingerprintHexTest, RoundTrip) {
  EXPECT_EQ(FingerprintToHex(0), "0000000000000000");
  EXPECT_EQ(FingerprintToHex(0x0123456789abcdefull), "0123456789abcdef");
  EXPECT_EQ(FingerprintToHex(~0ull), "ffffffffffffffff");
  EXPECT_EQ(*ParseFingerprintHex("0123456789abcdef"), 0x0123456789abcdefull);
  EXPECT_EQ(*ParseFingerprintHex("0x1F"), 0x1Full);
  EXPECT_EQ(*ParseFingerprintHex("0XfF"), 0xFFull);
  EXPECT_EQ(*ParseFingerprintHex("ffffffffffffffff"), ~0ull);
  for (const char* bad : {"", "0x", "g", "12345678901234567", "0x-1", " 1", "1 ", "+1"}) {
    EXPECT_EQ(ParseFingerprintHex(bad).status().code(), Status::Code::kInvalidArgument) << bad;
  }
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t v = rng();
    EXPECT_EQ(*ParseFingerprintHex(FingerprintToHex(v)), v);
  }
}

// ---- golden vectors -------------------------------------------------------------
// Pinned outputs of scheme v1. If one of these changes, the fingerprint rules
// changed: that needs a new kSchemeVersion, not a new golden value.

struct Golden {
  const char* name;
  std::string input;
  const char* mixed;  // simhash64-v1/mixed-ngram2/logtf
  const char* icu;    // simhash64-v1/icu-words/logtf
};

const std::vector<Golden>& Goldens() {
  static const std::vector<Golden> g = {
      {"english", "The quick brown fox jumps over the lazy dog.", "8212868318d29267", "8212868318d29267"},
      {"chinese", "今天天气很好，我们一起去公园散步吧。", "66296c9152082922", "3a813a9e1a0a0920"},
      {"mixed", "iPhone 15发布会在北京举行，售价5999元起。", "9147eb267082d890", "3115ff6620d9fc96"},
      {"fullwidth", "ＡＢＣ１２３", "33739d7bb9744cd0", "33739d7bb9744cd0"},
      {"emoji", "I ❤️ NY 🍕🍕 pizza!", "6d1610437b526a8e", "6d1610437b526a8e"},
      {"invalid_utf8", "caf\xC3 na\xEF\xBF\xBDve \xF0\x9F\x98 end\xFF", "600c04c5405d4412", "600c04c5405d4412"},
      {"empty", "", "0000000000000000", "0000000000000000"},
      {"punctuation", " ,.!? \t\n…—「」", "0000000000000000", "0000000000000000"},
      {"paragraph",
       "Near-duplicate detection finds documents that are almost, but not exactly, "
       "the same: reposted news articles, boilerplate pages, or spam with a few words "
       "changed. A simhash fingerprint maps each document to 64 bits so that similar "
       "documents get fingerprints with a small Hamming distance, and an index can "
       "find all of them quickly, even among billions of documents.",
       "b75677e377ced91c", "b75677e377ced91c"},
      {"repeated", "spam spam spam eggs spam bacon spam", "b7eb44bbfdc71621", "b7eb44bbfdc71621"},
      {"japanese", "東京タワーへ行きました。コーヒーを飲みました。", "8451a9bdbd30c3b2", "62cbd2a199769ca2"},
      {"korean_thai", "안녕하세요 세계 สวัสดีครับ", "d29440804091605a", "c23482a348208952"},
  };
  return g;
}

TEST(FingerprintGoldenTest, MixedNgram2) {
  Fingerprinter fp = Make();
  for (const Golden& g : Goldens()) {
    EXPECT_EQ(FingerprintToHex(fp.Compute(g.input)), g.mixed) << g.name;
  }
}

TEST(FingerprintGoldenTest, IcuWords) {
  Fingerprinter fp = Make(TokenizerKind::kIcuWords);
  for (const Golden& g : Goldens()) {
    EXPECT_EQ(FingerprintToHex(fp.Compute(g.input)), g.icu) << g.name;
  }
}

TEST(FingerprintGoldenTest, Analysis) {
  Fingerprinter fp = Make();
  TextAnalysis a;
  fp.Analyze("iPhone 15发布会在北京举行，售价5999元起。", &a);
  EXPECT_EQ(a.normalized, "iphone 15发布会在北京举行 售价5999元起");
  EXPECT_EQ(a.num_chars, 26u);
  EXPECT_EQ(a.invalid_utf8, 0u);
  EXPECT_EQ(a.content_hash, H(a.normalized));
  std::vector<std::string> tokens;
  for (const Feature& f : a.features) tokens.push_back(f.token);
  EXPECT_EQ(tokens, (std::vector<std::string>{"iphone", "15", "发布", "布会", "会在", "在北", "北京",
                                              "京举", "举行", "售价", "5999", "元起"}));

  fp.Analyze("caf\xC3 na\xEF\xBF\xBDve \xF0\x9F\x98 end\xFF", &a);
  EXPECT_EQ(a.normalized, "caf na ve end");
  EXPECT_EQ(a.invalid_utf8, 3u);
}

// ---- properties -----------------------------------------------------------------

TEST(FingerprintPropertyTest, EquivalentSpellings) {
  const std::vector<std::vector<std::string>> groups = {
      {"Hello, World!", "hello world", "HELLO   WORLD", "  ＨＥＬＬＯ，　ｗｏｒｌｄ！ ",
       "hello\n\t-- world...", "«Hello» — “World”"},
      {"ABC123 test", "ＡＢＣ１２３ ＴＥＳＴ", "abc123, test."},
      {"今天天气很好，我们去公园。", "今天天气很好 我们去公园", "今天天气很好!!我们去公园?"},
      {"Straße café", "STRASSE CAFÉ", "strasse cafe\u0301"},
  };
  for (TokenizerKind kind : {TokenizerKind::kMixedNgram, TokenizerKind::kIcuWords}) {
    Fingerprinter fp = Make(kind);
    for (const auto& group : groups) {
      TextAnalysis first, a;
      fp.Analyze(group[0], &first);
      EXPECT_TRUE(first.has_features());
      for (const auto& s : group) {
        fp.Analyze(s, &a);
        EXPECT_EQ(a.normalized, first.normalized) << s;
        EXPECT_EQ(a.content_hash, first.content_hash) << s;
        EXPECT_EQ(a.fingerprint, first.fingerprint) << s;
      }
    }
  }
}

TEST(FingerprintPropertyTest, NoFeatures) {
  for (TokenizerKind kind : {TokenizerKind::kMixedNgram, TokenizerKind::kIcuWords}) {
    Fingerprinter fp = Make(kind);
    for (std::string s : {std::string(), std::string("   "), std::string("!!! ... ???"),
                          std::string("🙂🙂🙂"), std::string("\xFF\xFE"), std::string("\0\0", 2)}) {
      bool has = true;
      EXPECT_EQ(fp.Compute(s, &has), 0u);
      EXPECT_FALSE(has);
      TextAnalysis a;
      fp.Analyze(s, &a);
      EXPECT_FALSE(a.has_features());
      EXPECT_EQ(a.fingerprint, 0u);
      EXPECT_EQ(a.normalized, "");
      EXPECT_EQ(a.content_hash, H(""));
    }
  }
}

TEST(FingerprintPropertyTest, VoteAndTieRule) {
  Fingerprinter fp = Make();
  // One feature: the fingerprint is its hash.
  EXPECT_EQ(fp.Compute("alpha"), H("alpha"));
  // Two features of equal weight: where the hashes agree the vote is +-2q;
  // where they differ it is exactly 0, which gives 0. So fp = h1 & h2.
  const uint64_t a = H("alpha"), b = H("beta"), c = H("gamma");
  ASSERT_NE(a ^ b, 0u);
  EXPECT_EQ(fp.Compute("alpha beta"), a & b);
  EXPECT_EQ(fp.Compute("beta alpha"), a & b);  // order-independent
  // Three equal weights: bitwise majority.
  EXPECT_EQ(fp.Compute("alpha beta gamma"), (a & b) | (a & c) | (b & c));
  // tf 2 (q = round(1024 * (1 + ln 2)) = 1734) beats tf 1 (q = 1024).
  EXPECT_EQ(fp.Compute("alpha beta alpha"), a);
  // ... but not two tf-1 features together: 1734 < 2048.
  // Where beta and gamma agree they win, where they cancel alpha decides.
  EXPECT_EQ(fp.Compute("alpha alpha beta gamma"), (b & c) | (a & (b ^ c)));
}

TEST(FingerprintPropertyTest, Weights) {
  Fingerprinter fp = Make();
  TextAnalysis a;
  fp.Analyze("x y x z x y", &a);
  ASSERT_EQ(a.features.size(), 3u);
  EXPECT_EQ(a.features[0].token, "x");
  EXPECT_EQ(a.features[0].tf, 3u);
  EXPECT_EQ(a.features[0].hash, H("x"));
  EXPECT_DOUBLE_EQ(a.features[0].weight, 1 + std::log(3.0));
  EXPECT_EQ(a.features[1].token, "y");
  EXPECT_EQ(a.features[1].tf, 2u);
  EXPECT_DOUBLE_EQ(a.features[1].weight, 1 + std::log(2.0));
  EXPECT_EQ(a.features[2].tf, 1u);
  EXPECT_DOUBLE_EQ(a.features[2].weight, 1.0);
}

TEST(FingerprintPropertyTest, SmallEditSmallDistance) {
  const std::vector<std::string> words = Words(ReadSample("bench_en.txt"));
  ASSERT_GT(words.size(), 20000u);
  for (TokenizerKind kind : {TokenizerKind::kMixedNgram, TokenizerKind::kIcuWords}) {
    Fingerprinter fp = Make(kind);
    int total = 0, count = 0, worst = 0;
    for (size_t start = 0; start + 300 < words.size() && count < 40; start += 997, ++count) {
      std::vector<std::string> w(words.begin() + start, words.begin() + start + 300);
      const uint64_t before = fp.Compute(Join(w, 0, 300));
      w[(start * 7) % 300] = "xylophone";
      const int d = HammingDistance(before, fp.Compute(Join(w, 0, 300)));
      total += d;
      worst = std::max(worst, d);
    }
    EXPECT_LE(worst, 6);
    EXPECT_LE(static_cast<double>(total) / count, 3.0);
  }
}

// Mean pairwise distance of the fingerprints of ~1.5 KB pieces of `text`.
double MeanPairwiseDistance(const std::string& text, const FingerprintOptions& base,
                            bool with_idf) {
  std::vector<std::string> docs;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos + 1500);
    if (end == std::string::npos) end = text.size();
    docs.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  FingerprintOptions options = base;
  if (with_idf) {
    auto plain = Fingerprinter::Create(base);
    IdfTable::Builder b;
    TextAnalysis a;
    for (const auto& d : docs) {
      plain->Analyze(d, &a);
      b.AddDocument(a.features);
    }
    options.idf = b.Build(2);
  }
  auto fp = Fingerprinter::Create(options);
  std::vector<uint64_t> fps;
  for (const auto& d : docs) fps.push_back(fp->Compute(d));
  double total = 0;
  int pairs = 0;
  for (size_t i = 0; i < fps.size(); ++i) {
    for (size_t j = i + 1; j < fps.size(); ++j) {
      total += HammingDistance(fps[i], fps[j]);
      ++pairs;
    }
  }
  return total / pairs;
}

TEST(FingerprintPropertyTest, UnrelatedTextsAreFarApart) {
  const std::string zh = ReadSample("bench_zh.txt");
  const std::string en = ReadSample("bench_en.txt");
  ASSERT_GT(zh.size(), 100000u);
  ASSERT_GT(en.size(), 100000u);
  for (TokenizerKind kind : {TokenizerKind::kMixedNgram, TokenizerKind::kIcuWords}) {
    FingerprintOptions o;
    o.tokenizer = kind;
    // Independent random fingerprints would be 32 apart on average.
    const double zh_plain = MeanPairwiseDistance(zh, o, false);
    EXPECT_GT(zh_plain, 28.0);
    EXPECT_LT(zh_plain, 35.0);
    EXPECT_GT(MeanPairwiseDistance(zh, o, true), 28.0);
    // English with plain log-tf weights: frequent function words ("the",
    // "of", ...) dominate every text and pull fingerprints together (~24);
    // idf weighting removes that bias (~30).
    const double en_plain = MeanPairwiseDistance(en, o, false);
    EXPECT_GT(en_plain, 20.0);
    const double en_idf = MeanPairwiseDistance(en, o, true);
    EXPECT_GT(en_idf, 28.0);
    EXPECT_LT(en_idf, 35.0);
    EXPECT_GT(en_idf, en_plain + 3.0);
  }
}

TEST(FingerprintPropertyTest, ChineseSmallEdit) {
  const std::string zh = ReadSample("bench_zh.txt");
  ASSERT_FALSE(zh.empty());
  // Code points of the text, so that edits replace whole characters.
  std::vector<std::string> cps;
  for (size_t i = 0; i < zh.size();) {
    const unsigned char c = zh[i];
    const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    cps.push_back(zh.substr(i, len));
    i += len;
  }
  for (TokenizerKind kind : {TokenizerKind::kMixedNgram, TokenizerKind::kIcuWords}) {
    Fingerprinter fp = Make(kind);
    int worst = 0, total = 0;
    for (size_t k = 0; k < 20; ++k) {
      // ~400 characters (~300 of them Han) of prose; replace one character.
      std::vector<std::string> w(cps.begin() + k * 5000, cps.begin() + k * 5000 + 400);
      std::string before, after;
      for (const auto& c : w) before += c;
      size_t pos = 200;
      std::string tmp;
      // Find a 3-byte letter (a Han character, not CJK punctuation).
      while (w[pos].size() != 3 || (internal::NormalizeText(w[pos], &tmp), tmp.empty())) ++pos;
      w[pos] = "龘";
      for (const auto& c : w) after += c;
      const int d = HammingDistance(fp.Compute(before), fp.Compute(after));
      worst = std::max(worst, d);
      total += d;
    }
    // One replaced character changes up to 2n n-gram features (or a few ICU
    // words), more than a one-word edit in English: allow a little more.
    EXPECT_LE(worst, 8) << static_cast<int>(kind);
    EXPECT_LE(total / 20.0, 4.0) << static_cast<int>(kind);
  }
}

TEST(FingerprintPropertyTest, RandomBytesNeverCrash) {
  Fingerprinter mixed = Make();
  Fingerprinter icu = Make(TokenizerKind::kIcuWords);
  std::mt19937_64 rng(12345);
  TextAnalysis a;
  std::string s;
  for (int iter = 0; iter < 10000; ++iter) {
    s.clear();
    const size_t len = rng() % 64;
    for (size_t i = 0; i < len; ++i) s.push_back(static_cast<char>(rng()));
    mixed.Analyze(s, &a);
    std::string sanitized;
    ASSERT_EQ(a.invalid_utf8, internal::SanitizeUtf8(s, &sanitized));
    ASSERT_EQ(a.fingerprint, mixed.Compute(s));
    ASSERT_EQ(a.has_features(), !a.normalized.empty());
    bool has = false;
    const uint64_t f = icu.Compute(s, &has);
    if (!has) {
      ASSERT_EQ(f, 0u);
    }
  }
}

TEST(FingerprintPropertyTest, ComputeMatchesAnalyze) {
  const std::string zh = ReadSample("bench_zh.txt");
  const std::string en = ReadSample("bench_en.txt");
  for (TokenizerKind kind : {TokenizerKind::kMixedNgram, TokenizerKind::kIcuWords}) {
    Fingerprinter fp = Make(kind);
    TextAnalysis a;
    for (const std::string* text : {&zh, &en}) {
      for (size_t off = 0; off + 2000 < text->size(); off += 20000) {
        const std::string_view s(text->data() + off, 2000);  // may cut UTF-8: fine
        fp.Analyze(s, &a);
        bool has = false;
        EXPECT_EQ(fp.Compute(s, &has), a.fingerprint);
        EXPECT_EQ(has, a.has_features());
      }
    }
  }
}

TEST(FingerprintPropertyTest, ThreadSafety) {
  const std::string zh = ReadSample("bench_zh.txt");
  const std::string en = ReadSample("bench_en.txt");
  std::vector<std::string> texts;
  for (const std::string* t : {&zh, &en}) {
    for (size_t off = 0; off + 3000 < t->size(); off += 1500) texts.push_back(t->substr(off, 3000));
  }
  for (TokenizerKind kind : {TokenizerKind::kMixedNgram, TokenizerKind::kIcuWords}) {
    const Fingerprinter fp = Make(kind);
    std::vector<uint64_t> serial;
    for (const auto& t : texts) serial.push_back(fp.Compute(t));
    std::vector<uint64_t> got[2];
    std::vector<std::string> norm_got[2];
    auto work = [&](int id) {
      TextAnalysis a;
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          // Alternate Compute and Analyze to exercise both scratch paths.
          if ((i + id + round) % 2) {
            got[id].push_back(fp.Compute(texts[i]));
          } else {
            fp.Analyze(texts[i], &a);
            got[id].push_back(a.fingerprint);
          }
        }
      }
    };
    std::thread t0(work, 0), t1(work, 1);
    t0.join();
    t1.join();
    for (int id = 0; id < 2; ++id) {
      ASSERT_EQ(got[id].size(), 3 * texts.size());
      for (size_t i = 0; i < got[id].size(); ++i) {
        ASSERT_EQ(got[id][i], serial[i % texts.size()]) << "thread " << id << " text " << i;
      }
    }
  }
}

TEST(FingerprintPropertyTest, CopiesShareBehaviour) {
  Fingerprinter a = Make(TokenizerKind::kIcuWords);
  Fingerprinter b = a;
  EXPECT_EQ(a.scheme_id(), b.scheme_id());
  EXPECT_EQ(a.Compute("北京欢迎你"), b.Compute("北京欢迎你"));
}

}  // namespace
}  // namespace neardup
