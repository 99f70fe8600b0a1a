// The staged run's files (neardup/dedup/staged_files.h) and the `neardup
// stage` commands: outputs identical to `neardup dedup`, and the refusals
// (a missing shard, a checksum mismatch, shards of other settings, another
// input). The same run on a Dask cluster: tests/dask_stage_test.py.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "neardup/dedup/staged_files.h"
#include "util/sanitized.h"

namespace neardup {
namespace {

const std::string kCli = NEARDUP_CLI_PATH;
const std::string kSample = std::string(NEARDUP_SOURCE_DIR) + "/data/sample/docs.jsonl";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

class StageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/neardup_stage_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // The temporary files of outputs not yet complete (tools/pending_outputs.h)
  // left in the test's directory.
  std::vector<std::string> PendingOutputsLeft() const {
    std::vector<std::string> left;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      if (e.path().filename().string().starts_with(".neardup-")) left.push_back(e.path().string());
    }
    return left;
  }

  // `neardup <args>`; stderr in err_.
  int Run(const std::string& args) {
    const std::string cmd = "'" + kCli + "' " + args + " >/dev/null 2>'" + Path("stderr") + "'";
    const int status = std::system(cmd.c_str());
    err_ = ReadAll(Path("stderr"));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // Splits the sample into `parts` files (part 1 gzip-compressed).
  std::vector<std::string> SplitSample(int parts) {
    std::vector<std::string> lines;
    std::istringstream in(ReadAll(kSample));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::vector<std::string> paths;
    const size_t per = (lines.size() + parts - 1) / parts;
    for (int p = 0; p < parts; ++p) {
      std::string text;
      for (size_t i = p * per; i < std::min(lines.size(), (p + 1) * per); ++i) text += lines[i] + "\n";
      const std::string path = Path("part-" + std::to_string(p) + ".jsonl");
      WriteAll(path, text);
      if (p == 1) {
        EXPECT_EQ(std::system(("gzip '" + path + "'").c_str()), 0);
        paths.push_back(path + ".gz");
      } else {
        paths.push_back(path);
      }
    }
    return paths;
  }

  // Runs fingerprint + decide + filter over `inputs`; the filter outputs
  // concatenated into Path(tag + ".out" / ".dups"). Returns decide's exit code.
  int Staged(const std::vector<std::string>& inputs, const std::string& tag, const std::string& settings,
             const std::string& filter_flags = "", const std::string& decide_flags = "") {
    const int n = static_cast<int>(inputs.size());
    std::string sigs, out, dups;
    for (int i = 0; i < n; ++i) {
      const std::string sig = Path(tag + "-" + std::to_string(i) + ".sig");
      EXPECT_EQ(Run("stage fingerprint -q -i '" + inputs[i] + "' --shard " + std::to_string(i) + " --shards " +
                    std::to_string(n) + " -o '" + sig + "' " + settings),
                0)
          << err_;
      sigs += " -s '" + sig + "'";
    }
    const int rc =
        Run("stage decide -q" + sigs + " -o '" + Path(tag + "-dec") + "' --stats-json '" + Path(tag + ".json") +
            "' " + decide_flags);
    if (rc != 0) return rc;
    for (int i = 0; i < n; ++i) {
      char dec[16];
      std::snprintf(dec, sizeof dec, "/%05d.dec", i);
      const std::string o = Path(tag + "-out" + std::to_string(i)), d = Path(tag + "-dups" + std::to_string(i));
      EXPECT_EQ(Run("stage filter -q -i '" + inputs[i] + "' --decisions '" + Path(tag + "-dec") + dec + "' -o '" +
                    o + "' -d '" + d + "' " + filter_flags),
                0)
          << err_;
      out += ReadAll(o);
      dups += ReadAll(d);
    }
    WriteAll(Path(tag + ".out"), out);
    WriteAll(Path(tag + ".dups"), dups);
    return 0;
  }

  // `dedup_flags`: dedup's flags that are decide's `decide_flags` in the
  // staged run; `same_files`: more (dedup's, decide's) outputs to compare.
  void ExpectSameAsDedup(const std::vector<std::string>& inputs, const std::string& settings,
                         const std::string& output_flags = "", const std::string& decide_flags = "",
                         const std::string& dedup_flags = "",
                         const std::vector<std::pair<std::string, std::string>>& same_files = {}) {
    std::string in;
    for (const std::string& p : inputs) in += " -i '" + p + "'";
    ASSERT_EQ(Run("dedup -q" + in + " -o '" + Path("single.out") + "' -d '" + Path("single.dups") +
                  "' --stats-json '" + Path("single.json") + "' " + output_flags + " " + dedup_flags + " " + settings),
              0)
        << err_;
    ASSERT_EQ(Staged(inputs, "staged", settings, output_flags, decide_flags), 0) << err_;
    EXPECT_FALSE(ReadAll(Path("single.out")).empty());
    EXPECT_EQ(ReadAll(Path("staged.out")), ReadAll(Path("single.out")));
    EXPECT_EQ(ReadAll(Path("staged.dups")), ReadAll(Path("single.dups")));
    for (const auto& [single, staged] : same_files) {
      EXPECT_FALSE(ReadAll(single).empty()) << single;
      EXPECT_EQ(ReadAll(staged), ReadAll(single)) << staged << " differs from " << single;
    }
    // The same counts in decide's --stats-json as in dedup's.
    const auto single = nlohmann::json::parse(ReadAll(Path("single.json")));
    const auto staged = nlohmann::json::parse(ReadAll(Path("staged.json")));
    for (const char* key : {"documents", "kept", "duplicates", "exact_duplicates", "near_duplicates",
                            "without_features", "invalid_utf8", "files", "lines", "bad_lines", "blank_lines",
                            "truncated_texts"}) {
      EXPECT_EQ(staged.at(key), single.at(key)) << key;
    }
  }

  // Run(args) dying like kill -9 after its `batch`-th batch
  // (NEARDUP_DEDUP_CRASH_AFTER_BATCHES).
  int RunCrashingAfter(int batch, const std::string& args) {
    ::setenv("NEARDUP_DEDUP_CRASH_AFTER_BATCHES", std::to_string(batch).c_str(), 1);
    const int rc = Run(args);
    ::unsetenv("NEARDUP_DEDUP_CRASH_AFTER_BATCHES");
    return rc;
  }

  std::string dir_;
  std::string err_;
};

TEST_F(StageTest, FileRoundTrip) {
  const std::string path = Path("f.sig");
  StagedDoc doc{7, "\"a1\"", {}};
  doc.sig.content_hash = 11;
  doc.sig.fingerprint = 0xfeedULL;
  doc.sig.has_features = true;
  doc.sig.num_chars = 19;
  doc.sig.sketch = ComputeSketch("the quick brown fox", 3);
  StagedDecision dec{9, {}, "\"x\"", "42"};
  dec.decision.duplicate = true;
  dec.decision.duplicate_of = 5;
  dec.decision.distance = 2;
  dec.decision.similarity = 0.8125;
  dec.decision.exact = true;
  {
    auto w = StageFileWriter::Create(path, StageFileKind::kSignatures, "{\"h\":1}");
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    std::string r;
    EncodeStagedDoc(doc, &r);
    ASSERT_TRUE((*w)->Add(r).ok());
    r.clear();
    EncodeStagedDecision(dec, &r);
    ASSERT_TRUE((*w)->Add(r).ok());
    ASSERT_TRUE((*w)->Add("").ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto r = StageFileReader::Open(path, StageFileKind::kSignatures);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->header(), "{\"h\":1}");
  std::string_view rec;
  ASSERT_TRUE((*r)->Next(&rec));
  StagedDoc got;
  ASSERT_TRUE(DecodeStagedDoc(rec, &got).ok());
  EXPECT_EQ(got.line_number, 7u);
  EXPECT_EQ(got.id, "\"a1\"");
  EXPECT_EQ(got.sig.fingerprint, 0xfeedULL);
  EXPECT_EQ(got.sig.num_chars, 19u);
  EXPECT_EQ(got.sig.sketch, doc.sig.sketch);
  ASSERT_TRUE((*r)->Next(&rec));
  StagedDecision got_dec;
  ASSERT_TRUE(DecodeStagedDecision(rec, &got_dec).ok());
  EXPECT_EQ(got_dec, dec);
  EXPECT_EQ(DecodeStagedDoc(rec, &got).code(), Status::Code::kCorruption);  // another record type
  ASSERT_TRUE((*r)->Next(&rec));
  EXPECT_TRUE(rec.empty());
  EXPECT_FALSE((*r)->Next(&rec));
  EXPECT_TRUE((*r)->status().ok()) << (*r)->status().ToString();
  // Another kind is refused at open.
  EXPECT_EQ(StageFileReader::Open(path, StageFileKind::kDecisions).status().code(), Status::Code::kCorruption);
}

// A stage file continued by another process from a checkpoint (dedup
// --memory-limit --checkpoint) is the file written in one go, whether the
// crash left more bytes after the checkpoint or the file finished; damage in
// the recorded bytes is refused.
TEST_F(StageTest, ResumedFileIsTheFileWrittenInOneGo) {
  const std::string path = Path("f.dec");
  const std::vector<std::string> records{"Ca", "Cbb", "", "Cdddd", "S{}"};
  {
    auto w = StageFileWriter::Create(path, StageFileKind::kDecisions, "{\"h\":2}");
    ASSERT_TRUE(w.ok());
    for (const std::string& r : records) ASSERT_TRUE((*w)->Add(r).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  const std::string whole = ReadAll(path);
  for (const bool finished_after : {false, true}) {
    SCOPED_TRACE(finished_after);
    uint64_t bytes = 0, count = 0, digest = 0;
    {
      auto w = StageFileWriter::Create(path, StageFileKind::kDecisions, "{\"h\":2}");
      ASSERT_TRUE(w.ok());
      (*w)->KeepIfUnfinished();
      for (size_t i = 0; i < 2; ++i) ASSERT_TRUE((*w)->Add(records[i]).ok());
      ASSERT_TRUE((*w)->Sync().ok());
      bytes = (*w)->bytes(), count = (*w)->records(), digest = (*w)->digest();
      ASSERT_TRUE((*w)->Add("Clost after the checkpoint").ok());
      if (finished_after) {
        ASSERT_TRUE((*w)->Finish().ok());
      }
    }
    auto w = StageFileWriter::Resume(path, bytes, count, digest);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (size_t i = 2; i < records.size(); ++i) ASSERT_TRUE((*w)->Add(records[i]).ok());
    ASSERT_TRUE((*w)->Finish().ok());
    EXPECT_EQ(ReadAll(path), whole);
    std::string damaged = whole;
    damaged[bytes - 2] ^= 1;
    WriteAll(path, damaged);
    EXPECT_EQ(StageFileWriter::Resume(path, bytes, count, digest).status().code(), Status::Code::kCorruption);
  }
}

TEST_F(StageTest, FileCorruptionAndTruncationDetected) {
  const std::string path = Path("f.sig");
  {
    auto w = StageFileWriter::Create(path, StageFileKind::kSignatures, "{}");
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < 100; ++i) ASSERT_TRUE((*w)->Add("record number " + std::to_string(i)).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  const std::string good = ReadAll(path);
  auto read_all = [&](const std::string& bytes) {
    WriteAll(path, bytes);
    auto r = StageFileReader::Open(path, StageFileKind::kSignatures);
    if (!r.ok()) return r.status();
    std::string_view rec;
    while ((*r)->Next(&rec)) {
    }
    return (*r)->status();
  };
  EXPECT_TRUE(read_all(good).ok());
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x20;
  const Status st = read_all(flipped);
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_NE(st.message().find("checksum mismatch"), std::string::npos) << st.ToString();
  for (size_t cut : {size_t{3}, size_t{30}, good.size() / 2, good.size() - 1}) {
    EXPECT_EQ(read_all(good.substr(0, cut)).code(), Status::Code::kCorruption) << cut;
  }
  EXPECT_EQ(read_all(good + "x").code(), Status::Code::kCorruption);
  // A writer that never finishes leaves nothing under the real name.
  std::remove(path.c_str());
  {
    auto w = StageFileWriter::Create(path, StageFileKind::kSignatures, "{}");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add("x").ok());
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  EXPECT_NE(::access((path + ".tmp").c_str(), F_OK), 0);
}

TEST_F(StageTest, SameOutputsAsDedup) {
  const auto inputs = SplitSample(3);
  ExpectSameAsDedup(inputs, "");
}

// decide --threads searches each batch on several threads
// (Deduplicator::DecideBatch): the same decisions as dedup on one thread.
TEST_F(StageTest, SameOutputsWithDecideThreads) {
  const auto inputs = SplitSample(3);
  ExpectSameAsDedup(inputs, "", "", "--threads 3", "--threads 1");
}

TEST_F(StageTest, SameOutputsWithSketchDir) {
  const auto inputs = SplitSample(2);
  ExpectSameAsDedup(inputs, "", "", "--sketch-dir '" + dir_ + "'");
}

TEST_F(StageTest, SameOutputsAsDedupOtherSettingsAndAnnotate) {
  const auto inputs = SplitSample(4);
  ExpectSameAsDedup(inputs, "--threshold 0.5 --shingle-size 4", "--annotate dd");
}

// --save-index over an old crawl, then the new crawl with --load-index of it,
// --clusters and either --keep: decide writes what dedup writes.
TEST_F(StageTest, SameIndexClustersAndKeepAsDedup) {
  const auto inputs = SplitSample(4);
  const std::vector<std::string> old_crawl(inputs.begin(), inputs.begin() + 2);
  const std::vector<std::string> new_crawl(inputs.begin() + 2, inputs.end());
  ExpectSameAsDedup(old_crawl, "", "", "--save-index '" + Path("staged-index") + "'",
                    "--save-index '" + Path("single-index") + "'",
                    {{Path("single-index/kept.ndk"), Path("staged-index/kept.ndk")},
                     {Path("single-index/manifest.json"), Path("staged-index/manifest.json")}});
  for (const std::string keep : {"first", "longest"}) {
    SCOPED_TRACE(keep);
    const auto flags = [&](const std::string& side) {
      return "--load-index '" + Path(side + "-index") + "' --clusters '" + Path(side + ".clusters") + "' --keep " + keep;
    };
    ExpectSameAsDedup(new_crawl, "", "--annotate dd", flags("staged"), flags("single"),
                      {{Path("single.clusters"), Path("staged.clusters")}});
    // The old crawl's documents count: more duplicates than without them.
    std::string in;
    for (const std::string& p : new_crawl) in += " -i '" + p + "'";
    ASSERT_EQ(Run("dedup -q" + in + " -o '" + Path("alone.out") + "' --stats-json '" + Path("alone.json") +
                  "' --keep " + keep),
              0)
        << err_;
    EXPECT_GT(nlohmann::json::parse(ReadAll(Path("staged.json")))["duplicates"].get<uint64_t>(),
              nlohmann::json::parse(ReadAll(Path("alone.json")))["duplicates"].get<uint64_t>());
  }
}

TEST_F(StageTest, SameOutputsWithBadLinesBlankLinesAndLinesFormat) {
  WriteAll(Path("a.jsonl"),
           "{\"id\":\"a1\",\"text\":\"The quick brown fox jumps over the lazy dog\"}\n\n"
           "not json\n{\"id\":2,\"text\":\"Completely different words about databases\"}\r\n"
           "bytes \xff\xfe that are not UTF-8\n");
  WriteAll(Path("b.jsonl"),
           "{\"id\":3,\"text\":\"the quick brown fox jumps over the lazy dog!\"}\n"
           "{\"id\":[4],\"text\":\"x\"}\n{\"text\":\"Completely different words about databases\",\"id\":5.0}");
  ExpectSameAsDedup({Path("a.jsonl"), Path("b.jsonl")}, "");
  ExpectSameAsDedup({Path("a.jsonl"), Path("b.jsonl")}, "--format lines");
}

TEST_F(StageTest, MissingShardIsRefused) {
  const auto inputs = SplitSample(3);
  for (int i : {0, 2}) {
    ASSERT_EQ(Run("stage fingerprint -q -i '" + inputs[i] + "' --shard " + std::to_string(i) +
                  " --shards 3 -o '" + Path(std::to_string(i) + ".sig") + "'"),
              0)
        << err_;
  }
  EXPECT_EQ(Run("stage decide -q -s '" + Path("*.sig") + "' -o '" + Path("dec") + "'"), 2);
  EXPECT_NE(err_.find("signature shard 1 of 3 is missing"), std::string::npos) << err_;
  // A named shard file that does not exist: an I/O error.
  EXPECT_EQ(Run("stage decide -q -s '" + Path("0.sig") + "' -s '" + Path("1.sig") + "' -o '" + Path("dec") + "'"), 1);
  EXPECT_NE(err_.find("cannot open"), std::string::npos) << err_;
}

// Regressions (a tester, 2026-12-02): one input fingerprinted as two shards
// was decided (all of the second a duplicate), exit 0, where dedup refuses a
// file named twice; and a decide that failed on its last shard had renamed
// its first decision files over an earlier run's, so the directory held a
// mix of two runs that filter took, exit 0.
TEST_F(StageTest, ShardsOfOneInputAndAFailedDecidesFilesAreRefused) {
  const auto inputs = SplitSample(3);
  auto fingerprint = [&](const std::string& input, int shard, const std::string& out, const std::string& extra = "") {
    ASSERT_EQ(Run("stage fingerprint -q -i '" + input + "' --shard " + std::to_string(shard) + " --shards 3 -o '" +
                  Path(out) + "'" + extra),
              0)
        << err_;
  };
  fingerprint(inputs[0], 0, "0.sig");
  fingerprint(inputs[0], 1, "twice.sig");
  fingerprint(inputs[2], 2, "2.sig");
  EXPECT_EQ(Run("stage decide -q -s '" + Path("0.sig") + "' -s '" + Path("twice.sig") + "' -s '" + Path("2.sig") +
                "' -o '" + Path("dec") + "'"),
            2);
  EXPECT_NE(err_.find("were both made from " + inputs[0]), std::string::npos) << err_;
  // Run A decides into dec/; run B (other settings) fails on its shard 1.
  fingerprint(inputs[1], 1, "1.sig");
  ASSERT_EQ(Run("stage decide -q -s '" + Path("?.sig") + "' -o '" + Path("dec") + "'"), 0) << err_;
  for (int i = 0; i < 3; ++i) fingerprint(inputs[i], i, "b" + std::to_string(i) + ".sig", " --threshold 0.5");
  const std::string b1 = ReadAll(Path("b1.sig"));
  WriteAll(Path("b1.sig"), b1.substr(0, b1.size() - 10));
  EXPECT_EQ(Run("stage decide -q -s '" + Path("b?.sig") + "' -o '" + Path("dec") + "'"), 1);
  // No file of run A is left beside run B's first one.
  EXPECT_NE(::access(Path("dec/00001.dec").c_str(), F_OK), 0);
  EXPECT_NE(::access(Path("dec/00002.dec").c_str(), F_OK), 0);
  EXPECT_EQ(Run("stage filter -q -i '" + inputs[2] + "' --decisions '" + Path("dec/00002.dec") + "' -o '" +
                Path("out2") + "'"),
            1);
}

// A task writes NAME.tmp and renames it when complete: the .tmp of a killed
// task, found in a directory or a pattern, is not a shard.
TEST_F(StageTest, UnfinishedShardsInADirectoryAreSkipped) {
  const auto inputs = SplitSample(3);
  ASSERT_EQ(::mkdir(Path("sig").c_str(), 0755), 0);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Run("stage fingerprint -q -i '" + inputs[i] + "' --shard " + std::to_string(i) +
                  " --shards 3 -o '" + Path(i == 1 ? "whole1.sig" : "sig/0000" + std::to_string(i) + ".sig") + "'"),
              0)
        << err_;
  }
  const std::string whole = ReadAll(Path("whole1.sig"));
  WriteAll(Path("sig/00001.sig.tmp"), whole.substr(0, whole.size() / 2));  // killed while writing
  EXPECT_EQ(Run("stage decide -q -s '" + Path("sig") + "' -o '" + Path("dec") + "'"), 2);
  EXPECT_NE(err_.find("signature shard 1 of 3 is missing"), std::string::npos) << err_;
  // Shard 1 complete, and a re-run of its task killed before its rename.
  WriteAll(Path("sig/00001.sig"), whole);
  WriteAll(Path("sig/00001.sig.tmp"), whole);
  EXPECT_EQ(Run("stage decide -q -s '" + Path("sig") + "' -o '" + Path("dec") + "'"), 0) << err_;
  EXPECT_EQ(Run("stage decide -q -s '" + Path("sig/*") + "' -o '" + Path("dec2") + "'"), 0) << err_;
}

TEST_F(StageTest, ChecksumMismatchIsRefused) {
  const auto inputs = SplitSample(1);
  ASSERT_EQ(Run("stage fingerprint -q -i '" + inputs[0] + "' -o '" + Path("0.sig") + "'"), 0) << err_;
  std::string bytes = ReadAll(Path("0.sig"));
  bytes[bytes.size() / 2] ^= 1;
  WriteAll(Path("0.sig"), bytes);
  EXPECT_EQ(Run("stage decide -q -s '" + Path("0.sig") + "' -o '" + Path("dec") + "'"), 1);
  EXPECT_NE(err_.find("checksum mismatch"), std::string::npos) << err_;
  EXPECT_NE(::access(Path("dec/00000.dec").c_str(), F_OK), 0);  // no decision file from a bad shard
}

TEST_F(StageTest, ShardsOfOtherSettingsAreRefused) {
  const auto inputs = SplitSample(2);
  ASSERT_EQ(Run("stage fingerprint -q -i '" + inputs[0] + "' --shard 0 --shards 2 -o '" + Path("0.sig") + "'"), 0);
  ASSERT_EQ(Run("stage fingerprint -q -i '" + inputs[1] + "' --shard 1 --shards 2 -o '" + Path("1.sig") +
                "' --threshold 0.5"),
            0);
  EXPECT_EQ(Run("stage decide -q -s '" + Path("0.sig") + "' -s '" + Path("1.sig") + "' -o '" + Path("dec") + "'"), 2);
  EXPECT_NE(err_.find("other settings"), std::string::npos) << err_;
  ASSERT_EQ(Run("stage fingerprint -q -i '" + inputs[1] + "' --shard 1 --shards 3 -o '" + Path("1.sig") + "'"), 0);
  EXPECT_EQ(Run("stage decide -q -s '" + Path("0.sig") + "' -s '" + Path("1.sig") + "' -o '" + Path("dec") + "'"), 2);
  EXPECT_NE(err_.find("shards of different runs"), std::string::npos) << err_;
  EXPECT_EQ(Run("stage fingerprint -q -i - -o '" + Path("x.sig") + "'"), 2);
  EXPECT_EQ(Run("stage fingerprint -q -i '" + inputs[0] + "' --shard 2 --shards 2 -o '" + Path("x.sig") + "'"), 2);
}

int64_t MtimeNs(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

TEST_F(StageTest, KeepExistingRedoesOnlyStaleShards) {
  const auto inputs = SplitSample(1);
  const std::string fp = "stage fingerprint -q --keep-existing -i '" + inputs[0] + "' -o '" + Path("0.sig") + "'";
  ASSERT_EQ(Run(fp), 0) << err_;
  const int64_t first = MtimeNs(Path("0.sig"));
  ::usleep(20000);
  ASSERT_EQ(Run(fp), 0) << err_;
  EXPECT_EQ(MtimeNs(Path("0.sig")), first);  // current: left alone
  ASSERT_EQ(Run(fp + " --threshold 0.5"), 0) << err_;
  const int64_t second = MtimeNs(Path("0.sig"));
  EXPECT_NE(second, first);  // other settings: rewritten
  std::string bytes = ReadAll(Path("0.sig"));
  bytes[bytes.size() / 2] ^= 1;
  WriteAll(Path("0.sig"), bytes);
  ::usleep(20000);
  const int64_t damaged = MtimeNs(Path("0.sig"));
  ASSERT_EQ(Run(fp + " --threshold 0.5"), 0) << err_;
  EXPECT_NE(MtimeNs(Path("0.sig")), damaged);  // damaged: rewritten
  ASSERT_EQ(Run("stage decide -q -s '" + Path("0.sig") + "' -o '" + Path("dec") + "'"), 0) << err_;
}

TEST_F(StageTest, FilterRefusesAnotherInput) {
  const auto inputs = SplitSample(2);
  ASSERT_EQ(Run("stage fingerprint -q -i '" + inputs[0] + "' -o '" + Path("0.sig") + "'"), 0) << err_;
  ASSERT_EQ(Run("stage decide -q -s '" + Path("0.sig") + "' -o '" + Path("dec") + "'"), 0) << err_;
  const std::string dec = " --decisions '" + Path("dec/00000.dec") + "' -o '" + Path("out") + "'";
  EXPECT_EQ(Run("stage filter -q -i '" + inputs[1] + "'" + dec), 2);  // another size
  EXPECT_NE(err_.find("is not the input of"), std::string::npos) << err_;
  // Same size, other content: found by the line digest; no output is left.
  std::string bytes = ReadAll(inputs[0]);
  bytes[bytes.size() - 5] = bytes[bytes.size() - 5] == 'a' ? 'b' : 'a';
  WriteAll(Path("changed.jsonl"), bytes);
  EXPECT_EQ(Run("stage filter -q -i '" + Path("changed.jsonl") + "'" + dec), 1);
  EXPECT_NE(err_.find("has changed since it was fingerprinted"), std::string::npos) << err_;
  EXPECT_NE(::access(Path("out").c_str(), F_OK), 0);
  EXPECT_EQ(Run("stage filter -q -i '" + inputs[0] + "'" + dec), 0) << err_;
  // A signature shard is not a decision file.
  EXPECT_EQ(Run("stage filter -q -i '" + inputs[0] + "' --decisions '" + Path("0.sig") + "' -o '" + Path("o2") + "'"),
            1);
}

// Regression (issue 17, adversarial test F2, 2026-11-29): stage filter's
// and dedup --memory-limit's outputs were opened under their own names at
// the start: a rerun emptied the last complete output at once, and a task
// killed by SIGKILL left a partial file under the output's name, where a
// scheduler would take it for a result. They are now written under a hidden
// temporary name and renamed into place when complete
// (tools/pending_outputs.h); what a SIGKILL leaves is removed by the next
// run that writes that output.
// Regression (issue 17, review of 2026-11-30): two outputs whose names are
// too long for ".neardup-PID-" before them and end alike had one temporary
// name, so the second output was written over the first and both were
// renamed from it. The temporary name of a long one carries its hash.
TEST_F(StageTest, LongOutputNamesThatEndAlikeStayApart) {
  const std::string tail(240, 'x');
  const std::string kept = Path("k" + tail + ".jsonl"), dups = Path("d" + tail + ".jsonl");
  ASSERT_EQ(Run("dedup -q -i '" + kSample + "' -o '" + Path("k") + "' -d '" + Path("d") + "'"), 0) << err_;
  ASSERT_FALSE(ReadAll(Path("d")).empty());
  ASSERT_EQ(Run("dedup -q -i '" + kSample + "' -o '" + kept + "' -d '" + dups + "' --memory-limit 1"), 0) << err_;
  EXPECT_EQ(ReadAll(kept), ReadAll(Path("k")));
  EXPECT_EQ(ReadAll(dups), ReadAll(Path("d")));
  EXPECT_EQ(PendingOutputsLeft(), std::vector<std::string>{});
}

TEST_F(StageTest, OutputsAppearUnderTheirNamesOnlyWhenComplete) {
  const auto inputs = SplitSample(2);
  const std::string run = "dedup -q -i '" + inputs[0] + "' -i '" + inputs[1] + "' -o '" + Path("out") + "' -d '" +
                          Path("dups") + "' --memory-limit 1";
  ASSERT_EQ(Run(run), 0) << err_;
  const std::string kept = ReadAll(Path("out")), dups = ReadAll(Path("dups"));
  ASSERT_FALSE(dups.empty());
  WriteAll(Path("out"), "before\n");
  WriteAll(Path("dups"), "before\n");
  ASSERT_EQ(RunCrashingAfter(2, run), 137);
  EXPECT_EQ(ReadAll(Path("out")), "before\n");
  EXPECT_EQ(ReadAll(Path("dups")), "before\n");
  EXPECT_EQ(PendingOutputsLeft().size(), 2u);  // SIGKILL: nothing ran
  ASSERT_EQ(Run(run), 0) << err_;
  EXPECT_EQ(ReadAll(Path("out")), kept);
  EXPECT_EQ(ReadAll(Path("dups")), dups);
  EXPECT_EQ(PendingOutputsLeft(), std::vector<std::string>{});  // the killed run's went too

  // stage filter: a task that fails leaves the last complete output.
  ASSERT_EQ(Run("stage fingerprint -q -i '" + inputs[0] + "' -o '" + Path("0.sig") + "'"), 0) << err_;
  ASSERT_EQ(Run("stage decide -q -s '" + Path("0.sig") + "' -o '" + Path("dec") + "'"), 0) << err_;
  const std::string filter = "stage filter -q -i '" + inputs[0] + "' --decisions '" + Path("dec/00000.dec") +
                             "' -o '" + Path("f.jsonl.gz") + "' -d '" + Path("f.dups") + "'";
  ASSERT_EQ(Run(filter), 0) << err_;
  const std::string filtered = ReadAll(Path("f.jsonl.gz")), filtered_dups = ReadAll(Path("f.dups"));
  EXPECT_EQ(filtered.substr(0, 2), "\x1f\x8b");  // compressed as its name says, under the temporary name too
  std::string bytes = ReadAll(inputs[0]);
  WriteAll(Path("kept-input"), bytes);
  bytes[bytes.size() - 5] = bytes[bytes.size() - 5] == 'a' ? 'b' : 'a';  // same size: found at the end
  WriteAll(inputs[0], bytes);
  EXPECT_EQ(Run(filter), 1);
  EXPECT_NE(err_.find("has changed since it was fingerprinted"), std::string::npos) << err_;
  EXPECT_EQ(ReadAll(Path("f.jsonl.gz")), filtered);
  EXPECT_EQ(ReadAll(Path("f.dups")), filtered_dups);
  EXPECT_EQ(PendingOutputsLeft(), std::vector<std::string>{});
  WriteAll(inputs[0], ReadAll(Path("kept-input")));

  // Found by the adversarial test of this change (2026-11-30): (1) an output
  // that is a symbolic link (/dev/stdout redirected to a file is one) was
  // replaced by a regular file, its target left alone: it is written
  // through, in place. (2) An output that is a directory failed only at the
  // end of the run: now at once (exit 2). (3) SIGTERM left stage filter's
  // temporary files: it removes them now, as dedup --memory-limit does.
  ASSERT_EQ(::symlink(Path("target.jsonl").c_str(), Path("link.jsonl").c_str()), 0);
  ASSERT_EQ(Run(run.substr(0, run.find(" -o ")) + " -o '" + Path("link.jsonl") + "' --memory-limit 1"), 0) << err_;
  EXPECT_TRUE(std::filesystem::is_symlink(Path("link.jsonl")));
  EXPECT_EQ(ReadAll(Path("target.jsonl")), kept);
  std::filesystem::create_directories(Path("a-dir"));
  EXPECT_EQ(Run(run.substr(0, run.find(" -o ")) + " -o '" + Path("a-dir") + "' --memory-limit 1"), 2);
  EXPECT_NE(err_.find(Path("a-dir") + " is a directory"), std::string::npos) << err_;
  // --duplicates a FIFO without a reader: its open blocks, with the
  // output's temporary file already made.
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0644), 0);
  const std::string blocked = "'" + kCli + "' " + filter.substr(0, filter.find(" -d ")) + " -d '" + Path("fifo") + "'";
  const std::string script = blocked + " & pid=$!; i=0; while [ $i -lt 200 ] && ! ls '" + dir_ +
                             "'/.neardup-* >/dev/null 2>&1; do sleep 0.05; i=$((i+1)); done; kill -TERM $pid; "
                             "wait $pid; echo $? > '" + Path("rc") + "'";
  ASSERT_EQ(std::system(script.c_str()), 0);
  EXPECT_EQ(ReadAll(Path("rc")), "143\n");
  EXPECT_EQ(PendingOutputsLeft(), std::vector<std::string>{});
  EXPECT_EQ(ReadAll(Path("f.jsonl.gz")), filtered);
}

// --memory-limit (docs/SCALING.md, "Deciding in bounded memory"): inputs of
// more than one decide batch (4,096 documents) per file, so that rounds end
// inside a file as well as at its end. File 0: the sample, then each of its
// texts with a word appended (near-duplicates of the first half); file 1:
// the sample with a prefix.
std::vector<std::string> RoundsCorpus(const std::string& dir) {
  std::vector<std::string> lines;
  std::istringstream in(ReadAll(kSample));
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  auto edited = [&](const std::string& tag, bool prefix) {
    std::string out;
    for (const std::string& l : lines) {
      auto j = nlohmann::json::parse(l);
      const std::string text = j["text"].get<std::string>();
      j["text"] = prefix ? tag + text : text + tag;
      j["id"] = tag + j["id"].dump();
      out += j.dump() + "\n";
    }
    return out;
  };
  std::string first;
  for (const std::string& l : lines) first += l + "\n";
  WriteAll(dir + "/rounds-0.jsonl", first + edited(" again", false));
  WriteAll(dir + "/rounds-1.jsonl", edited("re: ", true));
  return {dir + "/rounds-0.jsonl", dir + "/rounds-1.jsonl"};
}

// Without stop keys (every anchor keeps its postings) a document's decision
// depends only on the documents kept before it, so deciding in rounds of one
// batch each must give exactly the one-set decisions: staged decide and dedup,
// on 1 and 2 threads, every output.
constexpr char kNoStopKeys[] = "--anchor-max-postings 1073741824";

TEST_F(StageTest, MemoryLimitRoundsDecideAsOneSetWithoutStopKeys) {
  const auto inputs = RoundsCorpus(dir_);
  ExpectSameAsDedup(inputs, kNoStopKeys, "", "--memory-limit 1 --threads 2", "");
  ExpectSameAsDedup(inputs, kNoStopKeys, "--annotate dd", "--memory-limit 1", "");
  std::string in;
  for (const std::string& p : inputs) in += " -i '" + p + "'";
  const char* const thread_counts[] = {"2", "1"};
  for (int t = 0; t < 2; ++t) {
    if (!testing::RunsCase(t, 2)) continue;
    const char* threads = thread_counts[t];
    SCOPED_TRACE(threads);
    const std::string out = " -o '" + Path("kept-{shard}.jsonl.gz") + "' --output-shards 2 --annotate dd -t " + threads;
    ASSERT_EQ(Run("dedup" + in + out + " --memory-limit 1 --spill-dir '" + dir_ + "' " + kNoStopKeys), 0) << err_;
    EXPECT_NE(err_.find("round 3 decided"), std::string::npos) << err_;  // in rounds
    for (int shard : {0, 1}) {
      const std::string name = "kept-0000" + std::to_string(shard) + ".jsonl.gz";
      ASSERT_EQ(std::system(("gzip -dc '" + Path(name) + "' > '" + Path(name + ".rounds") + "'").c_str()), 0);
    }
    ASSERT_EQ(Run("dedup -q" + in + out + " " + kNoStopKeys), 0) << err_;
    for (int shard : {0, 1}) {
      const std::string name = "kept-0000" + std::to_string(shard) + ".jsonl.gz";
      ASSERT_EQ(std::system(("gzip -dc '" + Path(name) + "' > '" + Path(name + ".one") + "'").c_str()), 0);
      EXPECT_FALSE(ReadAll(Path(name + ".one")).empty());
      EXPECT_EQ(ReadAll(Path(name + ".rounds")), ReadAll(Path(name + ".one"))) << name;
    }
  }
  // Its scratch files are gone.
  std::string left;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    if (e.path().filename().string().starts_with("neardup-")) left += e.path().string() + " ";
  }
  EXPECT_EQ(left, "");
}

// With the default stop keys the rounds may find a few more or fewer
// duplicates (an anchor can be a stop key in the whole set and not in a
// round's); an exact repeat is a duplicate whatever the rounds.
TEST_F(StageTest, MemoryLimitWithStopKeysKeepsNoExactRepeat) {
  const auto inputs = RoundsCorpus(dir_);
  WriteAll(Path("repeat.jsonl"), ReadAll(inputs[0]));
  const std::string in = " -i '" + inputs[0] + "' -i '" + inputs[1] + "' -i '" + Path("repeat.jsonl") + "'";
  ASSERT_EQ(Run("dedup -q" + in + " -o '" + Path("one") + "' --stats-json '" + Path("one.json") + "'"), 0) << err_;
  ASSERT_EQ(Run("dedup -q" + in + " -o '" + Path("rounds") + "' --stats-json '" + Path("rounds.json") +
                "' --memory-limit 1"),
            0)
      << err_;
  const auto one = nlohmann::json::parse(ReadAll(Path("one.json")));
  const auto rounds = nlohmann::json::parse(ReadAll(Path("rounds.json")));
  EXPECT_EQ(rounds["documents"], one["documents"]);
  const double a = one["duplicates"].get<double>(), b = rounds["duplicates"].get<double>();
  EXPECT_NEAR(b, a, a * 0.01);
  // The third input repeats the first: none of it is kept again.
  const std::string kept = ReadAll(Path("rounds"));
  EXPECT_EQ(std::count(kept.begin(), kept.end(), '\n'), rounds["kept"].get<int64_t>());
  std::set<std::string> seen;
  std::istringstream lines(kept);
  for (std::string l; std::getline(lines, l);) EXPECT_TRUE(seen.insert(l).second) << l;
}

// --save-index and --load-index in rounds: the loaded documents are judged
// against in the first round, whose probes carry them to the later ones.
TEST_F(StageTest, MemoryLimitSavesAndLoadsIndexAsDedup) {
  const auto inputs = SplitSample(4);
  const std::string old_crawl = " -i '" + inputs[0] + "' -i '" + inputs[1] + "' " + kNoStopKeys;
  const std::string new_crawl = " -i '" + inputs[2] + "' -i '" + inputs[3] + "' " + kNoStopKeys;
  ASSERT_EQ(Run("dedup -q" + old_crawl + " -o '" + Path("a1") + "' --save-index '" + Path("ix1") + "'"), 0) << err_;
  ASSERT_EQ(Run("dedup -q" + old_crawl + " -o '" + Path("a2") + "' --save-index '" + Path("ix2") + "' --memory-limit 1"),
            0)
      << err_;
  EXPECT_EQ(ReadAll(Path("ix2/kept.ndk")), ReadAll(Path("ix1/kept.ndk")));
  EXPECT_EQ(ReadAll(Path("ix2/manifest.json")), ReadAll(Path("ix1/manifest.json")));
  const std::string load = " --load-index '" + Path("ix1") + "'";
  ASSERT_EQ(Run("dedup -q" + new_crawl + load + " -o '" + Path("b1") + "' -d '" + Path("d1") + "'"), 0) << err_;
  ASSERT_EQ(Run("dedup -q" + new_crawl + load + " -o '" + Path("b2") + "' -d '" + Path("d2") + "' --memory-limit 1"), 0)
      << err_;
  EXPECT_FALSE(ReadAll(Path("d1")).empty());
  EXPECT_EQ(ReadAll(Path("b2")), ReadAll(Path("b1")));
  EXPECT_EQ(ReadAll(Path("d2")), ReadAll(Path("d1")));
}

// A later round reads a file again but analyzes only the documents it
// needs: the counts (invalid UTF-8 with --format lines, blank lines) are the
// first read's.
TEST_F(StageTest, MemoryLimitCountsAsDedup) {
  const auto inputs = RoundsCorpus(dir_);
  std::string text = "bytes \xff\xfe that are not UTF-8\n\n";
  std::istringstream lines(ReadAll(inputs[0]));
  for (std::string l; std::getline(lines, l);) {
    std::string t = nlohmann::json::parse(l)["text"].get<std::string>();
    std::replace(t.begin(), t.end(), '\n', ' ');
    text += t + "\n";
  }
  WriteAll(Path("odd.txt"), text);
  const std::string in = " --format lines -i '" + Path("odd.txt") + "' " + kNoStopKeys;
  ASSERT_EQ(Run("dedup -q" + in + " -o '" + Path("one") + "' --stats-json '" + Path("one.json") + "'"), 0) << err_;
  ASSERT_EQ(Run("dedup" + in + " -o '" + Path("rounds") + "' --stats-json '" + Path("rounds.json") +
                "' --memory-limit 1"),
            0)
      << err_;
  EXPECT_NE(err_.find("round 2 decided documents 4096 to"), std::string::npos) << err_;  // a round inside the file
  EXPECT_EQ(ReadAll(Path("rounds")), ReadAll(Path("one")));
  const auto one = nlohmann::json::parse(ReadAll(Path("one.json")));
  const auto rounds = nlohmann::json::parse(ReadAll(Path("rounds.json")));
  for (const char* key : {"documents", "kept", "duplicates", "exact_duplicates", "near_duplicates", "without_features",
                          "invalid_utf8", "files", "lines", "bad_lines", "blank_lines", "truncated_texts"}) {
    EXPECT_EQ(rounds.at(key), one.at(key)) << key;
  }
  EXPECT_GT(one["invalid_utf8"].get<int64_t>(), 0);
  // dedup's --stats-json shape, so one reader reads both: every field of the
  // run in memory is there, of the same JSON type, at the same place.
  std::function<void(const nlohmann::json&, const nlohmann::json&, const std::string&)> same_shape =
      [&](const nlohmann::json& want, const nlohmann::json& got, const std::string& at) {
        for (const auto& [key, value] : want.items()) {
          ASSERT_TRUE(got.contains(key)) << at + key;
          if (key == "memory_bytes") {  // the rounds know only the total
            EXPECT_GT(got[key].at("total").get<uint64_t>(), 0u);
            continue;
          }
          EXPECT_EQ(got[key].type_name(), std::string(value.type_name())) << at + key;
          if (value.is_object()) same_shape(value, got[key], at + key + ".");
        }
      };
  same_shape(one, rounds, "");
  for (const char* key : {"k", "scheme", "scheme_id", "threads"}) EXPECT_EQ(rounds.at(key), one.at(key)) << key;
  EXPECT_GT(rounds["rounds"].get<int>(), 2);
  EXPECT_EQ(rounds["memory_limit_bytes"].get<int>(), 1);
}

// A run in rounds may take hours: --progress S prints where it is (round,
// document, memory held) and, once round 1 has counted the documents, an ETA.
TEST_F(StageTest, MemoryLimitShowsProgressInRounds) {
  const auto inputs = RoundsCorpus(dir_);
  std::string in;
  for (const std::string& p : inputs) in += " -i '" + p + "'";
  // Room for all: one round, deciding throughout.
  ASSERT_EQ(Run("dedup" + in + " -o '" + Path("out") + "' --memory-limit 40M --progress 0.000001"), 0) << err_;
  // Round 1 estimates the number from the bytes read.
  EXPECT_NE(err_.find("neardup: round 1, deciding, document 4096 of about "), std::string::npos) << err_;
  EXPECT_NE(err_.find("ETA about"), std::string::npos) << err_;
  EXPECT_EQ(err_.find("neardup: round 2"), std::string::npos) << err_;
  // Room for one batch: past it, round 1 only searches; round 2 knows the count.
  ASSERT_EQ(Run("dedup" + in + " -o '" + Path("out") + "' --memory-limit 1 --progress 0.000001"), 0) << err_;
  EXPECT_NE(err_.find("neardup: round 1, searching, document 8192 of about "), std::string::npos) << err_;
  const size_t later = err_.find("neardup: round 2, ");
  ASSERT_NE(later, std::string::npos) << err_;
  EXPECT_NE(err_.find(" of ", later), std::string::npos) << err_;
  EXPECT_NE(err_.find("ETA about", later), std::string::npos) << err_;
  ASSERT_EQ(Run("dedup -q" + in + " -o '" + Path("out") + "' --memory-limit 1 --progress 0.000001"), 0) << err_;
  EXPECT_EQ(err_, "");
}

// Found in review: SIGTERM left the scratch directory (its decision
// records are 11 bytes per document). The run now removes it and dies of
// the signal.
// Regression (the outputs): they are opened at the start, so that a path
// that cannot be written fails at once, and are written at the end; a run
// ended by a signal left them as empty files, which read as a result.
// Regression: an output that is a device or a pipe was replaced by a regular
// file (stage files are written under a temporary name and renamed into
// place; --memory-limit's --stats-json was moved in) or removed (a failed
// --memory-limit run removes its outputs). Run as root, `stage fingerprint
// -o /dev/null` replaced /dev/null for the whole machine. A FIFO with a
// reader stands for the device here.
TEST_F(StageTest, DevicesAndPipesAsOutputsAreWrittenInPlace) {
  WriteAll(Path("bad.jsonl"), "{\"id\": 1, \"text\": \"a b c\"}\n{bad\n");
  const std::string fifo = Path("fifo"), rounds = " --memory-limit 1M --spill-dir '" + dir_ + "'";
  const std::pair<std::string, int> runs[] = {
      {"stage fingerprint -i '" + kSample + "' -o '" + fifo + "'", 0},
      {"dedup -q -i '" + kSample + "' -o '" + fifo + "'" + rounds, 0},
      {"dedup -q -i '" + kSample + "' -o '" + Path("k") + "' --stats-json '" + fifo + "'" + rounds, 0},
      {"dedup -q -i '" + Path("bad.jsonl") + "' -o '" + fifo + "' --strict" + rounds, 3},
  };
  for (const auto& [args, rc] : runs) {
    SCOPED_TRACE(args);
    std::filesystem::remove(fifo);
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    ASSERT_EQ(std::system(("timeout 120 cat '" + fifo + "' > '" + Path("copy") + "' &").c_str()), 0);
    EXPECT_EQ(Run(args), rc) << err_;
    struct stat st {};
    ASSERT_EQ(::lstat(fifo.c_str(), &st), 0) << "the output was removed";
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the output was replaced by a regular file";
  }
}

TEST_F(StageTest, MemoryLimitRemovesItsScratchOnSigterm) {
  const auto inputs = RoundsCorpus(dir_);
  ASSERT_EQ(::mkdir(Path("spill").c_str(), 0755), 0);
  const std::string run = "'" + kCli + "' dedup -q -i '" + inputs[0] + "' -i '" + inputs[1] + "' -o '" + Path("o") +
                          "' -d '" + Path("d") + "' --memory-limit 1 -t 1 --spill-dir '" + Path("spill") + "' " +
                          kNoStopKeys;
  // Runs `command` in the background, waits (at most 20 s) until the shell
  // test `ready` holds, then sends SIGTERM; the exit status is 128 + 15.
  auto terminate_when = [&](const std::string& command, const std::string& ready) {
    const std::string script = command + " & pid=$!; i=0; while [ $i -lt 200 ] && ! " + ready +
                               "; do sleep 0.1; i=$((i+1)); done; kill -TERM $pid; wait $pid; echo $? > '" +
                               Path("rc") + "'";
    ASSERT_EQ(std::system(script.c_str()), 0);
    EXPECT_EQ(ReadAll(Path("rc")), "143\n");
  };
  terminate_when(run, "ls '" + Path("spill") + "'/neardup-dedup-*/dec/* >/dev/null 2>&1");
  EXPECT_TRUE(std::filesystem::is_empty(Path("spill")));
  EXPECT_FALSE(std::filesystem::exists(Path("o")));
  EXPECT_FALSE(std::filesystem::exists(Path("d")));
  EXPECT_EQ(PendingOutputsLeft(), std::vector<std::string>{});
  // With --checkpoint: the outputs' temporary files go, the checkpoint
  // stays, and the same command then finishes with the uninterrupted run's
  // outputs. The outputs of the run before stay as they were until then.
  ASSERT_EQ(std::system((run + " > /dev/null 2>&1").c_str()), 0);
  const std::string kept = ReadAll(Path("o")), dups = ReadAll(Path("d"));
  ASSERT_FALSE(dups.empty());
  WriteAll(Path("o"), "before\n");
  WriteAll(Path("d"), "before\n");
  const std::string checkpointed = run + " --checkpoint '" + Path("ck") + "'";
  terminate_when(checkpointed, "[ -e '" + Path("ck/rounds/rounds.json") + "' ]");
  EXPECT_EQ(ReadAll(Path("o")), "before\n");
  EXPECT_EQ(ReadAll(Path("d")), "before\n");
  EXPECT_EQ(PendingOutputsLeft(), std::vector<std::string>{});
  EXPECT_TRUE(std::filesystem::exists(Path("ck/rounds/rounds.json")));
  ASSERT_EQ(std::system((checkpointed + " > /dev/null 2>&1").c_str()), 0);
  EXPECT_EQ(ReadAll(Path("o")), kept);
  EXPECT_EQ(ReadAll(Path("d")), dups);
}

// Found by an adversarial test (2026-12-02): a SIGTERM at the wrong moment
// left files for good. During the outputs' fsyncs (Commit forgot their
// temporary names first), during the teardown after a failure (the names
// were forgotten before the files went), during the scratch directory's
// removal (its name was forgotten first), between its creation and its
// lock; and under nohup a hangup ended the run. strace delivers the signal
// at the n-th call of each kind of file system call, for every n until the
// run ends untouched. Whatever n: no
// temporary file and no scratch directory is left, and each output holds
// the run before's file or the complete new one (they are renamed one by
// one).
TEST_F(StageTest, MemoryLimitLeavesNothingWhereverASignalLands) {
  if (std::system("strace -V > /dev/null 2>&1") != 0) GTEST_SKIP() << "no strace";
  const auto inputs = SplitSample(2);
  ASSERT_EQ(::mkdir(Path("spill").c_str(), 0755), 0);
  const std::string args = "dedup -q -i '" + inputs[0] + "' -i '" + inputs[1] + "' -o '" + Path("o") + "' -d '" +
                           Path("d") + "' --memory-limit 1 -t 1 --spill-dir '" + Path("spill") + "'";
  ASSERT_EQ(Run(args), 0) << err_;
  const std::string kept = ReadAll(Path("o")), dups = ReadAll(Path("d"));
  ASSERT_FALSE(dups.empty());
  const std::string run = "'" + kCli + "' " + args + " > /dev/null 2>&1";
  // LeakSanitizer cannot run under ptrace: at the exit of a run that no
  // signal ended, it aborted (exit 134), so that no run ended untouched and
  // the sweep went on to its end (the ASan CI stage timed out). A hung run
  // fails its case instead of the whole test.
  const std::string guard = "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\" timeout -k 5 120 ";
  const std::string traced = guard + "strace -f -qq -o /dev/null ";
  for (const std::string call : {"fsync", "rename", "unlink", "unlinkat", "rmdir", "mkdir", "openat", "write"}) {
    const int stride = call == "write" ? 10 : 1;  // 235 writes here, 37 opens, at most 6 of the others
    int signalled = 0;
    for (int n = 1, c = 0; n <= 1000; n += stride, ++c) {
      if (!testing::RunsCase(c, 3)) continue;
      SCOPED_TRACE(call + " number " + std::to_string(n));
      WriteAll(Path("o"), "before\n");
      WriteAll(Path("d"), "before\n");
      const int status = std::system((traced + "-e trace=" + call + " -e inject=" + call +
                                      ":signal=TERM:when=" + std::to_string(n) + " " + run).c_str());
      const bool untouched = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      EXPECT_TRUE(untouched || (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) ||
                  (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM))
          << status;
      EXPECT_EQ(PendingOutputsLeft(), std::vector<std::string>{});
      EXPECT_TRUE(std::filesystem::is_empty(Path("spill")));
      const std::string o = ReadAll(Path("o")), d = ReadAll(Path("d"));
      EXPECT_TRUE(o == kept || (!untouched && o == "before\n"));
      EXPECT_TRUE(d == dups || (!untouched && d == "before\n"));
      if (untouched) break;  // fewer than n such calls
      ++signalled;
      std::filesystem::remove_all(Path("spill"));  // so that one failure does not fail every later case
      ::mkdir(Path("spill").c_str(), 0755);
    }
    EXPECT_GT(signalled, 0) << call;  // the run makes such calls: the signal landed
  }
  // Under nohup (SIGHUP ignored when the run starts) a hangup does not end
  // the run: the cleanup's handler took the signal over and ended it.
  // (nohup inside timeout: timeout handles SIGHUP, so its child starts with
  // the default action.)
  const int status = std::system(
      (guard + "nohup strace -f -qq -o /dev/null -e trace=fsync -e inject=fsync:signal=HUP:when=1 " + run).c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(ReadAll(Path("o")), kept);
}

// Found in review: a run killed by SIGKILL (nothing runs then) left its
// neardup-dedup-* scratch directory, the size of a round's decisions, in
// --spill-dir for good. Each scratch directory now holds a lock file naming
// its host, locked while its run lives; the next run in the same place
// removes those whose lock is free. A live run's directory (its lock held),
// another host's (a shared disk, where a lock may not reach) and a
// directory without a lock are left alone.
TEST_F(StageTest, MemoryLimitRemovesTheScratchOfAKilledRun) {
  const auto inputs = RoundsCorpus(dir_);
  ASSERT_EQ(::mkdir(Path("spill").c_str(), 0755), 0);
  const std::string run = "dedup -i '" + inputs[0] + "' -i '" + inputs[1] + "' -o '" + Path("o") +
                          "' --memory-limit 1 -t 1 --spill-dir '" + Path("spill") + "'";
  ASSERT_EQ(RunCrashingAfter(3, run), 137) << err_;
  std::vector<std::string> killed;
  for (const auto& e : std::filesystem::directory_iterator(Path("spill"))) killed.push_back(e.path().string());
  ASSERT_EQ(killed.size(), 1u);
  ASSERT_EQ(::access((killed[0] + "/lock").c_str(), F_OK), 0);
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  auto fake = [&](const std::string& name, const std::string* lock_text) {
    const std::string d = Path("spill/" + name);
    std::filesystem::create_directories(d + "/dec");
    WriteAll(d + "/dec/0.dec", "decisions");
    if (lock_text) WriteAll(d + "/lock", *lock_text);
    return d;
  };
  const std::string other_host = std::string(host) + ".elsewhere", this_host = host;
  const std::string live = fake("neardup-dedup-live01", &this_host);
  const std::string elsewhere = fake("neardup-dedup-other1", &other_host);
  const std::string unlocked = fake("neardup-dedup-nolock", nullptr);
  const std::string dead = fake("neardup-dedup-dead01", &this_host);
  const std::string not_ours = fake("someone-elses", &this_host);
  const int held = ::open((live + "/lock").c_str(), O_RDWR);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);  // as a run in progress holds it
  ASSERT_EQ(Run(run), 0) << err_;
  ::close(held);
  for (const std::string& gone : {killed[0], dead}) {
    EXPECT_NE(::access(gone.c_str(), F_OK), 0) << gone;
    EXPECT_NE(err_.find("removed " + gone + ", left by a run that was killed"), std::string::npos) << err_;
  }
  for (const std::string& kept : {live, elsewhere, unlocked, not_ours}) {
    EXPECT_EQ(ReadAll(kept + "/dec/0.dec"), "decisions") << kept;
  }
  size_t left = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(Path("spill"))) ++left;
  EXPECT_EQ(left, 4u) << "the run removed its own scratch";
}

