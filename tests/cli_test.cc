// End-to-end tests of the `neardup` program (NEARDUP_CLI_PATH).
#include <gtest/gtest.h>

#include <filesystem>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/strict_json.h"
#include "io/input_stream.h"
#include "neardup/dedup/dedup.h"
#include "util/compress.h"

namespace {

const std::string kCli = NEARDUP_CLI_PATH;
const std::string kSample = std::string(NEARDUP_SOURCE_DIR) + "/data/sample/docs.jsonl";
const std::string kSampleLines = std::string(NEARDUP_SOURCE_DIR) + "/data/sample/docs.txt";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

// A checkpoint's state file as builds before 2026-12-01 wrote it, at
// `version`, unsealed: what its log holds (tools/checkpoint_log.h) put back
// in it. For the run in memory (state.json and state.log) the command line,
// --load-index, the inputs and the clusters' checksums; for the rounds
// (rounds.json and rounds.log) the identity, shard_first and summaries,
// and the segments as numbers.
nlohmann::ordered_json WithoutLog(const std::string& state, const std::string& log, int version) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(ReadFile(state));
  std::vector<nlohmann::ordered_json> lines;
  for (const std::string& l : Lines(ReadFile(log))) {
    if (lines.size() < j["log"]["lines"].get<size_t>()) lines.push_back(nlohmann::ordered_json::parse(l));
  }
  for (const auto& [key, value] : lines.at(0).items()) j[key] = value;
  const bool rounds = !j.contains("files_done");
  nlohmann::ordered_json a = nlohmann::ordered_json::array(), b = nlohmann::ordered_json::array();
  for (size_t i = 1; i < lines.size(); ++i) {
    a.push_back(lines[i][rounds ? "first" : "input"]);
    b.push_back(lines[i][rounds ? "summary" : "clusters"]);
  }
  if (rounds && !j["documents_of_run"].is_null()) a.push_back(j["documents_of_run"]);
  j[rounds ? "shard_first" : "inputs"] = a;
  j[rounds ? "summaries" : "clusters_checksums"] = b;
  if (rounds && j["in_round"].is_object()) {
    nlohmann::ordered_json numbers = nlohmann::ordered_json::array();
    for (const auto& range : j["in_round"]["segments"]) {
      for (size_t s = range[0]; s < range[1].get<size_t>(); ++s) numbers.push_back(s);
    }
    j["in_round"]["segments"] = numbers;
  }
  for (const char* gone : {"log", "documents_of_run", "checksum"}) j.erase(gone);
  j["version"] = version;
  return j;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/neardup_cli_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // The sample split into `parts` files p0.jsonl, p1.jsonl, ...; returns
  // " -i p0.jsonl -i p1.jsonl ..." for a command line.
  std::string SplitSample(size_t parts) {
    const std::vector<std::string> lines = Lines(ReadFile(kSample));
    std::string ins;
    for (size_t s = 0; s < parts; ++s) {
      std::string part;
      for (size_t i = s * lines.size() / parts; i < (s + 1) * lines.size() / parts; ++i) part += lines[i] + "\n";
      WriteFile(Path("p" + std::to_string(s) + ".jsonl"), part);
      ins += " -i " + Path("p" + std::to_string(s) + ".jsonl");
    }
    return ins;
  }

  // Runs `neardup <args>` through the shell; captures stdout and stderr.
  int Run(const std::string& args, const std::string& stdin_path = "/dev/null") {
    return RunShell("'" + kCli + "' " + args, stdin_path);
  }
  // Run(args) after the shell's `ulimit <limit>` ("-n 64": the open-file
  // limit, soft and hard; "-S -n 64": the soft one).
  int RunUnderUlimit(const std::string& limit, const std::string& args) {
    return RunShell("ulimit " + limit + " && exec '" + kCli + "' " + args, "/dev/null");
  }
  int RunShell(const std::string& command, const std::string& stdin_path) {
    const std::string cmd = command + " <'" + stdin_path + "' >'" + Path("stdout") + "' 2>'" + Path("stderr") + "'";
    const int status = std::system(cmd.c_str());
    out_ = ReadFile(Path("stdout"));
    err_ = ReadFile(Path("stderr"));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string dir_;
  std::string out_, err_;
};

const char* kSmall =
    R"({"id":"a1","text":"The quick brown fox jumps over the lazy dog","src":"x"})" "\n"
    R"({"id":2,"text":"Completely different words about databases and indexes"})" "\n"
    R"({"id":"a3","text":"the quick brown fox jumps over the lazy dog!"})" "\n"
    "\n"
    R"({"id":4,"body":"no text field"})" "\n"
    R"({"id":5,"text":"The quick brown fox jumps over the lazy dog"})" "\n"
    R"(not json at all)" "\n"
    R"({"id":[7],"text":"x"})" "\n"
    R"({"text":"Something else entirely, about gardening tomatoes","id":8.0})" "\n";

TEST_F(CliTest, HelpAndVersionExitZero) {
  EXPECT_EQ(Run("--help"), 0);
  EXPECT_NE(out_.find("dedup"), std::string::npos);
  EXPECT_NE(out_.find("Exit codes"), std::string::npos);
  for (const char* cmd : {"dedup", "fingerprint", "distance", "pairs", "idf", "idf build"}) {
    EXPECT_EQ(Run(std::string(cmd) + " --help"), 0) << cmd;
    EXPECT_NE(out_.find("Usage"), std::string::npos) << cmd;
  }
  EXPECT_EQ(Run("--version"), 0);
  EXPECT_NE(out_.find("neardup "), std::string::npos);
  EXPECT_EQ(Run("version"), 0);
  EXPECT_NE(out_.find("neardup "), std::string::npos);
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Run(""), 2);
  EXPECT_EQ(Run("frobnicate"), 2);
  EXPECT_EQ(Run("dedup --output x"), 2);  // --input missing
  WriteFile(Path("in.jsonl"), kSmall);
  EXPECT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " -k 9"), 2);
  EXPECT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " --format csv"), 2);
  EXPECT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " --no-such-flag"), 2);
  EXPECT_EQ(Run("distance 12"), 2);
  // An output that is the input would truncate it before it is read.
  EXPECT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " -d " + Path("in.jsonl")), 2);
  EXPECT_NE(err_.find("refusing to overwrite"), std::string::npos) << err_;
  EXPECT_EQ(ReadFile(Path("in.jsonl")), kSmall);
}

TEST_F(CliTest, IoErrorsExitOne) {
  EXPECT_EQ(Run("dedup -i " + Path("missing.jsonl") + " -o " + Path("u")), 1);
  EXPECT_NE(err_.find("cannot open"), std::string::npos) << err_;
  WriteFile(Path("in.jsonl"), kSmall);
  EXPECT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("no/such/dir/u")), 1);
  WriteFile(Path("bad.idf"), "not an idf table");
  EXPECT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " --idf " + Path("bad.idf")), 1);
}

TEST_F(CliTest, DedupSmallFile) {
  WriteFile(Path("in.jsonl"), kSmall);
  ASSERT_EQ(Run("dedup --input " + Path("in.jsonl") + " --output " + Path("u.jsonl") + " --duplicates " +
                Path("d.jsonl") + " --clusters " + Path("c.jsonl") + " --stats-json " + Path("s.json") +
                " --threads 2"),
            0)
      << err_;
  const auto input = Lines(kSmall);
  // Kept lines are the input lines, byte for byte, in input order.
  EXPECT_EQ(ReadFile(Path("u.jsonl")), input[0] + "\n" + input[1] + "\n" + input[8] + "\n");
  // Ids echoed raw (string or number, 8.0 stays 8.0). Equal normalized text
  // is an exact match (distance 0), but the similarity is the defined one,
  // 4 decimals: "!" and the capital T count (a3: 39 of 40 trigrams shared).
  EXPECT_EQ(ReadFile(Path("d.jsonl")),
            "{\"id\": \"a3\", \"duplicate_of\": \"a1\", \"distance\": 0, \"exact\": true, \"similarity\": 0.9750, "
            "\"similarity_exact\": true}\n"
            "{\"id\": 5, \"duplicate_of\": \"a1\", \"distance\": 0, \"exact\": true, \"similarity\": 1.0000, "
            "\"similarity_exact\": true}\n");
  EXPECT_EQ(ReadFile(Path("c.jsonl")), "{\"kept\": \"a1\", \"size\": 3, \"members\": [\"a3\", 5]}\n");
  // Bad lines: reported with their 1-based line numbers, skipped, exit 0.
  EXPECT_NE(err_.find("neardup: line 5: missing field \"text\"\n"), std::string::npos) << err_;
  EXPECT_NE(err_.find("neardup: line 7: invalid JSON\n"), std::string::npos) << err_;
  EXPECT_NE(err_.find("neardup: line 8: field \"id\" must be a string or number\n"), std::string::npos)
      << err_;
  EXPECT_EQ(err_.find("line 4:"), std::string::npos) << "blank lines are skipped silently";
  // Summary on stderr; same numbers in --stats-json.
  EXPECT_NE(err_.find("5 documents"), std::string::npos) << err_;
  auto stats = nlohmann::json::parse(ReadFile(Path("s.json")));
  EXPECT_EQ(stats["documents"], 5);
  EXPECT_EQ(stats["kept"], 3);
  EXPECT_EQ(stats["duplicates"], 2);
  EXPECT_EQ(stats["exact_duplicates"], 2);
  EXPECT_EQ(stats["near_duplicates"], 0);
  EXPECT_EQ(stats["bad_lines"], 3);
  EXPECT_EQ(stats["lines"], 9);
  // Every duplicates line is valid JSON.
  for (const auto& line : Lines(ReadFile(Path("d.jsonl")))) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  }
}

TEST_F(CliTest, QuietSuppressesSummaryAndBadLinesButNotErrors) {
  WriteFile(Path("in.jsonl"), kSmall);
  ASSERT_EQ(Run("dedup -i - -o -", Path("in.jsonl")), 0);
  EXPECT_NE(err_.find("neardup: line 5: missing field \"text\""), std::string::npos) << err_;
  ASSERT_EQ(Run("dedup -q -i - -o - --stats-json " + Path("s.json"), Path("in.jsonl")), 0);
  EXPECT_EQ(Lines(out_).size(), 3u);  // kept lines on stdout
  EXPECT_EQ(err_, "");
  EXPECT_EQ(nlohmann::json::parse(ReadFile(Path("s.json")))["bad_lines"], 3);  // the counts stay
  EXPECT_EQ(Run("dedup -q -i " + Path("missing") + " -o -"), 1);
  EXPECT_NE(err_.find("cannot open"), std::string::npos) << err_;
  ASSERT_EQ(Run("fingerprint -q", Path("in.jsonl")), 0);
  EXPECT_EQ(err_, "");
}

TEST_F(CliTest, StrictStopsAtFirstBadLine) {
  WriteFile(Path("in.jsonl"), kSmall);
  EXPECT_EQ(Run("dedup --strict -i " + Path("in.jsonl") + " -o " + Path("u.jsonl") + " -d " + Path("d.jsonl")),
            3);
  EXPECT_NE(err_.find("neardup: line 5: missing field \"text\""), std::string::npos) << err_;
  EXPECT_EQ(err_.find("line 7"), std::string::npos) << "nothing after the first bad line: " << err_;
  const auto input = Lines(kSmall);
  EXPECT_EQ(ReadFile(Path("u.jsonl")), input[0] + "\n" + input[1] + "\n");
  EXPECT_EQ(Lines(ReadFile(Path("d.jsonl"))).size(), 1u);
  // Without bad lines --strict is a plain success.
  WriteFile(Path("good.jsonl"), input[0] + "\n" + input[1] + "\n");
  EXPECT_EQ(Run("dedup --strict -i " + Path("good.jsonl") + " -o " + Path("u2.jsonl")), 0) << err_;
}

TEST_F(CliTest, CustomFieldsAndLinesFormat) {
  WriteFile(Path("in.jsonl"),
            "{\"key\":\"k1\",\"body\":\"hello there general kenobi\"}\n"
            "{\"key\":\"k2\",\"body\":\"Hello there, General Kenobi!\"}\n");
  ASSERT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " -d " + Path("d") +
                " --id-field key --text-field body"),
            0)
      << err_;
  // Same normalized text; punctuation counts in the similarity (22 / 28 trigrams).
  EXPECT_EQ(ReadFile(Path("d")),
            "{\"id\": \"k2\", \"duplicate_of\": \"k1\", \"distance\": 0, \"exact\": true, \"similarity\": 0.7857, "
            "\"similarity_exact\": true}\n");

  WriteFile(Path("in.txt"), "first line of text here\nsecond different line\nFirst line of text here.\n\n\n");
  ASSERT_EQ(Run("dedup --format lines -i " + Path("in.txt") + " -o " + Path("u") + " -d " + Path("d")), 0)
      << err_;
  EXPECT_EQ(ReadFile(Path("u")), "first line of text here\nsecond different line\n\n");
  EXPECT_EQ(ReadFile(Path("d")),
            "{\"id\": 3, \"duplicate_of\": 1, \"distance\": 0, \"exact\": true, \"similarity\": 0.9545, "
            "\"similarity_exact\": true}\n"
            "{\"id\": 5, \"duplicate_of\": 4, \"distance\": 0, \"exact\": true, \"similarity\": 1.0000, "
            "\"similarity_exact\": true}\n");
}

TEST_F(CliTest, Distance) {
  ASSERT_EQ(Run("distance ff 0"), 0);
  EXPECT_EQ(out_, "8\n");
  ASSERT_EQ(Run("distance 0xffffffffffffffff 0000000000000000"), 0);
  EXPECT_EQ(out_, "64\n");
  ASSERT_EQ(Run("distance 0123456789abcdef 0123456789ABCDEF"), 0);
  EXPECT_EQ(out_, "0\n");
  EXPECT_EQ(Run("distance xyz 0"), 2);
  EXPECT_NE(err_.find("invalid fingerprint \"xyz\""), std::string::npos) << err_;
  EXPECT_EQ(Run("distance 0 12345678901234567"), 2);  // 17 digits
}

TEST_F(CliTest, PairsJoinsFingerprintLines) {
  // fingerprint's output format, a bare hex line (id = its line number), a
  // text without features ("-") and a blank line, both skipped.
  WriteFile(Path("fps.txt"),
            "a\t00000000000000ff\n"
            "b\t00000000000000fe\n"
            "c\tffff000000000000\n"
            "d\t-\n"
            "\n"
            "00000000000000f0\n"
            "e\t00000000000000ff\n");
  ASSERT_EQ(Run("pairs -i " + Path("fps.txt") + " -k 3 -t 2"), 0) << err_;
  EXPECT_EQ(out_, "a\tb\t1\na\te\t0\nb\t6\t3\nb\te\t1\n");
  ASSERT_EQ(Run("pairs -i - -k 4", Path("fps.txt")), 0) << err_;
  EXPECT_EQ(out_, "a\tb\t1\na\t6\t4\na\te\t0\nb\t6\t3\nb\te\t1\n6\te\t4\n");
  EXPECT_EQ(Run("pairs -i " + Path("fps.txt") + " -k 8"), 2);
  WriteFile(Path("bad.txt"), "a\t00ff\nb\tnot-hex\n");
  EXPECT_EQ(Run("pairs -i " + Path("bad.txt")), 3);
  EXPECT_NE(err_.find("line 2: invalid fingerprint"), std::string::npos) << err_;
  EXPECT_EQ(Run("pairs -i " + Path("missing.txt")), 1);
}

