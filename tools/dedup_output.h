// What `neardup dedup` writes for each decided document, shared with the
// staged run's decide and filter stages (tools/cmd_stage.cc), whose outputs
// must concatenate to exactly the single-process run's: the annotated
// record, the --duplicates line, the raw ids of kept documents by sequence
// number, the --output-shards names, the --clusters lines, the
// --load-index / --save-index directories, and the --keep longest order.
#ifndef NEARDUP_TOOLS_DEDUP_OUTPUT_H_
#define NEARDUP_TOOLS_DEDUP_OUTPUT_H_

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "kept_ids.h"
#include "neardup/dedup/dedup.h"
#include "neardup/dedup/kept_file.h"

namespace neardup::cli {

// --output with each "{shard}" replaced by the shard's number (5 digits),
// when there are several (--output-shards). Records go round robin over the
// shards in output order: record w (0-based, of the whole run) to shard
// w % shards.
inline std::string ShardPath(const std::string& output, int shard, int shards) {
  if (shards == 1) return output;
  char n[16];
  std::snprintf(n, sizeof n, "%05d", shard);
  std::string p = output;
  for (size_t at; (at = p.find("{shard}")) != std::string::npos;) p.replace(at, 7, n);
  return p;
}

// The files a run writes: `others` (empty = not given) and the output's
// shards (ShardPath).
inline std::vector<std::string> OutputPaths(std::vector<std::string> others, const std::string& output, int shards) {
  for (int i = 0; i < shards; ++i) others.push_back(ShardPath(output, i, shards));
  return others;
}

// The shards are all open at once, beside the run's other files (an input,
// --duplicates, --rejects, checkpoint and spill files): checked before any is
// created, rather than failing halfway with empty shards left behind.
inline Status CheckOpenFileLimit(int shards) {
  constexpr rlim_t kOtherFiles = 64;
  const rlim_t needed = static_cast<rlim_t>(shards) + kOtherFiles;
  struct rlimit limit {};
  if (shards == 1 || ::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
      needed <= limit.rlim_cur) {
    return Status::OK();
  }
  return Status::InvalidArgument("--output-shards " + std::to_string(shards) + " needs " + std::to_string(needed) +
                                 " open files, above the open-file limit of " + std::to_string(limit.rlim_cur) +
                                 " (ulimit -n): raise it or write fewer shards");
}

inline Status CheckShardedOutput(const std::string& output, int shards) {
  if (shards > 1 && output.find("{shard}") == std::string::npos) {
    return Status::InvalidArgument("--output-shards " + std::to_string(shards) +
                                   " needs \"{shard}\" in --output (e.g. kept/part-{shard}.jsonl.zst)");
  }
  if (shards == 1 && output.find("{shard}") != std::string::npos) {
    return Status::InvalidArgument("--output " + output + " has \"{shard}\" but --output-shards is 1: give the "
                                   "number of shards, or a name without it");
  }
  return CheckOpenFileLimit(shards);
}

// Duplicates grouped by the kept document, for --clusters.
class Clusters {
 public:
  void Add(uint64_t kept, std::string_view id) {
    members_.push_back(Member{kept, arena_.size(), id.size()});
    arena_.append(id);
  }
  // One line per kept document with duplicates, in the kept documents' input
  // order; members in input order.
  void Write(std::FILE* out, const KeptIds& kept_ids) {
    std::stable_sort(members_.begin(), members_.end(),
                     [](const Member& a, const Member& b) { return a.kept < b.kept; });
    for (size_t i = 0; i < members_.size();) {
      size_t j = i;
      while (j < members_.size() && members_[j].kept == members_[i].kept) ++j;
      const std::string_view kept = kept_ids.Find(members_[i].kept);
      std::fprintf(out, "{\"kept\": %.*s, \"size\": %zu, \"members\": [", static_cast<int>(kept.size()),
                   kept.data(), j - i + 1);
      for (size_t m = i; m < j; ++m) {
        if (m > i) std::fputs(", ", out);
        std::fwrite(arena_.data() + members_[m].offset, 1, members_[m].size, out);
      }
      std::fputs("]}\n", out);
      i = j;
    }
  }