// Found in review: a second run given the same --checkpoint while the first
// ran emptied the first's round files (a fresh start clears them) and wrote
// its own among them. DIR/lock is now held while a run lives; a second run
// is refused (exit 2) and touches nothing, and the first's checkpoint
// resumes as before once the lock is free.
TEST_F(StageTest, MemoryLimitCheckpointIsUsedByOneRunAtATime) {
  const auto inputs = RoundsCorpus(dir_);
  const std::string plain = "dedup -q -i '" + inputs[0] + "' -i '" + inputs[1] + "' -o '" + Path("kept") +
                            "' -d '" + Path("dups") + "' --memory-limit 1";
  ASSERT_EQ(Run(plain), 0) << err_;
  const std::string kept = ReadAll(Path("kept")), dups = ReadAll(Path("dups"));
  const std::string run = plain + " --checkpoint '" + Path("ck") + "'";
  ASSERT_EQ(RunCrashingAfter(11, run), 137) << err_;
  ASSERT_EQ(::access(Path("ck/rounds/rounds.json").c_str(), F_OK), 0);
  const std::string recorded = ReadAll(Path("ck/rounds/rounds.json"));
  const int held = ::open(Path("ck/lock").c_str(), O_RDWR);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
  for (const std::string& other : {run, plain + " -k 4 --checkpoint '" + Path("ck") + "'"}) {
    EXPECT_EQ(Run(other), 2) << other;
    EXPECT_NE(err_.find("is in use by another run"), std::string::npos) << err_;
    EXPECT_EQ(ReadAll(Path("ck/rounds/rounds.json")), recorded);
  }
  ::close(held);
  ASSERT_EQ(Run(run), 0) << err_;
  EXPECT_EQ(ReadAll(Path("kept")), kept);
  EXPECT_EQ(ReadAll(Path("dups")), dups);
  EXPECT_NE(::access(Path("ck").c_str(), F_OK), 0) << "the checkpoint, its lock too, is removed when the run succeeds";
}