TEST_F(CliTest, Fingerprint) {
  WriteFile(Path("in.txt"), "hello world\n\n...\nhello world\n");
  ASSERT_EQ(Run("fingerprint --format lines", Path("in.txt")), 0) << err_;
  auto lines = Lines(out_);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].substr(0, 2), "1\t");
  EXPECT_EQ(lines[0].size(), 2u + 16u);
  EXPECT_EQ(lines[1], "2\t-");  // no features
  EXPECT_EQ(lines[2], "3\t-");
  EXPECT_EQ(lines[3], "4\t" + lines[0].substr(2));

  WriteFile(Path("in.jsonl"), "{\"id\":\"x\",\"text\":\"hello world\"}\n{\"id\":7}\n{\"id\":9,\"text\":\"\"}\n");
  ASSERT_EQ(Run("fingerprint", Path("in.jsonl")), 0) << err_;
  EXPECT_EQ(out_, "\"x\"\t" + lines[0].substr(2) + "\n9\t-\n");
  EXPECT_NE(err_.find("neardup: line 2: missing field \"text\""), std::string::npos) << err_;
  EXPECT_EQ(Run("fingerprint --strict", Path("in.jsonl")), 3);

  // The fingerprints agree with `distance`.
  WriteFile(Path("two.txt"), "alpha beta gamma\nalpha beta delta\n");
  ASSERT_EQ(Run("fingerprint --format lines", Path("two.txt")), 0);
  auto two = Lines(out_);
  ASSERT_EQ(two.size(), 2u);
  ASSERT_EQ(Run("distance " + two[0].substr(2) + " " + two[1].substr(2)), 0);
  EXPECT_FALSE(out_.empty());
}

TEST_F(CliTest, IdfBuildThenDedupWithIdf) {
  ASSERT_EQ(Run("idf build --input " + kSample + " --min-df 2 --output " + Path("idf.bin")), 0) << err_;
  EXPECT_NE(out_.find("documents: "), std::string::npos) << out_;
  EXPECT_NE(out_.find("tokens: "), std::string::npos) << out_;
  ASSERT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("u") + " --idf " + Path("idf.bin")), 0) << err_;
  EXPECT_FALSE(ReadFile(Path("u")).empty());
  EXPECT_EQ(Run("idf build --input " + kSample), 2);  // --output missing
}

TEST_F(CliTest, OutputIdenticalForAnyThreadCountAndBatchSize) {
  std::string reference;
  for (const std::string& opts : {std::string("--threads 1"), std::string("--threads 2"),
                                  std::string("--threads 2 --batch-size 77"), std::string("--threads 4")}) {
    ASSERT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("u") + " -d " + Path("d") + " --clusters " +
                  Path("c") + " " + opts),
              0)
        << err_;
    const std::string all = ReadFile(Path("u")) + "\x1f" + ReadFile(Path("d")) + "\x1f" + ReadFile(Path("c"));
    if (reference.empty()) {
      reference = all;
      EXPECT_GT(Lines(ReadFile(Path("d"))).size(), 500u);
      EXPECT_EQ(err_, "");  // the sample has no bad lines
    } else {
      EXPECT_TRUE(all == reference) << opts << " differs from --threads 1";
    }
  }
  // Kept + duplicates = all input documents.
  const size_t total = Lines(ReadFile(kSample)).size();
  EXPECT_EQ(Lines(ReadFile(Path("u"))).size() + Lines(ReadFile(Path("d"))).size(), total);
}

// The next batch is read and analyzed ahead, on its own thread, while one is
// decided: bad lines, blank lines, several inputs and a stop
// at --max-bad-lines inside a batch give the same outputs, rejects, counts
// and exit code on 1, 2 and 3 threads, and the stopped run decides exactly
// the documents before the stopping line.
TEST_F(CliTest, BadLinesAndStopsIdenticalForAnyThreadCount) {
  const std::vector<std::string> lines = Lines(ReadFile(kSample));
  std::string a, b;
  size_t docs_before_stop = 0, bad = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string& to = i < lines.size() / 2 ? a : b;
    to += lines[i] + "\n";
    if (bad <= 6) ++docs_before_stop;  // the 7th bad line stops --max-bad-lines 6
    if (i % 97 == 5) to += "\n";
    if (i % 211 == 7) {
      to += "{not json\n";
      ++bad;
    }
  }
  WriteFile(Path("a.jsonl"), a);
  WriteFile(Path("b.jsonl"), b);
  std::string reference[2];
  for (const char* threads : {"1", "2", "3"}) {
    for (int stop = 0; stop < 2; ++stop) {
      SCOPED_TRACE(std::string("threads ") + threads + (stop ? ", stopping" : ""));
      const int rc = Run("dedup -q -i " + Path("a.jsonl") + " -i " + Path("b.jsonl") + " -o " + Path("o") + " -d " +
                         Path("d") + " --annotate nd --rejects " + Path("r") + " --stats-json " + Path("s") +
                         " --batch-size 50 -t " + threads + (stop ? " --max-bad-lines 6" : " --max-bad-lines 0"));
      EXPECT_EQ(rc, stop ? 4 : 0) << err_;
      auto stats = nlohmann::json::parse(ReadFile(Path("s")));
      for (const char* varies : {"stage_seconds", "elapsed_seconds", "seconds", "docs_per_second", "threads"}) {
        stats.erase(varies);
      }
      const std::string all = ReadFile(Path("o")) + "\x1f" + ReadFile(Path("d")) + "\x1f" + ReadFile(Path("r")) +
                              "\x1f" + stats.dump();
      if (reference[stop].empty()) {
        reference[stop] = all;
        EXPECT_GT(stats["bad_lines"].get<int>(), 6);
        if (stop) {
          EXPECT_EQ(Lines(ReadFile(Path("o"))).size(), docs_before_stop);
        }
      } else {
        EXPECT_TRUE(all == reference[stop]);
      }
    }
  }
  // Invalid UTF-8 (lines format: JSON refuses it) is counted once per
  // decided document, whichever thread analyzed it.
  std::string text;
  for (size_t i = 0; i < lines.size(); ++i) text += lines[i].substr(0, 60) + (i % 13 == 0 ? "\xff\xfe\n" : "\n");
  WriteFile(Path("t.txt"), text);
  std::string counted;
  for (const char* threads : {"1", "2"}) {
    ASSERT_EQ(Run("dedup -q --format lines -i " + Path("t.txt") + " -o " + Path("o") + " --batch-size 50 -t " +
                  threads + " --stats-json " + Path("s")),
              0)
        << err_;
    const std::string n = nlohmann::json::parse(ReadFile(Path("s")))["invalid_utf8"].dump() + ReadFile(Path("o"));
    if (counted.empty()) counted = n;
    EXPECT_EQ(n, counted) << threads;
  }
  EXPECT_NE(counted.substr(0, 1), "0");
}

TEST_F(CliTest, SampleLinesFormat) {
  ASSERT_EQ(Run("dedup --format lines -i " + kSampleLines + " -o " + Path("u") + " -d " + Path("d")), 0)
      << err_;
  const size_t total = Lines(ReadFile(kSampleLines)).size();
  const size_t kept = Lines(ReadFile(Path("u"))).size();
  EXPECT_LT(kept, total);
  EXPECT_EQ(kept + Lines(ReadFile(Path("d"))).size(), total);
}

// Many inputs (issue 17): repeated --input, a directory (recursively, hidden
// names skipped, compressed files by content) and a pattern read as one
// stream in a deterministic order: the same output as the concatenation.
TEST_F(CliTest, ManyInputsAreOneStreamInOrder) {
  const std::vector<std::string> lines = Lines(ReadFile(kSample));
  ASSERT_GE(lines.size(), 3000u);
  auto part = [&](size_t from, size_t to) {
    std::string s;
    for (size_t i = from; i < to; ++i) s += lines[i] + "\n";
    return s;
  };
  std::filesystem::create_directories(Path("shards/sub"));
  std::filesystem::create_directories(Path("shards/.hidden"));
  WriteFile(Path("a.jsonl"), part(0, 1000));
  WriteFile(Path("shards/b.jsonl"), part(1000, 2000));
  WriteFile(Path("shards/sub/c.jsonl.gz"), neardup::testing::Gzip(part(2000, 3000)));
  WriteFile(Path("shards/.hidden/junk"), "not json\n");
  WriteFile(Path("all.jsonl"), part(0, 3000));
  ASSERT_EQ(Run("dedup -i " + Path("all.jsonl") + " -o " + Path("one") + " -d " + Path("one.d")), 0) << err_;
  ASSERT_EQ(Run("dedup -i " + Path("a.jsonl") + " -i " + Path("shards") + " -o " + Path("dir") + " -d " +
                Path("dir.d") + " --stats-json " + Path("s.json")),
            0)
      << err_;
  EXPECT_EQ(ReadFile(Path("dir")), ReadFile(Path("one")));
  EXPECT_EQ(ReadFile(Path("dir.d")), ReadFile(Path("one.d")));
  EXPECT_NE(ReadFile(Path("s.json")).find("\"files\": 3"), std::string::npos);
  // A pattern: its files by name (b before sub/c), after a.jsonl as given.
  ASSERT_EQ(Run("dedup -i " + Path("a.jsonl") + " -i '" + Path("shards/*") + "' -o " + Path("glob")), 0) << err_;
  EXPECT_EQ(ReadFile(Path("glob")), ReadFile(Path("one")));
  // Another order is another stream: the first occurrence changes.
  ASSERT_EQ(Run("dedup -i " + Path("shards") + " -i " + Path("a.jsonl") + " -o " + Path("rev")), 0) << err_;
  EXPECT_NE(ReadFile(Path("rev")), ReadFile(Path("one")));
}

// A pattern that matches a directory: its files are sorted with the
// pattern's other files ("ord/a-b" before "ord/a/z", as `-i ord` reads them).
TEST_F(CliTest, PatternAndDirectoryReadTheSameOrder) {
  std::filesystem::create_directories(Path("ord/a"));
  WriteFile(Path("ord/a-b.jsonl"), "{\"id\":\"a-b\",\"text\":\"the same text in two shards\"}\n");
  WriteFile(Path("ord/a/z.jsonl"), "{\"id\":\"a/z\",\"text\":\"the same text in two shards\"}\n");
  ASSERT_EQ(Run("stage plan -i " + Path("ord")), 0) << err_;
  const std::string dir_plan = out_;
  EXPECT_LT(dir_plan.find("a-b.jsonl"), dir_plan.find("a/z.jsonl")) << dir_plan;
  ASSERT_EQ(Run("stage plan -i '" + Path("ord/*") + "'"), 0) << err_;
  EXPECT_EQ(out_, dir_plan);
  ASSERT_EQ(Run("dedup -q -i " + Path("ord") + " -o " + Path("k1")), 0) << err_;
  ASSERT_EQ(Run("dedup -q -i '" + Path("ord/*") + "' -o " + Path("k2")), 0) << err_;
  EXPECT_NE(ReadFile(Path("k1")).find("\"a-b\""), std::string::npos);
  EXPECT_EQ(ReadFile(Path("k2")), ReadFile(Path("k1")));
}

// Regression: `stage plan -i FIFO` opened the pipe to check its compression,
// which waits for a writer: the plan hung. A staged run reads every input
// twice, so a pipe or standard input is refused at once.
TEST_F(CliTest, StagePlanRefusesAPipeWithoutWaiting) {
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0644), 0);
  // No writer ever comes: without the check this waits (timeout: exit 124).
  ASSERT_EQ(RunShell("timeout 30 '" + kCli + "' stage plan -i " + Path("fifo"), "/dev/null"), 2);
  EXPECT_NE(err_.find("can be read only once"), std::string::npos) << err_;
  EXPECT_EQ(Run("stage plan -i -"), 2);
  EXPECT_NE(err_.find("standard input"), std::string::npos) << err_;
}

TEST_F(CliTest, ManyInputsErrors) {
  WriteFile(Path("a.jsonl"), kSmall);
  std::filesystem::create_directories(Path("empty"));
  EXPECT_EQ(Run("dedup -i " + Path("a.jsonl") + " -i " + Path("a.jsonl") + " -o " + Path("u")), 2);
  EXPECT_NE(err_.find("given twice"), std::string::npos) << err_;
  EXPECT_EQ(Run("dedup -i '" + Path("nothing*") + "' -o " + Path("u")), 2);
  EXPECT_NE(err_.find("no file matches"), std::string::npos) << err_;
  EXPECT_EQ(Run("dedup -i " + Path("empty") + " -o " + Path("u")), 2);
  EXPECT_EQ(Run("dedup -i " + Path("a.jsonl") + " -i " + Path("missing.jsonl") + " -o " + Path("u")), 1);
  EXPECT_FALSE(std::filesystem::exists(Path("u"))) << "no output before every input opened";
  // An output may not overwrite any of the inputs.
  EXPECT_EQ(Run("dedup -i " + Path("empty") + " -i " + Path("a.jsonl") + " -o " + Path("a.jsonl")), 2);
  // Bad lines name their file when there are many.
  WriteFile(Path("bad.jsonl"), "{\"id\": 1, \"text\": \"fine text here\"}\nnot json\n");
  ASSERT_EQ(Run("dedup -i " + Path("a.jsonl") + " -i " + Path("bad.jsonl") + " -o " + Path("u2") + " --rejects " +
                Path("r")),
            0);
  EXPECT_NE(err_.find("bad.jsonl: line 2"), std::string::npos) << err_;
  EXPECT_NE(ReadFile(Path("r")).find("\"file\""), std::string::npos);
}

// 100 inputs under an open-file limit of 64: each input is open only while
// it is read, in memory and with --checkpoint as with --memory-limit.
TEST_F(CliTest, ManyInputsFitAFewOpenFiles) {
  std::filesystem::create_directories(Path("shards"));
  for (int i = 0; i < 100; ++i) {
    WriteFile(Path("shards/s" + std::to_string(i) + ".jsonl"),
              "{\"id\":" + std::to_string(i) + ",\"text\":\"document about topic " + std::to_string(i * 37 % 11) +
                  "\"}\n");
  }
  const std::string in = " -i " + Path("shards") + " -o " + Path("kept") + " -d " + Path("dups");
  ASSERT_EQ(Run("dedup -q" + in), 0) << err_;
  const std::string kept = ReadFile(Path("kept")), dups = ReadFile(Path("dups"));
  ASSERT_FALSE(kept.empty());
  ASSERT_FALSE(dups.empty());
  for (const std::string& flags : std::vector<std::string>{"", " --checkpoint " + Path("ck"), " --memory-limit 1G"}) {
    std::filesystem::remove(Path("kept"));
    EXPECT_EQ(RunUnderUlimit("-n 64", "dedup -q" + in + flags), 0) << flags << ": " << err_;
    EXPECT_EQ(ReadFile(Path("kept")), kept) << flags;
    EXPECT_EQ(ReadFile(Path("dups")), dups) << flags;
  }
}

