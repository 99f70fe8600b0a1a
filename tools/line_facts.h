// What dedup's first pass (--decide join, --keep longest) learned of every
// input line, so that its write pass reads the lines again without parsing
// them: there the parse was about half of the pass's CPU, and most of what
// kept it on one core, for an answer the first pass already had.
//
// The first pass's view is the one that counts: a line's kind (document,
// bad, blank), whether its text was cut, a bad line's error, and each
// document's id (held by the caller, by document number; a bad line's id,
// which nothing reads, is not kept). The write pass checks that each input
// still holds the lines it held (their number, and a hash of their bytes
// chained line by line, XXH3: about 0.1 ns a byte) and fails if not: at
// the input's end, so the outputs written by then are of the changed
// lines, and the run's exit code says they are not to be used. (The
// parsing read it replaces checked nothing.)
//
// Thread-safety: none; each pass calls it from one thread at a time.
#ifndef NEARDUP_TOOLS_LINE_FACTS_H_
#define NEARDUP_TOOLS_LINE_FACTS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <xxhash.h>

#include "io/jsonl.h"
#include "neardup/util/status.h"

namespace neardup::cli {

class LineFacts {
 public:
  // First pass: the next line, parsed.
  void Add(const InputRecord& r) {
    lines_.push_back(static_cast<uint8_t>(static_cast<uint8_t>(r.kind) | (r.truncated ? kTruncated : 0)));
    if (r.kind == InputRecord::Kind::kBad) errors_.push_back(r.error);
    first_hash_ = Chain(first_hash_, r.line);
  }
  // First pass: the end of an input.
  void EndInput() { ends_.push_back(End{lines_.size(), first_hash_}); }

  // Write pass: fills in the kind, truncation, error and, for a document,
  // the id (id_of(k): the id of the run's k-th document) of records that
  // RecordReader::ReadLines read. kIOError when the input now holds more
  // lines than it did.
  template <typename IdOf>
  Status Apply(std::vector<InputRecord>* records, IdOf id_of, const std::string& name) {
    for (InputRecord& r : *records) {
      if (line_ >= InputEnd().lines) return Changed(name);
      const uint8_t fact = lines_[line_++];
      r.kind = static_cast<InputRecord::Kind>(fact & kKindMask);
      r.truncated = (fact & kTruncated) != 0;
      r.error.clear();
      r.id.clear();
      if (r.kind == InputRecord::Kind::kBad) r.error = errors_[error_++];
      if (r.kind == InputRecord::Kind::kDocument) r.id = id_of(document_++);
      second_hash_ = Chain(second_hash_, r.line);
    }
    return Status::OK();
  }

  // Write pass: the end of an input (read to its end). kIOError unless it
  // held the lines of the first pass.
  Status EndInput(const std::string& name) {
    if (line_ != InputEnd().lines || second_hash_ != InputEnd().hash) return Changed(name);
    ++input_;
    return Status::OK();
  }

 private:
  static constexpr uint8_t kKindMask = 3, kTruncated = 4;
  static_assert(static_cast<uint8_t>(InputRecord::Kind::kBlank) <= kKindMask);
  struct End {
    size_t lines = 0;   // lines_ of the inputs up to this one's end
    uint64_t hash = 0;  // Chain over their lines
  };
  static uint64_t Chain(uint64_t hash, std::string_view line) {
    return XXH3_64bits_withSeed(line.data(), line.size(), hash);
  }
  const End& InputEnd() const {
    static const End kNone;
    return input_ < ends_.size() ? ends_[input_] : kNone;
  }
  Status Changed(const std::string& name) const {
    return Status::IOError((name.empty() ? std::string("the input") : name) +
                           " changed between the run's two reads of it (other lines than the first read "
                           "saw): its outputs would not be those of its documents");
  }

  std::vector<uint8_t> lines_;       // per line: kind | kTruncated
  std::vector<std::string> errors_;  // the bad lines', in order
  std::vector<End> ends_;
  uint64_t first_hash_ = 0;
  // The write pass's place.
  size_t line_ = 0, error_ = 0, input_ = 0;
  uint64_t document_ = 0, second_hash_ = 0;
};

}  // namespace neardup::cli

#endif  // NEARDUP_TOOLS_LINE_FACTS_H_