// Found in review: the spill refused to read back a raw id over 1 MiB that
// it had written, so a duplicate of such a document in a later round failed
// the run.
TEST_F(StageTest, MemoryLimitCarriesLongIdsAcrossRounds) {
  const std::string id(std::size_t{1} << 21, 'x');
  const std::string doc = "{\"id\": \"" + id + "\", \"text\": \"a document whose id is two megabytes long\"}\n";
  std::string later;
  std::istringstream lines(ReadAll(kSample));
  for (std::string l; std::getline(lines, l);) later += l + "\n";
  WriteAll(Path("long.jsonl"), doc + later + later + doc);  // past a round's first batch
  const std::string in = " -i '" + Path("long.jsonl") + "' -o '" + Path("o") + "' " + kNoStopKeys;
  ASSERT_EQ(Run("dedup -q" + in + " -d '" + Path("d1") + "'"), 0) << err_;
  ASSERT_EQ(Run("dedup" + in + " -d '" + Path("d2") + "' --memory-limit 1"), 0) << err_;
  EXPECT_NE(err_.find("round 3 decided"), std::string::npos) << err_.substr(0, 2000);
  EXPECT_EQ(ReadAll(Path("d2")), ReadAll(Path("d1")));
  EXPECT_NE(ReadAll(Path("d2")).find(id), std::string::npos);
}