// --output-shards N holds N files open: refused before any is created when
// N and the run's other files pass the open-file limit; a soft limit below
// the hard one is raised first.
TEST_F(CliTest, OutputShardsMustFitTheOpenFileLimit) {
  WriteFile(Path("in.jsonl"), kSmall);
  const std::string args =
      "dedup -q -i " + Path("in.jsonl") + " -o '" + Path("out/{shard}.jsonl") + "' --output-shards 100";
  std::filesystem::create_directories(Path("out"));
  EXPECT_EQ(RunUnderUlimit("-n 64", args), 2);
  EXPECT_NE(err_.find("open-file limit of 64 (ulimit -n)"), std::string::npos) << err_;
  EXPECT_TRUE(std::filesystem::is_empty(Path("out")));
  ASSERT_EQ(Run("stage fingerprint -q -i " + Path("in.jsonl") + " -o " + Path("in.sig")), 0) << err_;
  ASSERT_EQ(Run("stage decide -q -s " + Path("in.sig") + " -o " + Path("dec")), 0) << err_;
  EXPECT_EQ(RunUnderUlimit("-n 64", "stage filter -q -i " + Path("in.jsonl") + " --decisions " +
                                        Path("dec/00000.dec") + " -o '" + Path("out/{shard}.jsonl") +
                                        "' --output-shards 100"),
            2);
  EXPECT_NE(err_.find("(ulimit -n)"), std::string::npos) << err_;
  EXPECT_TRUE(std::filesystem::is_empty(Path("out")));
  struct rlimit limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < 200) GTEST_SKIP() << "hard open-file limit below 200";
  EXPECT_EQ(RunUnderUlimit("-S -n 64", args), 0) << err_;
  EXPECT_TRUE(std::filesystem::exists(Path("out/00099.jsonl")));
}

// --annotate: every record once, in input order, with the decision the
// duplicates file gives; the kept ones are exactly the plain run's output.
// A crawl split in three runs, each loading the kept documents the earlier
// ones saved, decides every document as one run over the whole crawl does.
TEST_F(CliTest, SavedIndexesMakeSplitRunsEqualOneRun) {
  const std::vector<std::string> lines = Lines(ReadFile(kSample));
  auto part = [&](size_t from, size_t to) {
    std::string s;
    for (size_t i = from; i < to; ++i) s += lines[i] + "\n";
    return s;
  };
  const size_t n = lines.size();
  WriteFile(Path("p0"), part(0, n / 3));
  WriteFile(Path("p1"), part(n / 3, 2 * n / 3));
  WriteFile(Path("p2"), part(2 * n / 3, n));
  const std::string flags = " --threshold 0.5 --shingle-size 4";
  ASSERT_EQ(Run("dedup -i " + kSample + flags + " -o " + Path("one") + " -d " + Path("one.d")), 0) << err_;
  std::string kept, dups;
  for (int i = 0; i < 3; ++i) {
    std::string args = "dedup -i " + Path("p" + std::to_string(i)) + flags + " -o " + Path("k") + " -d " + Path("d") +
                       " --save-index " + Path("idx" + std::to_string(i));
    for (int j = 0; j < i; ++j) args += " --load-index " + Path("idx" + std::to_string(j));
    ASSERT_EQ(Run(args), 0) << err_;
    kept += ReadFile(Path("k"));
    dups += ReadFile(Path("d"));
  }
  EXPECT_EQ(kept, ReadFile(Path("one")));
  EXPECT_EQ(dups, ReadFile(Path("one.d")));
  EXPECT_NE(ReadFile(Path("idx2/manifest.json")).find("\"shingle_size\": 4"), std::string::npos);
  // Other n-grams are refused, and nothing is written.
  EXPECT_EQ(Run("dedup -i " + Path("p2") + " --load-index " + Path("idx0") + " -o " + Path("x")), 1);
  EXPECT_NE(err_.find("--shingle-size 4"), std::string::npos) << err_;
  EXPECT_FALSE(std::filesystem::exists(Path("x")));
}

// A --no-recheck run makes no sketches (no decision of its reads one), but
// the index it saves holds them: a later run may load it with the re-check
// on. On texts every rule keeps, the saved index is the same bytes under
// either rule, in memory and in rounds.
TEST_F(CliTest, APlainRuleRunSavesTheSketches) {
  ASSERT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("s1")), 0) << err_;
  ASSERT_EQ(Run("dedup -q -i " + Path("s1") + " -o " + Path("s2") + " --no-recheck"), 0) << err_;
  const size_t n = Lines(ReadFile(Path("s2"))).size();
  ASSERT_GT(n, 1000u);
  for (const std::string rounds : {"", " --memory-limit 49M"}) {
    const std::string in = "dedup -q -i " + Path("s2") + rounds;
    ASSERT_EQ(Run(in + " -o " + Path("a") + " --save-index " + Path("a.idx")), 0) << err_;
    ASSERT_EQ(Run(in + " -o " + Path("b") + " --no-recheck --save-index " + Path("b.idx")), 0) << err_;
    EXPECT_EQ(Lines(ReadFile(Path("a"))).size(), n) << rounds;
    EXPECT_EQ(ReadFile(Path("b")), ReadFile(Path("a"))) << rounds;
    EXPECT_TRUE(ReadFile(Path("b.idx/kept.ndk")) == ReadFile(Path("a.idx/kept.ndk"))) << rounds;
  }
}

TEST_F(CliTest, DamagedSavedIndexIsAnErrorAndWritesNothing) {
  ASSERT_EQ(Run("dedup -i " + kSample + " -o " + Path("k") + " --save-index " + Path("idx")), 0) << err_;
  const std::string good = ReadFile(Path("idx/kept.ndk"));
  std::filesystem::create_directories(Path("bad"));
  for (size_t at : {size_t{3}, size_t{40}, good.size() / 2, good.size() - 12, good.size() - 1}) {
    std::string flipped = good;
    flipped[at] ^= 0x10;
    WriteFile(Path("bad/kept.ndk"), flipped);
    EXPECT_EQ(Run("dedup -i " + kSample + " --load-index " + Path("bad") + " -o " + Path("x")), 1) << at;
    EXPECT_NE(err_.find("bad/kept.ndk"), std::string::npos) << err_;
    EXPECT_FALSE(std::filesystem::exists(Path("x"))) << at;
  }
  WriteFile(Path("bad/kept.ndk"), good.substr(0, good.size() - 100));
  EXPECT_EQ(Run("dedup -i " + kSample + " --load-index " + Path("bad") + " -o " + Path("x")), 1);
  EXPECT_EQ(Run("dedup -i " + kSample + " --load-index " + Path("idx") + " --save-index " + Path("idx/") + " -o " +
                Path("x")),
            2);
  // A run that fails (every line bad) saves nothing.
  WriteFile(Path("junk"), "not json\n");
  EXPECT_EQ(Run("dedup -i " + Path("junk") + " -o " + Path("x") + " --save-index " + Path("none")), 4);
  EXPECT_FALSE(std::filesystem::exists(Path("none/kept.ndk")));
}

// --keep longest: no duplicate is longer than the document it is a
// duplicate of (in the normalized code points the similarity counts), the
// outputs do not depend on threads or batches, and bad lines count once.
TEST_F(CliTest, KeepLongestKeepsTheLongestOfEachGroup) {
  ASSERT_EQ(Run("dedup -i " + kSample + " --keep longest -o " + Path("k") + " -d " + Path("d") + " --stats-json " +
                Path("s.json")),
            0)
      << err_;
  auto dedup = neardup::Deduplicator::Create({});
  ASSERT_TRUE(dedup.ok());
  std::map<std::string, uint32_t> chars;  // raw id token -> length
  for (const std::string& line : Lines(ReadFile(kSample))) {
    const auto j = nlohmann::json::parse(line);
    chars[j["id"].dump()] = dedup.value()->Signature(j["text"].get<std::string>()).num_chars;
  }
  const std::vector<std::string> dups = Lines(ReadFile(Path("d")));
  size_t longer_elsewhere = 0;
  for (const std::string& line : dups) {
    const auto j = nlohmann::json::parse(line);
    ASSERT_TRUE(chars.count(j["id"].dump()) && chars.count(j["duplicate_of"].dump())) << line;
    EXPECT_GE(chars[j["duplicate_of"].dump()], chars[j["id"].dump()]) << line;
    longer_elsewhere += chars[j["duplicate_of"].dump()] > chars[j["id"].dump()];
  }
  EXPECT_GT(longer_elsewhere, 100u);  // the sample's edits make many groups' first copy not the longest
  const auto stats = nlohmann::json::parse(ReadFile(Path("s.json")));
  EXPECT_EQ(stats["kept"].get<size_t>() + dups.size(), stats["documents"].get<size_t>());
  EXPECT_EQ(Lines(ReadFile(Path("k"))).size(), stats["kept"].get<size_t>());
  ASSERT_EQ(Run("dedup -i " + kSample + " --keep longest -t 1 --batch-size 77 -o " + Path("k1") + " -d " + Path("d1")),
            0);
  EXPECT_EQ(ReadFile(Path("k1")), ReadFile(Path("k")));
  EXPECT_EQ(ReadFile(Path("d1")), ReadFile(Path("d")));
  ASSERT_EQ(Run("dedup -i " + kSample + " -o " + Path("f")), 0);
  EXPECT_NE(ReadFile(Path("f")), ReadFile(Path("k")));
  // Bad lines are reported once, as with --keep first.
  WriteFile(Path("small.jsonl"), kSmall);
  ASSERT_EQ(Run("dedup -i " + Path("small.jsonl") + " --keep longest -o " + Path("x") + " --stats-json " +
                Path("s2.json")),
            0)
      << err_;
  EXPECT_EQ(nlohmann::json::parse(ReadFile(Path("s2.json")))["bad_lines"], 3);
  EXPECT_EQ(Run("dedup -i - --keep longest -o " + Path("x"), Path("small.jsonl")), 2);
  EXPECT_NE(err_.find("standard input"), std::string::npos) << err_;
}

// --decide join (batch_join.h): the same outputs for any thread count and
// batch size, with every output kind; close to the stream rule's; bad lines
// counted once; the flags that need the stream decision refused.
// The write pass after --keep longest's or --decide join's first read does
// not parse the lines again (tools/line_facts.h): an input whose lines
// changed in between is refused, not written as if it were the first.
// /proc/self/io changes: its read count grows with the first read.
TEST_F(CliTest, AnInputChangedBetweenTheTwoReadsIsRefused) {
  if (!std::filesystem::exists("/proc/self/io")) GTEST_SKIP() << "no /proc/self/io on this kernel";
  for (const std::string mode : {"--keep longest", "--decide join"}) {
    EXPECT_EQ(Run("dedup --format lines " + mode + " -i /proc/self/io -o " + Path("o")), 1) << mode << ": " << err_;
    EXPECT_NE(err_.find("/proc/self/io changed between the run's two reads"), std::string::npos) << err_;
  }
}

// A write that fails before the last batch of the second read is reported
// as the write failure, not as an input that changed (the read-ahead, still
// running then, had read fewer lines than the first read), on 1 and 2
// threads (under TSan, the race that was there).
TEST_F(CliTest, AFailedWriteAfterTheFirstReadIsReportedAsSuch) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  for (const std::string mode : {"--keep longest", "--decide join"}) {
    for (const std::string threads : {"1", "2"}) {
      EXPECT_EQ(Run("dedup " + mode + " -t " + threads + " --batch-size 50 -i " + kSample + " -o /dev/full"), 1)
          << mode << " -t " << threads << ": " << err_;
      EXPECT_NE(err_.find("error writing /dev/full"), std::string::npos) << mode << ": " << err_;
      EXPECT_EQ(err_.find("changed between"), std::string::npos) << mode << ": " << err_;
    }
  }
}

// The second read takes each document's id from the first one's, after
// those of --load-index's documents: every input line is in --output or in
// --duplicates under its own id (an id off by the loaded count would not).
TEST_F(CliTest, KeepLongestWithLoadIndexNamesEachDocumentByItsId) {
  const std::vector<std::string> lines = Lines(ReadFile(kSample));
  std::string head;
  for (size_t i = 0; i < 300; ++i) head += lines[i] + "\n";
  WriteFile(Path("head.jsonl"), head);
  ASSERT_EQ(Run("dedup -q -i " + Path("head.jsonl") + " -o " + Path("h") + " --save-index " + Path("idx")), 0) << err_;
  ASSERT_EQ(Run("dedup -q --keep longest -t 2 --batch-size 64 --load-index " + Path("idx") + " -i " + kSample + " -o " +
                Path("o") + " -d " + Path("d")),
            0)
      << err_;
  std::multiset<std::string> want, got;
  for (const std::string& line : lines) want.insert(nlohmann::json::parse(line)["id"].dump());
  for (const std::string& line : Lines(ReadFile(Path("o")))) got.insert(nlohmann::json::parse(line)["id"].dump());
  size_t of_loaded = 0;
  for (const std::string& line : Lines(ReadFile(Path("d")))) {
    const auto d = nlohmann::json::parse(line);
    got.insert(d["id"].dump());
    of_loaded += d["duplicate_of"].dump() != "null" && head.find("\"id\": " + d["duplicate_of"].dump() + ",") != std::string::npos;
  }
  EXPECT_TRUE(got == want);
  EXPECT_GT(of_loaded, 200u);  // the head's own lines, at least, are duplicates of what was loaded
}

