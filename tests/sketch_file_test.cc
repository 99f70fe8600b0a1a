// NearDupSet with its sketch records in a file (NearDupOptions::sketch_dir,
// issue 14's memory target): the same answers as in memory through inserts,
// removals and chunk evacuations, far less resident memory, and a record
// that cannot be written (a full disk) leaves nothing of its document.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dedup/sketch_arena.h"
#include "neardup/dedup/near_dup_set.h"
#include "neardup/text/fingerprint.h"
#include "neardup/text/shingles.h"

namespace neardup {
namespace {

std::string TempDir() {
  std::string dir = std::filesystem::temp_directory_path() / "neardup_sketch_file_XXXXXX";
  EXPECT_NE(::mkdtemp(dir.data()), nullptr);
  return dir;
}

// Short texts over a small vocabulary (shared anchors, stop keys) with a
// frame shared by every text (hard negatives), and edited variants.
std::vector<std::string> Texts(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> words;
  for (int i = 0; i < 400; ++i) words.push_back("w" + std::to_string(i * 7919 % 1000));
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    if (!out.empty() && rng() % 3 == 0) {  // a variant of an earlier text
      std::string t = out[rng() % out.size()];
      t.insert(rng() % t.size(), words[rng() % words.size()] + " ");
      out.push_back(t);
      continue;
    }
    std::string t = "Package description: ";
    for (int w = 0; w < 6 + static_cast<int>(rng() % 10); ++w) t += words[rng() % words.size()] + " ";
    out.push_back(t + "(library)");
  }
  return out;
}

std::string Describe(const std::vector<DuplicateMatch>& v) {
  std::string s;
  for (const DuplicateMatch& m : v) {
    s += std::to_string(m.id) + "/" + std::to_string(m.distance) + "/" + std::to_string(m.similarity) +
         (m.similarity_exact ? "e " : " ");
  }
  return s.empty() ? "-" : s;
}

struct Pair {
  std::unique_ptr<NearDupSet> memory, file;
};

Pair MakePair(const std::string& dir, NearDupOptions o = {}) {
  Pair p;
  p.memory = std::move(NearDupSet::Create(o)).value();
  o.sketch_dir = dir;
  p.file = std::move(NearDupSet::Create(o)).value();
  return p;
}

void ExpectSameAnswers(const Pair& p, const std::vector<DocSignature>& sigs, const std::string& when) {
  for (size_t i = 0; i < sigs.size(); ++i) {
    std::optional<DuplicateMatch> bm, bf;
    std::vector<DuplicateMatch> am, af;
    ASSERT_TRUE(p.memory->FindDuplicate(sigs[i], &bm, &am).ok());
    ASSERT_TRUE(p.file->FindDuplicate(sigs[i], &bf, &af).ok());
    ASSERT_EQ(Describe(am), Describe(af)) << when << ", text " << i;
  }
}

std::vector<DocSignature> Signatures(const std::vector<std::string>& texts) {
  const Fingerprinter fp = std::move(Fingerprinter::Create(FingerprintOptions{})).value();
  std::vector<DocSignature> sigs;
  TextAnalysis a;
  for (const std::string& t : texts) {
    fp.Analyze(t, &a);
    sigs.push_back(MakeSignature(a, t, RecheckOptions{}.shingle_size));
  }
  return sigs;
}

TEST(SketchFileTest, SameAnswersAsInMemoryThroughRemovalsAndEvacuations) {
  const std::string dir = TempDir();
  const std::vector<DocSignature> sigs = Signatures(Texts(30000, 7));
  Pair p = MakePair(dir);
  std::vector<DocId> kept;
  for (size_t i = 0; i < sigs.size(); ++i) {
    std::optional<DuplicateMatch> bm, bf;
    ASSERT_TRUE(p.memory->FindDuplicate(sigs[i], &bm).ok());
    ASSERT_TRUE(p.file->FindDuplicate(sigs[i], &bf).ok());
    ASSERT_EQ(bm.has_value(), bf.has_value()) << i;
    if (bm) {
      ASSERT_EQ(bm->id, bf->id) << i;
    }
    if (bm && i % 4 != 0) continue;  // keep some duplicates too (insert-always)
    ASSERT_TRUE(p.memory->Insert(i, sigs[i]).ok());
    ASSERT_TRUE(p.file->Insert(i, sigs[i]).ok());
    kept.push_back(i);
  }
  ASSERT_GT(p.file->sketches(), 10000u);
  const size_t file_bytes = p.file->SketchFileBytes();
  EXPECT_GT(file_bytes, 4 * internal::SketchArena::kChunkWords);
  // The records are most of the memory: in a file they cost only places.
  EXPECT_LT(p.file->MemoryBytes() * 2, p.memory->MemoryBytes());
  ExpectSameAnswers(p, sigs, "after inserts");
  // Remove 80 % in random order: chunks fall below half live and are evacuated.
  std::mt19937_64 rng(11);
  std::shuffle(kept.begin(), kept.end(), rng);
  const size_t removed = kept.size() * 4 / 5;
  for (size_t i = 0; i < removed; ++i) {
    ASSERT_TRUE(p.memory->Remove(kept[i], sigs[kept[i]]));
    ASSERT_TRUE(p.file->Remove(kept[i], sigs[kept[i]]));
  }
  EXPECT_LT(p.file->SketchFileBytes(), file_bytes * 3 / 4) << "evacuated chunks are given back";
  ExpectSameAnswers(p, sigs, "after removals");
  // And re-inserted into the freed chunks.
  for (size_t i = 0; i < removed; i += 2) {
    ASSERT_TRUE(p.memory->Insert(kept[i], sigs[kept[i]]).ok());
    ASSERT_TRUE(p.file->Insert(kept[i], sigs[kept[i]]).ok());
  }
  ExpectSameAnswers(p, sigs, "after re-inserts");
  std::filesystem::remove_all(dir);
}

TEST(SketchFileTest, TheFileIsUnnamed) {
  const std::string dir = TempDir();
  {
    NearDupOptions o;
    o.sketch_dir = dir;
    auto set = std::move(NearDupSet::Create(o)).value();
    const auto sigs = Signatures(Texts(100, 3));
    for (size_t i = 0; i < sigs.size(); ++i) ASSERT_TRUE(set->Insert(i, sigs[i]).ok());
    EXPECT_GT(set->SketchFileBytes(), 0u);
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "nothing a crash could leave behind";
  }
  std::filesystem::remove_all(dir);
}

TEST(SketchFileTest, MissingDirectoryIsAnIOError) {
  NearDupOptions o;
  o.sketch_dir = "/nonexistent/neardup";
  auto set = NearDupSet::Create(o);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), Status::Code::kIOError);
}

