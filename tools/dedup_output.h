// What `neardup dedup` writes for each decided document, shared with the
// staged run's filter stage (tools/cmd_stage.cc), whose outputs must
// concatenate to exactly the single-process run's: the annotated record,
// the --duplicates line, and the raw ids of kept documents by sequence
// number.
#ifndef NEARDUP_TOOLS_DEDUP_OUTPUT_H_
#define NEARDUP_TOOLS_DEDUP_OUTPUT_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/dedup/dedup.h"

namespace neardup::cli {

// Raw ids of kept documents by sequence number (kept sequence numbers only
// grow, so a sorted vector + binary search; ids live in one arena).
class KeptIds {
 public:
  void Add(uint64_t sequence, std::string_view id) {
    sequences_.push_back(sequence);
    offsets_.push_back(arena_.size());
    arena_.append(id);
  }
  std::string_view Find(uint64_t sequence) const {
    const auto it = std::lower_bound(sequences_.begin(), sequences_.end(), sequence);
    if (it == sequences_.end() || *it != sequence) return {};
    const size_t i = static_cast<size_t>(it - sequences_.begin());
    const size_t end = i + 1 < offsets_.size() ? offsets_[i + 1] : arena_.size();
    return std::string_view(arena_).substr(offsets_[i], end - offsets_[i]);
  }

 private:
  std::vector<uint64_t> sequences_;
  std::vector<size_t> offsets_;
  std::string arena_;
};

// The line of a JSONL record with `field` added: {"kept": true}, or the
// duplicate's decision. The record parsed as a JSON object, so its last '}'
// closes it.
inline void WriteAnnotated(std::FILE* out, std::string_view line, const std::string& field, const DedupDecision& d,
                           std::string_view of) {
  size_t end = line.find_last_of('}');
  const size_t open = line.find('{');
  const bool empty = line.find_first_not_of(" \t\r\n", open + 1) == end;
  std::fwrite(line.data(), 1, end, out);
  const std::string key = nlohmann::json(field).dump();
  if (!d.duplicate) {
    std::fprintf(out, "%s%s: {\"kept\": true}}\n", empty ? "" : ", ", key.c_str());
    return;
  }
  std::fprintf(out,
               "%s%s: {\"kept\": false, \"duplicate_of\": %.*s, \"similarity\": %.4f, \"similarity_exact\": %s, "
               "\"distance\": %d, \"exact\": %s}}\n",
               empty ? "" : ", ", key.c_str(), static_cast<int>(of.size()), of.data(), d.similarity,
               d.similarity_exact ? "true" : "false", d.distance, d.exact ? "true" : "false");
}

// The --duplicates line of duplicate `id` of kept document `of` (raw ids).
inline void WriteDuplicateLine(std::FILE* out, std::string_view id, std::string_view of, const DedupDecision& d) {
  std::fprintf(out,
               "{\"id\": %.*s, \"duplicate_of\": %.*s, \"distance\": %d, \"exact\": %s, "
               "\"similarity\": %.4f, \"similarity_exact\": %s}\n",
               static_cast<int>(id.size()), id.data(), static_cast<int>(of.size()), of.data(), d.distance,
               d.exact ? "true" : "false", d.similarity, d.similarity_exact ? "true" : "false");
}

// The counts of --stats-json (dedup, stage decide): the decisions and the
// input's lines.
struct LineCounts {
  uint64_t files = 0, lines = 0, bad_lines = 0, blank_lines = 0, truncated_texts = 0;
};

template <typename Json>
void AddRunStats(const DedupStats& s, const LineCounts& c, Json* j) {
  (*j)["documents"] = s.documents;
  (*j)["kept"] = s.kept;
  (*j)["duplicates"] = s.duplicates();
  (*j)["exact_duplicates"] = s.exact_duplicates;
  (*j)["near_duplicates"] = s.near_duplicates;
  (*j)["duplicate_percent"] =
      s.documents ? 100.0 * static_cast<double>(s.duplicates()) / static_cast<double>(s.documents) : 0.0;
  (*j)["without_features"] = s.without_features;
  (*j)["invalid_utf8"] = s.invalid_utf8;
  (*j)["files"] = c.files;
  (*j)["lines"] = c.lines;
  (*j)["bad_lines"] = c.bad_lines;
  (*j)["blank_lines"] = c.blank_lines;
  (*j)["truncated_texts"] = c.truncated_texts;
}

}  // namespace neardup::cli

#endif  // NEARDUP_TOOLS_DEDUP_OUTPUT_H_