TEST_F(CliTest, DecideJoinGivesTheSameOutputsForAnyThreadCount) {
  std::string reference;
  for (const std::string& opts : {std::string("-t 1"), std::string("-t 2"), std::string("-t 3 --batch-size 77")}) {
    ASSERT_EQ(Run("dedup --decide join -i " + kSample + " -o " + Path("u") + " -d " + Path("d") + " --clusters " +
                  Path("c") + " --stats-json " + Path("s.json") + " " + opts),
              0)
        << err_;
    EXPECT_NE(err_.find("  join        "), std::string::npos) << err_;
    ASSERT_EQ(Run("dedup -q --decide join --annotate dup -i " + kSample + " -o " + Path("a") + " " + opts), 0) << err_;
    const std::string all = ReadFile(Path("u")) + "\x1f" + ReadFile(Path("d")) + "\x1f" + ReadFile(Path("c")) +
                            "\x1f" + ReadFile(Path("a"));
    if (reference.empty()) reference = all;
    EXPECT_TRUE(all == reference) << opts << " differs from -t 1";
  }
  const auto stats = nlohmann::json::parse(ReadFile(Path("s.json")));
  EXPECT_GT(stats["join"]["pairs"].get<uint64_t>(), 0u);
  const size_t total = Lines(ReadFile(kSample)).size(), dups = Lines(ReadFile(Path("d"))).size();
  EXPECT_EQ(Lines(ReadFile(Path("u"))).size() + dups, total);
  EXPECT_EQ(stats["kept"].get<size_t>() + dups, total);
  EXPECT_EQ(Lines(ReadFile(Path("a"))).size(), total);
  ASSERT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("f") + " -d " + Path("fd")), 0);
  const size_t stream_dups = Lines(ReadFile(Path("fd"))).size();
  EXPECT_GT(dups, stream_dups * 97 / 100);
  EXPECT_LT(dups, stream_dups * 103 / 100);
  // Bad lines are skipped by the analysis and counted once, by the writing pass.
  WriteFile(Path("small.jsonl"), kSmall);
  ASSERT_EQ(Run("dedup --decide join -i " + Path("small.jsonl") + " -o " + Path("x") + " --stats-json " +
                Path("s2.json")),
            0)
      << err_;
  EXPECT_EQ(nlohmann::json::parse(ReadFile(Path("s2.json")))["bad_lines"], 3);
  for (const std::string& flags : {std::string("--memory-limit 1G"), std::string("--load-index ") + dir_,
                                   std::string("--checkpoint ") + Path("ck"), std::string("--keep longest"),
                                   std::string("--sketch-dir ") + dir_}) {
    EXPECT_EQ(Run("dedup --decide join -i " + kSample + " -o " + Path("r") + " " + flags), 2) << flags;
    EXPECT_NE(err_.find("--decide join cannot be combined with"), std::string::npos) << flags << ": " << err_;
  }
  EXPECT_EQ(Run("dedup --decide join -i - -o " + Path("x"), Path("small.jsonl")), 2);
  EXPECT_NE(err_.find("--decide join reads the inputs twice"), std::string::npos) << err_;
  EXPECT_EQ(Run("dedup --decide sideways -i " + kSample + " -o " + Path("x")), 2);
}

std::string ReadAnyFile(const std::string& path);

// --checkpoint: a run killed anywhere (after any batch, or by SIGKILL at
// any moment) and run again with the same arguments ends with the same
// bytes in every output as a run never interrupted.
TEST_F(CliTest, InterruptedRunResumesToTheSameOutputs) {
  const std::vector<std::string> lines = Lines(ReadFile(kSample));
  std::string ins;
  for (int s = 0; s < 5; ++s) {
    std::string part;
    for (size_t i = s * lines.size() / 5; i < (s + 1) * lines.size() / 5; ++i) part += lines[i] + "\n";
    if (s == 2) part += "not json\n{\"id\": 1}\n";
    const std::string name = Path("s" + std::to_string(s) + (s == 3 ? ".jsonl.gz" : ".jsonl"));
    WriteFile(name, s == 3 ? neardup::testing::Gzip(part) : part);
    ins += " -i " + name;
  }
  const std::vector<std::string> outs = {"out.jsonl.gz", "dups.jsonl", "cl.jsonl", "rej.jsonl", "idx/kept.ndk"};
  const std::string args = "dedup" + ins + " -o " + Path("out.jsonl.gz") + " -d " + Path("dups.jsonl") +
                           " --clusters " + Path("cl.jsonl") + " --rejects " + Path("rej.jsonl") +
                           " --save-index " + Path("idx") + " --batch-size 300 -q --checkpoint " + Path("ckpt");
  auto clean = [&] {
    std::filesystem::remove_all(Path("ckpt"));
    std::filesystem::remove_all(Path("idx"));
    for (const std::string& o : outs) std::filesystem::remove(Path(o));
  };
  ASSERT_EQ(Run(args), 0) << err_;
  EXPECT_FALSE(std::filesystem::exists(Path("ckpt")));  // removed once the run succeeded
  std::map<std::string, std::string> want;
  for (const std::string& o : outs) want[o] = ReadFile(Path(o));
  ASSERT_EQ(Run("dedup" + ins + " -o " + Path("plain.jsonl") + " -d " + Path("plain.d") + " -q"), 0);
  EXPECT_EQ(ReadFile(Path("plain.d")), want["dups.jsonl"]);
  EXPECT_EQ(ReadFile(Path("plain.jsonl")), ReadAnyFile(Path("out.jsonl.gz")));
  auto expect_same = [&](const std::string& how) {
    ASSERT_EQ(Run(args), 0) << how << ": " << err_;
    for (const std::string& o : outs) EXPECT_EQ(ReadFile(Path(o)), want[o]) << how << ": " << o;
    EXPECT_FALSE(std::filesystem::exists(Path("ckpt"))) << how;
  };
  const std::string cli = "'" + kCli + "' ";
  for (int batches : {1, 4, 7, 11, 16}) {
    clean();
    const std::string crash = "NEARDUP_DEDUP_CRASH_AFTER_BATCHES=" + std::to_string(batches) + " " + cli + args;
    ASSERT_EQ(WEXITSTATUS(std::system(crash.c_str())), 137) << batches;
    expect_same("crash after batch " + std::to_string(batches));
  }
  for (const char* delay : {"0.01", "0.03", "0.06", "0.1"}) {
    clean();
    // --foreground: timeout kills only the run and waits for it. Without it,
    // timeout SIGKILLs its whole process group, itself included, and returned
    // while the run was still exiting with DIR/lock held: the resume below
    // was then refused as "in use by another run" (seen in CI, 2026-11-27).
    std::system(("timeout --foreground -s KILL " + std::string(delay) + " " + cli + args).c_str());
    expect_same(std::string("SIGKILL after ") + delay + " s");
  }
  // Another run's checkpoint, or a finished input changed, is refused.
  clean();
  ASSERT_EQ(WEXITSTATUS(std::system(("NEARDUP_DEDUP_CRASH_AFTER_BATCHES=9 " + cli + args).c_str())), 137);
  EXPECT_EQ(Run(args + " -k 2"), 2);
  EXPECT_NE(err_.find("another run"), std::string::npos) << err_;
  WriteFile(Path("s0.jsonl"), lines[0] + "\n");
  EXPECT_EQ(Run(args), 2);
  EXPECT_NE(err_.find("changed"), std::string::npos) << err_;
  EXPECT_EQ(Run("dedup -i - -o " + Path("x") + " --checkpoint " + Path("c2"), kSample), 2);
}

// Regression (adversarial test, 2026-12-02): a resumed run read its
// checkpoint's cluster members back through a JSON parse, which respelled
// their raw ids ("\u00e9" as "é", 1E2 as 100.0): its --clusters differed
// from an uninterrupted run's. The run is stopped by a bad line in its last
// input (--strict) after the first two were checkpointed.
TEST_F(CliTest, AResumedRunKeepsTheClustersRawIds) {
  const std::string fox = R"("text": "The quick brown fox jumps over the lazy dog near the river bank today"})";
  const std::string db = R"("text": "Completely different text about database replication and consensus"})";
  WriteFile(Path("a.jsonl"), R"({"id": "k\u00e9pt-1", )" + fox + "\n" + R"({"id": "x\/y", )" + db + "\n");
  WriteFile(Path("b.jsonl"), R"({"id": "dup-\u00e9-2", )" + fox + "\n" + R"({"id": 1E2, )" + db + "\n");
  const std::string good = R"({"id": 5, "text": "another unrelated sentence about apples and oranges"})" "\n";
  WriteFile(Path("c.jsonl"), good);
  const std::string args = "dedup -q --strict -i " + Path("a.jsonl") + " -i " + Path("b.jsonl") + " -i " +
                           Path("c.jsonl") + " -o " + Path("out") + " --checkpoint " + Path("ck") + " --clusters ";
  ASSERT_EQ(Run(args + Path("want")), 0) << err_;
  const std::string want = ReadFile(Path("want"));
  EXPECT_NE(want.find(R"("members": ["dup-\u00e9-2"])"), std::string::npos) << want;
  EXPECT_NE(want.find(R"("members": [1E2])"), std::string::npos) << want;
  WriteFile(Path("c.jsonl"), "bad line\n");
  ASSERT_EQ(Run(args + Path("got")), 3) << err_;
  ASSERT_TRUE(std::filesystem::exists(Path("ck")));
  WriteFile(Path("c.jsonl"), good);
  ASSERT_EQ(Run(args + Path("got")), 0) << err_;
  EXPECT_EQ(ReadFile(Path("got")), want);
}

// Regression (issue 17, adversarial test, 2026-11-29): --load-index took an
// index saved with another --max-text-bytes and missed a byte-identical long
// text; the scheme mismatch printed its ids in decimal, the manifest in hex.
TEST_F(CliTest, LoadIndexRefusesAnotherMaxTextBytes) {
  std::string text;
  for (int i = 0; i < 800; ++i) text += "w" + std::to_string(i * 7919 % 1000) + " ";
  WriteFile(Path("day1.jsonl"), nlohmann::json({{"id", "a"}, {"text", text}}).dump() + "\n");
  WriteFile(Path("day2.jsonl"), nlohmann::json({{"id", "b"}, {"text", text}}).dump() + "\n");
  ASSERT_EQ(Run("dedup -q -i " + Path("day1.jsonl") + " -o /dev/null --save-index " + Path("idx") +
                " --max-text-bytes 100"),
            0)
      << err_;
  EXPECT_EQ(Run("dedup -q -i " + Path("day2.jsonl") + " -o " + Path("k") + " -d " + Path("d") + " --load-index " +
                Path("idx")),
            1);
  EXPECT_NE(err_.find("saved with --max-text-bytes 100, this run uses 1048576"), std::string::npos) << err_;
  ASSERT_EQ(Run("dedup -q -i " + Path("day2.jsonl") + " -o " + Path("k") + " -d " + Path("d") + " --load-index " +
                Path("idx") + " --max-text-bytes 100"),
            0)
      << err_;
  EXPECT_NE(ReadFile(Path("d")).find("\"duplicate_of\": \"a\""), std::string::npos) << ReadFile(Path("d"));
  EXPECT_EQ(Run("dedup -q -i " + Path("day2.jsonl") + " -o " + Path("k") + " --load-index " + Path("idx") +
                " --max-text-bytes 100 --tokenizer icu-words"),
            1);
  const std::string manifest = ReadFile(Path("idx/manifest.json"));
  const std::string id = nlohmann::json::parse(manifest)["scheme_id"];
  EXPECT_NE(err_.find("(scheme " + id + ", this run "), std::string::npos) << err_ << manifest;
}

// Regression (issue 17, adversarial test, 2026-11-29): a --spill-dir inside
// an --input directory was accepted; after a SIGKILL the next run listed the
// stale scratch files as inputs, removed them as stale scratch, then failed
// to open them (exit 1). It is refused up front, as outputs there are.
TEST_F(CliTest, MemoryLimitRefusesASpillDirAmongTheInputs) {
  std::filesystem::create_directories(Path("crawl/sub"));
  WriteFile(Path("crawl/a.jsonl"), kSmall);
  for (const std::string& spill : {Path("crawl"), Path("crawl/sub")}) {
    for (const std::string& in : {Path("crawl"), Path("crawl/*")}) {
      EXPECT_EQ(Run("dedup -q -i '" + in + "' -o " + Path("k") + " --memory-limit 1 --spill-dir " + spill), 2)
          << in << " " << spill;
      EXPECT_NE(err_.find("--spill-dir's scratch directory " + spill + "/neardup-dedup-XXXXXX is where the --input"),
                std::string::npos)
          << err_;
    }
  }
  // Patterns that find no scratch directory there.
  for (const std::string& spill : {Path("crawl"), Path("crawl/sub")}) {
    EXPECT_EQ(Run("dedup -q -i '" + Path("crawl/*.jsonl") + "' -o " + Path("k") + " --memory-limit 1 --spill-dir " +
                  spill),
              0)
        << err_;
  }
  std::filesystem::create_directories(Path("spill"));
  EXPECT_EQ(Run("dedup -q -i " + Path("crawl") + " -o " + Path("k") + " --memory-limit 1 --spill-dir " + Path("spill")),
            0)
      << err_;
  EXPECT_FALSE(ReadFile(Path("k")).empty());
}

// Regression (issue 17, adversarial test, 2026-11-29): the resume key was the
// raw command line without `-t N`, `--threads N` and `--threads=N`, so a
// restart that spelled the thread count `-t1` (or `-qt1`), or the crashed
// run that did, was refused as "another run", though --threads may change.
// The key now comes from the parsed options; a checkpoint that holds the old
// key (written by an older build) is still resumed. Named so that it is not
// in the TSan stage (cmake/tests.cmake, NEARDUP_THREADED): the crash hook
// exits with the reader thread unjoined, which TSan reports as a thread leak
// (exit 66), not a race.
TEST_F(CliTest, ResumeIgnoresHowTheWorkerCountIsSpelled) {
  const std::string ins = SplitSample(3);
  const std::string cli = "'" + kCli + "' ";
  for (const std::string& mode : {std::string(" --memory-limit 1"), std::string()}) {
    const std::string args = "dedup" + ins + " -o " + Path("out.jsonl") + " -d " + Path("dups.jsonl") +
                             " --batch-size 300 --checkpoint " + Path("ckpt") + mode;
    ASSERT_EQ(Run("dedup" + ins + " -o " + Path("want.jsonl") + " -d " + Path("want.d") + " -q" + mode), 0) << err_;
    // Crashed where the resume checks the key: after an input (after a round).
    const std::string at = "NEARDUP_DEDUP_CRASH_AFTER_BATCHES=" + std::string(mode.empty() ? "8 " : "5 ");
    const std::string state = Path(mode.empty() ? "ckpt/state.json" : "ckpt/rounds/rounds.json");
    const std::pair<const char*, const char*> spellings[] = {
        {"-t2", "-t 1"}, {"-t 1", "-qt2"}, {"--threads=2", "-t1"}, {"-q -t 2", "--threads 1 --progress 1"}};
    for (const auto& [crashed, resumed] : spellings) {
      std::filesystem::remove_all(Path("ckpt"));
      const std::string crash = at + cli + args + " " + crashed + " 2>/dev/null";
      ASSERT_EQ(WEXITSTATUS(std::system(crash.c_str())), 137) << mode << crashed;
      ASSERT_TRUE(std::filesystem::exists(state)) << mode << crashed;
      ASSERT_EQ(Run(args + " " + resumed), 0) << mode << crashed << " then " << resumed << ": " << err_;
      EXPECT_EQ(ReadFile(Path("out.jsonl")), ReadFile(Path("want.jsonl"))) << mode << crashed << resumed;
      EXPECT_EQ(ReadFile(Path("dups.jsonl")), ReadFile(Path("want.d"))) << mode << crashed << resumed;
    }
    // An option that changes the outputs is still another run, however spelled.
    std::filesystem::remove_all(Path("ckpt"));
    const std::string crash = at + cli + args + " -k 3 2>/dev/null";
    ASSERT_EQ(WEXITSTATUS(std::system(crash.c_str())), 137);
    ASSERT_TRUE(std::filesystem::exists(state)) << mode;
    EXPECT_EQ(Run(args + " -k2"), 2) << mode;
    EXPECT_NE(err_.find("another run"), std::string::npos) << err_;
    ASSERT_EQ(Run(args + " -k3"), 0) << mode << ": " << err_;
    EXPECT_EQ(ReadFile(Path("out.jsonl")), ReadFile(Path("want.jsonl"))) << mode;
  }
  // A checkpoint whose key is the raw command line (an older build's); the
  // loop's last mode was the run in memory, whose outputs want.* hold.
  const std::string args = "dedup" + ins + " -o " + Path("out.jsonl") + " -d " + Path("dups.jsonl") +
                           " --batch-size 300 --checkpoint " + Path("ckpt");
  std::filesystem::remove_all(Path("ckpt"));
  ASSERT_EQ(WEXITSTATUS(std::system(("NEARDUP_DEDUP_CRASH_AFTER_BATCHES=8 " + cli + args + " -q").c_str())), 137);
  nlohmann::ordered_json state = WithoutLog(Path("ckpt/state.json"), Path("ckpt/state.log"), 1);
  nlohmann::json legacy = nlohmann::json::array({kCli});
  std::istringstream words(args);
  for (std::string w; words >> w;) legacy.push_back(w);
  state["command_line"] = legacy;
  WriteFile(Path("ckpt/state.json"), state.dump());
  ASSERT_EQ(Run(args + " -t 2"), 0) << err_;
  EXPECT_EQ(ReadFile(Path("out.jsonl")), ReadFile(Path("want.jsonl")));
}