TEST_F(StageTest, MemoryLimitRefusesWhatItCannotBound) {
  const auto inputs = SplitSample(2);
  const std::string run = "dedup -q -i '" + inputs[0] + "' -o '" + Path("out") + "' --memory-limit 100M ";
  for (const std::string& flags : {std::string("--keep longest"), "--clusters '" + Path("c") + "'"}) {
    EXPECT_EQ(Run(run + flags), 2) << flags;
    EXPECT_NE(err_.find("--memory-limit cannot be used with"), std::string::npos) << err_;
  }
  EXPECT_EQ(Run(run + "--memory-limit 12parsecs"), 2);
  EXPECT_NE(::access(Path("out").c_str(), F_OK), 0);
}

// Regression (an adversarial test): a checkpoint recorded only how many
// documents its --load-index directories held, so an index replaced by
// another of as many documents between the kill and the resume was taken,
// exit 0, and the outputs matched neither index. Both kinds of checkpoint
// (in memory, and in rounds) now record each index file's length and
// checksum; the resume with the index the run started with still succeeds.
TEST_F(StageTest, CheckpointRefusesAnotherLoadIndex) {
  const auto inputs = RoundsCorpus(dir_);
  // Two indexes of the same documents under other ids: as many kept.
  std::string renamed;
  std::istringstream lines(ReadAll(kSample));
  for (std::string l; std::getline(lines, l);) {
    auto j = nlohmann::json::parse(l);
    j["id"] = "other-" + j["id"].dump();
    renamed += j.dump() + "\n";
  }
  WriteAll(Path("renamed.jsonl"), renamed);
  ASSERT_EQ(Run("dedup -q -i '" + kSample + "' -o /dev/null --save-index '" + Path("a") + "'"), 0) << err_;
  ASSERT_EQ(Run("dedup -q -i '" + Path("renamed.jsonl") + "' -o /dev/null --save-index '" + Path("b") + "'"), 0);
  ASSERT_EQ(nlohmann::json::parse(ReadAll(Path("a/manifest.json")))["documents"],
            nlohmann::json::parse(ReadAll(Path("b/manifest.json")))["documents"]);
  ASSERT_NE(ReadAll(Path("a/kept.ndk")), ReadAll(Path("b/kept.ndk")));
  for (const std::string mode : {"", " --memory-limit 1"}) {
    SCOPED_TRACE("mode:" + mode);
    std::filesystem::remove_all(Path("l"));
    std::filesystem::copy(Path("a"), Path("l"));
    const std::string run = "dedup -q -i '" + inputs[0] + "' -i '" + inputs[1] + "' -o '" +
                            Path("k") + "' -d '" + Path("d") + "' --load-index '" + Path("l") +
                            "' --batch-size 300 --checkpoint '" + Path("ck") + "'" + mode;
    ASSERT_EQ(Run(run), 0) << err_;
    const std::string kept = ReadAll(Path("k")), dups = ReadAll(Path("d"));
    // The first crash after the checkpoint has recorded something: the first
    // input (in memory), a round (in rounds).
    const std::string state = Path(mode.empty() ? "ck/state.json" : "ck/rounds/rounds.json");
    for (int crash = 1; !std::filesystem::exists(state); ++crash) {
      ASSERT_LT(crash, 100);
      std::filesystem::remove_all(Path("ck"));
      ASSERT_EQ(RunCrashingAfter(crash, run), 137) << err_;
    }
    std::filesystem::remove_all(Path("l"));
    std::filesystem::copy(Path("b"), Path("l"));
    EXPECT_EQ(Run(run), 2) << err_;
    EXPECT_NE(err_.find("--load-index directories are not those the interrupted run loaded"), std::string::npos)
        << err_;
    std::filesystem::remove_all(Path("l"));
    std::filesystem::copy(Path("a"), Path("l"));
    ASSERT_EQ(Run(run), 0) << err_;
    EXPECT_EQ(ReadAll(Path("k")), kept);
    EXPECT_EQ(ReadAll(Path("d")), dups);
  }
}

