// dedup's second read of an input without parsing (tools/line_facts.h): for
// every line, what RecordReader::ReadLines plus LineFacts give must be what
// the parsing read gave (kind, truncation, error, id, line and number), for
// other batch sizes in the two reads; and an input whose lines changed in
// between must be refused, not written.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../tools/line_facts.h"

namespace neardup::cli {
namespace {

std::FILE* TempFileWith(const std::string& content) {
  std::FILE* f = std::tmpfile();
  std::fwrite(content.data(), 1, content.size(), f);
  std::rewind(f);
  return f;
}

// Every record of `content`, parsed, fed to facts (the first read).
std::vector<InputRecord> FirstRead(const std::string& content, const RecordReaderOptions& options, LineFacts* facts) {
  std::FILE* f = TempFileWith(content);
  RecordReader reader(f, options);
  std::vector<InputRecord> all, batch;
  while (reader.ReadBatch(7, 2, &batch).ok() && !batch.empty()) {
    for (const InputRecord& r : batch) facts->Add(r), all.push_back(r);
  }
  std::fclose(f);
  facts->EndInput();
  return all;
}

// The second read of `content`; *records gets what it gave, and the status
// is the first failure (or OK).
Status SecondRead(const std::string& content, const RecordReaderOptions& options, const std::vector<std::string>& ids,
                  uint64_t* document, LineFacts* facts, std::vector<InputRecord>* records) {
  std::FILE* f = TempFileWith(content);
  RecordReader reader(f, options);
  std::vector<InputRecord> batch;
  Status st;
  for (;;) {
    st = reader.ReadLines(5, &batch);
    if (st.ok()) st = facts->Apply(&batch, [&](uint64_t k) { return std::string_view(ids.at(k)); }, "in.jsonl");
    if (!st.ok() || batch.empty()) break;
    for (InputRecord& r : batch) *document += r.kind == InputRecord::Kind::kDocument, records->push_back(r);
  }
  std::fclose(f);
  return st.ok() ? facts->EndInput("in.jsonl") : st;
}

const char* kInput =
    R"({"id":"a1","text":"short"})" "\n"
    "\n"
    R"({"id":2,"text":"a text longer than the limit of sixteen bytes"})" "\n"
    R"({"id":3,"body":"no text"})" "\n"
    R"(not json)" "\n"
    "   \n"
    R"({"text":"\u00e9t\u00e9 \u00e9t\u00e9 \u00e9t\u00e9 \u00e9t\u00e9","id":[5]})" "\n"
    R"({"text":"caf\u00e9 caf\u00e9 caf\u00e9 caf\u00e9 caf\u00e9","id":"x"})" "\n";

TEST(LineFacts, TheSecondReadGivesWhatTheParseGave) {
  for (InputFormat format : {InputFormat::kJsonl, InputFormat::kLines}) {
    RecordReaderOptions options;
    options.format = format;
    options.max_text_bytes = 16;
    LineFacts facts;
    // Two inputs, the second one the first twice over.
    const std::vector<std::string> inputs = {kInput, std::string(kInput) + kInput};
    std::vector<InputRecord> first;
    std::vector<std::string> ids;
    for (const std::string& in : inputs) {
      for (const InputRecord& r : FirstRead(in, options, &facts)) {
        if (r.kind == InputRecord::Kind::kDocument) ids.push_back(r.id);
        first.push_back(r);
      }
    }
    std::vector<InputRecord> second;
    uint64_t documents = 0;
    for (const std::string& in : inputs) ASSERT_TRUE(SecondRead(in, options, ids, &documents, &facts, &second).ok());
    ASSERT_EQ(second.size(), first.size());
    EXPECT_EQ(documents, ids.size());
    int bad = 0, truncated = 0;
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(second[i].kind, first[i].kind) << i;
      EXPECT_EQ(second[i].truncated, first[i].truncated) << i;
      EXPECT_EQ(second[i].error, first[i].error) << i;
      if (first[i].kind == InputRecord::Kind::kDocument) {
        EXPECT_EQ(second[i].id, first[i].id) << i;
      }
      EXPECT_EQ(second[i].line, first[i].line) << i;
      EXPECT_EQ(second[i].line_number, first[i].line_number) << i;
      bad += first[i].kind == InputRecord::Kind::kBad, truncated += first[i].truncated;
    }
    if (format == InputFormat::kJsonl) {
      EXPECT_EQ(bad, 3 * 3);  // no text field, not JSON, an array id: in each copy
    }
    EXPECT_GT(truncated, 0);
  }
}

TEST(LineFacts, AnInputThatChangedBetweenTheReadsIsRefused) {
  const std::string in = kInput;
  const std::string longer = std::string(kInput).replace(in.find("short"), 5, "shorter");
  const std::string as_long = std::string(kInput).replace(in.find("short"), 5, "shirt");
  for (const std::string& changed : {in + "{\"id\":9,\"text\":\"one more\"}\n",  // a line more
                                     in.substr(0, in.find("not json")),          // lines fewer
                                     longer,                                     // as many, more bytes
                                     as_long}) {                                 // as many bytes, others
    LineFacts facts;
    std::vector<std::string> ids;
    for (const InputRecord& r : FirstRead(in, RecordReaderOptions{}, &facts)) {
      if (r.kind == InputRecord::Kind::kDocument) ids.push_back(r.id);
    }
    std::vector<InputRecord> second;
    uint64_t documents = 0;
    const Status st = SecondRead(changed, RecordReaderOptions{}, ids, &documents, &facts, &second);
    EXPECT_EQ(st.code(), Status::Code::kIOError) << st.ToString();
    EXPECT_NE(st.ToString().find("in.jsonl changed between"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace neardup::cli