// Regression (issue 17, adversarial test, 2026-11-30): a checkpoint's state
// file had no checksum, so one changed digit that still parsed (where a
// round stops deciding, a counter, the length of --rejects) resumed another
// run, exit 0, with other outputs. state.json and rounds.json now carry the
// XXH3 of their content; a damaged one is refused (exit 1), and an older
// build's, without one, is still resumed (above).
TEST_F(CliTest, ResumeRefusesADamagedStateFile) {
  const std::string ins = SplitSample(3);
  const std::string cli = "'" + kCli + "' ";
  for (const std::string& mode : {std::string(" --memory-limit 1"), std::string()}) {
    const std::string args = "dedup" + ins + " -o " + Path("out.jsonl") + " -d " + Path("dups.jsonl") +
                             " --batch-size 300 -q --checkpoint " + Path("ckpt") + mode;
    const std::string state = Path(mode.empty() ? "ckpt/state.json" : "ckpt/rounds/rounds.json");
    std::filesystem::remove_all(Path("ckpt"));
    const std::string at = "NEARDUP_DEDUP_CRASH_AFTER_BATCHES=" + std::string(mode.empty() ? "8 " : "5 ");
    ASSERT_EQ(WEXITSTATUS(std::system((at + cli + args).c_str())), 137);
    ASSERT_TRUE(std::filesystem::exists(state)) << mode;
    const std::string good = ReadFile(state);
    nlohmann::json j = nlohmann::json::parse(good);
    ASSERT_TRUE(j.contains("checksum")) << mode;
    j[mode.empty() ? "written" : "start"] = j[mode.empty() ? "written" : "start"].get<uint64_t>() + 1;
    WriteFile(state, j.dump(1));
    EXPECT_EQ(Run(args), 1) << mode;
    EXPECT_NE(err_.find(state + ": damaged (its checksum differs)"), std::string::npos) << err_;
    // As it was: resumes. A rounds.json of version 2 (the builds of
    // 2026-11-30 before the checksum) has none and resumes too.
    if (mode.empty()) {
      WriteFile(state, good);
    } else {
      WriteFile(state, good);  // in the order the run wrote it
      WriteFile(state, WithoutLog(state, Path("ckpt/rounds/rounds.log"), 2).dump(1));
    }
    ASSERT_EQ(Run(args), 0) << mode << ": " << err_;
    ASSERT_EQ(Run("dedup" + ins + " -o " + Path("want.jsonl") + " -d " + Path("want.d") + " -q" + mode), 0) << err_;
    EXPECT_EQ(ReadFile(Path("out.jsonl")), ReadFile(Path("want.jsonl"))) << mode;
    EXPECT_EQ(ReadFile(Path("dups.jsonl")), ReadFile(Path("want.d"))) << mode;
  }
}

// Regression (issue 17, 2026-12-01): the state file held every input's
// identity and summary (or stat and clusters' checksum), so each checkpoint
// wrote O(inputs) bytes and a run O(inputs^2): 1,000 small inputs took 23.6 s
// with --memory-limit --checkpoint against 1.9 s without (now 3.5 s). What does not change goes to an
// append-only log (tools/checkpoint_log.h), and the state file stays the same
// size from the 10th input to the 110th. The log is checked: a damaged one
// is refused, and lines a crash left past its recorded end are cut off.
TEST_F(CliTest, CheckpointStateStaysSmallWithManyInputs) {
  const std::string ins = SplitSample(120);
  const std::string cli = "'" + kCli + "' ";
  for (const std::string& mode : {std::string(" --memory-limit 100M"), std::string()}) {
    SCOPED_TRACE(mode);
    const std::string args = "dedup" + ins + " -o " + Path("out.jsonl") + " -d " + Path("dups.jsonl") +
                             " -q --checkpoint " + Path("ckpt") + mode;
    const std::string state = Path(mode.empty() ? "ckpt/state.json" : "ckpt/rounds/rounds.json");
    const std::string log = Path(mode.empty() ? "ckpt/state.log" : "ckpt/rounds/rounds.log");
    auto crash_after = [&](int batches) {
      std::filesystem::remove_all(Path("ckpt"));
      const std::string at = "NEARDUP_DEDUP_CRASH_AFTER_BATCHES=" + std::to_string(batches) + " ";
      EXPECT_EQ(WEXITSTATUS(std::system((at + cli + args).c_str())), 137);
      EXPECT_TRUE(std::filesystem::exists(state));
      return std::filesystem::exists(state) ? std::filesystem::file_size(state) : 0;
    };
    const uintmax_t early = crash_after(12), late = crash_after(112);
    EXPECT_LT(late, early + 64) << "the state file grew with the inputs: " << early << " then " << late << " bytes";
    EXPECT_LT(late, 4096u);
    EXPECT_GT(std::filesystem::file_size(log), 100 * 40u) << "a line per input";
    ASSERT_EQ(Run("dedup" + ins + " -o " + Path("want.jsonl") + " -d " + Path("want.d") + " -q" + mode), 0) << err_;
    // A line the crashed run appended but never recorded (it died between
    // the log and the state file): cut off, and the run resumes.
    WriteFile(log, ReadFile(log) + "{\"input\": \"not recorded\"}\n");
    ASSERT_EQ(Run(args), 0) << err_;
    EXPECT_EQ(ReadFile(Path("out.jsonl")), ReadFile(Path("want.jsonl")));
    EXPECT_EQ(ReadFile(Path("dups.jsonl")), ReadFile(Path("want.d")));
    EXPECT_FALSE(std::filesystem::exists(Path("ckpt"))) << "removed with the checkpoint";
    // A damaged log (one byte; or cut short) is refused.
    for (const bool cut : {false, true}) {
      crash_after(60);
      std::string bytes = ReadFile(log);
      if (cut) {
        bytes.resize(bytes.size() / 2);
      } else {
        bytes[bytes.size() / 2] ^= 0x01;
      }
      WriteFile(log, bytes);
      EXPECT_EQ(Run(args), 1) << cut;
      EXPECT_NE(err_.find(log + " differs from what the checkpoint recorded"), std::string::npos) << err_;
    }
  }
}

// Regressions (issue 17, adversarial test). (1) A run that adds
// --memory-limit to an interrupted run's command line (a retry after running
// out of memory) started afresh over its checkpoint, and the original run
// resumed afterwards cut back and appended to outputs the other had
// rewritten: wrong outputs, exit 0. Each kind of run now refuses the
// other's checkpoint. (2) An output cut shorter since the checkpoint was
// padded with zero bytes back to the recorded size: now refused.
TEST_F(CliTest, ResumeRefusesAnotherKindOfRunAndAShortenedOutput) {
  const std::string ins = SplitSample(3);
  const std::string args = "dedup" + ins + " -o " + Path("out.jsonl") + " -d " + Path("dups.jsonl") +
                           " --batch-size 300 -q --checkpoint " + Path("ckpt");
  const std::string cli = "'" + kCli + "' ";
  auto crash = [&](const std::string& a, int batches) {
    std::filesystem::remove_all(Path("ckpt"));
    const std::string cmd = "NEARDUP_DEDUP_CRASH_AFTER_BATCHES=" + std::to_string(batches) + " " + cli + a;
    ASSERT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 137);
  };
  crash(args, 8);  // in the second input: the first is recorded
  ASSERT_TRUE(std::filesystem::exists(Path("ckpt/state.json")));
  EXPECT_EQ(Run(args + " --memory-limit 1"), 2);
  EXPECT_NE(err_.find("holds another run (one without --memory-limit)"), std::string::npos) << err_;
  ASSERT_EQ(Run("dedup" + ins + " -o " + Path("want.jsonl") + " -d " + Path("want.d") + " -q"), 0) << err_;
  ASSERT_EQ(Run(args), 0) << err_;  // the refused run touched nothing
  EXPECT_EQ(ReadFile(Path("out.jsonl")), ReadFile(Path("want.jsonl")));
  EXPECT_EQ(ReadFile(Path("dups.jsonl")), ReadFile(Path("want.d")));

  crash(args + " --memory-limit 1", 5);  // in round 2
  ASSERT_TRUE(std::filesystem::exists(Path("ckpt/rounds/rounds.json")));
  EXPECT_EQ(Run(args), 2);
  EXPECT_NE(err_.find("holds another run (one with --memory-limit)"), std::string::npos) << err_;

  crash(args, 8);
  ASSERT_GT(std::filesystem::file_size(Path("out.jsonl")), 100u);
  std::filesystem::resize_file(Path("out.jsonl"), 100);
  EXPECT_EQ(Run(args), 1);
  EXPECT_NE(err_.find("is shorter (100 bytes) than the checkpoint recorded"), std::string::npos) << err_;
  EXPECT_EQ(ReadFile(Path("out.jsonl")).find('\0'), std::string::npos);
}

// Regression (issue 17, adversarial test): two outputs given one path were
// both written, each over the other's lines (exit 0). Refused before any
// file is created; also through another spelling of the path.
TEST_F(CliTest, TwoOutputsOfOnePathAreRefused) {
  const std::string o = Path("same.jsonl");
  for (const std::string& flags : {"-o " + o + " -d " + o, "-o " + o + " --stats-json " + Path(".") + "/same.jsonl",
                                   "-o " + Path("a") + " -d " + o + " --clusters " + o,
                                   "-o " + o + " --rejects " + o + " --memory-limit 64M"}) {
    EXPECT_EQ(Run("dedup -q -i " + kSample + " " + flags), 2) << flags;
    EXPECT_NE(err_.find("two outputs name one file"), std::string::npos) << flags << ": " << err_;
    EXPECT_FALSE(std::filesystem::exists(o)) << flags;
  }
  EXPECT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("y{shard}") + " --output-shards 2 -d " + Path("y00001")), 2);
  // Regression (adversarial test, 2026-11-30): an output that is the
  // --save-index (or --checkpoint) directory was truncated, then the run
  // failed to make the directory (exit 1).
  WriteFile(Path("prev"), "the previous run's output\n");
  for (const std::string flag : {" --save-index ", " --checkpoint "}) {
    for (const char* mode : {"", " --memory-limit 1"}) {
      EXPECT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("prev") + flag + Path("prev") + mode), 2) << flag << mode;
      EXPECT_NE(err_.find("output " + Path("prev") + " is the" + flag.substr(0, flag.size() - 1) + " directory"),
                std::string::npos)
          << err_;
      EXPECT_EQ(ReadFile(Path("prev")), "the previous run's output\n") << flag << mode;
    }
  }
  // Regression (adversarial test, 2026-11-30): through a symbolic link to
  // the directory, before either file exists, the two were written as one.
  std::filesystem::create_directories(Path("real"));
  std::filesystem::create_directory_symlink(Path("real"), Path("link"));
  for (const char* mode : {"", " --memory-limit 1"}) {
    EXPECT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("real/k") + " -d " + Path("link/k") + mode), 2) << mode;
    EXPECT_NE(err_.find("two outputs name one file"), std::string::npos) << err_;
    EXPECT_FALSE(std::filesystem::exists(Path("real/k"))) << mode;
    // A symbolic link to the other output's file, which does not exist yet.
    std::filesystem::create_symlink("k", Path("real/klink"));
    EXPECT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("real/k") + " -d " + Path("real/klink") + mode), 2) << mode;
    EXPECT_NE(err_.find("two outputs name one file"), std::string::npos) << err_;
    EXPECT_FALSE(std::filesystem::exists(Path("real/k"))) << mode;
    std::filesystem::remove(Path("real/klink"));
  }
}

// Regression (issue 17, adversarial test, 2026-11-29): (1) `-i - < f -o f`
// truncated f before reading it: 0 documents, exit 0 (f emptied). (2) `-o -`
// beside `-d /dev/stdout` wrote one file from two descriptors, each over the
// other's lines, exit 0. Both now refused before any output is opened;
// /dev/null beside standard output stays allowed.
TEST_F(CliTest, OutputsThatAreTheInputOrEachOtherThroughStandardStreamsAreRefused) {
  const std::string self = Path("self.jsonl");
  WriteFile(self, ReadFile(kSample));
  EXPECT_EQ(Run("dedup -q -i - -o " + self, self), 2);
  EXPECT_NE(err_.find("refusing to overwrite the input file on standard input"), std::string::npos) << err_;
  EXPECT_EQ(ReadFile(self), ReadFile(kSample));
  EXPECT_EQ(Run("dedup -q -i " + kSample + " -o - -d /dev/stdout"), 2);  // stdout is a file here
  EXPECT_NE(err_.find("two outputs name one file"), std::string::npos) << err_;
  EXPECT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("k") + " -d - --stats-json /proc/self/fd/1"), 2);
  EXPECT_EQ(Run("dedup -q -i " + kSample + " -o - -d /dev/null"), 0);
  EXPECT_EQ(Run("dedup -q -i - -o " + Path("k2"), kSample), 0);  // stdin a file, not an output
  EXPECT_EQ(Run("dedup -q -i " + kSample + " -o /dev/null -d /dev/null"), 0) << err_;  // a device takes both
  // The second review: pairs and eval overwrote their input (exit 0).
  WriteFile(Path("fps.txt"), "a\t0000000000000000\nb\t0000000000000001\n");
  EXPECT_EQ(Run("pairs -i " + Path("fps.txt") + " -o " + Path("fps.txt")), 2);
  EXPECT_EQ(ReadFile(Path("fps.txt")), "a\t0000000000000000\nb\t0000000000000001\n");
  EXPECT_EQ(Run("eval -i " + self + " --json " + self), 2);
  EXPECT_EQ(Run("eval -i " + kSample + " --json " + Path("e") + " --errors " + Path("e")), 2);
  EXPECT_EQ(ReadFile(self), ReadFile(kSample));
}

