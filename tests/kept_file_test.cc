// Kept-document files (include/neardup/dedup/kept_file.h): a round trip
// gives back every record, and any damage is an error, never wrong records.
#include "neardup/dedup/kept_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "neardup/dedup/dedup.h"

namespace neardup {
namespace {

class KeptFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::path(::testing::TempDir()) / ("kept_" + std::to_string(::getpid()) + ".ndk")).string();
    auto d = Deduplicator::Create(DedupOptions{});
    ASSERT_TRUE(d.ok());
    dedup_ = std::move(d).value();
    scheme_ = {dedup_->scheme_id(), static_cast<uint32_t>(dedup_->options().recheck.shingle_size)};
    const char* texts[] = {"", "今天北京天气很好", "the quick brown fox", "x"};
    for (const char* t : texts) sigs_.push_back(dedup_->Signature(t));
    sigs_.push_back(dedup_->Signature(std::string(5000, 'y') + " long text beyond the sketch"));
    for (size_t i = 0; i < sigs_.size(); ++i) ids_.push_back("\"id-" + std::to_string(i) + "\"");
  }
  void TearDown() override { std::filesystem::remove(path_); }

  void Write() {
    auto w = KeptFileWriter::Create(path_, scheme_);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (size_t i = 0; i < sigs_.size(); ++i) ASSERT_TRUE(w.value()->Add(10 * i, ids_[i], sigs_[i]).ok());
    ASSERT_TRUE(w.value()->Finish().ok());
  }
  Result<uint64_t> Read(std::vector<std::string>* ids, std::vector<DocSignature>* sigs) {
    return ReadKeptFile(path_, scheme_, [&, i = uint64_t{0}](uint64_t seq, std::string_view id, const DocSignature& s) mutable {
      if (seq != 10 * i++) return Status::Corruption("sequence");
      ids->emplace_back(id);
      sigs->push_back(s);
      return Status::OK();
    });
  }
  std::string Bytes() {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void Put(const std::string& bytes) { std::ofstream(path_, std::ios::binary) << bytes; }

  std::string path_;
  std::unique_ptr<Deduplicator> dedup_;
  KeptFileScheme scheme_;
  std::vector<DocSignature> sigs_;
  std::vector<std::string> ids_;
};

TEST_F(KeptFileTest, RoundTripGivesEveryRecordBack) {
  Write();
  std::vector<std::string> ids;
  std::vector<DocSignature> sigs;
  auto n = Read(&ids, &sigs);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n.value(), sigs_.size());
  EXPECT_EQ(ids, ids_);
  EXPECT_EQ(sigs, sigs_);
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

TEST_F(KeptFileTest, EveryFlippedByteAndEveryTruncationIsAnError) {
  Write();
  const std::string good = Bytes();
  // Every byte of the header, then every 7th. Regression: a flip in the
  // header's scheme or shingle size was reported as "saved with other
  // fingerprint settings" (kFailedPrecondition), not as damage.
  for (size_t at = 0; at < good.size(); at += at < 32 ? 1 : 7) {
    std::string bad = good;
    bad[at] ^= 0x01;
    Put(bad);
    std::vector<std::string> ids;
    std::vector<DocSignature> sigs;
    auto n = Read(&ids, &sigs);
    ASSERT_FALSE(n.ok()) << "flipped byte " << at;
    EXPECT_EQ(n.status().code(), Status::Code::kCorruption) << "flipped byte " << at << ": " << n.status().ToString();
  }
  for (size_t len = 0; len < good.size(); len += 5) {
    Put(good.substr(0, len));
    std::vector<std::string> ids;
    std::vector<DocSignature> sigs;
    auto n = Read(&ids, &sigs);
    ASSERT_FALSE(n.ok()) << "truncated to " << len;
    EXPECT_EQ(n.status().code(), Status::Code::kCorruption) << n.status().ToString();
  }
}