// --checkpoint with --memory-limit: a run that dies like kill -9 after any
// decide batch of any round, or before writing its outputs, and is started
// again (and dies again, and is started again) gives the uninterrupted run's
// outputs byte for byte: kept, duplicates, rejects, the saved index. The
// inputs are a gzip file, bad lines and a file a round ends inside.
TEST_F(StageTest, MemoryLimitCheckpointResumesAfterACrashAnywhere) {
  const auto inputs = RoundsCorpus(dir_);
  ASSERT_EQ(std::system(("gzip '" + inputs[1] + "'").c_str()), 0);
  WriteAll(Path("bad.jsonl"), "{broken\n" + ReadAll(inputs[0]).substr(0, 20000) + "\n[1]\n");
  const std::string run = "dedup -q -i '" + inputs[0] + "' -i '" + inputs[1] + ".gz' -i '" + Path("bad.jsonl") +
                          "' -o '" + Path("kept") + "' -d '" + Path("dups") + "' --rejects '" + Path("rej") +
                          "' --save-index '" + Path("ix") + "' --stats-json '" + Path("st.json") + "' --memory-limit 1";
  const std::vector<std::string> outputs{"kept", "dups", "rej", "ix/kept.ndk", "ix/manifest.json"};
  ASSERT_EQ(Run(run), 0) << err_;
  std::vector<std::string> expected;
  for (const std::string& o : outputs) expected.push_back(ReadAll(Path(o)));
  ASSERT_FALSE(expected[2].empty());
  const auto stats = nlohmann::json::parse(ReadAll(Path("st.json")));
  ASSERT_GE(stats["rounds"].get<int>(), 4);
  const std::string checkpointed = run + " --checkpoint '" + Path("ck") + "'";
  int resumed = 0;
  for (int crash = 1;; ++crash) {
    if (!testing::RunsCase(crash - 1, 2)) continue;
    SCOPED_TRACE("crash after batch " + std::to_string(crash));
    ASSERT_LT(crash, 100);
    std::system(("rm -rf '" + Path("ck") + "' '" + Path("ix") + "'").c_str());
    const int rc = RunCrashingAfter(crash, checkpointed);
    if (rc == 0) break;  // past the run's last batch
    ASSERT_EQ(rc, 137) << err_;
    resumed += ::access(Path("ck/rounds/rounds.json").c_str(), F_OK) == 0;
    // Dies again early in the restarted run, then finishes.
    ASSERT_NE(RunCrashingAfter(2, checkpointed), 0);
    ASSERT_EQ(Run(checkpointed), 0) << err_;
    for (size_t i = 0; i < outputs.size(); ++i) EXPECT_EQ(ReadAll(Path(outputs[i])), expected[i]) << outputs[i];
    const auto again = nlohmann::json::parse(ReadAll(Path("st.json")));
    for (const char* key : {"documents", "kept", "duplicates", "lines", "bad_lines", "rounds", "files"}) {
      EXPECT_EQ(again.at(key), stats.at(key)) << key;
    }
    EXPECT_NE(::access(Path("ck").c_str(), F_OK), 0) << "the checkpoint is removed when the run succeeds";
  }
  EXPECT_GE(resumed, 3);  // most crash points are past a recorded round
}