 private:
  struct Member {
    uint64_t kept;
    size_t offset, size;
  };
  std::vector<Member> members_;
  std::string arena_;
};

// ---- --load-index / --save-index (docs/index-format.md) ----------------------

// The kept-document file and its description inside an index directory.
inline std::string KeptFilePath(const std::string& dir) { return (std::filesystem::path(dir) / "kept.ndk").string(); }
inline std::string ManifestPath(const std::string& dir) {
  return (std::filesystem::path(dir) / "manifest.json").string();
}

inline KeptFileScheme SchemeOf(const Deduplicator& dedup, uint64_t max_text_bytes) {
  return {dedup.scheme_id(), static_cast<uint32_t>(dedup.options().recheck.shingle_size), max_text_bytes};
}

// What a checkpoint records of its --load-index directories: each one's
// kept-document file's length and last 16 bytes (its record count and the
// XXH3 of the whole file), so that a resume notices another index of as
// many documents.
inline nlohmann::json LoadedIndexIdentity(const std::vector<std::string>& dirs) {
  nlohmann::json j = nlohmann::json::array();
  for (const std::string& dir : dirs) {
    const std::string path = KeptFilePath(dir);
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path, ec);
    unsigned char tail[16] = {};
    if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
      if (!ec && size >= 16 && std::fseek(f, static_cast<long>(size - 16), SEEK_SET) == 0) {
        if (std::fread(tail, 1, 16, f) != 16) std::fill(tail, tail + 16, 0);
      }
      std::fclose(f);
    }
    char hex[33];
    for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", tail[i]);
    j.push_back({{"bytes", ec ? 0 : size}, {"tail", hex}});
  }
  return j;
}

// A run must not save into a directory it loads, nor load one twice.
inline Status CheckSaveIsNotLoaded(const std::vector<std::string>& load_index, const std::string& save_index) {
  std::error_code ec;
  for (size_t i = 0; i < load_index.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (std::filesystem::weakly_canonical(load_index[i], ec) == std::filesystem::weakly_canonical(load_index[j], ec)) {
        return Status::InvalidArgument("--load-index " + load_index[i] + " is given twice (" + load_index[j] +
                                       "): its documents would be loaded twice");
      }
    }
  }
  if (save_index.empty()) return Status::OK();
  for (const std::string& dir : load_index) {
    if (std::filesystem::weakly_canonical(dir, ec) == std::filesystem::weakly_canonical(save_index, ec)) {
      return Status::InvalidArgument("--save-index " + save_index +
                                     " is also a --load-index: it would then hold only this run's kept "
                                     "documents; save each run to its own directory");
    }
  }
  return Status::OK();
}

// Adds the kept documents saved in `dir` by an earlier run to `dedup`, their
// ids to `kept_ids` at the sequence numbers they get: later documents are
// judged against them, and a duplicate of one names its id. Returns their
// number.
inline Result<uint64_t> LoadKeptIndex(const std::string& dir, Deduplicator& dedup, KeptIds& kept_ids,
                                      uint64_t max_text_bytes) {
  return ReadKeptFile(KeptFilePath(dir), SchemeOf(dedup, max_text_bytes), [&](uint64_t, std::string_view id, const DocSignature& sig) {
    kept_ids.Add(dedup.next_sequence(), id);
    return dedup.AddKept(sig);
  });
}

// Creates `dir` and its kept-document file (under a temporary name until
// FinishSavedIndex).
inline Result<std::unique_ptr<KeptFileWriter>> CreateSavedIndex(const std::string& dir, const Deduplicator& dedup,
                                                                uint64_t max_text_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create --save-index directory " + dir + ": " + ec.message());
  return KeptFileWriter::Create(KeptFilePath(dir), SchemeOf(dedup, max_text_bytes));
}