// Regression (issue 17, adversarial test, 2026-11-29): CLI11 read "-1" and
// numbers past 2^64 - 1 into unsigned options as 2^64 - 1, a silent "no
// limit" (exit 0); an empty --annotate meant no --annotate, so a script's
// empty variable dropped every duplicate from --output (exit 0). All exit 2.
TEST_F(CliTest, NegativeOverflowingAndEmptyValuesAreUsageErrors) {
  const std::string run = "dedup -q -i " + kSample + " -o " + Path("k");
  for (const std::string flag : {"--memory-limit -1", "--memory-limit 99999999999999999999", "--memory-limit -5M",
                                 "--memory-limit ' -1G'", "--max-bad-lines -1", "--max-text-bytes -1",
                                 "--max-text-bytes 18446744073709551616", "--max-bad-lines +18446744073709551616",
                                 "--max-bad-lines \"$(printf '\\n-1')\"", "--max-bad-lines \"$(printf '\\v-1')\"", "--memory-limit +99999999999999999999999",
                                 "--annotate ''", "-d ''",
                                 "--save-index ''", "--checkpoint ''", "--clusters ''"}) {
    EXPECT_EQ(Run(run + " " + flag), 2) << flag;
    EXPECT_TRUE(err_.find("negative") != std::string::npos || err_.find("too large") != std::string::npos ||
                err_.find("must not be empty") != std::string::npos)
        << flag << ": " << err_;
  }
  EXPECT_EQ(Run(run + " --memory-limit 0x10000000 --max-bad-lines 0 --max-text-bytes 18446744073709551615"), 0) << err_;
  EXPECT_EQ(Run(run + " --id-field ''"), 0) << err_;  // documented: the line number
  EXPECT_EQ(Run("stage filter -i " + kSample + " --decisions x -o " + Path("f") + " --annotate ''"), 2);
}

// Regression (issue 17, adversarial test, 2026-11-29): a --checkpoint run
// with an output inside an --input directory was accepted, and its resume
// then read the output as an input and refused, blaming an unchanged file.
// Such outputs, and those a pattern matches, are refused at the first run
// of a resumable run (a run without --checkpoint may write there: it lists
// the inputs once); a resume whose directory gained a file names what
// changed.
TEST_F(CliTest, OutputsWhereAnInputDirectoryOrPatternFindsFilesAreRefused) {
  std::filesystem::create_directories(Path("corpus/sub"));
  std::filesystem::create_directory_symlink(Path("corpus"), Path("link"));
  WriteFile(Path("corpus/part.00"), ReadFile(kSample));
  const std::string in = " -i " + Path("corpus"), ck = " --checkpoint " + Path("ck0");
  for (const std::string& args : {in + " -o " + Path("corpus/kept.jsonl") + ck,
                                   in + " -o " + Path("corpus/sub/k.jsonl") + ck,
                                   in + " -o " + Path("k") + " --checkpoint " + Path("corpus/ck"),
                                   in + " -o " + Path("k") + ck + " --save-index " + Path("corpus") + "/../corpus/idx",
                                   " -i '" + Path("corpus") + "/*.00' -o " + Path("corpus/z.00") + ck,
                                   " -i '" + Path("") + "/corp*' -o " + Path("corpus/sub/k.jsonl") + ck,
                                   // The second review: the directory itself, a link to it, a trailing slash.
                                   in + " -o " + Path("k") + " --checkpoint " + Path("corpus"),
                                   in + " -o " + Path("k") + " --checkpoint " + Path("corpus") + "/",
                                   " -i '" + Path("link") + "/*.00' -o " + Path("corpus/z.00") + ck,
                                   " -i '" + Path("corpus") + "/*.00' -o " + Path("link/z.00") + ck,
                                   " -i '" + Path("cor*") + "/' -o " + Path("corpus/sub/k.jsonl") + ck,
                                   // The final review: the pattern's own directory as the checkpoint.
                                   " -i '" + Path("corpus") + "/*.00' -o " + Path("k") + " --checkpoint " + Path("corpus")}) {
    EXPECT_EQ(Run("dedup -q" + args), 2) << args;
    EXPECT_NE(err_.find("finds files: a resume would read it"), std::string::npos) << args << ": " << err_;
  }
  EXPECT_FALSE(std::filesystem::exists(Path("corpus/kept.jsonl")));
  EXPECT_EQ(Run("dedup -q -i '" + Path("corpus") + "/*.00' -o " + Path("corpus/z.jsonl") + ck), 0) << err_;
  EXPECT_EQ(Run("dedup -q" + in + " -o " + Path("corpus/sub/k.jsonl")), 0) << err_;  // not resumable: allowed
  // A hidden directory is not listed: a checkpoint there is not read back.
  EXPECT_EQ(Run("dedup -q" + in + " -o " + Path("k3") + " --checkpoint " + Path("corpus/.ck")), 0) << err_;
  EXPECT_EQ(Run("dedup -q -i '" + Path("corp*") + "' -o " + Path("k4") + " --checkpoint " + Path("corpus/.ck")), 0) << err_;
  // A wildcard in a directory part, the checkpoint hidden below a match (the
  // final review: the pattern's depth was read from two path objects, UB).
  std::filesystem::create_directories(Path("corpus/sub/shard1"));
  WriteFile(Path("corpus/sub/shard1/f.jsonl"), ReadFile(kSample).substr(0, 5000));
  EXPECT_EQ(Run("dedup -q -i '" + Path("corpus") + "/*/shard*' -o " + Path("k5") + " --checkpoint " +
                Path("corpus/sub/shard1/.ck")),
            0)
      << err_;
  EXPECT_EQ(Run("dedup -q -i '" + Path("corpus") + "/*/shard*' -o " + Path("corpus/sub/shard1/k.jsonl") + ck), 2);
  std::filesystem::remove_all(Path("corpus/sub/shard1"));
  // A file added to an input directory before a resume is named as such.
  std::filesystem::remove(Path("corpus/z.jsonl"));
  std::filesystem::remove(Path("corpus/sub/k.jsonl"));
  WriteFile(Path("corpus/part.01"), ReadFile(kSample).substr(0, 20000));
  const std::string args = "dedup -q" + in + " -o " + Path("out.jsonl") + " --batch-size 300 --checkpoint " + Path("ck");
  const std::string crash = "NEARDUP_DEDUP_CRASH_AFTER_BATCHES=18 '" + kCli + "' " + args + " 2>/dev/null";
  ASSERT_EQ(WEXITSTATUS(std::system(crash.c_str())), 137);
  ASSERT_TRUE(std::filesystem::exists(Path("ck/state.json")));
  WriteFile(Path("corpus/part.0"), "{\"id\": \"x\", \"text\": \"new\"}\n");  // sorts first
  EXPECT_EQ(Run(args), 2);
  EXPECT_NE(err_.find("the inputs are not the files the run read: input 1 was"), std::string::npos) << err_;
  EXPECT_NE(err_.find("part.0\""), std::string::npos) << err_;
}

// Regression (an adversarial test): outputs that write over what the run
// reads or keeps were accepted, exit 0. Several outputs to standard output
// mixed their record kinds; an output inside a --load-index directory
// destroyed the index; one inside --save-index or --checkpoint was replaced
// by the index or deleted with the checkpoint; `stage decide --clusters` and
// `--stats-json` overwrote signature shards; `stage filter -o` its decision
// file; a --load-index given twice loaded its documents twice.
TEST_F(CliTest, OutputsThatWouldDestroyWhatTheRunReadsAreRefused) {
  const std::string in = "dedup -q -i " + kSample;
  EXPECT_EQ(Run(in + " -o - -d -"), 2);
  EXPECT_NE(err_.find("standard output"), std::string::npos) << err_;
  EXPECT_EQ(Run(in + " -o - --stats-json -"), 2);
  ASSERT_EQ(Run(in + " -o " + Path("k") + " --save-index " + Path("idx")), 0) << err_;
  const std::string index = ReadFile(Path("idx/kept.ndk"));
  for (const std::string& flags :
       {"-o " + Path("idx/kept.ndk") + " --load-index " + Path("idx"),
        "-o " + Path("k2") + " --clusters " + Path("idx") + "/./x.jsonl --load-index " + Path("idx") + "/",
        "-o " + Path("k2") + " -d " + Path("idx2/manifest.json") + " --save-index " + Path("idx2"),
        "-o " + Path("ck/state.json") + " --checkpoint " + Path("ck"),
        "-o " + Path("k2") + " --stats-json " + Path("ck/rounds/rounds.json") + " --checkpoint " + Path("ck") +
            " --memory-limit 64M"}) {
    EXPECT_EQ(Run(in + " " + flags), 2) << flags;
    EXPECT_NE(err_.find("is inside the"), std::string::npos) << flags << ": " << err_;
  }
  EXPECT_EQ(ReadFile(Path("idx/kept.ndk")), index);
  EXPECT_FALSE(std::filesystem::exists(Path("k2")));
  EXPECT_EQ(Run(in + " -o " + Path("k2") + " --load-index " + Path("idx") + " --load-index " + Path("idx") + "/./"), 2);
  EXPECT_NE(err_.find("is given twice"), std::string::npos) << err_;
  // The staged stages.
  ASSERT_EQ(Run("stage fingerprint -q -i " + kSample + " -o " + Path("0.sig")), 0) << err_;
  const std::string sig = ReadFile(Path("0.sig"));
  EXPECT_EQ(Run("stage decide -q -s " + Path("0.sig") + " -o " + Path("dec") + " --clusters " + Path("0.sig")), 2);
  EXPECT_EQ(Run("stage decide -q -s " + Path("0.sig") + " -o " + Path("dec") + " --stats-json " + Path("0.sig")), 2);
  EXPECT_EQ(ReadFile(Path("0.sig")), sig);
  ASSERT_EQ(Run("stage decide -q -s " + Path("0.sig") + " -o " + Path("dec")), 0) << err_;
  const std::string dec = ReadFile(Path("dec/00000.dec"));
  EXPECT_EQ(Run("stage filter -q -i " + kSample + " --decisions " + Path("dec/00000.dec") + " -o " +
                Path("dec/00000.dec")),
            2);
  EXPECT_EQ(ReadFile(Path("dec/00000.dec")), dec);
  // "{shard}" names a shard of several only.
  EXPECT_EQ(Run(in + " -o " + Path("x{shard}.jsonl")), 2);
  EXPECT_FALSE(std::filesystem::exists(Path("x{shard}.jsonl")));
  ASSERT_EQ(Run(in + " -o " + Path("{shard}-{shard}") + " --output-shards 2"), 0) << err_;
  EXPECT_TRUE(std::filesystem::exists(Path("00001-00001")));
}

// Regression (an adversarial test): an input that is a pipe named by path
// (/dev/stdin, <(zcat ...), a FIFO) was opened once to check it, which read
// its first 64 KiB, then opened again to read the rest: documents lost,
// exit 0 (a 10 KB input gave 0 documents). --keep longest, which reads its
// inputs twice, gave empty outputs (or waited on a FIFO) instead of a refusal.
TEST_F(CliTest, APipeNamedByPathIsReadWhole) {
  ASSERT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("want") + " -d " + Path("want.d")), 0) << err_;
  // In a subshell: RunShell's redirection of standard input is then the
  // subshell's, not the pipe's reader's.
  ASSERT_EQ(RunShell("(cat " + kSample + " | '" + kCli + "' dedup -q -i /dev/stdin -o " + Path("k") + " -d " +
                         Path("d") + ")",
                     "/dev/null"),
            0)
      << err_;
  EXPECT_EQ(ReadFile(Path("k")), ReadFile(Path("want")));
  EXPECT_EQ(ReadFile(Path("d")), ReadFile(Path("want.d")));
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0644), 0);
  ASSERT_EQ(RunShell("(gzip -c " + kSample + " > " + Path("fifo") + " & timeout 60 '" + kCli + "' dedup -q -i " +
                         Path("fifo") + " -o " + Path("k2") + " -d " + Path("d2") + "; rc=$?; wait; exit $rc)",
                     "/dev/null"),
            0)
      << err_;
  EXPECT_EQ(ReadFile(Path("k2")), ReadFile(Path("want")));
  EXPECT_EQ(ReadFile(Path("d2")), ReadFile(Path("want.d")));
  EXPECT_EQ(RunShell("(cat " + kSample + " | timeout 60 '" + kCli + "' dedup -q -i /dev/stdin -o " + Path("k3") +
                         " --keep longest)",
                     "/dev/null"),
            2);
  EXPECT_NE(err_.find("--keep longest reads the inputs twice"), std::string::npos) << err_;
  EXPECT_EQ(RunShell("(cat " + kSample + " | timeout 60 '" + kCli + "' dedup -q -i /dev/stdin -o " + Path("k4") +
                         " --checkpoint " + Path("ck") + ")",
                     "/dev/null"),
            2);
}

// Regression: a UTF-8 byte order mark before the first line made it a bad
// line ("invalid JSON"), its document dropped.
TEST_F(CliTest, AByteOrderMarkBeforeTheFirstLineIsIgnored) {
  WriteFile(Path("bom.jsonl"), "\xEF\xBB\xBF{\"id\":1,\"text\":\"first line\"}\n{\"id\":2,\"text\":\"second\"}\n");
  ASSERT_EQ(Run("dedup -q -i " + Path("bom.jsonl") + " -o " + Path("k") + " --stats-json " + Path("s")), 0) << err_;
  EXPECT_EQ(ReadFile(Path("k")), "{\"id\":1,\"text\":\"first line\"}\n{\"id\":2,\"text\":\"second\"}\n");
  EXPECT_EQ(nlohmann::json::parse(ReadFile(Path("s")))["bad_lines"], 0);
}