// Issue 17 ("continues from its last completed input file"): with
// --checkpoint, a --memory-limit run records its place at the end of every
// input file inside a round too, not only at the rounds' ends. A run killed
// after any batch resumes from the last input file it completed, whether
// the round was still deciding (its kept documents so far reloaded, with
// the --load-index documents in round 1) or only searching (both spills
// where they stood), and gives the uninterrupted outputs byte for byte.
TEST_F(StageTest, MemoryLimitCheckpointResumesInsideARound) {
  std::vector<std::string> lines;
  std::istringstream sample(ReadAll(kSample));
  for (std::string l; std::getline(sample, l);) lines.push_back(l);
  std::string in;
  for (size_t p = 0; p < 6; ++p) {  // 6 files; 12M gives 3 rounds of 2 or 3 files each
    std::string part = p == 3 ? "{broken\n" : "";
    for (size_t i = p * lines.size() / 6; i < (p + 1) * lines.size() / 6; ++i) part += lines[i] + "\n";
    WriteAll(Path("p" + std::to_string(p) + ".jsonl"), part);
    in += " -i '" + Path("p" + std::to_string(p) + ".jsonl") + "'";
  }
  ASSERT_EQ(Run("dedup -q -i '" + Path("p5.jsonl") + "' -o /dev/null --save-index '" + Path("old") + "'"), 0) << err_;
  const std::string run = "dedup" + in + " -o '" + Path("kept") + "' -d '" + Path("dups") + "' --rejects '" +
                          Path("rej") + "' --load-index '" + Path("old") + "' --save-index '" + Path("ix") +
                          "' --stats-json '" + Path("st.json") + "' --memory-limit 12M";
  const std::vector<std::string> outputs{"kept", "dups", "rej", "ix/kept.ndk", "ix/manifest.json"};
  ASSERT_EQ(Run(run), 0) << err_;
  std::vector<std::string> expected;
  for (const std::string& o : outputs) expected.push_back(ReadAll(Path(o)));
  ASSERT_NE(expected[1].find("\"similarity\""), std::string::npos);  // duplicates of the loaded index among them
  const auto stats = nlohmann::json::parse(ReadAll(Path("st.json")));
  ASSERT_EQ(stats["rounds"].get<int>(), 3);
  const std::string checkpointed = run + " --checkpoint '" + Path("ck") + "'";
  int deciding = 0, searching = 0, in_round_1 = 0;
  for (int crash = 1;; ++crash) {
    SCOPED_TRACE("crash after batch " + std::to_string(crash));
    ASSERT_LT(crash, 100);
    std::system(("rm -rf '" + Path("ck") + "' '" + Path("ix") + "'").c_str());
    const int rc = RunCrashingAfter(crash, checkpointed + " -q");
    if (rc == 0) break;  // past the run's last batch
    ASSERT_EQ(rc, 137) << err_;
    bool inside = false;
    if (::access(Path("ck/rounds/rounds.json").c_str(), F_OK) == 0) {
      const auto state = nlohmann::json::parse(ReadAll(Path("ck/rounds/rounds.json")));
      if ((inside = state["in_round"].is_object())) {
        (state["in_round"]["deciding"].get<bool>() ? deciding : searching)++;
        in_round_1 += state["rounds"] == 0;
      }
    }
    ASSERT_EQ(Run(checkpointed), 0) << err_;
    EXPECT_EQ(err_.find(", input ") != std::string::npos, inside) << err_;  // the message names the place
    for (size_t i = 0; i < outputs.size(); ++i) EXPECT_EQ(ReadAll(Path(outputs[i])), expected[i]) << outputs[i];
    const auto again = nlohmann::json::parse(ReadAll(Path("st.json")));
    for (const char* key : {"documents", "kept", "duplicates", "lines", "bad_lines", "rounds", "files"}) {
      EXPECT_EQ(again.at(key), stats.at(key)) << key;
    }
    EXPECT_NE(::access(Path("ck").c_str(), F_OK), 0) << "the checkpoint is removed when the run succeeds";
  }
  EXPECT_GE(deciding, 2);
  EXPECT_GE(searching, 2);
  EXPECT_GE(in_round_1, 2);
}

