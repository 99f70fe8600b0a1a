#include "io/jsonl.h"

#include <simdjson.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "neardup/util/parallel.h"

namespace neardup {
namespace {

namespace od = simdjson::ondemand;
using simdjson::error_code;

std::string_view StripTrailingWhitespace(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// True if `token` is a number by JSON's grammar (RFC 8259, section 6):
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool IsJsonNumber(std::string_view token) {
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < token.size() && token[i] >= '0' && token[i] <= '9') ++i;
    return i > start;
  };
  if (i < token.size() && token[i] == '-') ++i;
  if (i < token.size() && token[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < token.size() && token[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
    ++i;
    if (i < token.size() && (token[i] == '+' || token[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == token.size();
}

// Fully consumes (and so validates) one value. simdjson's max depth bounds the
// recursion.
error_code Validate(od::value value) {
  od::json_type type;
  if (auto err = value.type().get(type)) return err;
  switch (type) {
    case od::json_type::object: {
      od::object object;
      if (auto err = value.get_object().get(object)) return err;
      for (auto field_result : object) {
        od::field field;
        if (auto err = std::move(field_result).get(field)) return err;
        std::string_view key;
        if (auto err = field.unescaped_key().get(key)) return err;
        if (auto err = Validate(field.value())) return err;
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::array: {
      od::array array;
      if (auto err = value.get_array().get(array)) return err;
      for (auto element_result : array) {
        od::value element;
        if (auto err = std::move(element_result).get(element)) return err;
        if (auto err = Validate(element)) return err;
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::number: {
      double d;
      const error_code err = value.get_double().get(d);
      // simdjson refuses numbers a double cannot hold (1e400); JSON does not.
      return err && IsJsonNumber(StripTrailingWhitespace(value.raw_json_token())) ? simdjson::SUCCESS : err;
    }
    case od::json_type::string: {
      std::string_view s;
      return value.get_string().get(s);
    }
    case od::json_type::boolean: {
      bool b;
      return value.get_bool().get(b);
    }
    case od::json_type::null: {
      bool is_null;
      if (auto err = value.is_null().get(is_null)) return err;
      return is_null ? simdjson::SUCCESS : simdjson::N_ATOM_ERROR;
    }
  }
  return simdjson::TAPE_ERROR;
}

// Validates a whole document whose top-level value is not an object, so that
// e.g. `nonsense` is reported as invalid JSON rather than as a non-object.
error_code ValidateNonObjectDocument(od::document& doc, od::json_type type) {
  switch (type) {
    case od::json_type::array: {
      od::value value;
      if (auto err = doc.get_value().get(value)) return err;
      if (auto err = Validate(value)) return err;
      const char* trailing = nullptr;
      return doc.current_location().get(trailing) == simdjson::OUT_OF_BOUNDS ? simdjson::SUCCESS
                                                                               : simdjson::TRAILING_CONTENT;
    }
    case od::json_type::number: {
      double d;
      return doc.get_double().get(d);
    }
    case od::json_type::string: {
      std::string_view s;
      return doc.get_string().get(s);
    }
    case od::json_type::boolean: {
      bool b;
      return doc.get_bool().get(b);
    }
    case od::json_type::null: {
      bool is_null;
      if (auto err = doc.is_null().get(is_null)) return err;
      return is_null ? simdjson::SUCCESS : simdjson::N_ATOM_ERROR;
    }
    case od::json_type::object:
      break;
  }
  return simdjson::TAPE_ERROR;
}

std::string InvalidMessage(error_code err) {
  return err == simdjson::UTF8_ERROR ? "invalid UTF-8" : "invalid JSON";
}

}  // namespace

struct JsonlParser::Impl {
  od::parser parser;
  std::vector<char> buffer;  // line copy + SIMDJSON_PADDING
};

JsonlParser::JsonlParser(std::string id_field, std::string text_field)
    : id_field_(std::move(id_field)), text_field_(std::move(text_field)), impl_(new Impl) {}
JsonlParser::~JsonlParser() = default;
JsonlParser::JsonlParser(JsonlParser&&) noexcept = default;
JsonlParser& JsonlParser::operator=(JsonlParser&&) noexcept = default;

bool JsonlParser::Parse(std::string_view line, JsonlRecord* out, std::string* error) {
  const bool ok = ParseImpl(line, out, error);
  // simdjson sizes its scratch to the longest document seen (several bytes
  // per input byte) and parsers are pooled: after a huge line, start over.
  if (line.size() > (size_t{1} << 20)) {
    impl_->buffer = std::vector<char>();
    impl_->parser = od::parser();
  }
  return ok;
}

bool JsonlParser::ParseImpl(std::string_view line, JsonlRecord* out, std::string* error) {
  out->id.clear();
  out->text.clear();
  auto& buffer = impl_->buffer;
  const size_t needed = line.size() + simdjson::SIMDJSON_PADDING;
  if (buffer.size() < needed) buffer.resize(std::max(needed, buffer.size() * 2));
  if (!line.empty()) std::memcpy(buffer.data(), line.data(), line.size());
  std::memset(buffer.data() + line.size(), 0, simdjson::SIMDJSON_PADDING);

  od::document doc;
  if (auto err = impl_->parser.iterate(buffer.data(), line.size(), buffer.size()).get(doc)) {
    *error = InvalidMessage(err);
    return false;
  }
  od::json_type top;
  if (auto err = doc.type().get(top)) {
    *error = InvalidMessage(err);
    return false;
  }
  if (top != od::json_type::object) {
    const error_code err = ValidateNonObjectDocument(doc, top);
    *error = err ? InvalidMessage(err) : "not a JSON object";
    return false;
  }
  od::object object;
  if (auto err = doc.get_object().get(object)) {
    *error = InvalidMessage(err);
    return false;
  }

  enum class State { kMissing, kOk, kBadType };
  State id_state = id_field_.empty() ? State::kOk : State::kMissing;
  State text_state = State::kMissing;
  for (auto field_result : object) {
    od::field field;
    std::string_view key;
    error_code err = std::move(field_result).get(field);
    if (!err) err = field.unescaped_key().get(key);
    if (err) {
      *error = InvalidMessage(err);
      return false;
    }
    const bool is_id = !id_field_.empty() && key == id_field_;
    const bool is_text = key == text_field_;
    od::value value = field.value();
    if (!is_id && !is_text) {
      if (auto verr = Validate(value)) {
        *error = InvalidMessage(verr);
        return false;
      }
      continue;
    }
    od::json_type type;
    if (auto terr = value.type().get(type)) {
      *error = InvalidMessage(terr);
      return false;
    }
    if (is_id) {
      if (type == od::json_type::string || type == od::json_type::number) {
        out->id.assign(StripTrailingWhitespace(value.raw_json_token()));
        id_state = State::kOk;
      } else {
        id_state = State::kBadType;
      }
    }
    if (type == od::json_type::string) {
      std::string_view s;
      if (auto serr = value.get_string().get(s)) {
        *error = InvalidMessage(serr);
        return false;
      }
      if (is_text) {
        out->text.assign(s);
        text_state = State::kOk;
      }
    } else {
      if (auto verr = Validate(value)) {
        *error = InvalidMessage(verr);
        return false;
      }
      if (is_text) text_state = State::kBadType;
    }
  }
  // Nothing may follow the object: at the end, current_location() reports
  // OUT_OF_BOUNDS.
  const char* trailing = nullptr;
  if (doc.current_location().get(trailing) != simdjson::OUT_OF_BOUNDS) {
    *error = "invalid JSON";
    return false;
  }
  if (text_state == State::kMissing) {
    *error = "missing field \"" + text_field_ + "\"";
    return false;
  }
  if (text_state == State::kBadType) {
    *error = "field \"" + text_field_ + "\" is not a string";
    return false;
  }
  if (id_state == State::kMissing) {
    *error = "missing field \"" + id_field_ + "\"";
    return false;
  }
  if (id_state == State::kBadType) {
    *error = "field \"" + id_field_ + "\" must be a string or number";
    return false;
  }
  return true;
}

bool IsBlankLine(std::string_view line) { return StripTrailingWhitespace(line).empty(); }

// ---- LineReader ------------------------------------------------------------

namespace {
// The line buffer's usual size; it grows for a longer line and shrinks back
// afterwards, so one long line does not pin its memory for the whole run.
constexpr size_t kLineBufferSize = size_t{1} << 16;
}  // namespace

LineReader::LineReader(std::FILE* in)
    : owned_(InputStream::FromFile(in, "input")), in_(owned_.get()), buf_(kLineBufferSize) {}
LineReader::LineReader(InputStream* in) : in_(in), buf_(kLineBufferSize) {}

bool LineReader::Fill() {
  if (eof_) return false;
  if (pos_ > 0) {  // keep the unfinished line at the front
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
  }
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
  size_t n = 0;
  status_ = in_->Read(buf_.data() + end_, buf_.size() - end_, &n);
  end_ += n;
  if (n == 0) {
    eof_ = true;
    return false;
  }
  return true;
}

// After a long line, gives the grown buffer back once what is pending fits.
void LineReader::MaybeShrink() {
  if (buf_.size() <= kLineBufferSize || end_ - pos_ > kLineBufferSize / 2) return;
  std::vector<char> small(kLineBufferSize);
  std::memcpy(small.data(), buf_.data() + pos_, end_ - pos_);
  end_ -= pos_;
  pos_ = 0;
  buf_.swap(small);
}

// A UTF-8 byte order mark before a file's first line is not text (RFC 8259
// lets a JSON reader ignore it; editors on Windows write one).
namespace {
void DropByteOrderMark(std::string* line) {
  if (line->size() >= 3 && line->compare(0, 3, "\xEF\xBB\xBF") == 0) line->erase(0, 3);
}
}  // namespace

bool LineReader::Next(std::string* line) {
  MaybeShrink();
  size_t scanned = pos_;
  for (;;) {
    const char* nl = static_cast<const char*>(std::memchr(buf_.data() + scanned, '\n', end_ - scanned));
    if (nl != nullptr) {
      const size_t nl_pos = static_cast<size_t>(nl - buf_.data());
      line->assign(buf_.data() + pos_, nl_pos - pos_);
      pos_ = nl_pos + 1;
      if (++line_number_ == 1) DropByteOrderMark(line);
      return true;
    }
    const size_t scanned_len = end_ - pos_;
    if (!Fill()) break;
    scanned = pos_ + scanned_len;  // Fill() moved the pending bytes to pos_
  }
  if (!status_.ok() || pos_ == end_) return false;
  line->assign(buf_.data() + pos_, end_ - pos_);  // last line without '\n'
  pos_ = end_;
  if (++line_number_ == 1) DropByteOrderMark(line);
  return true;
}

// ---- RecordReader ----------------------------------------------------------

RecordReader::RecordReader(std::FILE* in, RecordReaderOptions options)
    : options_(std::move(options)), lines_(in) {}
RecordReader::RecordReader(std::unique_ptr<InputStream> in, RecordReaderOptions options)
    : options_(std::move(options)), stream_(std::move(in)), lines_(stream_.get()) {}
RecordReader::~RecordReader() = default;

std::unique_ptr<JsonlParser> RecordReader::AcquireParser() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!parsers_.empty()) {
      auto parser = std::move(parsers_.back());
      parsers_.pop_back();
      return parser;
    }
  }
  return std::make_unique<JsonlParser>(options_.id_field, options_.text_field);
}

void RecordReader::ReleaseParser(std::unique_ptr<JsonlParser> parser) {
  std::lock_guard<std::mutex> lock(mu_);
  parsers_.push_back(std::move(parser));
}

size_t Utf8PrefixLength(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  size_t n = max_bytes;
  // Back over continuation bytes (10xxxxxx) to the start of the sequence
  // that crosses the limit; at most 3 (more means invalid UTF-8: cut anyway).
  for (int i = 0; i < 3 && n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80; ++i) --n;
  return n;
}

void RecordReader::CutText(InputRecord* r) const {
  const size_t limit = options_.max_text_bytes == 0 ? SIZE_MAX : options_.max_text_bytes;
  if (r->text_is_line) {
    r->line_text_size = Utf8PrefixLength(r->line, limit);
    r->truncated = r->line_text_size < r->line.size();
    return;
  }
  const size_t n = Utf8PrefixLength(r->parsed_text, limit);
  r->truncated = n < r->parsed_text.size();
  if (r->truncated) {
    r->parsed_text.resize(n);
    r->parsed_text.shrink_to_fit();  // the rest would stay allocated for the batch
  }
}

// Records reuse their strings' capacity across batches, but not a huge one.
static void ReleaseIfHuge(std::string* s) {
  if (s->capacity() > (size_t{1} << 20)) std::string().swap(*s);
}

void RecordReader::ParseLines(size_t begin, size_t end, std::vector<InputRecord>* batch) {
  auto parser = AcquireParser();
  JsonlRecord record;
  for (size_t i = begin; i < end; ++i) {
    InputRecord& r = (*batch)[i];
    r.text_is_line = false;
    r.truncated = false;
    r.error.clear();
    if (IsBlankLine(r.line)) {
      r.kind = InputRecord::Kind::kBlank;
      r.id.clear();
      r.parsed_text.clear();
      continue;
    }
    record.id.swap(r.id);
    record.text.swap(r.parsed_text);
    const bool ok = parser->Parse(r.line, &record, &r.error);
    r.id.swap(record.id);
    r.parsed_text.swap(record.text);
    r.kind = ok ? InputRecord::Kind::kDocument : InputRecord::Kind::kBad;
    if (ok && options_.id_field.empty()) r.id = LineId(r.line_number);
    if (ok) CutText(&r);
  }
  ReleaseParser(std::move(parser));
}

std::string RecordReader::LineId(uint64_t line_number) const {
  if (options_.line_id_prefix.empty()) return std::to_string(line_number);
  return options_.line_id_prefix + std::to_string(line_number) + '"';
}

Status RecordReader::ReadLines(size_t max_lines, std::vector<InputRecord>* batch) {
  if (max_lines == 0) max_lines = 1;
  if (batch->size() < max_lines) batch->resize(max_lines);
  size_t n = 0;
  for (; n < max_lines; ++n) {
    InputRecord& r = (*batch)[n];
    ReleaseIfHuge(&r.line);
    ReleaseIfHuge(&r.parsed_text);
    if (!lines_.Next(&r.line)) break;
    r.line_number = lines_.line_number();
  }
  batch->resize(n);
  return lines_.status();
}

Status RecordReader::ReadBatch(size_t max_lines, int threads, std::vector<InputRecord>* batch) {
  NEARDUP_RETURN_IF_ERROR(ReadLines(max_lines, batch));
  const size_t n = batch->size();
  if (options_.format == InputFormat::kLines) {
    for (auto& r : *batch) {
      r.kind = InputRecord::Kind::kDocument;
      r.id = LineId(r.line_number);
      r.error.clear();
      r.parsed_text.clear();
      r.text_is_line = true;
      CutText(&r);
    }
    return Status::OK();
  }
  ParallelFor(n, threads, [&](size_t begin, size_t end) { ParseLines(begin, end, batch); });
  return Status::OK();
}

Result<InputFormat> ParseInputFormat(std::string_view name) {
  if (name == "jsonl") return InputFormat::kJsonl;
  if (name == "lines") return InputFormat::kLines;
  return Status::InvalidArgument("unknown input format \"" + std::string(name) +
                                 "\" (expected jsonl or lines)");
}

}  // namespace neardup