// The kept-document file under its name, then the manifest that describes
// it (for people and scripts; loading reads only the file).
inline Status FinishSavedIndex(std::unique_ptr<KeptFileWriter> saved, const std::string& dir,
                               const Deduplicator& dedup, const std::vector<std::string>& inputs, uint64_t loaded,
                               const std::vector<std::string>& loaded_from) {
  const uint64_t documents = saved->documents();
  NEARDUP_RETURN_IF_ERROR(saved->Finish());
  const DedupOptions& o = dedup.options();
  nlohmann::json m;
  m["format"] = "neardup kept documents";
  m["version"] = 1;
  m["file"] = "kept.ndk";
  m["documents"] = documents;
  m["scheme"] = dedup.fingerprinter().scheme_name();
  m["scheme_id"] = FingerprintToHex(dedup.scheme_id());
  m["shingle_size"] = o.recheck.shingle_size;
  m["k"] = o.k;
  m["threshold"] = o.recheck.threshold;
  m["recheck"] = o.recheck.enabled;
  m["inputs"] = inputs;
  m["loaded_documents"] = loaded;
  m["loaded_from"] = loaded_from;
  const std::string text = m.dump(2) + "\n";
  const std::string path = ManifestPath(dir), tmp = path + ".tmp";
  NEARDUP_ASSIGN_OR_RETURN(FilePtr file, OpenOutput(tmp));
  std::fwrite(text.data(), 1, text.size(), file.get());
  NEARDUP_RETURN_IF_ERROR(FinishOutput(std::move(file), tmp));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::IOError("cannot rename " + tmp + " to " + path);
  return Status::OK();
}

// The flags `dedup` and `stage decide` share, in one wording.
inline void AddDecisionOutputFlags(CLI::App* cmd, std::vector<std::string>* load_index, std::string* save_index,
                                   std::string* clusters, std::string* keep) {
  cmd->add_option("--keep", *keep,
                  "Which document of a group of near-duplicates is kept: first (input order) or longest "
                  "(decided from the longest text to the shortest, ties in input order; reads the inputs, or "
                  "the signature shards, twice and holds every document's signature)")
      ->check(CLI::IsMember({"first", "longest"}));
  cmd->add_option("--load-index", *load_index,
                  "Also deduplicate against the kept documents an earlier run saved in this directory "
                  "(--save-index); repeatable, loaded in the order given, before any input. A duplicate of one "
                  "names its id. Needs the same fingerprint flags and --shingle-size")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--save-index", *save_index,
                  "Save this run's kept documents (ids and signatures, checksummed) to this directory, for a "
                  "later run's --load-index; written only when the run (in a staged run, decide) succeeds");
  cmd->add_option("--clusters", *clusters, "Groups of size >= 2 as JSONL: {\"kept\", \"size\", \"members\"}");
}

// ---- --keep longest -------------------------------------------------------------

// Decides the first `count` documents of `sigs` (the run's documents in
// input order, after `loaded` documents of --load-index; the rest, after a
// line that stops the run, are left undecided) from the longest text to the shortest,
// ties in input order: each is kept unless a kept one matches it. Returns
// the decisions in input order; duplicate_of names documents by input order
// (loaded + index), as the outputs do.
inline Result<std::vector<DedupDecision>> DecideLongestFirst(Deduplicator& dedup, const std::vector<DocSignature>& sigs,
                                                             uint64_t loaded, size_t count = SIZE_MAX) {
  std::vector<uint64_t> order(std::min(count, sigs.size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint64_t a, uint64_t b) { return sigs[a].num_chars > sigs[b].num_chars; });
  std::vector<DedupDecision> decisions(sigs.size());
  for (uint64_t i : order) {
    NEARDUP_ASSIGN_OR_RETURN(DedupDecision d, dedup.ProcessSignature(sigs[i]));
    // The deduplicator numbers documents in decision order.
    if (d.duplicate && d.duplicate_of >= loaded) d.duplicate_of = loaded + order[d.duplicate_of - loaded];
    decisions[i] = d;
  }
  return decisions;
}

