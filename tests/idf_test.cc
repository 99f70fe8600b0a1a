// IdfTable: formula, build, file format (docs/fingerprint.md, "IDF").
#include "neardup/text/idf.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "neardup/text/fingerprint.h"

namespace neardup {
namespace {

uint64_t H(std::string_view token) { return XXH3_64bits(token.data(), token.size()); }

std::vector<Feature> Features(std::initializer_list<const char*> tokens) {
  std::vector<Feature> f;
  for (const char* t : tokens) {
    Feature x;
    x.token = t;
    x.hash = H(t);
    x.tf = 1;
    f.push_back(x);
  }
  return f;
}

std::shared_ptr<const IdfTable> SmallTable(uint32_t min_df = 1) {
  IdfTable::Builder b;
  b.AddDocument(Features({"a", "b", "c"}));
  b.AddDocument(Features({"a", "b", "b"}));  // duplicate counted once per doc
  b.AddDocument(Features({"a", "d"}));
  b.AddDocument(Features({}));
  EXPECT_EQ(b.num_documents(), 4u);
  return b.Build(min_df);
}

class IdfFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("neardup_idf_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const char* name) const { return (dir_ / name).string(); }
  static std::string ReadAll(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static void WriteAll(const std::string& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::filesystem::path dir_;
};

TEST(IdfTest, Formula) {
  auto t = SmallTable(1);
  EXPECT_EQ(t->num_documents(), 4u);
  EXPECT_EQ(t->size(), 4u);
  const double n1 = 5.0;
  EXPECT_DOUBLE_EQ(t->Idf(H("a")), std::log(n1 / 4.0) + 1.0);  // df 3
  EXPECT_DOUBLE_EQ(t->Idf(H("b")), std::log(n1 / 3.0) + 1.0);  // df 2
  EXPECT_DOUBLE_EQ(t->Idf(H("c")), std::log(n1 / 2.0) + 1.0);  // df 1
  EXPECT_DOUBLE_EQ(t->Idf(H("zzz")), std::log(n1 / 1.0) + 1.0);  // unseen: df 0
  EXPECT_GT(t->Idf(H("zzz")), t->Idf(H("c")));
  EXPECT_GT(t->Idf(H("c")), t->Idf(H("a")));
}

TEST(IdfTest, MinDf) {
  auto t = SmallTable(2);
  EXPECT_EQ(t->size(), 2u);  // a, b
  EXPECT_DOUBLE_EQ(t->Idf(H("c")), std::log(5.0) + 1.0);  // dropped -> default
  EXPECT_DOUBLE_EQ(t->Idf(H("b")), std::log(5.0 / 3.0) + 1.0);
  EXPECT_NE(t->content_hash(), SmallTable(1)->content_hash());
  EXPECT_EQ(t->content_hash(), SmallTable(2)->content_hash());  // deterministic
}

// Pins the serialized form (it feeds the scheme id) and the tf-idf vote.
TEST(IdfTest, Golden) {
  auto t = SmallTable(1);
  EXPECT_EQ(FingerprintToHex(t->content_hash()), "a1f09dac9245cce1");
  FingerprintOptions o;
  o.idf = t;
  auto fp = Fingerprinter::Create(o);
  ASSERT_TRUE(fp.ok());
  EXPECT_EQ(fp->scheme_name(), "simhash64-v1/mixed-ngram2/logtfidf:" + FingerprintToHex(t->content_hash()));
  EXPECT_EQ(FingerprintToHex(fp->scheme_id()), "467d7b5b8a3a7c29");
  EXPECT_EQ(FingerprintToHex(fp->Compute("a a b c d e")), "c5c2221e4edcce1b");
}

TEST(IdfTest, EmptyTable) {
  IdfTable::Builder b;
  auto t = b.Build();
  EXPECT_EQ(t->size(), 0u);
  EXPECT_EQ(t->num_documents(), 0u);
  EXPECT_DOUBLE_EQ(t->Idf(123), 1.0);
}

TEST_F(IdfFileTest, IdfSaveLoadRoundTrip) {
  auto t = SmallTable(1);
  const std::string p = Path("t.idf");
  ASSERT_TRUE(t->Save(p).ok());
  EXPECT_FALSE(std::filesystem::exists(p + ".tmp"));
  auto loaded = IdfTable::Load(p);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const auto& l = *loaded;
  EXPECT_EQ(l->num_documents(), t->num_documents());
  EXPECT_EQ(l->size(), t->size());
  EXPECT_EQ(l->content_hash(), t->content_hash());
  for (const char* tok : {"a", "b", "c", "d", "zzz"}) EXPECT_EQ(l->Idf(H(tok)), t->Idf(H(tok)));
  // File layout: 32-byte header + 16 bytes per entry + 8-byte checksum,
  // and the checksum is the content hash.
  const std::string bytes = ReadAll(p);
  ASSERT_EQ(bytes.size(), 32u + 16u * 4 + 8u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("NDUPIDF\0", 8));
  uint64_t stored = 0;
  for (int i = 7; i >= 0; --i) stored = stored << 8 | static_cast<unsigned char>(bytes[bytes.size() - 8 + i]);
  EXPECT_EQ(stored, t->content_hash());
  EXPECT_EQ(XXH3_64bits(bytes.data(), bytes.size() - 8), t->content_hash());
}

TEST_F(IdfFileTest, IdfCorruptedByteIsCorruption) {
  const std::string p = Path("t.idf");
  ASSERT_TRUE(SmallTable(1)->Save(p).ok());
  const std::string good = ReadAll(p);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    WriteAll(p, bad);
    auto r = IdfTable::Load(p);
    ASSERT_FALSE(r.ok()) << "byte " << i;
    EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << "byte " << i << ": "
                                                             << r.status().ToString();
  }
}

TEST_F(IdfFileTest, IdfTruncatedIsCorruption) {
  const std::string p = Path("t.idf");
  ASSERT_TRUE(SmallTable(1)->Save(p).ok());
  const std::string good = ReadAll(p);
  for (size_t len = 0; len < good.size(); ++len) {
    WriteAll(p, good.substr(0, len));
    auto r = IdfTable::Load(p);
    ASSERT_FALSE(r.ok()) << len;
    EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << len;
  }
  WriteAll(p, good + "x");  // trailing garbage
  EXPECT_EQ(IdfTable::Load(p).status().code(), Status::Code::kCorruption);
}

TEST_F(IdfFileTest, IdfUnreadableIsIOError) {
  auto r = IdfTable::Load(Path("missing.idf"));
  EXPECT_EQ(r.status().code(), Status::Code::kIOError);
  EXPECT_EQ(IdfTable::Load(dir_.string()).status().code(), Status::Code::kIOError);  // a directory
  EXPECT_EQ(SmallTable()->Save(Path("no/such/dir/t.idf")).code(), Status::Code::kIOError);
}

TEST_F(IdfFileTest, IdfChangesSchemeAndFingerprints) {
  FingerprintOptions plain;
  auto fp_plain = Fingerprinter::Create(plain);
  ASSERT_TRUE(fp_plain.ok());

  // Build an idf table from a small corpus with the default tokenizer.
  const std::vector<std::string> docs = {
      "the cat sat on the mat", "the dog sat on the log", "the bird flew over the house",
      "a cat and a dog", "the end of the story"};
  IdfTable::Builder b;
  TextAnalysis a;
  for (const auto& d : docs) {
    fp_plain->Analyze(d, &a);
    b.AddDocument(a.features);
  }
  auto table = b.Build(1);
  FingerprintOptions with_idf;
  with_idf.idf = table;
  auto fp_idf = Fingerprinter::Create(with_idf);
  ASSERT_TRUE(fp_idf.ok());
  EXPECT_NE(fp_idf->scheme_id(), fp_plain->scheme_id());
  EXPECT_EQ(fp_idf->scheme_name(),
            "simhash64-v1/mixed-ngram2/logtfidf:" + FingerprintToHex(table->content_hash()));

  // Weights follow (1 + ln tf) * idf.
  fp_idf->Analyze("the the cat", &a);
  ASSERT_EQ(a.features.size(), 2u);
  EXPECT_DOUBLE_EQ(a.features[0].weight, (1 + std::log(2.0)) * table->Idf(H("the")));
  EXPECT_DOUBLE_EQ(a.features[1].weight, table->Idf(H("cat")));
  // Reweighting changes some fingerprints of the corpus.
  bool any_diff = false;
  for (const auto& d : docs) any_diff |= fp_idf->Compute(d) != fp_plain->Compute(d);
  EXPECT_TRUE(any_diff);

  // The same table loaded from disk gives the same scheme and fingerprints.
  const std::string p = Path("t.idf");
  ASSERT_TRUE(table->Save(p).ok());
  auto loaded = IdfTable::Load(p);
  ASSERT_TRUE(loaded.ok());
  FingerprintOptions with_loaded;
  with_loaded.idf = *loaded;
  auto fp_loaded = Fingerprinter::Create(with_loaded);
  ASSERT_TRUE(fp_loaded.ok());
  EXPECT_EQ(fp_loaded->scheme_id(), fp_idf->scheme_id());
  for (const auto& d : docs) EXPECT_EQ(fp_loaded->Compute(d), fp_idf->Compute(d));

  // A different table -> different scheme.
  auto table2 = b.Build(2);
  FingerprintOptions with_idf2;
  with_idf2.idf = table2;
  EXPECT_NE(Fingerprinter::Create(with_idf2)->scheme_id(), fp_idf->scheme_id());
}

}  // namespace
}  // namespace neardup