// A write that fails (here the file size limit, as a full disk: exit 1,
// kStorageFull) in any round, or while the outputs are written, leaves the
// checkpoint as it was at the last round's end; the same command, once
// there is room, finishes with the uninterrupted outputs.
TEST_F(StageTest, MemoryLimitCheckpointResumesAfterAFullDisk) {
  const auto inputs = RoundsCorpus(dir_);
  // A third input of long ids: its decision file, written over the later
  // rounds, is the largest of the rounds' files.
  std::string long_ids;
  for (const char* copy : {"", " again"}) {
    std::istringstream lines(ReadAll(kSample));
    for (std::string l; std::getline(lines, l);) {
      auto j = nlohmann::json::parse(l);
      j["id"] = std::string(300, 'x') + copy + j["id"].dump();
      j["text"] = j["text"].get<std::string>() + copy;
      long_ids += j.dump() + "\n";
    }
  }
  WriteAll(Path("long.jsonl"), long_ids);
  const std::string run = "dedup -i '" + inputs[0] + "' -i '" + inputs[1] + "' -i '" + Path("long.jsonl") + "' -o '" +
                          Path("kept") + "' -d '" + Path("dups") + "' --memory-limit 1 --checkpoint '" + Path("ck") + "'";
  ASSERT_EQ(Run(run), 0) << err_;
  const std::string kept = ReadAll(Path("kept")), dups = ReadAll(Path("dups"));
  int failed = 0, resumed = 0, in_a_round = 0;
  for (int blocks = 300; blocks <= 4800; blocks += 300) {  // 1 KiB blocks: the largest file is the duplicates
    if (!testing::RunsCase(blocks / 300 - 1, 2)) continue;
    SCOPED_TRACE(blocks);
    std::system(("rm -rf '" + Path("ck") + "'").c_str());
    const int status = std::system(("ulimit -f " + std::to_string(blocks) + "; trap '' XFSZ; exec '" + kCli + "' " +
                                    run + " 2>'" + Path("stderr") + "'")
                                       .c_str());
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) != 0) {
      ++failed;
      EXPECT_EQ(WEXITSTATUS(status), 1);
      const std::string why = ReadAll(Path("stderr"));
      EXPECT_NE(why.find("File too large"), std::string::npos) << why;
      in_a_round += why.find(".dec.tmp") != std::string::npos;
      ASSERT_EQ(::access(Path("ck").c_str(), F_OK), 0) << "the checkpoint stays after an error";
      ASSERT_EQ(Run(run), 0) << err_;
      resumed += err_.find("resuming from --checkpoint") != std::string::npos;
    }
    EXPECT_EQ(ReadAll(Path("kept")), kept);
    EXPECT_EQ(ReadAll(Path("dups")), dups);
  }
  EXPECT_GE(failed, 3);
  EXPECT_GE(resumed, 2);     // failed past a recorded round
  EXPECT_GE(in_a_round, 1);  // and in a round (the others: writing the outputs)
}