// Found in review: two runs given the same --checkpoint at once cut back
// and overwrote each other's files. DIR/lock is held while a run lives; a
// second run is refused (exit 2, nothing touched) and the first's state
// resumes to the uninterrupted outputs once the lock is free.
// Regression: --checkpoint makes its outputs durable and cuts them back on a
// resume, which a device or a pipe cannot do: /dev/null gave "cannot fsync"
// (exit 1) after the run, a FIFO waited forever. Both are refused first.
TEST_F(CliTest, CheckpointRefusesADeviceOrAPipeAsOutput) {
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0600), 0);
  for (const std::string& out : {std::string("/dev/null"), Path("fifo")}) {
    EXPECT_EQ(RunShell("timeout 30 '" + kCli + "' dedup -q -i " + kSample + " -o " + out + " --checkpoint " +
                           Path("ck"),
                       "/dev/null"),
              2)
        << out;
    EXPECT_NE(err_.find("(a device or a pipe)"), std::string::npos) << err_;
  }
}

TEST_F(CliTest, CheckpointIsUsedByOneRunAtATime) {
  const std::string args = "dedup -i " + kSample + " -o " + Path("out") + " -d " + Path("dups") +
                           " --batch-size 300 -q --checkpoint " + Path("ckpt");
  ASSERT_EQ(Run("dedup -i " + kSample + " -o " + Path("want") + " -d " + Path("want.d") + " -q"), 0) << err_;
  std::filesystem::create_directories(Path("ckpt"));
  const int held = ::open(Path("ckpt/lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);  // as a run in progress holds it
  EXPECT_EQ(Run(args), 2);
  EXPECT_NE(err_.find("is in use by another run"), std::string::npos) << err_;
  EXPECT_FALSE(std::filesystem::exists(Path("ckpt/state.json")));
  ::close(held);
  ASSERT_EQ(Run(args), 0) << err_;
  EXPECT_EQ(ReadFile(Path("out")), ReadFile(Path("want")));
  EXPECT_EQ(ReadFile(Path("dups")), ReadFile(Path("want.d")));
  EXPECT_FALSE(std::filesystem::exists(Path("ckpt")));  // its lock is removed with it
}

// --sketch-dir keeps the sketch records in an unnamed file: the same
// outputs, and nothing left in the directory.
TEST_F(CliTest, SketchDirGivesTheSameOutputs) {
  std::filesystem::create_directories(Path("sk"));
  ASSERT_EQ(Run("dedup -i " + kSample + " -o " + Path("a") + " -d " + Path("ad")), 0) << err_;
  ASSERT_EQ(Run("dedup -i " + kSample + " --sketch-dir " + Path("sk") + " -o " + Path("b") + " -d " + Path("bd")), 0)
      << err_;
  EXPECT_EQ(ReadFile(Path("a")), ReadFile(Path("b")));
  EXPECT_EQ(ReadFile(Path("ad")), ReadFile(Path("bd")));
  EXPECT_TRUE(std::filesystem::is_empty(Path("sk")));
  EXPECT_EQ(Run("dedup -i " + kSample + " --sketch-dir " + Path("none") + " -o " + Path("c")), 2);
}

TEST_F(CliTest, AnnotateWritesEveryRecordWithItsDecision) {
  ASSERT_EQ(Run("dedup -i " + kSample + " -o " + Path("kept") + " -d " + Path("d")), 0) << err_;
  ASSERT_EQ(Run("dedup -i " + kSample + " -o " + Path("ann") + " --annotate neardup"), 0) << err_;
  const auto input = Lines(ReadFile(kSample));
  const auto ann = Lines(ReadFile(Path("ann")));
  const auto dups = Lines(ReadFile(Path("d")));
  ASSERT_EQ(ann.size(), input.size());
  std::string kept;
  size_t duplicates = 0;
  for (size_t i = 0; i < ann.size(); ++i) {
    const auto j = nlohmann::json::parse(ann[i]);
    const auto original = nlohmann::json::parse(input[i]);
    ASSERT_EQ(j["id"], original["id"]) << i;
    const auto& d = j["neardup"];
    if (d["kept"].get<bool>()) {
      kept += input[i] + "\n";
      continue;
    }
    ASSERT_LT(duplicates, dups.size());
    const auto want = nlohmann::json::parse(dups[duplicates++]);
    EXPECT_EQ(d["duplicate_of"], want["duplicate_of"]) << i;
    EXPECT_EQ(d["similarity"], want["similarity"]) << i;
    EXPECT_EQ(d["distance"], want["distance"]) << i;
  }
  EXPECT_EQ(duplicates, dups.size());
  EXPECT_EQ(kept, ReadFile(Path("kept")));
  WriteFile(Path("empty.jsonl"), "{}\n{ }\n");
  ASSERT_EQ(Run("dedup -i " + Path("empty.jsonl") + " --text-field id -o " + Path("e") + " --annotate x"), 4);
  EXPECT_EQ(Run("dedup --format lines -i " + kSampleLines + " -o " + Path("l") + " --annotate x"), 2);
}

// Regression: with several inputs, ids that are line numbers (--format
// lines, --id-field '') were each input's own, so {"id": 2, "duplicate_of":
// 1} could name lines of either file. They are now "INPUT:LINE" strings; one
// input keeps plain numbers. The rounds of --memory-limit agree.
TEST_F(CliTest, LineNumberIdsOfSeveralInputsNameTheirInput) {
  WriteFile(Path("l1.txt"), "alpha beta gamma delta epsilon\nunique one here\n");
  WriteFile(Path("l2.txt"), "unique two there\nalpha beta gamma delta epsilon\n");
  const std::string two = " -i " + Path("l1.txt") + " -i " + Path("l2.txt");
  ASSERT_EQ(Run("dedup -q --format lines" + two + " -o " + Path("k") + " -d " + Path("d")), 0) << err_;
  const std::string want = "{\"id\": \"" + Path("l2.txt") + ":2\", \"duplicate_of\": \"" + Path("l1.txt") + ":1\", ";
  EXPECT_EQ(ReadFile(Path("d")).substr(0, want.size()), want) << ReadFile(Path("d"));
  ASSERT_EQ(Run("dedup -q --format lines" + two + " -o " + Path("k2") + " -d " + Path("d2") + " --memory-limit 1G"),
            0) << err_;
  EXPECT_EQ(ReadFile(Path("d2")), ReadFile(Path("d")));
  WriteFile(Path("j1.jsonl"), "{\"text\":\"alpha beta gamma delta epsilon\"}\n");
  WriteFile(Path("j2.jsonl"), "{\"text\":\"alpha beta gamma delta epsilon\"}\n");
  ASSERT_EQ(Run("dedup -q --id-field '' -i " + Path("j1.jsonl") + " -i " + Path("j2.jsonl") + " -o " + Path("k3") +
                " -d " + Path("d3")),
            0) << err_;
  const std::string want3 = "{\"id\": \"" + Path("j2.jsonl") + ":1\", \"duplicate_of\": \"" + Path("j1.jsonl") + ":1\", ";
  EXPECT_EQ(ReadFile(Path("d3")).substr(0, want3.size()), want3) << ReadFile(Path("d3"));
  ASSERT_EQ(Run("dedup -q --format lines -i " + Path("l2.txt") + " -o " + Path("k4") + " -d " + Path("d4")), 0);
  EXPECT_EQ(ReadFile(Path("d4")), "");
  WriteFile(Path("l5.txt"), "same words in this line\nsame words in this line\n");
  ASSERT_EQ(Run("dedup -q --format lines -i " + Path("l5.txt") + " -o " + Path("k5") + " -d " + Path("d5")), 0);
  const std::string want5 = "{\"id\": 2, \"duplicate_of\": 1, ";
  EXPECT_EQ(ReadFile(Path("d5")).substr(0, want5.size()), want5);
}

// Regression: an empty run's summary gave "per kept document 19480.0 B" (the
// empty tables over one document), and a --memory-limit run's summary was
// labelled "neardup stage decide", a command the user did not run.
TEST_F(CliTest, SummariesOfAnEmptyRunAndOfRoundsNameWhatTheyCount) {
  WriteFile(Path("empty.jsonl"), "");
  ASSERT_EQ(Run("dedup -i " + Path("empty.jsonl") + " -o " + Path("k")), 0) << err_;
  EXPECT_NE(err_.find("(none kept)"), std::string::npos) << err_;
  EXPECT_EQ(err_.find("per kept document"), std::string::npos) << err_;
  ASSERT_EQ(Run("dedup -i " + kSample + " -o " + Path("k") + " --memory-limit 1G --spill-dir " + dir_), 0) << err_;
  EXPECT_EQ(err_.find("stage decide"), std::string::npos) << err_;
  EXPECT_NE(err_.find("neardup dedup --memory-limit: round 1 decided"), std::string::npos) << err_;
  EXPECT_NE(err_.find(" documents in 1 input: "), std::string::npos) << err_;
}

// Regression: a record that already had the field got it twice (the old
// value first), so annotating an annotated file gave records that readers
// resolve differently.
// Regression (a tester, 2026-12-02): --annotate naming the text or id field
// replaced every record's text or id with the decision, exit 0.
TEST_F(CliTest, AnnotateRefusesTheTextAndIdFields) {
  for (const std::string& args : {std::string(" --annotate text"), std::string(" --annotate id"),
                                  std::string(" --annotate body --text-field body"),
                                  std::string(" --annotate key --id-field key")}) {
    EXPECT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("a") + args), 2) << args;
    EXPECT_NE(err_.find("would replace each record's"), std::string::npos) << err_;
    EXPECT_NE(::access(Path("a").c_str(), F_OK), 0) << args;
  }
  // Without ids read from the records, "id" is a field like any other.
  EXPECT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("a") + " --annotate id --id-field ''"), 0) << err_;
  // stage filter refuses it too (the settings are in the decision file).
  ASSERT_EQ(Run("stage fingerprint -q -i " + kSample + " -o " + Path("s.sig")), 0) << err_;
  ASSERT_EQ(Run("stage decide -q -s " + Path("s.sig") + " -o " + Path("dec")), 0) << err_;
  EXPECT_EQ(Run("stage filter -q -i " + kSample + " --decisions " + Path("dec/00000.dec") + " -o " + Path("f") +
                " --annotate text"),
            2);
  EXPECT_NE(err_.find("would replace each record's --text-field text"), std::string::npos) << err_;
}

TEST_F(CliTest, AnnotateReplacesAFieldTheRecordAlreadyHas) {
  ASSERT_EQ(Run("dedup -i " + kSample + " -o " + Path("once") + " --annotate nd"), 0) << err_;
  ASSERT_EQ(Run("dedup -i " + Path("once") + " -o " + Path("twice") + " --annotate nd"), 0) << err_;
  EXPECT_EQ(ReadFile(Path("twice")), ReadFile(Path("once")));
  WriteFile(Path("in.jsonl"),
            "{\"id\":1,\"nd\":\"old\",\"text\":\"alpha beta gamma delta\"}\n"
            "{ \"n\\u0064\" : [1,{\"nd\":2}] , \"id\":2, \"text\":\"alpha beta gamma delta\", \"nd\":{\"a\":\"}\"} }\n"
            "{\"meta\":{\"nd\":\"nested, kept\"},\"text\":\"something else, \\\"nd\\\": entirely\",\"id\":3,\"nd\":null}\n"
            "{\"nd\":1e400}\n");
  ASSERT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("ann") + " --annotate nd --text-field text"), 0) << err_;
  const auto lines = Lines(ReadFile(Path("ann")));
  ASSERT_EQ(lines.size(), 3u) << ReadFile(Path("ann"));  // the last line has no text: a bad line
  for (const std::string& line : lines) {
    std::string duplicate;
    const auto j = neardup::ParseJsonRejectingDuplicates(line, &duplicate);
    ASSERT_TRUE(j.is_object()) << line;
    EXPECT_EQ(duplicate, "") << line;
    ASSERT_TRUE(j["nd"].is_object()) << line;
    EXPECT_TRUE(j["nd"].contains("kept")) << line;
  }
  EXPECT_EQ(nlohmann::json::parse(lines[1])["nd"]["duplicate_of"], 1);
  EXPECT_EQ(nlohmann::json::parse(lines[2])["meta"]["nd"], "nested, kept");
  EXPECT_EQ(nlohmann::json::parse(lines[2])["text"], "something else, \"nd\": entirely");
  // Regression (adversarial test, 2026-11-29): white space before the closing
  // brace, or before the comma of a replaced last member, moved on the second
  // pass, so annotating an annotated file did not give it back.
  WriteFile(Path("ws.jsonl"),
            "{\"id\":1,\"text\":\"x y z w v u t s r q p\" , \"nd\" : null }\n"
            "{\"id\":2,\"text\":\"a b c d e f g h i j k\"\t}\n"
            "{\"id\":3 , \"nd\": 1 , \"text\":\"q r s t u v w x y z\" }\n");
  for (const std::string& in : {Path("in.jsonl"), Path("ws.jsonl")}) {
    ASSERT_EQ(Run("dedup -q -i " + in + " -o " + Path("a1") + " --annotate nd"), 0) << err_;
    ASSERT_EQ(Run("dedup -q -i " + Path("a1") + " -o " + Path("a2") + " --annotate nd"), 0) << err_;
    EXPECT_EQ(ReadFile(Path("a2")), ReadFile(Path("a1"))) << in;
  }
}

TEST_F(CliTest, ProgressLinesGoToAnyStderr) {
  ASSERT_EQ(Run("dedup -i " + kSample + " -o " + Path("u") + " --progress 0.0001 --batch-size 100"), 0);
  EXPECT_NE(err_.find("neardup: file 1/1"), std::string::npos) << err_;
  EXPECT_NE(err_.find("ETA"), std::string::npos) << err_;
  ASSERT_EQ(Run("dedup -i " + kSample + " -o " + Path("u")), 0);
  EXPECT_EQ(err_.find("ETA"), std::string::npos) << "no progress lines off a terminal by default";
}

// Decompressed content of a file the CLI wrote (io/input_stream.h reads
// gzip and zstd by content).
std::string ReadAnyFile(const std::string& path) {
  auto in = neardup::InputStream::Open(path);
  EXPECT_TRUE(in.ok()) << path;
  if (!in.ok()) return "";
  std::string out;
  char buf[1 << 16];
  for (size_t got = 1; got > 0;) {
    EXPECT_TRUE((*in)->Read(buf, sizeof buf, &got).ok()) << path;
    out.append(buf, got);
  }
  return out;
}

// --output-shards and outputs compressed by their names: the shards hold
// the kept records round robin, together exactly the plain run's output.
TEST_F(CliTest, ShardedAndCompressedOutputs) {
  ASSERT_EQ(Run("dedup -i " + kSample + " -o " + Path("plain") + " -d " + Path("plain.d")), 0) << err_;
  ASSERT_EQ(Run("dedup -i " + kSample + " -o '" + Path("part-{shard}.jsonl.zst") + "' --output-shards 3 -d " +
                Path("d.gz")),
            0)
      << err_;
  const auto plain = Lines(ReadFile(Path("plain")));
  std::vector<std::vector<std::string>> shards;
  for (int i = 0; i < 3; ++i) shards.push_back(Lines(ReadAnyFile(Path("part-0000" + std::to_string(i) + ".jsonl.zst"))));
  for (size_t i = 0; i < plain.size(); ++i) {
    ASSERT_LT(i / 3, shards[i % 3].size()) << i;
    EXPECT_EQ(shards[i % 3][i / 3], plain[i]) << i;
  }
  EXPECT_EQ(shards[0].size() + shards[1].size() + shards[2].size(), plain.size());
  EXPECT_EQ(ReadAnyFile(Path("d.gz")), ReadFile(Path("plain.d")));
  EXPECT_EQ(Run("dedup -i " + kSample + " -o " + Path("x") + " --output-shards 2"), 2);
  EXPECT_NE(err_.find("{shard}"), std::string::npos);
}

}  // namespace