TEST_F(KeptFileTest, OtherSchemeOrShinglesAreRefused) {
  Write();
  auto read = [&](KeptFileScheme s) {
    return ReadKeptFile(path_, s, [](uint64_t, std::string_view, const DocSignature&) { return Status::OK(); });
  };
  EXPECT_EQ(read({scheme_.scheme_id + 1, scheme_.shingle_size}).status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(read({scheme_.scheme_id, scheme_.shingle_size + 1}).status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(read({}).status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(ReadKeptFile(path_ + ".none", scheme_, nullptr).status().code(), Status::Code::kIOError);
}

// Regression (adversarial test, 2026-11-29): --max-text-bytes was not
// recorded, so an index saved with another cut loaded without a word and
// missed exact repeats of its long texts. It is now recorded and compared;
// a file that records none (written before) is read as before.
TEST_F(KeptFileTest, AnotherMaxTextBytesIsRefusedWhereRecorded) {
  auto read = [&](std::optional<uint64_t> max) {
    KeptFileScheme s = scheme_;
    s.max_text_bytes = max;
    return ReadKeptFile(path_, s, [](uint64_t, std::string_view, const DocSignature&) { return Status::OK(); });
  };
  scheme_.max_text_bytes = 100;
  Write();
  EXPECT_TRUE(read(100).ok());
  EXPECT_TRUE(read(std::nullopt).ok());
  const auto other = read(uint64_t{1} << 20);
  EXPECT_EQ(other.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(other.status().ToString().find("saved with --max-text-bytes 100, this run uses 1048576"), std::string::npos)
      << other.status().ToString();
  EXPECT_EQ(read(0).status().code(), Status::Code::kFailedPrecondition);
  scheme_.max_text_bytes = std::nullopt;  // as written before 2026-11-30: flags 0
  Write();
  EXPECT_TRUE(read(100).ok());
  EXPECT_TRUE(read(0).ok());
}

TEST_F(KeptFileTest, AnUnfinishedWriterLeavesNothing) {
  {
    auto w = KeptFileWriter::Create(path_, scheme_);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w.value()->Add(0, ids_[0], sigs_[0]).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

// A checkpoint's unfinished file (dedup --memory-limit --checkpoint): the
// writer is resumed from its recorded length and checksum after a crash that
// wrote more (cut back), or after the file was finished past the checkpoint
// (taken back); the result is the file written in one go. Damage within the
// recorded bytes, or a shorter file, is refused.
TEST_F(KeptFileTest, ResumedWriterGivesTheFileWrittenInOneGo) {
  Write();
  const std::string whole = Bytes();
  for (const bool finished_after : {false, true}) {
    SCOPED_TRACE(finished_after);
    uint64_t bytes = 0, documents = 0, digest = 0;
    {
      auto w = KeptFileWriter::Create(path_, scheme_);
      ASSERT_TRUE(w.ok());
      w.value()->KeepIfUnfinished();
      for (size_t i = 0; i < 2; ++i) ASSERT_TRUE(w.value()->Add(10 * i, ids_[i], sigs_[i]).ok());
      ASSERT_TRUE(w.value()->Sync().ok());
      bytes = w.value()->bytes(), documents = w.value()->documents(), digest = w.value()->digest();
      ASSERT_TRUE(w.value()->Add(99, "\"lost\"", sigs_[3]).ok());  // after the checkpoint: cut back
      if (finished_after) {
        ASSERT_TRUE(w.value()->Finish().ok());
      }
    }
    ASSERT_TRUE(std::filesystem::exists(finished_after ? path_ : path_ + ".tmp"));
    auto w = KeptFileWriter::Resume(path_, bytes, documents, digest);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (size_t i = 2; i < sigs_.size(); ++i) ASSERT_TRUE(w.value()->Add(10 * i, ids_[i], sigs_[i]).ok());
    ASSERT_TRUE(w.value()->Finish().ok());
    EXPECT_EQ(Bytes(), whole);
    // Damage before the recorded length, or a file shorter than it.
    std::filesystem::rename(path_, path_ + ".tmp");
    std::string damaged = whole;
    damaged[40] ^= 1;
    std::ofstream(path_ + ".tmp", std::ios::binary) << damaged;
    EXPECT_EQ(KeptFileWriter::Resume(path_, bytes, documents, digest).status().code(), Status::Code::kCorruption);
    std::ofstream(path_ + ".tmp", std::ios::binary) << whole.substr(0, bytes - 1);
    EXPECT_EQ(KeptFileWriter::Resume(path_, bytes, documents, digest).status().code(), Status::Code::kCorruption);
    std::filesystem::remove(path_ + ".tmp");
    EXPECT_EQ(KeptFileWriter::Resume(path_, bytes, documents, digest).status().code(), Status::Code::kIOError);
  }
}

// The loaded documents are judged against exactly as if they had been kept
// in this run.
TEST_F(KeptFileTest, AddKeptDecidesLaterDocumentsAsKeptOnes) {
  auto a = Deduplicator::Create(DedupOptions{});
  auto b = Deduplicator::Create(DedupOptions{});
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::string_view> first = {"Reading computer manuals without the hardware is frustrating",
                                         "今天北京天气很好，我们去公园散步吧"};
  std::vector<std::string_view> later = {"Reading computer manuals without the hardware is frustrating!",
                                         "今天北京天气很好，我们去公园散步吧。", "something else"};
  std::vector<DedupDecision> da, db;
  ASSERT_TRUE(a.value()->ProcessBatch(first, &da, 1).ok());
  ASSERT_TRUE(a.value()->ProcessBatch(later, &da, 1).ok());
  for (std::string_view t : first) ASSERT_TRUE(b.value()->AddKept(b.value()->Signature(t)).ok());
  ASSERT_TRUE(b.value()->ProcessBatch(later, &db, 1).ok());
  EXPECT_EQ(da, db);
  EXPECT_TRUE(db[0].duplicate);
  EXPECT_EQ(b.value()->stats().documents, 3u);
}

}  // namespace
}  // namespace neardup