// A record that does not fit (here the process's file size limit, which fails
// the write as a full disk does) is kStorageFull and keeps nothing: the text
// is not found afterwards, and the same insert succeeds once there is room.
TEST(SketchFileTest, AFailedWriteKeepsNothing) {
  const std::string dir = TempDir();
  NearDupOptions o;
  o.sketch_dir = dir;
  auto set = std::move(NearDupSet::Create(o)).value();
  const auto sigs = Signatures(Texts(20000, 5));
  ::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 2 * internal::SketchArena::kChunkWords * sizeof(uint32_t);  // two chunks
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  size_t failed_at = sigs.size();
  Status failure;
  for (size_t i = 0; i < sigs.size(); ++i) {
    failure = set->Insert(i, sigs[i]);
    if (!failure.ok()) {
      failed_at = i;
      break;
    }
  }
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  ASSERT_LT(failed_at, sigs.size()) << "the limit was never reached";
  EXPECT_EQ(failure.code(), Status::Code::kStorageFull) << failure.message();
  EXPECT_EQ(set->size(), failed_at);
  std::optional<DuplicateMatch> best;
  std::vector<DuplicateMatch> all;
  ASSERT_TRUE(set->FindDuplicate(sigs[failed_at], &best, &all).ok());
  for (const DuplicateMatch& m : all) EXPECT_NE(m.id, failed_at) << "a failed insert left its document";
  ASSERT_TRUE(set->Insert(failed_at, sigs[failed_at]).ok()) << "room again";
  ASSERT_TRUE(set->FindDuplicate(sigs[failed_at], &best).ok());
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->id, failed_at);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace neardup
