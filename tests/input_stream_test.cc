// io/input_stream.h: plain, gzip and zstd input by content; errors.
#include "io/input_stream.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "io/jsonl.h"
#include "util/compress.h"

namespace neardup {
namespace {

using neardup::testing::Gzip;
using neardup::testing::Zstd;

class InputStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/neardup_input_stream_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  // Everything the stream yields, in reads of `chunk` bytes.
  static Status ReadAll(const std::string& path, size_t chunk, std::string* out, Compression* kind = nullptr,
                        uint64_t* raw_bytes = nullptr) {
    auto s = InputStream::Open(path);
    if (!s.ok()) return s.status();
    std::string buf(chunk, '\0');
    for (;;) {
      size_t got = 0;
      NEARDUP_RETURN_IF_ERROR(s.value()->Read(buf.data(), buf.size(), &got));
      if (got == 0) break;
      out->append(buf.data(), got);
    }
    if (kind != nullptr) *kind = s.value()->compression();
    if (raw_bytes != nullptr) *raw_bytes = s.value()->raw_bytes();
    return Status::OK();
  }

  std::string dir_;
};

// Enough data for several refills of the 64 KiB raw buffer.
std::string Sample() {
  std::string s;
  for (int i = 0; i < 20000; ++i) s += "{\"id\":" + std::to_string(i) + ",\"text\":\"line " + std::to_string(i * 7) + "\"}\n";
  return s;
}

TEST_F(InputStreamTest, PlainGzipAndZstdReadTheSame) {
  const std::string data = Sample();
  struct Case {
    std::string name, bytes;
    Compression kind;
  } cases[] = {{"plain.jsonl", data, Compression::kNone},
               // the names lie: content decides
               {"gz.txt", Gzip(data), Compression::kGzip},
               {"zst.jsonl.gz", Zstd(data), Compression::kZstd}};
  for (const Case& c : cases) {
    for (size_t chunk : {size_t{1} << 16, size_t{7}}) {
      std::string got;
      Compression kind;
      uint64_t raw = 0;
      ASSERT_TRUE(ReadAll(Write(c.name, c.bytes), chunk, &got, &kind, &raw).ok()) << c.name;
      EXPECT_EQ(kind, c.kind) << c.name;
      // Every byte of the file is counted (the progress line's bytes and
      // ETA); a plain file's once stood at the first 64 KiB.
      EXPECT_EQ(raw, c.bytes.size()) << c.name << " chunk " << chunk;
      EXPECT_EQ(got, data) << c.name << " chunk " << chunk;
    }
  }
}

TEST_F(InputStreamTest, ShortAndEmptyFilesArePlain) {
  for (std::string content : {"", "a", "\x1f", "ab\n"}) {
    std::string got;
    ASSERT_TRUE(ReadAll(Write("s", content), 16, &got).ok());
    EXPECT_EQ(got, content);
  }
}

TEST_F(InputStreamTest, ConcatenatedGzipMembersAreOneStream) {
  std::string got;
  ASSERT_TRUE(ReadAll(Write("cat.gz", Gzip("first\n") + Gzip("second\n")), 64, &got).ok());
  EXPECT_EQ(got, "first\nsecond\n");
}

// Found by an adversarial test (2026-12-02): zero bytes after the last
// member (a device's or a tape's padding), which gzip -d reads as the end,
// were "corrupt gzip data". Anything else after the zeros still is, in any
// read size.
TEST_F(InputStreamTest, ZeroPaddingAfterGzipEndsIt) {
  const std::string gz = Gzip("first\n") + Gzip("second\n"), zeros(1000, '\0');
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}}) {
    std::string got;
    ASSERT_TRUE(ReadAll(Write("pad.gz", gz + zeros), chunk, &got).ok()) << chunk;
    EXPECT_EQ(got, "first\nsecond\n") << chunk;
    const Status st = ReadAll(Write("pad2.gz", gz + zeros + "x"), chunk, &got);
    EXPECT_EQ(st.code(), Status::Code::kCorruption) << chunk;
    EXPECT_NE(st.message().find("after the zero padding"), std::string::npos) << st.message();
    EXPECT_EQ(ReadAll(Write("pad3.gz", gz + zeros + Gzip("third\n")), chunk, &got).code(),
              Status::Code::kCorruption) << chunk;
  }
}

// A zstd skippable frame: magic 0x184D2A50 + nibble, little-endian, then the
// content's size and the content (pzstd puts one before each frame).
std::string SkippableFrame(unsigned nibble, const std::string& content) {
  std::string f = {static_cast<char>(0x50 | nibble), 0x2a, 0x4d, 0x18};
  for (int i = 0; i < 4; ++i) f += static_cast<char>((content.size() >> (8 * i)) & 0xff);
  return f + content;
}