// ---- input robustness (issue 15) --------------------------------------------

TEST_F(CliTest, GzipAndZstdInputGiveTheSameOutput) {
  const std::string plain = ReadFile(kSample);
  WriteFile(Path("in.gz"), neardup::testing::Gzip(plain));
  WriteFile(Path("in.zst"), neardup::testing::Zstd(plain));
  ASSERT_EQ(Run("dedup -q -i " + kSample + " -o " + Path("u") + " -d " + Path("d")), 0) << err_;
  const std::string kept = ReadFile(Path("u")), dups = ReadFile(Path("d"));
  ASSERT_FALSE(dups.empty());
  for (const char* name : {"in.gz", "in.zst"}) {
    ASSERT_EQ(Run("dedup -q -i " + Path(name) + " -o " + Path("u2") + " -d " + Path("d2")), 0) << err_;
    EXPECT_EQ(ReadFile(Path("u2")), kept) << name;
    EXPECT_EQ(ReadFile(Path("d2")), dups) << name;
    ASSERT_EQ(Run("fingerprint", Path(name)), 0) << err_;  // standard input too
    const std::string fps = out_;
    ASSERT_EQ(Run("fingerprint -i " + kSample), 0);
    EXPECT_EQ(fps, out_) << name;
    ASSERT_EQ(Run("idf build -i " + Path(name) + " -o " + Path("idf2")), 0) << err_;
    ASSERT_EQ(Run("idf build -i " + kSample + " -o " + Path("idf1")), 0) << err_;
    EXPECT_EQ(ReadFile(Path("idf1")), ReadFile(Path("idf2"))) << name;
  }
}

TEST_F(CliTest, TruncatedGzipIsAnErrorExit) {
  const std::string gz = neardup::testing::Gzip(ReadFile(kSample));
  WriteFile(Path("cut.gz"), gz.substr(0, gz.size() / 2));
  EXPECT_EQ(Run("dedup -q -i " + Path("cut.gz") + " -o " + Path("u")), 1);
  EXPECT_NE(err_.find("truncated gzip stream"), std::string::npos) << err_;
  EXPECT_EQ(Run("fingerprint", Path("cut.gz")), 1);
  EXPECT_NE(err_.find("standard input: truncated gzip stream"), std::string::npos) << err_;
}

TEST_F(CliTest, RejectsFileHoldsEachBadLine) {
  WriteFile(Path("in.jsonl"), std::string(kSmall) + "{\"id\":9,\"text\":\"bad \xff byte\"}\n");
  ASSERT_EQ(Run("dedup -q -i " + Path("in.jsonl") + " -o " + Path("u") + " --rejects " + Path("r")), 0) << err_;
  EXPECT_EQ(ReadFile(Path("r")),
            "{\"line\":5,\"error\":\"missing field \\\"text\\\"\",\"text\":\"{\\\"id\\\":4,\\\"body\\\":\\\"no text "
            "field\\\"}\"}\n"
            "{\"line\":7,\"error\":\"invalid JSON\",\"text\":\"not json at all\"}\n"
            "{\"line\":8,\"error\":\"field \\\"id\\\" must be a string or number\",\"text\":"
            "\"{\\\"id\\\":[7],\\\"text\\\":\\\"x\\\"}\"}\n"
            "{\"line\":10,\"error\":\"invalid UTF-8\",\"text\":\"{\\\"id\\\":9,\\\"text\\\":\\\"bad \xef\xbf\xbd "
            "byte\\\"}\"}\n");
  // A rejects file that is the input is refused like any output.
  EXPECT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " --rejects " + Path("in.jsonl")), 2);
}

// `n` bad lines, then `good` good ones.
std::string BadThenGood(int n, int good) {
  std::string s;
  for (int i = 0; i < n; ++i) s += "oops " + std::to_string(i) + "\n";
  for (int i = 0; i < good; ++i) s += "{\"id\":" + std::to_string(i) + ",\"text\":\"doc " + std::to_string(i) + "\"}\n";
  return s;
}

TEST_F(CliTest, MaxBadLinesStopsWithExitFour) {
  WriteFile(Path("in.jsonl"), BadThenGood(5, 3));
  EXPECT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " --max-bad-lines 4"), 4);
  EXPECT_NE(err_.find("more than 4 bad lines (--max-bad-lines); stopped at line 5"), std::string::npos) << err_;
  EXPECT_EQ(ReadFile(Path("u")), "");  // nothing after the stop
  EXPECT_EQ(Run("fingerprint --max-bad-lines 4", Path("in.jsonl")), 4);
  EXPECT_EQ(Run("idf build --max-bad-lines 4 -i " + Path("in.jsonl") + " -o " + Path("idf")), 4);
  EXPECT_NE(err_.find("nothing written"), std::string::npos) << err_;
  EXPECT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " --max-bad-lines 5"), 0) << err_;
  EXPECT_EQ(Lines(ReadFile(Path("u"))).size(), 3u);
  EXPECT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " --max-bad-lines 0"), 0) << err_;
  // The default is 1000.
  WriteFile(Path("many.jsonl"), BadThenGood(1001, 1));
  EXPECT_EQ(Run("dedup -q -i " + Path("many.jsonl") + " -o " + Path("u")), 4);
  WriteFile(Path("many.jsonl"), BadThenGood(1000, 1));
  EXPECT_EQ(Run("dedup -q -i " + Path("many.jsonl") + " -o " + Path("u")), 0);
}

TEST_F(CliTest, EveryLineBadIsNotASuccess) {
  WriteFile(Path("in.jsonl"), BadThenGood(3, 0) + "\n");
  EXPECT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " --max-bad-lines 0"), 4);
  EXPECT_NE(err_.find("every line was bad (3)"), std::string::npos) << err_;
  EXPECT_EQ(Run("fingerprint", Path("in.jsonl")), 4);
  // A gzip file read as text was exactly this; now it is decompressed.
  WriteFile(Path("in.gz"), neardup::testing::Gzip(BadThenGood(0, 2)));
  EXPECT_EQ(Run("dedup -i " + Path("in.gz") + " -o " + Path("u")), 0) << err_;
  // Empty input: nothing bad, nothing done, success.
  WriteFile(Path("empty"), "");
  EXPECT_EQ(Run("dedup -i " + Path("empty") + " -o " + Path("u")), 0) << err_;
}

TEST_F(CliTest, BadLineMessagesAreCapped) {
  WriteFile(Path("in.jsonl"), BadThenGood(25, 1));
  ASSERT_EQ(Run("dedup -i " + Path("in.jsonl") + " -o " + Path("u") + " --rejects " + Path("r")), 0) << err_;
  size_t shown = 0;
  for (const std::string& line : Lines(err_)) shown += line.rfind("neardup: line ", 0) == 0;
  EXPECT_EQ(shown, 10u) << err_;
  EXPECT_NE(err_.find("neardup: line 10: invalid JSON"), std::string::npos) << err_;
  EXPECT_NE(err_.find("neardup: 15 more bad lines not shown (all are in " + Path("r") + ")"), std::string::npos)
      << err_;
  EXPECT_EQ(Lines(ReadFile(Path("r"))).size(), 25u);
}

// dedup reads a directory's files (ManyInputsAreOneStreamInOrder); one with
// none is a usage error. The single-input commands refuse any directory.
TEST_F(CliTest, DirectoryInputIsAUsageErrorAndCreatesNothing) {
  ::mkdir(Path("dir").c_str(), 0755);
  EXPECT_EQ(Run("dedup -i " + Path("dir") + " -o " + Path("u") + " -d " + Path("d") + " --rejects " + Path("r") +
                " --stats-json " + Path("s")),
            2);
  EXPECT_NE(err_.find("directory " + Path("dir") + " holds no input file"), std::string::npos) << err_;
  for (const char* name : {"u", "d", "r", "s"}) EXPECT_NE(::access(Path(name).c_str(), F_OK), 0) << name;
  EXPECT_EQ(Run("fingerprint -i " + Path("dir") + " -o " + Path("u")), 2);
  EXPECT_NE(::access(Path("u").c_str(), F_OK), 0);
  EXPECT_EQ(Run("idf build -i " + Path("dir") + " -o " + Path("u")), 2);
}

// Regression (a tester, 2026-11-30): a name that is not valid UTF-8, where a
// run records names as JSON, ended it with "internal error:
// [json.exception.type_error.316]" (exit 1), after outputs and a checkpoint
// that could never be resumed were written. Now refused (exit 2) before
// anything is written; runs that record no name still take such files.
TEST_F(CliTest, NamesThatAreNotUtf8AreRefusedWhereTheyAreRecorded) {
  ::mkdir(Path("in").c_str(), 0755);
  const std::string latin1 = Path("in/caf\xe9.jsonl"), in = Path("docs.jsonl");
  WriteFile(latin1, ReadFile(kSample));
  WriteFile(in, ReadFile(kSample));
  const std::string out = " -o " + Path("kept") + " -d " + Path("dups");
  struct Case {
    std::string args, recorder, shown;
  };
  const Case cases[] = {
      {"dedup -q -i '" + latin1 + "'" + out + " --checkpoint " + Path("ck"), "--checkpoint", "caf\\xE9.jsonl"},
      {"dedup -q -i " + Path("in") + out + " --checkpoint " + Path("ck"), "--checkpoint", "caf\\xE9.jsonl"},
      {"dedup -q -i '" + in + "' -o '" + Path("k\xfe") + "' --checkpoint " + Path("ck"), "--checkpoint", "k\\xFE"},
      {"dedup -q -i '" + latin1 + "'" + out + " --memory-limit 1 --checkpoint " + Path("ck"), "--memory-limit",
       "caf\\xE9.jsonl"},
      {"dedup -q -i '" + latin1 + "'" + out + " --memory-limit 1", "--memory-limit", "caf\\xE9.jsonl"},
      {"dedup -q -i '" + latin1 + "'" + out + " --save-index " + Path("ix"), "--save-index", "caf\\xE9.jsonl"},
      {"stage fingerprint -i '" + latin1 + "' -o " + Path("s.sig"), "stage fingerprint", "caf\\xE9.jsonl"},
      {"stage plan -i " + Path("in"), "stage plan", "caf\\xE9.jsonl"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    EXPECT_EQ(Run(c.args), 2) << err_;
    EXPECT_EQ(err_.find("neardup: " + c.recorder), 0u) << err_;
    EXPECT_NE(err_.find("records file names as JSON"), std::string::npos) << err_;
    EXPECT_NE(err_.find(c.shown + " is not valid UTF-8"), std::string::npos) << err_;
    for (const char* name : {"kept", "dups", "ck", "ix", "s.sig", "k\xfe"}) {
      EXPECT_NE(::access(Path(name).c_str(), F_OK), 0) << name;
    }
  }
  // Nothing recorded: the name is only opened.
  EXPECT_EQ(Run("dedup -q -i '" + in + "' -o " + Path("kept2")), 0) << err_;
  EXPECT_EQ(Run("dedup -q -i '" + latin1 + "'" + out + " --stats-json " + Path("st")), 0) << err_;
  EXPECT_EQ(ReadFile(Path("kept")), ReadFile(Path("kept2")));
}

// Regression (a tester, 2026-12-02): --keep longest decided every document
// before writing, so with --strict or --max-bad-lines a document after the
// stopping line (never written) became the match of one before it, which
// was then in neither output; the counts exceeded the lines read.
TEST_F(CliTest, KeepLongestDecidesOnlyTheLinesBeforeAStop) {
  const std::string a = R"({"id":"a","text":"the quick brown fox jumps over the lazy dog"})";
  const std::string c = R"({"id":"c","text":"the quick brown fox jumps over the lazy dog and then runs far away"})";
  WriteFile(Path("in.jsonl"), a + "\n" + R"({"id":"bad","text":5})" + "\n[1]\n" + c + "\n");
  const std::string common = "dedup -q -i " + Path("in.jsonl") + " -o " + Path("kept") + " -d " + Path("dups") +
                             " --threshold 0.5 --stats-json " + Path("st") + " --keep ";
  for (const std::string keep : {"first", "longest"}) {
    for (const auto& [stop, code] : std::vector<std::pair<std::string, int>>{{" --strict", 3}, {" --max-bad-lines 1", 4}}) {
      SCOPED_TRACE(keep + stop);
      EXPECT_EQ(Run(common + keep + stop), code) << err_;
      EXPECT_EQ(ReadFile(Path("kept")), a + "\n");
      EXPECT_EQ(ReadFile(Path("dups")), "");
      const auto st = nlohmann::json::parse(ReadFile(Path("st")));
      EXPECT_EQ(st["documents"], 1);
      EXPECT_EQ(st["kept"], 1);
      EXPECT_EQ(st["duplicates"], 0);
    }
  }
  // Without a stop, the longer later text is kept (the test's premise).
  EXPECT_EQ(Run(common + "longest"), 0) << err_;
  EXPECT_EQ(ReadFile(Path("kept")), c + "\n");
  // --strict names the line even under -q.
  EXPECT_EQ(Run(common + "first --strict"), 3);
  EXPECT_NE(err_.find("(--strict): line 2"), std::string::npos) << err_;
}

TEST_F(CliTest, MaxTextBytesCutsAndCounts) {
  const std::string long_text(5000, 'w');
  WriteFile(Path("in.jsonl"), "{\"id\":1,\"text\":\"" + long_text + " tail one\"}\n{\"id\":2,\"text\":\"" +
                                  long_text + " other end\"}\n");
  // Cut to the shared prefix, the two texts are equal.
  ASSERT_EQ(Run("dedup -q -i " + Path("in.jsonl") + " -o " + Path("u") + " --max-text-bytes 4000 --stats-json " +
                Path("s")),
            0)
      << err_;
  auto stats = nlohmann::json::parse(ReadFile(Path("s")));
  EXPECT_EQ(stats["truncated_texts"], 2);
  EXPECT_EQ(stats["duplicates"], 1);
  EXPECT_EQ(Lines(ReadFile(Path("u")))[0], Lines(ReadFile(Path("in.jsonl")))[0]);  // the whole line is kept
  ASSERT_EQ(Run("dedup -q -i " + Path("in.jsonl") + " -o " + Path("u") + " --stats-json " + Path("s")), 0);
  EXPECT_EQ(nlohmann::json::parse(ReadFile(Path("s")))["truncated_texts"], 0);
}
