// Reading documents from JSONL (one JSON object per line) or plain lines.
//
// JSONL rules (docs/cli.md, "Input"):
//  * Each line must be one JSON object; the whole line is validated (every
//    value, not just the two fields read) and nothing may follow the object.
//  * The text field must be a string (its unescaped UTF-8 is the text).
//  * The id field must be a string or a number; it is kept as its raw JSON
//    token exactly as written (`"a1"`, `42`, `4.20e1`, `"\u00e9"`), so it can
//    be echoed without re-encoding. With an empty id field name no id is read.
//  * Other fields are ignored (but validated). When a field occurs more than
//    once the last occurrence wins.
//  * Invalid UTF-8 anywhere in the line makes the line bad ("invalid UTF-8"):
//    JSON text must be UTF-8, and simdjson validates it before parsing.
//  * A line that is empty or only whitespace is blank: skipped silently.
//
// Errors are one-line messages: "invalid JSON", "invalid UTF-8",
// "not a JSON object", "missing field \"text\"", "field \"text\" is not a
// string", "missing field \"id\"", "field \"id\" must be a string or number"
// (with the configured field names).
//
// Thread-safety: a JsonlParser holds scratch buffers; use one per thread.
// A RecordReader is not thread-safe (it uses its own worker threads).
#ifndef NEARDUP_JSONL_H_
#define NEARDUP_JSONL_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "io/input_stream.h"
#include "neardup/util/status.h"

namespace neardup {

struct JsonlRecord {
  std::string id;    // raw JSON token of the id (empty when no id field is read)
  std::string text;  // unescaped UTF-8
};

class JsonlParser {
 public:
  // id_field may be empty: the id is then not read (and not required).
  JsonlParser(std::string id_field, std::string text_field);
  ~JsonlParser();
  JsonlParser(JsonlParser&&) noexcept;
  JsonlParser& operator=(JsonlParser&&) noexcept;

  // Parses one line (without its '\n'; a trailing '\r' is whitespace). On
  // success fills *out and returns true; otherwise sets *error and returns
  // false. Never crashes on any input bytes.
  bool Parse(std::string_view line, JsonlRecord* out, std::string* error);

  const std::string& id_field() const { return id_field_; }
  const std::string& text_field() const { return text_field_; }

 private:
  bool ParseImpl(std::string_view line, JsonlRecord* out, std::string* error);
  struct Impl;
  std::string id_field_;
  std::string text_field_;
  std::unique_ptr<Impl> impl_;
};

// True if the line is empty or only JSON whitespace (space, \t, \r, \n).
bool IsBlankLine(std::string_view line);

// Splits a stream into lines ('\n'-terminated; the last line may lack it).
// gzip/zstd data is decompressed (io/input_stream.h). Memory: one buffer
// holding the current line, shrunk back after a long line, plus the
// caller's copy of the line.
class LineReader {
 public:
  explicit LineReader(std::FILE* in);       // not owned
  explicit LineReader(InputStream* in);     // not owned
  // Replaces *line with the next line, without its '\n'. False at end of
  // input or on a read error (see status()).
  bool Next(std::string* line);
  // 1-based number of the last line returned.
  uint64_t line_number() const { return line_number_; }
  Status status() const { return status_; }

 private:
  bool Fill();
  void MaybeShrink();
  std::unique_ptr<InputStream> owned_;  // with the FILE* constructor
  InputStream* in_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
  uint64_t line_number_ = 0;
  Status status_;
};

enum class InputFormat : uint8_t {
  kJsonl,  // one JSON object per line
  kLines,  // each line is a text; its id is the 1-based line number
};

struct InputRecord {
  enum class Kind : uint8_t { kDocument, kBad, kBlank };
  Kind kind = Kind::kDocument;
  uint64_t line_number = 0;  // 1-based
  std::string line;          // raw line bytes without '\n'
  std::string id;            // raw JSON id token (jsonl) or the line number (lines)
  std::string error;         // kBad only
  // The document text: the unescaped field (jsonl) or the line (lines), cut
  // to RecordReaderOptions::max_text_bytes.
  std::string_view text() const {
    return text_is_line ? std::string_view(line).substr(0, line_text_size) : std::string_view(parsed_text);
  }
  bool truncated = false;  // text() is a prefix of the document's text

  std::string parsed_text;
  bool text_is_line = false;
  size_t line_text_size = 0;  // text_is_line only
};

// The length of the longest prefix of `text` of at most max_bytes bytes that
// does not end inside a UTF-8 sequence.
size_t Utf8PrefixLength(std::string_view text, size_t max_bytes);

struct RecordReaderOptions {
  InputFormat format = InputFormat::kJsonl;
  // Empty: JSONL ids are not read; every record's id is its line number.
  std::string id_field = "id";
  std::string text_field = "text";
  // Texts longer than this are cut (at a UTF-8 boundary) before anyone
  // analyzes them, so one huge document cannot take the memory of the run;
  // InputRecord::truncated tells. 0: no limit.
  size_t max_text_bytes = size_t{1} << 20;
  // Where a record's id is its line number (kLines, or JSONL with an empty
  // id_field): empty, the number itself; otherwise the id is this prefix,
  // the number and '"': the start of a JSON string such as "\"a.txt:" (an
  // escaped one), so that the ids of a run over several files stay
  // distinct (tools/commands.h ToReaderOptions).
  std::string line_id_prefix;
};

// Reads lines in batches and parses them in parallel.
class RecordReader {
 public:
  RecordReader(std::FILE* in, RecordReaderOptions options);  // `in` not owned
  RecordReader(std::unique_ptr<InputStream> in, RecordReaderOptions options);
  ~RecordReader();

  // Replaces *batch with the next (up to) max_lines lines, parsed on up to
  // `threads` threads; results do not depend on `threads`. An empty batch
  // means end of input. kIOError on a read error.
  Status ReadBatch(size_t max_lines, int threads, std::vector<InputRecord>* batch);

  // ReadBatch without the parse: only line and line_number are set, the
  // other fields keep what they held (for a second pass over an input whose
  // lines were parsed once already, tools/cmd_dedup.cc). The same lines, cut
  // the same way, as ReadBatch gives.
  Status ReadLines(size_t max_lines, std::vector<InputRecord>* batch);

  uint64_t lines_read() const { return lines_.line_number(); }
  // Bytes read from the input file so far (0 for the FILE* constructor).
  uint64_t input_bytes() const { return stream_ ? stream_->raw_bytes() : 0; }

 private:
  std::unique_ptr<JsonlParser> AcquireParser();
  void ReleaseParser(std::unique_ptr<JsonlParser> parser);

  void ParseLines(size_t begin, size_t end, std::vector<InputRecord>* batch);
  std::string LineId(uint64_t line_number) const;
  void CutText(InputRecord* r) const;

  RecordReaderOptions options_;
  std::unique_ptr<InputStream> stream_;  // may be null (FILE* constructor)
  LineReader lines_;
  std::mutex mu_;
  std::vector<std::unique_ptr<JsonlParser>> parsers_;  // idle, guarded by mu_
};

// Parses "jsonl" / "lines".
Result<InputFormat> ParseInputFormat(std::string_view name);

}  // namespace neardup

#endif  // NEARDUP_JSONL_H_
