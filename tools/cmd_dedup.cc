// neardup dedup: first-wins near-duplicate removal over JSONL or lines.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "neardup/dedup/dedup.h"

namespace neardup::cli {
namespace {

struct DedupFlags {
  InputFlags in;
  FingerprintFlags fp;
  std::string output;
  std::string duplicates;
  std::string clusters;
  std::string stats_json;
  int k = 3;
  RecheckOptions recheck_options;  // --recheck/--no-recheck: .enabled
  int threads = 0;
  size_t batch_size = 4096;
  bool quiet = false;
};

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

struct Counters {
  uint64_t lines = 0;
  uint64_t bad_lines = 0;
  uint64_t blank_lines = 0;
  uint64_t truncated_texts = 0;  // cut to --max-text-bytes
};

void PrintProgress(const DedupStats& s, double seconds) {
  const double pct = s.documents ? 100.0 * static_cast<double>(s.duplicates()) / static_cast<double>(s.documents) : 0;
  std::fprintf(stderr, "\rneardup: %llu documents, %llu duplicates (%.1f%%), %.0f docs/s   ",
               static_cast<unsigned long long>(s.documents), static_cast<unsigned long long>(s.duplicates()),
               pct, seconds > 0 ? static_cast<double>(s.documents) / seconds : 0.0);
  std::fflush(stderr);
}

nlohmann::json StatsJson(const Deduplicator& dedup, const Counters& c, double seconds, int threads) {
  const DedupStats& s = dedup.stats();
  nlohmann::json j;
  j["documents"] = s.documents;
  j["kept"] = s.kept;
  j["duplicates"] = s.duplicates();
  j["exact_duplicates"] = s.exact_duplicates;
  j["near_duplicates"] = s.near_duplicates;
  j["duplicate_percent"] =
      s.documents ? 100.0 * static_cast<double>(s.duplicates()) / static_cast<double>(s.documents) : 0.0;
  j["without_features"] = s.without_features;
  j["invalid_utf8"] = s.invalid_utf8;
  j["lines"] = c.lines;
  j["bad_lines"] = c.bad_lines;
  j["blank_lines"] = c.blank_lines;
  j["truncated_texts"] = c.truncated_texts;
  j["elapsed_seconds"] = seconds;
  j["docs_per_second"] = seconds > 0 ? static_cast<double>(s.documents) / seconds : 0.0;
  j["k"] = dedup.options().k;
  j["scheme"] = dedup.fingerprinter().scheme_name();
  j["scheme_id"] = FingerprintToHex(dedup.scheme_id());
  j["threads"] = threads;
  return j;
}

void PrintSummary(const Deduplicator& dedup, const Counters& c, double seconds) {
  const DedupStats& s = dedup.stats();
  const double pct =
      s.documents ? 100.0 * static_cast<double>(s.duplicates()) / static_cast<double>(s.documents) : 0;
  std::fprintf(stderr,
               "neardup dedup: %llu documents\n"
               "  kept        %llu\n"
               "  duplicates  %llu (%.2f%%): %llu exact, %llu near\n"
               "  bad lines   %llu\n"
               "  elapsed     %.3f s (%.0f docs/s)\n",
               static_cast<unsigned long long>(s.documents), static_cast<unsigned long long>(s.kept),
               static_cast<unsigned long long>(s.duplicates()), pct,
               static_cast<unsigned long long>(s.exact_duplicates),
               static_cast<unsigned long long>(s.near_duplicates),
               static_cast<unsigned long long>(c.bad_lines), seconds,
               seconds > 0 ? static_cast<double>(s.documents) / seconds : 0.0);
}

int RunDedup(const DedupFlags& f) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  auto fp_options = ToFingerprintOptions(f.fp);
  if (!fp_options.ok()) return Fail(fp_options.status());
  DedupOptions options;
  options.k = f.k;
  options.fingerprint = fp_options.value();
  options.recheck = f.recheck_options;
  auto created = Deduplicator::Create(options);
  if (!created.ok()) return Fail(created.status());
  Deduplicator& dedup = *created.value();
  const int threads = ResolveThreads(f.threads);

  for (const std::string* path : {&f.output, &f.duplicates, &f.clusters, &f.stats_json, &f.in.rejects}) {
    Status st = CheckNotInput(f.in.input, *path);
    if (!st.ok()) return Fail(st);
  }
  auto in = OpenInput(f.in.input);
  if (!in.ok()) return Fail(in.status());
  BadLines bad;
  if (Status st = bad.Open(f.in, f.quiet); !st.ok()) return Fail(st);
  auto out = OpenOutput(f.output);
  if (!out.ok()) return Fail(out.status());
  FilePtr dups, clusters_file, stats_file;
  if (!f.duplicates.empty()) {
    auto r = OpenOutput(f.duplicates);
    if (!r.ok()) return Fail(r.status());
    dups = std::move(r).value();
  }
  if (!f.clusters.empty()) {
    auto r = OpenOutput(f.clusters);
    if (!r.ok()) return Fail(r.status());
    clusters_file = std::move(r).value();
  }
  if (!f.stats_json.empty()) {
    auto r = OpenOutput(f.stats_json);
    if (!r.ok()) return Fail(r.status());
    stats_file = std::move(r).value();
  }

  RecordReader reader(std::move(in).value(), ToReaderOptions(f.in));
  KeptIds kept_ids;
  Clusters clusters;
  Counters counters;
  std::vector<InputRecord> batch;
  std::vector<std::string_view> texts;
  std::vector<size_t> record_of;  // texts[j] came from batch[record_of[j]]
  std::vector<DedupDecision> decisions;
  const bool progress = !f.quiet && StderrIsTerminal();
  double last_progress = 0;
  bool stopped = false;  // too many bad lines (BadLines::Add)