// ---- --annotate ------------------------------------------------------------

// The end of the JSON value that starts at line[i]. The line parsed as JSON,
// so brackets balance outside strings.
inline size_t JsonValueEnd(std::string_view line, size_t i) {
  int depth = 0;
  for (; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      for (++i; line[i] != '"'; ++i) i += line[i] == '\\';
      if (depth == 0) return i + 1;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i;  // the end of a scalar that was the last member
      if (--depth == 0) return i + 1;
    } else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n')) {
      return i;  // the end of a number, true, false or null
    }
  }
  return i;
}

// A JSONL record (a line that parsed as one JSON object) without its
// top-level members named `field`, so that annotating an annotated file
// replaces the earlier decision instead of repeating the key (which most
// JSON readers resolve to the first or to the last, unpredictably).
// nullopt when it has none: the line as it is (no copy on the usual path).
inline std::optional<std::string> WithoutMember(std::string_view line, const std::string& field) {
  const std::string key = nlohmann::json(field).dump();
  // A key spelled with escapes ("\u0069d") has a backslash somewhere.
  if (line.find(key) == std::string_view::npos && line.find('\\') == std::string_view::npos) return std::nullopt;
  auto skip_space = [&](size_t i) { return line.find_first_not_of(" \t\r\n", i); };
  // Each member's bytes, and the separator after it (", " as written).
  struct Member {
    size_t begin, end, next;
    bool named;
  };
  std::vector<Member> members;
  size_t i = skip_space(line.find('{') + 1);
  const size_t first = i;
  while (line[i] == '"') {
    const size_t begin = i, key_end = JsonValueEnd(line, i);
    const std::string_view raw_key = line.substr(i, key_end - i);
    const size_t end = JsonValueEnd(line, skip_space(skip_space(key_end) + 1));  // the value, past ':'
    const bool named = raw_key.find('\\') == std::string_view::npos
                           ? raw_key == key
                           : nlohmann::json::parse(raw_key).get<std::string>() == field;
    i = skip_space(end);
    if (line[i] == ',') i = skip_space(i + 1);
    members.push_back(Member{begin, end, i, named});
  }
  if (std::none_of(members.begin(), members.end(), [](const Member& m) { return m.named; })) return std::nullopt;
  std::string out(line.substr(0, first));
  size_t last = std::string::npos;  // the last member kept
  for (size_t m = 0; m < members.size(); ++m) {
    if (members[m].named) continue;
    if (last != std::string::npos) out.append(line.substr(members[last].end, members[last].next - members[last].end));
    out.append(line.substr(members[m].begin, members[m].end - members[m].begin));
    last = m;
  }
  out.append(line.substr(members.empty() ? first : members.back().end));
  return out;
}

// The line of a JSONL record with `field` set: {"kept": true}, or the
// duplicate's decision. A member already named `field` is replaced. The
// record parsed as a JSON object, so its last '}' closes it.
inline void WriteAnnotated(std::FILE* out, std::string_view given, const std::string& field, const DedupDecision& d,
                           std::string_view of) {
  const std::optional<std::string> without = WithoutMember(given, field);
  const std::string_view line = without ? std::string_view(*without) : given;
  const size_t end = line.find_last_of('}');
  const size_t open = line.find('{');
  // The members end at the last non-space before '}'. White space there was
  // kept before the added member's comma, and a second pass, which removes
  // that member, then moved it: annotating an annotated file changed it.
  const size_t last = line.find_last_not_of(" \t\r\n", end - 1);
  const bool empty = last == open;
  std::fwrite(line.data(), 1, last + 1, out);
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