TEST_F(InputStreamTest, ZstdStartingWithASkippableFrameIsZstd) {
  const std::string data = Sample();
  for (unsigned nibble : {0u, 0xeu, 0xfu}) {
    const std::string bytes = SkippableFrame(nibble, std::string("\x10\0\0\0", 4)) + Zstd(data);
    for (size_t chunk : {size_t{1} << 16, size_t{7}}) {
      std::string got;
      Compression kind;
      ASSERT_TRUE(ReadAll(Write("pz.jsonl.zst", bytes), chunk, &got, &kind).ok()) << nibble;
      EXPECT_EQ(kind, Compression::kZstd) << nibble;
      EXPECT_EQ(got.size(), data.size()) << nibble << " chunk " << chunk;
      EXPECT_TRUE(got == data) << nibble << " chunk " << chunk;  // not printed: 500 KB
    }
  }
  // Only a skippable frame: an empty zstd stream, not 12 bytes of text.
  std::string got;
  Compression kind;
  ASSERT_TRUE(ReadAll(Write("skip.zst", SkippableFrame(0, "abcd")), 64, &got, &kind).ok());
  EXPECT_EQ(kind, Compression::kZstd);
  EXPECT_EQ(got, "");
}

TEST_F(InputStreamTest, TruncatedCompressedDataIsAnError) {
  const std::string data = Sample();
  for (const std::string& whole : {Gzip(data), Zstd(data)}) {
    const std::string path = Write("cut", whole.substr(0, whole.size() / 2));
    std::string got;
    Status st = ReadAll(path, 4096, &got);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), Status::Code::kCorruption);
    EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  }
  // Cut inside the 8-byte gzip trailer: all the data came out, still an error.
  const std::string gz = Gzip(data);
  std::string got;
  EXPECT_FALSE(ReadAll(Write("trailer", gz.substr(0, gz.size() - 3)), 4096, &got).ok());
}

TEST_F(InputStreamTest, CorruptGzipIsAnError) {
  std::string gz = Gzip(Sample());
  for (size_t i = 20; i < 60; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  std::string got;
  Status st = ReadAll(Write("bad.gz", gz), 4096, &got);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kCorruption) << st.message();
}

TEST_F(InputStreamTest, DirectoryAndMissingFile) {
  auto dir = InputStream::Open(dir_);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos);
  auto missing = InputStream::Open(dir_ + "/missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kIOError);
}

TEST_F(InputStreamTest, RecordReaderReadsGzipLines) {
  auto s = InputStream::Open(Write("in", Gzip("{\"id\":1,\"text\":\"a\"}\nnot json\n")));
  ASSERT_TRUE(s.ok());
  RecordReader reader(std::move(s).value(), RecordReaderOptions{});
  std::vector<InputRecord> batch;
  ASSERT_TRUE(reader.ReadBatch(10, 1, &batch).ok());
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].text(), "a");
  EXPECT_EQ(batch[1].kind, InputRecord::Kind::kBad);
}

TEST(Utf8PrefixLength, CutsAtSequenceBoundaries) {
  const std::string s = "a\xc3\xa9\xe4\xb8\xad";  // a, é (2 bytes), 中 (3 bytes)
  EXPECT_EQ(Utf8PrefixLength(s, 100), s.size());
  EXPECT_EQ(Utf8PrefixLength(s, 1), 1u);
  EXPECT_EQ(Utf8PrefixLength(s, 2), 1u);  // inside é
  EXPECT_EQ(Utf8PrefixLength(s, 3), 3u);
  EXPECT_EQ(Utf8PrefixLength(s, 4), 3u);  // inside 中
  EXPECT_EQ(Utf8PrefixLength(s, 5), 3u);
  EXPECT_EQ(Utf8PrefixLength(s, 0), 0u);
}

TEST(RecordReaderLimit, TextsAreCutToMaxTextBytes) {
  std::FILE* f = std::tmpfile();
  std::fputs("{\"id\":1,\"text\":\"abc\\u00e9def\"}\nshort\n", f);
  std::rewind(f);
  RecordReaderOptions options;
  options.max_text_bytes = 4;  // "abc" + half of é
  RecordReader reader(f, options);
  std::vector<InputRecord> batch;
  ASSERT_TRUE(reader.ReadBatch(10, 1, &batch).ok());
  EXPECT_EQ(batch[0].text(), "abc");
  EXPECT_TRUE(batch[0].truncated);
  std::rewind(f);
  options.format = InputFormat::kLines;
  RecordReader lines(f, options);
  ASSERT_TRUE(lines.ReadBatch(10, 1, &batch).ok());
  EXPECT_EQ(batch[0].text(), "{\"id");
  EXPECT_TRUE(batch[0].truncated);
  EXPECT_EQ(batch[1].text(), "shor");
  EXPECT_EQ(batch[0].line, "{\"id\":1,\"text\":\"abc\\u00e9def\"}");  // the line itself is whole
  std::fclose(f);
}

}  // namespace
}  // namespace neardup
