// The texts of a JSONL file of the repository (data/sample, data/natural),
// in order, for tests that decide real text.
#ifndef NEARDUP_TESTS_SAMPLE_TEXTS_H_
#define NEARDUP_TESTS_SAMPLE_TEXTS_H_

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "io/jsonl.h"

namespace neardup::testing {

inline std::vector<std::string> SampleTexts(const std::string& path = NEARDUP_SOURCE_DIR "/data/sample/docs.jsonl") {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr) << path;
  std::vector<std::string> texts;
  if (f == nullptr) return texts;
  RecordReader reader(f, RecordReaderOptions{});
  std::vector<InputRecord> batch;
  for (;;) {
    EXPECT_TRUE(reader.ReadBatch(1000, 2, &batch).ok());
    if (batch.empty()) break;
    for (const auto& r : batch) {
      EXPECT_EQ(r.kind, InputRecord::Kind::kDocument) << "line " << r.line_number << ": " << r.error;
      texts.emplace_back(r.text());
    }
  }
  std::fclose(f);
  return texts;
}

}  // namespace neardup::testing

#endif  // NEARDUP_TESTS_SAMPLE_TEXTS_H_