  while (!stopped) {
    Status read = reader.ReadBatch(f.batch_size, threads, &batch);
    if (!read.ok()) return Fail(read);
    if (batch.empty()) break;
    texts.clear();
    record_of.clear();
    for (size_t i = 0; i < batch.size(); ++i) {
      const InputRecord& r = batch[i];
      ++counters.lines;
      if (r.kind == InputRecord::Kind::kBlank) {
        ++counters.blank_lines;
        continue;
      }
      if (r.kind == InputRecord::Kind::kBad) {
        ++counters.bad_lines;
        if (!bad.Add(r)) {
          stopped = true;
          break;
        }
        continue;
      }
      counters.truncated_texts += r.truncated;
      texts.push_back(r.text());
      record_of.push_back(i);
    }
    const uint64_t first_sequence = dedup.next_sequence();
    Status st = dedup.ProcessBatch(texts, &decisions, threads);
    if (!st.ok()) return Fail(Status::Internal(st.ToString()));
    for (size_t j = 0; j < texts.size(); ++j) {
      const InputRecord& r = batch[record_of[j]];
      const DedupDecision& d = decisions[j];
      if (!d.duplicate) {
        std::FILE* o = out.value().get();
        std::fwrite(r.line.data(), 1, r.line.size(), o);
        std::fputc('\n', o);
        kept_ids.Add(first_sequence + j, r.id);
        continue;
      }
      const std::string_view of = kept_ids.Find(d.duplicate_of);
      if (dups) {
        std::fprintf(dups.get(),
                     "{\"id\": %s, \"duplicate_of\": %.*s, \"distance\": %d, \"exact\": %s, "
                     "\"similarity\": %.4f, \"similarity_exact\": %s}\n",
                     r.id.c_str(), static_cast<int>(of.size()), of.data(), d.distance, d.exact ? "true" : "false",
                     d.similarity, d.similarity_exact ? "true" : "false");
      }
      if (clusters_file) clusters.Add(d.duplicate_of, r.id);
    }
    if (std::ferror(out.value().get()) || (dups && std::ferror(dups.get()))) break;  // reported below
    if (progress && elapsed() - last_progress >= 0.25) {
      last_progress = elapsed();
      PrintProgress(dedup.stats(), last_progress);
    }
  }
  if (progress) std::fputs("\r\033[K", stderr);

  if (clusters_file) clusters.Write(clusters_file.get(), kept_ids);
  int rc = kExitOk;
  auto finish = [&](FilePtr file, const std::string& path) {
    Status s = FinishOutput(std::move(file), path);
    if (!s.ok() && rc == kExitOk) rc = Fail(s);
  };
  finish(std::move(out).value(), f.output);
  finish(std::move(dups), f.duplicates);
  finish(std::move(clusters_file), f.clusters);
  const double seconds = elapsed();
  if (stats_file) {
    const std::string text = StatsJson(dedup, counters, seconds, threads).dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), stats_file.get());
    finish(std::move(stats_file), f.stats_json);
  }
  if (!f.quiet) PrintSummary(dedup, counters, seconds);
  const int bad_rc = bad.Finish(dedup.stats().documents);
  return rc != kExitOk ? rc : bad_rc;
}

}  // namespace

void AddRecheckFlags(CLI::App* cmd, RecheckOptions* o) {
  AddSettingFlags<RecheckOptions>(cmd, RecheckSettingTable(), o, "");
}

void AddDedupCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<DedupFlags>();
  CLI::App* cmd = app.add_subcommand(
      "dedup",
      "Remove near-duplicate documents, first occurrence wins. Kept documents' input lines are "
      "copied unchanged to --output; each duplicate is described on --duplicates.");
  AddInputFlags(cmd, &f->in, "Input documents", /*required=*/true, /*with_id=*/true);
  cmd->add_option("-o,--output", f->output,
                  "Kept (unique) documents: their input lines, byte for byte ('-' = stdout)")
      ->required();
  cmd->add_option("-d,--duplicates", f->duplicates,
                  "Duplicates as JSONL: {\"id\", \"duplicate_of\", \"distance\", \"exact\", \"similarity\", "
                  "\"similarity_exact\"}");
  cmd->add_option("--clusters", f->clusters,
                  "Groups of size >= 2 as JSONL: {\"kept\", \"size\", \"members\"}");
  cmd->add_option("-k,--max-distance", f->k,
                  "Largest Hamming distance (inclusive) between fingerprints of near-duplicates")
      ->check(CLI::Range(0, kMaxSupportedK));
  AddFingerprintFlags(cmd, &f->fp, /*with_idf=*/true);
  AddRecheckFlags(cmd, &f->recheck_options);
  cmd->add_option("-t,--threads", f->threads,
                  "Worker threads for parsing and fingerprinting (0 = hardware concurrency, " +
                      std::to_string(ResolveThreads(0)) + " here); output is identical for any value")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--batch-size", f->batch_size, "Lines read and analyzed per batch")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  cmd->add_option("--stats-json", f->stats_json, "Also write the final statistics as JSON to this file");
  cmd->add_flag("-q,--quiet", f->quiet,
                "No progress line, summary or bad-line messages on stderr (errors still shown; the "
                "counts are in --stats-json)");
  cmd->callback([f, exit_code] { *exit_code = RunDedup(*f); });
}

}  // namespace neardup::cli