// What a restart refuses to resume, with the reason: other arguments, an
// input changed since, a damaged unfinished file or spill. Nothing is
// written then.
TEST_F(StageTest, MemoryLimitCheckpointRefusesWhatItCannotResume) {
  const auto inputs = RoundsCorpus(dir_);
  const std::string run = "dedup -q -i '" + inputs[0] + "' -i '" + inputs[1] + "' -o '" + Path("kept") +
                          "' --save-index '" + Path("ix") + "' --memory-limit 1 --checkpoint '" + Path("ck") + "'";
  // After 10 batches the checkpoint is round 3's start, after 11 the end of
  // its first input (the decisions of that input finished).
  auto crash_in_round_3 = [&](int batches = 11) {
    std::system(("rm -rf '" + Path("ck") + "'").c_str());
    ASSERT_EQ(RunCrashingAfter(batches, run), 137);
    ASSERT_EQ(::access(Path("ck/rounds/rounds.json").c_str(), F_OK), 0);
  };
  auto flip = [&](const std::string& path, long at) {
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr) << path;
    std::fseek(f, at, SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, at, SEEK_SET);
    std::fputc(c ^ 0x20, f);
    std::fclose(f);
  };
  crash_in_round_3();
  EXPECT_EQ(Run(run + " -k 4"), 2);
  EXPECT_NE(err_.find("holds another run"), std::string::npos) << err_;
  EXPECT_EQ(Run(run + " --threads 1 --progress 5"), 0) << err_;  // threads and progress change no output
  // A failed run leaves this output as it was (tools/pending_outputs.h).
  const std::string complete = ReadAll(Path("kept"));
  ASSERT_FALSE(complete.empty());

  crash_in_round_3();
  const std::string text = ReadAll(inputs[1]);
  WriteAll(inputs[1], text + text.substr(0, text.find('\n') + 1));
  EXPECT_EQ(Run(run), 2);
  EXPECT_NE(err_.find("is not what the interrupted run read"), std::string::npos) << err_;
  WriteAll(inputs[1], text);

  // Regression (adversarial test, 2026-11-29): a file added to or removed
  // from an input directory was reported as the first file (every header
  // changed: each records the number of files). The message names it.
  std::filesystem::create_directories(Path("in"));
  WriteAll(Path("in/a.jsonl"), ReadAll(inputs[0]));
  WriteAll(Path("in/b.jsonl"), text);
  const std::string in_dir = "dedup -q -i '" + Path("in") + "' -o '" + Path("kept2") + "' --memory-limit 1 --checkpoint '" +
                             Path("ck") + "'";
  std::system(("rm -rf '" + Path("ck") + "'").c_str());
  ASSERT_EQ(RunCrashingAfter(11, in_dir), 137);
  ASSERT_EQ(::access(Path("ck/rounds/rounds.json").c_str(), F_OK), 0);
  WriteAll(Path("in/c.jsonl"), text.substr(0, text.find('\n') + 1));
  EXPECT_EQ(Run(in_dir), 2);
  EXPECT_NE(err_.find("the inputs are not the 2 files the interrupted run read (" + Path("in/c.jsonl") +
                      " was not among them)"),
            std::string::npos)
      << err_;
  std::filesystem::remove(Path("in/c.jsonl"));
  std::filesystem::rename(Path("in/b.jsonl"), Path("b.jsonl"));
  EXPECT_EQ(Run(in_dir), 2);
  EXPECT_NE(err_.find(Path("in/b.jsonl") + " is no longer given"), std::string::npos) << err_;
  std::filesystem::rename(Path("b.jsonl"), Path("in/b.jsonl"));  // the same file again: it resumes
  EXPECT_EQ(Run(in_dir), 0) << err_;

  crash_in_round_3(10);
  std::string unfinished;
  for (const auto& e : std::filesystem::directory_iterator(Path("ck/rounds/dec"))) {
    if (e.path().extension() == ".tmp") unfinished = e.path().string();
  }
  ASSERT_FALSE(unfinished.empty());
  flip(unfinished, 300);
  EXPECT_NE(Run(run), 0);
  EXPECT_NE(err_.find("differs from what the checkpoint recorded"), std::string::npos) << err_;

  crash_in_round_3();
  flip(Path("ck/rounds/index/kept.ndk.tmp"), 40);
  EXPECT_NE(Run(run), 0);
  EXPECT_NE(err_.find("differs from what the checkpoint recorded"), std::string::npos) << err_;

  // The round's kept documents so far (reloaded when a round resumes
  // inside it): checksummed like any kept-document file.
  crash_in_round_3();
  ASSERT_EQ(nlohmann::json::parse(ReadAll(Path("ck/rounds/rounds.json")))["in_round"]["segments"],
            nlohmann::json::parse("[[0, 1]]"));
  flip(Path("ck/rounds/kept-2-0.ndk"), 60);
  EXPECT_EQ(Run(run), 1);
  EXPECT_NE(err_.find("kept-2-0.ndk"), std::string::npos) << err_;
  EXPECT_EQ(ReadAll(Path("kept")), complete);
  EXPECT_EQ(PendingOutputsLeft(), std::vector<std::string>{});

  crash_in_round_3();
  for (const auto& e : std::filesystem::directory_iterator(Path("ck/rounds"))) {
    if (e.path().filename().string().starts_with("spill-")) std::filesystem::resize_file(e.path(), 100);
  }
  EXPECT_NE(Run(run), 0);
  EXPECT_NE(err_.find("damaged (not the length or checksum the checkpoint recorded)"), std::string::npos) << err_;
  EXPECT_EQ(ReadAll(Path("kept")), complete);
  EXPECT_EQ(PendingOutputsLeft(), std::vector<std::string>{});

  // Regression (issue 17, adversarial test): one changed byte of the spill,
  // a match's similarity or id, was taken as the next round's prior (a wrong
  // similarity or an invalid id in --duplicates, exit 0). Now checksummed.
  for (long at : {5L, 20L, 40L}) {
    crash_in_round_3();
    for (const auto& e : std::filesystem::directory_iterator(Path("ck/rounds"))) {
      if (e.path().filename().string().starts_with("spill-")) flip(e.path().string(), at);
    }
    EXPECT_EQ(Run(run), 1) << at;
    EXPECT_NE(err_.find("damaged (not the length or checksum the checkpoint recorded)"), std::string::npos) << err_;
    EXPECT_EQ(ReadAll(Path("kept")), complete);
  }

  // Standard input cannot be read again.
  EXPECT_EQ(Run("dedup -q -i - -o '" + Path("kept") + "' --memory-limit 1 --checkpoint '" + Path("ck2") + "' < '" +
                inputs[0] + "'"),
            2);
  EXPECT_NE(err_.find("--checkpoint cannot resume"), std::string::npos) << err_;
}

// Standard input and a named pipe can be read once; the rounds read each
// input once per round, so such an input is copied to the scratch directory
// first (it was refused before). Compressed input stays compressed in the
// copy. Outputs as a run over the files, and the copies are gone after.
TEST_F(StageTest, MemoryLimitReadsStandardInputAndPipesThroughACopy) {
  const auto inputs = RoundsCorpus(dir_);
  const std::string a = inputs[0], b = inputs[1];
  ASSERT_EQ(std::system(("gzip -c '" + b + "' > '" + Path("b.gz") + "'").c_str()), 0);
  const std::string tail = " -o '" + Path("kept") + "' -d '" + Path("dups") + "' --annotate dd " + kNoStopKeys;
  ASSERT_EQ(Run("dedup -q -i '" + a + "' -i '" + b + "'" + tail), 0) << err_;
  const std::string kept = ReadAll(Path("kept")), dups = ReadAll(Path("dups"));
  ASSERT_FALSE(dups.empty());
  const std::string rounds = " --memory-limit 1 --spill-dir '" + dir_ + "'";
  // A file, then standard input (gzip), in that order.
  ASSERT_EQ(Run("dedup -i '" + a + "' -i -" + tail + rounds + " < '" + Path("b.gz") + "'"), 0) << err_;
  EXPECT_NE(err_.find("round 3 decided"), std::string::npos) << err_;
  EXPECT_EQ(ReadAll(Path("kept")), kept);
  EXPECT_EQ(ReadAll(Path("dups")), dups);
  // A named pipe first, through a writer in the background.
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0600), 0);
  ASSERT_EQ(std::system(("cat '" + a + "' > '" + Path("fifo") + "' &").c_str()), 0);
  ASSERT_EQ(Run("dedup -q -i '" + Path("fifo") + "' -i '" + Path("b.gz") + "'" + tail + rounds), 0) << err_;
  EXPECT_EQ(ReadAll(Path("kept")), kept);
  EXPECT_EQ(ReadAll(Path("dups")), dups);
  // Bad lines on standard input are reported under its name, once.
  WriteAll(Path("bad.jsonl"), ReadAll(a) + "{not json\n");
  EXPECT_EQ(Run("dedup -i '" + b + "' -i - -o '" + Path("kept") + "'" + rounds + " < '" + Path("bad.jsonl") + "'"), 0);
  EXPECT_NE(err_.find("-:"), std::string::npos) << err_;
  EXPECT_EQ(err_.find("input-1"), std::string::npos) << err_;
  // So is corrupt compressed data on it (regression, a tester, 2026-12-02:
  // the message named the scratch copy, removed by then).
  const std::string gz = ReadAll(Path("b.gz"));
  WriteAll(Path("cut.gz"), gz.substr(0, gz.size() / 2));
  EXPECT_EQ(Run("dedup -q -i - -o '" + Path("kept") + "'" + rounds + " < '" + Path("cut.gz") + "'"), 1);
  EXPECT_NE(err_.find("neardup: standard input: truncated gzip stream"), std::string::npos) << err_;
  EXPECT_EQ(err_.find("input-0"), std::string::npos) << err_;
  std::string left;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    if (e.path().filename().string().starts_with("neardup-")) left += e.path().string() + " ";
  }
  EXPECT_EQ(left, "");
}

// Found in review: an output naming an input truncated it before the run.
// Now refused, as without --memory-limit, with every input left whole.
TEST_F(StageTest, MemoryLimitNeverOverwritesAnInput) {
  const auto inputs = SplitSample(3);
  const std::string b = inputs[2], before = ReadAll(b);
  const std::string run = "dedup -q -i '" + inputs[0] + "' -i '" + b + "' --memory-limit 100M ";
  for (const std::string& flags : {"-o '" + b + "'", "-o '" + Path("o") + "' -d '" + b + "'",
                                   "-o '" + Path("o") + "' --rejects '" + b + "'",
                                   "-o '" + Path("o") + "' --stats-json '" + b + "'"}) {
    EXPECT_EQ(Run(run + flags), 2) << flags;
    EXPECT_NE(err_.find("refusing to overwrite the input file"), std::string::npos) << err_;
    EXPECT_EQ(ReadAll(b), before) << flags;
  }
}

// A run that fails while writing leaves no output, no --save-index and no
// --stats-json behind (found in review: they were written before the write
// step and left when it failed).
TEST_F(StageTest, MemoryLimitFailureLeavesNothing) {
  const auto inputs = SplitSample(2);
  const std::string in = " -i '" + inputs[0] + "' -i '" + inputs[2 - 1] + "' --memory-limit 1 --spill-dir '" + dir_ + "'";
  // An output that cannot be created fails before the first round.
  EXPECT_EQ(Run("dedup -q" + in + " -o '" + Path("no/such/dir/out") + "' --save-index '" + Path("ix") +
                "' --stats-json '" + Path("st.json") + "'"),
            1);
  EXPECT_NE(::access(Path("ix").c_str(), F_OK), 0);
  EXPECT_NE(::access(Path("st.json").c_str(), F_OK), 0);
  // A --stats-json that cannot be written fails the run after the outputs:
  // they are removed.
  EXPECT_EQ(Run("dedup -q" + in + " -o '" + Path("out") + "' -d '" + Path("dups") + "' --stats-json '" +
                Path("no/st.json") + "'"),
            1);
  EXPECT_NE(::access(Path("out").c_str(), F_OK), 0);
  EXPECT_NE(::access(Path("dups").c_str(), F_OK), 0);
  EXPECT_EQ(PendingOutputsLeft(), std::vector<std::string>{});
  std::string left;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    if (e.path().filename().string().starts_with("neardup-")) left += e.path().string() + " ";
  }
  EXPECT_EQ(left, "");
}

}  // namespace
}  // namespace neardup
