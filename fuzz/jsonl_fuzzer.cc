// libFuzzer target for the JSONL record parser and the line splitter
// (src/jsonl.h): any bytes must be handled without a crash, a sanitizer
// report or a hang, and the results must obey the parser's contract.
//
// Build (clang, with the library instrumented for coverage: scripts/build.sh asan):
//   ./build-asan/jsonl_fuzzer -max_total_time=60 -max_len=4096
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "io/jsonl.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

// The contract of JsonlParser::Parse on one line.
void ParseOne(neardup::JsonlParser& parser, std::string_view line, bool with_id) {
  neardup::JsonlRecord record;
  std::string error;
  const bool ok = parser.Parse(line, &record, &error);
  if (ok) {
    if (with_id) {
      // A raw JSON string or number token, with no surrounding whitespace.
      Check(!record.id.empty());
      const char c = record.id.front();
      Check(c == '"' || c == '-' || (c >= '0' && c <= '9'));
      const char b = record.id.back();
      Check(b != ' ' && b != '\t' && b != '\r' && b != '\n');
      Check(record.id.size() <= line.size());
    } else {
      Check(record.id.empty());
    }
    // Unescaping never grows a string.
    Check(record.text.size() <= line.size());
  } else {
    Check(!error.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Reused across inputs, as the reader does: stale state must not leak.
  static neardup::JsonlParser with_id("id", "text");
  static neardup::JsonlParser without_id("", "text");
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  ParseOne(with_id, input, true);
  ParseOne(without_id, input, false);

  // The same bytes as a JSONL stream, through the line splitter and the
  // batch reader (one and two threads must agree).
  // Bytes that begin with a gzip or zstd magic are decompressed; only those
  // may fail to read (truncated or corrupt stream), and then the same way on
  // any thread count.
  const bool compressed = input.starts_with("\x1f\x8b") || input.starts_with("\x28\xb5\x2f\xfd");
  std::vector<std::vector<neardup::InputRecord>> results;
  std::vector<std::string> errors;
  for (int threads : {1, 2}) {
    std::FILE* f = fmemopen(const_cast<uint8_t*>(data), size, "rb");
    if (f == nullptr) return 0;  // fmemopen refuses size 0 on some libcs
    neardup::RecordReader reader(f, neardup::RecordReaderOptions{});
    std::vector<neardup::InputRecord> all, batch;
    std::string error;
    for (;;) {
      const neardup::Status status = reader.ReadBatch(threads == 1 ? 3 : 64, threads, &batch);
      if (!status.ok()) {
        Check(compressed && !status.message().empty());
        error = status.message();
        break;
      }
      if (batch.empty()) break;
      all.insert(all.end(), batch.begin(), batch.end());
    }
    std::fclose(f);
    uint64_t expected_line = 1;
    for (const auto& r : all) Check(r.line_number == expected_line++);
    results.push_back(std::move(all));
    errors.push_back(std::move(error));
  }
  Check(errors[0] == errors[1]);
  // A failed read may stop at a different batch boundary; the lines both
  // runs returned must still agree.
  if (!errors[0].empty()) {
    const size_t n = std::min(results[0].size(), results[1].size());
    results[0].resize(n);
    results[1].resize(n);
  }
  Check(results[0].size() == results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) {
    const auto& a = results[0][i];
    const auto& b = results[1][i];
    Check(a.kind == b.kind && a.id == b.id && a.error == b.error && a.text() == b.text());
  }
  return 0;
}
