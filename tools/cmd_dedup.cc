// neardup dedup: first-wins near-duplicate removal over JSONL or lines.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <future>
#include <fstream>
#include <iterator>
#include <memory>
#include <numeric>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>
#include <xxhash.h>

#include <sstream>

#include "commands.h"
#include "util/special_file.h"
#include "neardup/dedup/batch_join.h"
#include "dedup_checkpoint.h"
#include "dedup_output.h"
#include "input_files.h"
#include "line_facts.h"
#include "neardup/dedup/dedup.h"
#include "neardup/dedup/kept_file.h"
#include "neardup/util/parallel.h"

namespace neardup::cli {
namespace {

// How far below the deciding thread the read-ahead runs (ReadFile): 3 to 8
// measured alike on 2 cores, 19 starved it.
constexpr int kReadAheadNiceLevels = 5;

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
  std::string annotate;         // --annotate FIELD: every record, with its decision in FIELD
  double progress_seconds = 0;  // --progress: a line every this many seconds (0: on a terminal only)
  int output_shards = 1;        // --output-shards: --output holds "{shard}"
  std::vector<std::string> load_index;  // --load-index: earlier runs' kept documents, in this order
  std::string save_index;               // --save-index: this run's kept documents
  std::string keep = "first";           // --keep: first | longest
  std::string decide = "stream";        // --decide: stream | join (batch_join.h)
  std::string checkpoint;               // --checkpoint DIR: resumable run
  std::string sketch_dir;               // --sketch-dir: sketch records in a file there
  size_t memory_limit = 0;              // --memory-limit: 0 = none
  std::string spill_dir;                // --spill-dir
};

struct Counters {
  uint64_t lines = 0;
  uint64_t bad_lines = 0;
  uint64_t blank_lines = 0;
  uint64_t truncated_texts = 0;  // cut to --max-text-bytes
  uint64_t files = 0;            // inputs read to the end
  // Seconds in each stage: reading and parsing lines, deciding (fingerprint,
  // search, re-check), writing the outputs.
  double read_s = 0, decide_s = 0, write_s = 0;
};

nlohmann::json StatsJson(const Deduplicator& dedup, const Counters& c, double seconds, int threads,
                         const JoinStats* join) {
  const DedupStats& s = dedup.stats();
  nlohmann::json j;
  AddRunStats(s, LineCounts{c.files, c.lines, c.bad_lines, c.blank_lines, c.truncated_texts}, &j);
  j["elapsed_seconds"] = seconds;
  j["stage_seconds"] = {{"read", c.read_s}, {"decide", c.decide_s}, {"write", c.write_s}};
  j["docs_per_second"] = seconds > 0 ? static_cast<double>(s.documents) / seconds : 0.0;
  j["k"] = dedup.options().k;
  j["scheme"] = dedup.fingerprinter().scheme_name();
  j["scheme_id"] = FingerprintToHex(dedup.scheme_id());
  j["threads"] = threads;
  const NearDupSet::MemoryUse m = dedup.Memory();
  j["memory_bytes"] = {{"total", m.total()},         {"index", m.index},     {"exact", m.exact},
                       {"sketch_slots", m.sketch_slots}, {"anchors", m.anchors}, {"records", m.records}};
  if (join) {
    j["join"] = {{"classes", join->classes},     {"live_postings", join->live_postings}, {"pairs", join->pairs},
                 {"accepted", join->accepted},   {"classes_seconds", join->classes_s},
                 {"anchors_seconds", join->anchors_s}, {"fingerprints_seconds", join->fingerprints_s},
                 {"rule_seconds", join->rule_s}, {"decide_seconds", join->decide_s}};
  }
  return j;
}

// The kept documents' structures, in bytes per kept document (where the
// memory of a large run goes; process RSS adds buffers and the heap's slack).
std::string MemoryText(const Deduplicator& dedup) {
  const NearDupSet::MemoryUse m = dedup.Memory();
  if (dedup.stats().kept == 0) return "0.0 MB of documents (none kept)";
  const double kept = static_cast<double>(dedup.stats().kept);
  auto per = [kept](size_t bytes) { return static_cast<double>(bytes) / kept; };
  char b[256];
  std::snprintf(b, sizeof b,
                "%.1f MB, per kept document %.1f B: index %.1f, exact-match %.1f, sketch slots %.1f, anchors %.1f, "
                "records %.1f",
                static_cast<double>(m.total()) / 1e6, per(m.total()), per(m.index), per(m.exact),
                per(m.sketch_slots), per(m.anchors), per(m.records));
  return b;
}

// --decide join: what the join did, and its steps' wall seconds.
std::string JoinText(const JoinStats& j) {
  char b[320];
  std::snprintf(b, sizeof b,
                "%llu distinct signatures, %llu live postings, %llu candidate pairs, %llu accepted; "
                "classes %.2f s, anchors %.2f s, fingerprints %.2f s, pair rule %.2f s, decide %.2f s",
                static_cast<unsigned long long>(j.classes), static_cast<unsigned long long>(j.live_postings),
                static_cast<unsigned long long>(j.pairs), static_cast<unsigned long long>(j.accepted), j.classes_s,
                j.anchors_s, j.fingerprints_s, j.rule_s, j.decide_s);
  return b;
}

void PrintSummary(const Deduplicator& dedup, const Counters& c, double seconds, const JoinStats* join) {
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
  if (c.files > 1) std::fprintf(stderr, "  inputs      %llu files\n", static_cast<unsigned long long>(c.files));
  if (join) {
    std::fprintf(stderr, "  join        %s\n", JoinText(*join).c_str());
  } else {
    std::fprintf(stderr, "  memory      %s\n", MemoryText(dedup).c_str());
  }
}

// One run of the command: the outputs, the deduplicator, and the inputs read
// one after the other into the same stream of decisions.
class DedupRun {
 public:
  DedupRun(const DedupFlags& f, Deduplicator& dedup, int threads)
      : f_(f), dedup_(dedup), threads_(threads), start_(std::chrono::steady_clock::now()) {}

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  const Counters& counters() const { return counters_; }
  BadLines& bad() { return bad_; }

  // Adds the kept documents saved in `dir` by an earlier run: later
  // documents are judged against them, and a duplicate of one names its id.
  Status LoadKept(const std::string& dir) {
    NEARDUP_ASSIGN_OR_RETURN(const uint64_t n, LoadKeptIndex(dir, dedup_, kept_ids_, f_.in.max_text_bytes));
    loaded_ += n;
    return Status::OK();
  }

  // --keep longest and --decide join read every input once to analyze it,
  // then decide every document: from the longest to the shortest (ties in
  // input order), each kept unless a kept one matches it; or by the join
  // (batch_join.h), whose last step, serial, ReadFile's read-ahead takes
  // batch by batch while the batch before is written. ReadFile then only
  // writes, and reads the lines without parsing them (line_facts.h). Bad
  // lines are skipped here and counted and reported by ReadFile.
  Status DecideAllFirst(const std::vector<InputFile>& inputs) {
    auto t0 = std::chrono::steady_clock::now();
    precomputed_ = std::make_unique<Precomputed>();
    for (const InputFile& file : inputs) {
      NEARDUP_ASSIGN_OR_RETURN(std::unique_ptr<InputStream> in, OpenInput(file.path));
      RecordReader reader(std::move(in), ToReaderOptions(f_.in, inputs.size() > 1 ? file.path : ""));
      NEARDUP_RETURN_IF_ERROR(AnalyzeAll(reader, &precomputed_->sigs));
      precomputed_->facts.EndInput();
    }
    const std::vector<DocSignature>& sigs = precomputed_->sigs;
    precomputed_->ids = KeptIds::Walker(&kept_ids_);
    counters_.read_s += Since(t0);
    t0 = std::chrono::steady_clock::now();
    if (f_.decide == "join") {
      join_ = std::make_unique<JoinStats>();
      NEARDUP_ASSIGN_OR_RETURN(precomputed_->join, JoinDecider::Create(sigs, dedup_.options(), threads_, join_.get()));
    } else {
      // Only the documents before a bad line that stops the run: a later one
      // was made the match of an earlier one, which then went unwritten
      // (a tester, 2026-12-02). The join decides in input order anyway.
      NEARDUP_ASSIGN_OR_RETURN(precomputed_->decisions,
                               DecideLongestFirst(dedup_, sigs, loaded_, precomputed_->stop_docs));
    }
    counters_.decide_s += Since(t0);
    return Status::OK();
  }

  // Appends the signature of every document `reader` holds to *sigs. With
  // two threads or more, the next batch is read and parsed on a thread of
  // its own while this one is analyzed: reading lines is serial, and would
  // leave the other cores idle (the batches, and so the signatures, are
  // those of one thread).
  Status AnalyzeAll(RecordReader& reader, std::vector<DocSignature>* sigs) {
    std::vector<InputRecord> cur, next;
    std::vector<std::string_view> texts;
    std::vector<DocSignature> batch_sigs;
    Status read = reader.ReadBatch(f_.batch_size, threads_, &cur);
    for (;;) {
      NEARDUP_RETURN_IF_ERROR(read);
      if (cur.empty()) return Status::OK();
      std::future<Status> ahead;  // waited for before cur and next change hands
      if (threads_ > 1) {
        ahead = std::async(std::launch::async, [&] { return reader.ReadBatch(f_.batch_size, 1, &next); });
      }
      texts.clear();
      for (const InputRecord& r : cur) {
        precomputed_->facts.Add(r);
        const bool stops = r.kind == InputRecord::Kind::kBad && BadLines::StopsAt(f_.in, ++precomputed_->bad_lines);
        if (stops) precomputed_->stop_docs = std::min(precomputed_->stop_docs, sigs->size() + texts.size());
        if (r.kind != InputRecord::Kind::kDocument) continue;
        kept_ids_.Add(loaded_ + sigs->size() + texts.size(), r.id);  // every id: a kept one may come later
        texts.push_back(r.text());
      }
      dedup_.Analyze(texts, &batch_sigs, threads_);
      std::move(batch_sigs.begin(), batch_sigs.end(), std::back_inserter(*sigs));
      read = ahead.valid() ? ahead.get() : reader.ReadBatch(f_.batch_size, threads_, &next);
      std::swap(cur, next);
    }
  }

  // `resume`: the state of the interrupted run to continue (its outputs are
  // cut back to its last checkpoint and appended to), or null.
  Status OpenOutputs(const std::vector<InputFile>& inputs, const nlohmann::json* resume) {
    resume_ = resume;
    for (const InputFile& in : inputs) {
      for (const std::string* path : {&f_.duplicates, &f_.clusters, &f_.stats_json, &f_.in.rejects}) {
        NEARDUP_RETURN_IF_ERROR(CheckNotInput(in.path, *path));
      }
      for (int i = 0; i < f_.output_shards; ++i) {
        NEARDUP_RETURN_IF_ERROR(CheckNotInput(in.path, ShardPath(f_.output, i, f_.output_shards)));
      }
      total_bytes_ += in.size;
    }
    if (!f_.in.rejects.empty()) NEARDUP_RETURN_IF_ERROR(CutBack(f_.in.rejects));
    NEARDUP_RETURN_IF_ERROR(bad_.Open(f_.in, f_.quiet, resume != nullptr));
    for (int i = 0; i < f_.output_shards; ++i) {
      NEARDUP_ASSIGN_OR_RETURN(FilePtr shard, OpenStreamed(ShardPath(f_.output, i, f_.output_shards)));
      outs_.push_back(std::move(shard));
    }
    if (!f_.duplicates.empty()) {
      NEARDUP_ASSIGN_OR_RETURN(dups_, OpenStreamed(f_.duplicates));
    }
    if (!f_.clusters.empty()) {
      NEARDUP_ASSIGN_OR_RETURN(clusters_file_, OpenOutput(f_.clusters));
    }
    if (!f_.stats_json.empty()) {
      NEARDUP_ASSIGN_OR_RETURN(stats_file_, OpenOutput(f_.stats_json));
    }
    if (!f_.save_index.empty()) {
      NEARDUP_ASSIGN_OR_RETURN(saved_, CreateSavedIndex(f_.save_index, dedup_, f_.in.max_text_bytes));
    }
    files_ = inputs.size();
    inputs_ = inputs;
    for (const InputFile& in : inputs) input_names_.push_back(in.path);
    return Status::OK();
  }

  // Continues the interrupted run whose state OpenOutputs was given: its
  // kept documents, clusters and counters. Returns how many inputs it had
  // finished (the caller skips them).
  Result<size_t> Resume(const std::vector<InputFile>& inputs) {
    const nlohmann::json& st = *resume_;
    const size_t done = st["files_done"].get<size_t>();
    if (st["loaded"].get<uint64_t>() != loaded_ ||
        (st.contains("load_index") && st["load_index"] != LoadedIndexIdentity(f_.load_index))) {
      return Status::InvalidArgument(checkpoint_->State() +
                                     ": the --load-index directories are not those the interrupted run loaded "
                                     "(changed since); remove the checkpoint to start afresh");
    }
    for (size_t i = 0; i < done; ++i) {
      NEARDUP_RETURN_IF_ERROR(ReadKeptFile(checkpoint_->Kept(i), SchemeOf(dedup_, f_.in.max_text_bytes),
                                           [&](uint64_t seq, std::string_view id, const DocSignature& sig) {
                                             kept_ids_.Add(seq, id);
                                             if (saved_) NEARDUP_RETURN_IF_ERROR(saved_->Add(seq, id, sig));
                                             return dedup_.AddKeptAt(seq, sig);
                                           })
                                  .status());
      NEARDUP_RETURN_IF_ERROR(RestoreClusters(i, st["clusters_checksums"][i].get<uint64_t>()));
      done_bytes_ += inputs[i].size;
    }
    DedupStats ds;
    const nlohmann::json& j = st["stats"];
    ds.documents = j["documents"], ds.kept = j["kept"], ds.exact_duplicates = j["exact_duplicates"];
    ds.near_duplicates = j["near_duplicates"], ds.without_features = j["without_features"];
    ds.invalid_utf8 = j["invalid_utf8"];
    dedup_.RestoreProgress(ds, st["next_sequence"].get<uint64_t>());
    const nlohmann::json& c = st["counters"];
    counters_.lines = c["lines"], counters_.bad_lines = c["bad_lines"], counters_.blank_lines = c["blank_lines"];
    counters_.truncated_texts = c["truncated_texts"], counters_.files = c["files"];
    written_ = st["written"].get<uint64_t>();
    bad_.RestoreCount(counters_.bad_lines);
    files_done_ = done;
    if (!f_.quiet) {
      std::fprintf(stderr, "neardup: resuming from --checkpoint %s: %zu of %zu inputs done, %llu documents\n",
                   f_.checkpoint.c_str(), done, inputs.size(), static_cast<unsigned long long>(ds.documents));
    }
    return done;
  }

  // Takes DIR's lock (refused while another run holds it).
  Status SetCheckpoint(const std::string& dir) {
    checkpoint_ = std::make_unique<CheckpointFiles>(dir);
    return checkpoint_->Lock();
  }

  // Reads one input to its end (or to a stop for bad lines: *stopped). With
  // two threads or more, the next batch is read and analyzed on a thread of
  // its own while this one is decided and written: deciding in input order
  // is serial, and the analysis of what comes next fills the other cores
  // meanwhile. Analysis changes nothing the decisions read, so the outputs
  // are those of one thread (tested).
  Status ReadFile(std::unique_ptr<InputStream> in, const std::string& name, bool* stopped) {
    if (files_ > 1) bad_.SetSource(name);
    if (checkpoint_) {
      NEARDUP_ASSIGN_OR_RETURN(segment_, KeptFileWriter::Create(checkpoint_->Kept(files_done_), SchemeOf(dedup_, f_.in.max_text_bytes)));
    }
    RecordReader reader(std::move(in), ToReaderOptions(f_.in, files_ > 1 ? name : ""));
    Batch next;
    std::future<void> ahead;  // uses reader and next: declared after them, so waited for first
    StartWorkers(threads_);  // here, at this thread's priority: not by the read-ahead (below)
    Prepare(reader, name, &cur_, threads_);
    for (;;) {
      NEARDUP_RETURN_IF_ERROR(cur_.status);
      counters_.read_s += cur_.read_s;
      if (cur_.records.empty()) break;
      *stopped = !CollectTexts();
      // One thread fewer ahead: the in-order half of the decision, the serial
      // path, keeps a core to itself (decided already: the writing). And a
      // lower priority: the read-ahead should fill the cores the decision
      // leaves idle, not take one from its search. Three runnable threads on
      // two cores left each slice waiting for a preempted worker; at 5 nice
      // levels below, 1M short documents took 1.61x less time on 2 threads
      // than on 1, against 1.45x (docs/BENCHMARKS.md, "Two threads").
      if (!*stopped && threads_ > 1) {
        ahead = std::async(std::launch::async, [&] {
          LowerThisThreadPriority(kReadAheadNiceLevels);
          Prepare(reader, name, &next, threads_ - 1);
        });
      }
      auto t0 = std::chrono::steady_clock::now();
      const uint64_t first_sequence = precomputed_ ? loaded_ + written_docs_ : dedup_.next_sequence();
      std::span<const DocSignature> sigs = cur_.sigs;
      if (precomputed_) {  // decided already (DecideAllFirst)
        TakeDecisions(cur_.texts.size());
        sigs = std::span(precomputed_->sigs).subspan(written_docs_, cur_.texts.size());
      } else {
        dedup_.CountAnalyzed(cur_.invalid_utf8);
        Status st = dedup_.DecideBatch(cur_.sigs, &decisions_, DecisionThreads(ahead.valid()));
        if (!st.ok()) return Status::Internal(st.ToString());
      }
      written_docs_ += cur_.texts.size();
      counters_.decide_s += cur_.analyze_s + Since(t0);
      t0 = std::chrono::steady_clock::now();
      WriteDecisions(first_sequence, sigs);
      counters_.write_s += Since(t0);
      if (WriteFailed()) break;  // reported by Finish
      Progress(done_bytes_ + cur_.input_bytes);
      CrashPointForTests();
      if (*stopped) break;
      if (ahead.valid()) {
        ahead.get();
      } else {
        Prepare(reader, name, &next, threads_);
      }
      std::swap(cur_, next);
    }
    // A failed write leaves the loop with the read-ahead running: it still
    // advances the line facts (and the join), so it is waited for first.
    if (ahead.valid()) ahead.wait();
    // Read to its end only if neither stopped nor failed: then the facts
    // must have met every line (a failed write is reported by Finish).
    if (precomputed_ && !*stopped && !WriteFailed()) NEARDUP_RETURN_IF_ERROR(precomputed_->facts.EndInput(name));
    done_bytes_ += cur_.input_bytes;
    ++counters_.files;
    if (checkpoint_ && !*stopped && !WriteFailed()) NEARDUP_RETURN_IF_ERROR(Checkpoint());
    return Status::OK();
  }

  int Finish() {
    // Left to the exit that follows: the OS takes the signatures back at
    // once, where freeing them block by block (two per document) took 0.2 s
    // per million documents on the serial path. A static keeps them
    // reachable, so no leak checker reports them; volatile, so the compiler
    // keeps a store that nothing reads (it did not: LeakSanitizer failed CI).
    [[maybe_unused]] static Precomputed* volatile left_to_exit = nullptr;
    if (precomputed_) left_to_exit = precomputed_.release();
    if (progress_shown_ && StderrIsTerminal()) std::fputs("\r\033[K", stderr);
    if (clusters_file_) clusters_.Write(clusters_file_.get(), kept_ids_);
    int rc = kExitOk;
    auto finish = [&](FilePtr file, const std::string& path) {
      Status s = FinishOutput(std::move(file), path);
      if (!s.ok() && rc == kExitOk) rc = Fail(s);
    };
    for (size_t i = 0; i < outs_.size(); ++i) {
      finish(std::move(outs_[i]), ShardPath(f_.output, static_cast<int>(i), f_.output_shards));
    }
    finish(std::move(dups_), f_.duplicates);
    finish(std::move(clusters_file_), f_.clusters);
    const double seconds = elapsed();
    if (stats_file_) {
      const std::string text = StatsJson(dedup_, counters_, seconds, threads_, join_.get()).dump(2) + "\n";
      std::fwrite(text.data(), 1, text.size(), stats_file_.get());
      finish(std::move(stats_file_), f_.stats_json);
    }
    if (!f_.quiet) PrintSummary(dedup_, counters_, seconds, join_.get());
    const int bad_rc = bad_.Finish(dedup_.stats().documents);
    if (rc != kExitOk) return rc;
    if (bad_rc != kExitOk) return bad_rc;  // no --save-index from a run that failed
    if (saved_) {
      Status s = save_failed_.ok()
                     ? FinishSavedIndex(std::move(saved_), f_.save_index, dedup_, input_names_, loaded_, f_.load_index)
                     : save_failed_;
      if (!s.ok()) return Fail(s);
    }
    if (checkpoint_) checkpoint_->Remove(files_done_);  // done: nothing left to resume
    return kExitOk;
  }

 private:
  bool WriteFailed() const {
    for (const FilePtr& o : outs_) {
      if (std::ferror(o.get())) return true;
    }
    return dups_ && std::ferror(dups_.get());
  }

  // An output written as the run goes: created, or when resuming cut back
  // to the last checkpoint and appended to.
  Result<FilePtr> OpenStreamed(const std::string& path) {
    NEARDUP_RETURN_IF_ERROR(CutBack(path));
    return OpenOutput(path, resume_ != nullptr);
  }
  Status CutBack(const std::string& path) {
    if (!resume_) return Status::OK();
    const nlohmann::json& sizes = (*resume_)["outputs"];
    if (!sizes.contains(path)) return Status::Corruption(checkpoint_->State() + ": no size recorded for " + path);
    return CheckpointFiles::CutBack(path, sizes[path].get<off_t>());
  }

  // The outputs written as the run goes, by name.
  std::vector<std::pair<FilePtr*, std::string>> Streamed() {
    std::vector<std::pair<FilePtr*, std::string>> v;
    for (size_t i = 0; i < outs_.size(); ++i) {
      v.emplace_back(&outs_[i], ShardPath(f_.output, static_cast<int>(i), f_.output_shards));
    }
    if (dups_) v.emplace_back(&dups_, f_.duplicates);
    if (bad_.rejects_file()) v.emplace_back(&bad_.rejects_file(), f_.in.rejects);
    return v;
  }

  // After a completed input: every streamed output closed (a compressed one
  // ends its gzip member / zstd frame), fsynced and reopened for appending;
  // this input's kept documents and clusters saved; then state.json.
  Status Checkpoint() {
    NEARDUP_RETURN_IF_ERROR(segment_failed_);
    NEARDUP_RETURN_IF_ERROR(segment_->Finish());
    segment_.reset();
    NEARDUP_RETURN_IF_ERROR(CheckpointFiles::WriteDurably(checkpoint_->Clusters(files_done_), segment_clusters_));
    clusters_checksums_.push_back(XXH3_64bits(segment_clusters_.data(), segment_clusters_.size()));
    segment_clusters_.clear();
    nlohmann::json sizes = nlohmann::json::object();
    for (auto& [file, path] : Streamed()) {
      NEARDUP_RETURN_IF_ERROR(FinishOutput(std::move(*file), path));
      NEARDUP_RETURN_IF_ERROR(CheckpointFiles::SyncPath(path));
      sizes[path] = std::filesystem::file_size(path);
      NEARDUP_ASSIGN_OR_RETURN(*file, OpenOutput(path, /*append=*/true));
    }
    ++files_done_;
    const DedupStats& ds = dedup_.stats();
    nlohmann::json st;
    st["version"] = 3;  // 2: sealed (CheckpointFiles::Sealed); 3: with state.log
    st["files_done"] = files_done_;
    st["loaded"] = loaded_;
    st["next_sequence"] = dedup_.next_sequence();
    st["stats"] = {{"documents", ds.documents}, {"kept", ds.kept}, {"exact_duplicates", ds.exact_duplicates},
                   {"near_duplicates", ds.near_duplicates}, {"without_features", ds.without_features},
                   {"invalid_utf8", ds.invalid_utf8}};
    st["counters"] = {{"lines", counters_.lines}, {"bad_lines", counters_.bad_lines},
                      {"blank_lines", counters_.blank_lines}, {"truncated_texts", counters_.truncated_texts},
                      {"files", counters_.files}};
    st["written"] = written_;
    st["outputs"] = sizes;
    return checkpoint_->Save(std::move(st), resume_, inputs_, clusters_checksums_, LoadedIndexIdentity(f_.load_index));
  }

  Status RestoreClusters(size_t file, uint64_t checksum) {
    std::ifstream in(checkpoint_->Clusters(file), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    if (!in || XXH3_64bits(text.data(), text.size()) != checksum) {
      return Status::Corruption(checkpoint_->Clusters(file) + ": missing or damaged");
    }
    clusters_checksums_.push_back(checksum);
    if (!clusters_file_) return Status::OK();
    std::stringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      uint64_t kept = 0;
      std::string_view id;
      if (!ParseClusterLine(line, &kept, &id)) {
        return Status::Corruption(checkpoint_->Clusters(file) + ": not a cluster line: " + line.substr(0, 200));
      }
      clusters_.Add(kept, std::string(id));
    }
    return Status::OK();
  }

  // A checkpoint's cluster member: {"kept": N, "id": RAW}, RAW the id's raw
  // JSON token. ParseClusterLine takes RAW back as it is: a JSON parse and
  // dump respelled it ("\u00e9" as "é", 1E2 as 100.0), and a resumed run's
  // --clusters differed from an uninterrupted one's (an adversarial test,
  // 2026-12-02).
  static constexpr std::string_view kHead = "{\"kept\": ", kMiddle = ", \"id\": ";
  static std::string ClusterLine(uint64_t kept, std::string_view id) {
    return std::string(kHead) + std::to_string(kept) + std::string(kMiddle) + std::string(id) + "}\n";
  }
  static bool ParseClusterLine(std::string_view line, uint64_t* kept, std::string_view* id) {
    if (!line.starts_with(kHead) || !line.ends_with('}')) return false;
    line.remove_prefix(kHead.size());
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), *kept);
    if (ec != std::errc()) return false;
    line.remove_prefix(static_cast<size_t>(end - line.data()));
    if (!line.starts_with(kMiddle)) return false;
    *id = line.substr(kMiddle.size(), line.size() - kMiddle.size() - 1);
    return !id->empty();
  }

  static double Since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // One batch of an input: read, and its documents' texts picked and
  // analyzed. Prepare fills it touching nothing else but, decided already,
  // what follows the input in order (the line facts, the id walker, the
  // join's pass), so it may run on another thread while the batch before is
  // decided, one call at a time.
  struct Batch {
    std::vector<InputRecord> records;
    std::vector<std::string_view> texts;  // the documents' texts, in order
    std::vector<size_t> record_of;        // texts[j] came from records[record_of[j]]
    std::vector<DocSignature> sigs;       // of texts (none with --keep longest: decided already)
    std::vector<DedupDecision> joined;    // --decide join: of texts, from the join's pass in input order
    uint64_t invalid_utf8 = 0;            // met by the analysis; counted when decided
    uint64_t input_bytes = 0;             // the reader's, after this batch
    double read_s = 0, analyze_s = 0, join_s = 0;
    Status status;                        // of the read, or of the join's pass
  };

  // The plain rule's search is one index probe: beside a read-ahead, the
  // threaded decision's two passes over each slice cost more than the
  // threads it takes from the read-ahead save (1M short documents on 2
  // threads: 1.61x over 1 thread decided on one, 1.41x on two;
  // docs/BENCHMARKS.md, "Two threads"). The re-check's search is the larger
  // part of the work and takes them all.
  int DecisionThreads(bool reading_ahead) const {
    const bool plain = !dedup_.options().recheck.enabled;
    return plain && reading_ahead ? std::max(1, threads_ - 1) : threads_;
  }

  // Decided already (precomputed_), the lines are not parsed again: the
  // first pass's facts say what each one is (line_facts.h).
  void Prepare(RecordReader& reader, const std::string& name, Batch* b, int threads) const {
    auto t0 = std::chrono::steady_clock::now();
    if (precomputed_) {
      b->status = reader.ReadLines(f_.batch_size, &b->records);
      if (b->status.ok()) {
        b->status = precomputed_->facts.Apply(
            &b->records, [&](uint64_t k) { return precomputed_->ids.Find(loaded_ + k); }, name);
      }
    } else {
      b->status = reader.ReadBatch(f_.batch_size, threads, &b->records);
    }
    b->input_bytes = reader.input_bytes();
    b->read_s = Since(t0);
    b->texts.clear(), b->record_of.clear(), b->sigs.clear();
    if (!b->status.ok()) return;
    for (size_t i = 0; i < b->records.size(); ++i) {
      if (b->records[i].kind != InputRecord::Kind::kDocument) continue;
      b->texts.push_back(b->records[i].text());
      b->record_of.push_back(i);
    }
    t0 = std::chrono::steady_clock::now();
    b->invalid_utf8 = precomputed_ ? 0 : dedup_.Sign(b->texts, &b->sigs, threads);
    b->analyze_s = Since(t0);
    if (precomputed_ && precomputed_->join) b->status = Join(b);
  }

  // The join's decisions for b's documents: its pass in input order, serial,
  // here on the thread that reads ahead while the batch before is written
  // (what that thread does is otherwise light). Counted when taken.
  Status Join(Batch* b) const {
    auto t0 = std::chrono::steady_clock::now();
    b->joined.resize(b->texts.size());
    for (DedupDecision& d : b->joined) {
      NEARDUP_ASSIGN_OR_RETURN(d, precomputed_->join->Next());
    }
    b->join_s = Since(t0);
    return Status::OK();
  }

  // decisions_: the next n documents' decisions (cur_'s first n), decided
  // by DecideAllFirst, or by the join's pass (Join), then counted (the
  // analysis counted invalid UTF-8).
  void TakeDecisions(size_t n) {
    if (!precomputed_->join) {
      decisions_.assign(precomputed_->decisions.begin() + written_docs_,
                        precomputed_->decisions.begin() + written_docs_ + n);
      return;
    }
    decisions_.assign(cur_.joined.begin(), cur_.joined.begin() + n);
    DedupStats counted = dedup_.stats();
    CountDecisions(decisions_, &counted);
    dedup_.RestoreProgress(counted, loaded_ + written_docs_ + n);
    join_->decide_s += cur_.join_s;
  }

  // Counts cur_'s lines and reports its bad ones; false when bad lines stop
  // the run, cur_ then cut to the documents before the stopping line.
  bool CollectTexts() {
    for (size_t i = 0; i < cur_.records.size(); ++i) {
      const InputRecord& r = cur_.records[i];
      ++counters_.lines;
      if (r.kind == InputRecord::Kind::kBlank) {
        ++counters_.blank_lines;
        continue;
      }
      if (r.kind == InputRecord::Kind::kBad) {
        ++counters_.bad_lines;
        if (!bad_.Add(r)) {
          CutBatch(i);
          return false;
        }
        continue;
      }
      counters_.truncated_texts += r.truncated;
    }
    return true;
  }

  // cur_ without its records from `record` on (analyzed again, so the
  // invalid UTF-8 counted is that of the documents decided).
  void CutBatch(size_t record) {
    const size_t n = static_cast<size_t>(
        std::lower_bound(cur_.record_of.begin(), cur_.record_of.end(), record) - cur_.record_of.begin());
    cur_.texts.resize(n), cur_.record_of.resize(n);
    if (!precomputed_) cur_.invalid_utf8 = dedup_.Sign(cur_.texts, &cur_.sigs, threads_);
  }

  void WriteDecisions(uint64_t first_sequence, std::span<const DocSignature> sigs) {
    for (size_t j = 0; j < cur_.texts.size(); ++j) {
      const InputRecord& r = cur_.records[cur_.record_of[j]];
      const DedupDecision& d = decisions_[j];
      // Round robin over the shards, in output order: deterministic, even.
      std::FILE* o = outs_[written_ % outs_.size()].get();
      if (!f_.annotate.empty() || !d.duplicate) ++written_;
      if (!d.duplicate) {
        if (!precomputed_) kept_ids_.Add(first_sequence + j, r.id);
        if (saved_ && save_failed_.ok()) save_failed_ = saved_->Add(first_sequence + j, r.id, sigs[j]);
        if (segment_ && segment_failed_.ok()) segment_failed_ = segment_->Add(first_sequence + j, r.id, sigs[j]);
      }
      const std::string_view of = d.duplicate ? kept_ids_.Find(d.duplicate_of) : std::string_view();
      if (!f_.annotate.empty()) {
        WriteAnnotated(o, r.line, f_.annotate, d, of);
      } else if (!d.duplicate) {
        std::fwrite(r.line.data(), 1, r.line.size(), o);
        std::fputc('\n', o);
      }
      if (!d.duplicate) continue;
      if (dups_) {
        WriteDuplicateLine(dups_.get(), r.id, of, d);
      }
      if (clusters_file_) clusters_.Add(d.duplicate_of, r.id);
      if (clusters_file_ && checkpoint_) {
        segment_clusters_ += ClusterLine(d.duplicate_of, r.id);
      }
    }
  }

  // On a terminal, a line redrawn every 0.25 s; with --progress S, a line
  // every S seconds wherever stderr goes (a batch job's log).
  void Progress(uint64_t bytes) {
    const bool tty = !f_.quiet && StderrIsTerminal();
    const double period = f_.progress_seconds > 0 ? f_.progress_seconds : 0.25;
    if (!(tty || f_.progress_seconds > 0) || elapsed() - last_progress_ < period) return;
    last_progress_ = elapsed();
    progress_shown_ = true;
    const DedupStats& s = dedup_.stats();
    const double pct = s.documents ? 100.0 * static_cast<double>(s.duplicates()) / static_cast<double>(s.documents) : 0;
    std::string where = "file " + std::to_string(counters_.files + 1) + "/" + std::to_string(files_);
    if (total_bytes_ > 0) {
      const double frac = std::min(1.0, static_cast<double>(bytes) / static_cast<double>(total_bytes_));
      char b[96];
      std::snprintf(b, sizeof b, ", %.1f of %.1f MB (%.0f%%), ETA %s", static_cast<double>(bytes) / 1e6,
                    static_cast<double>(total_bytes_) / 1e6, 100 * frac,
                    frac > 0 ? Duration(last_progress_ * (1 - frac) / frac).c_str() : "?");
      where += b;
    }
    // A log's lines also say where the memory goes as the run grows.
    const std::string memory = f_.progress_seconds > 0 ? "; held " + MemoryText(dedup_) : "";
    std::fprintf(stderr, "%sneardup: %s, %llu documents, %llu duplicates (%.1f%%), %.0f docs/s%s%s",
                 f_.progress_seconds > 0 ? "" : "\r", where.c_str(), static_cast<unsigned long long>(s.documents),
                 static_cast<unsigned long long>(s.duplicates()), pct,
                 static_cast<double>(s.documents) / std::max(last_progress_, 1e-9), memory.c_str(),
                 f_.progress_seconds > 0 ? "\n" : "   ");
    std::fflush(stderr);
  }

  const DedupFlags& f_;
  Deduplicator& dedup_;
  int threads_;
  std::chrono::steady_clock::time_point start_;
  BadLines bad_;
  std::vector<FilePtr> outs_;  // --output, one per shard
  uint64_t written_ = 0;       // records written to outs_
  FilePtr dups_, clusters_file_, stats_file_;
  KeptIds kept_ids_;
  Clusters clusters_;
  Counters counters_;
  Batch cur_;  // the batch being decided and written
  std::vector<DedupDecision> decisions_;
  size_t files_ = 0;
  // --keep longest, --decide join: every signature, by input order, and
  // every decision (--keep longest) or the join that gives them in order.
  struct Precomputed {
    std::vector<DocSignature> sigs;
    std::vector<DedupDecision> decisions;
    std::unique_ptr<JoinDecider> join;  // reads sigs
    LineFacts facts;                    // of every line, for the write pass
    KeptIds::Walker ids;                // over kept_ids_ (every document's), for the write pass
    uint64_t bad_lines = 0;             // so far
    size_t stop_docs = SIZE_MAX;        // documents before the bad line that stops the run
  };
  std::unique_ptr<Precomputed> precomputed_;
  std::unique_ptr<JoinStats> join_;  // --decide join
  uint64_t written_docs_ = 0;  // documents through ReadFile so far
  std::vector<std::string> input_names_;
  std::unique_ptr<KeptFileWriter> saved_;  // --save-index
  Status save_failed_;                     // the first failed write to saved_
  uint64_t loaded_ = 0;                    // documents from --load-index
  // --checkpoint: its files, the state being resumed (or null), this
  // input's kept documents and cluster members, inputs finished.
  std::unique_ptr<CheckpointFiles> checkpoint_;
  const nlohmann::json* resume_ = nullptr;
  std::unique_ptr<KeptFileWriter> segment_;
  Status segment_failed_;
  std::string segment_clusters_;
  std::vector<uint64_t> clusters_checksums_;
  size_t files_done_ = 0;
  std::vector<InputFile> inputs_;
  uint64_t total_bytes_ = 0, done_bytes_ = 0;
  double last_progress_ = 0;
  bool progress_shown_ = false;
};

// --checkpoint: checks the run can be resumed at all, and returns the state
// of the interrupted run to continue (nullopt: none, start afresh).
Result<std::optional<nlohmann::json>> PrepareCheckpoint(const DedupFlags& f, const std::vector<InputFile>& inputs,
                                                        DedupRun& run) {
  if (f.checkpoint.empty()) return std::optional<nlohmann::json>();
  if (f.keep != "first") return Status::InvalidArgument("--checkpoint needs --keep first");
  for (const std::string* out : {&f.output, &f.duplicates, &f.in.rejects}) {
    if (*out == "-") return Status::InvalidArgument("--checkpoint cannot cut back standard output: name files");
    if (IsSpecialFile(*out)) {  // fsync fails on /dev/null; on a FIFO the checkpoint waited forever
      return Status::InvalidArgument("--checkpoint cannot cut back " + *out + " (a device or a pipe): name files");
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(f.checkpoint, ec);
  if (ec) return Status::IOError("cannot create --checkpoint directory " + f.checkpoint + ": " + ec.message());
  NEARDUP_RETURN_IF_ERROR(run.SetCheckpoint(f.checkpoint));
  return CheckpointFiles(f.checkpoint).Load(inputs);
}

// --memory-limit: decided in rounds (RunStagedDedup), for the settings it
// can bound.
int RunDedupInRounds(const DedupFlags& f, std::vector<InputFile> inputs) {
  if (Status st = CheckMemoryLimit(f.memory_limit, f.keep, f.clusters); !st.ok()) return Fail(st);
  StagedDedupArgs a;
  a.in = f.in;
  a.in.inputs.clear();
  for (const InputFile& in : inputs) a.in.inputs.push_back(in.path);
  a.fp = f.fp, a.k = f.k, a.recheck = f.recheck_options;
  a.output = f.output, a.duplicates = f.duplicates, a.annotate = f.annotate, a.stats_json = f.stats_json;
  a.sketch_dir = f.sketch_dir, a.save_index = f.save_index, a.spill_dir = f.spill_dir, a.load_index = f.load_index;
  a.output_shards = f.output_shards, a.threads = ResolveThreads(f.threads);
  a.batch_size = f.batch_size, a.memory_limit = f.memory_limit, a.quiet = f.quiet;
  a.progress_seconds = f.progress_seconds, a.checkpoint = f.checkpoint;
  return RunStagedDedup(a);
}

// --decide join decides every document at once, in memory (batch_join.h):
// the flags that need the stream decision are refused.
Status CheckDecideJoin(const DedupFlags& f) {
  if (f.decide != "join") return Status::OK();
  const std::pair<bool, const char*> refused[] = {{f.memory_limit > 0, "--memory-limit"},
                                                  {!f.load_index.empty(), "--load-index"},
                                                  {!f.checkpoint.empty(), "--checkpoint"},
                                                  {f.keep != "first", "--keep longest"},
                                                  {!f.sketch_dir.empty(), "--sketch-dir"}};
  for (const auto& [given, flag] : refused) {
    if (given) return Status::InvalidArgument(std::string("--decide join cannot be combined with ") + flag);
  }
  return Status::OK();
}

// kInvalidArgument if a name that --checkpoint (its command line and
// inputs), --memory-limit (its round files' headers) or --save-index (the
// manifest's inputs and loaded indexes) records as JSON is not valid UTF-8.
Status CheckRecordedNames(const DedupFlags& f, const std::vector<InputFile>& inputs) {
  std::vector<std::string> paths;
  for (const InputFile& in : inputs) paths.push_back(in.path);
  if (f.memory_limit > 0) NEARDUP_RETURN_IF_ERROR(CheckRecordableNames(paths, "--memory-limit"));
  if (!f.checkpoint.empty()) {
    std::vector<std::string> names = CommandLine();
    names.insert(names.end(), paths.begin(), paths.end());
    NEARDUP_RETURN_IF_ERROR(CheckRecordableNames(names, "--checkpoint"));
  }
  if (f.save_index.empty()) return Status::OK();
  paths.insert(paths.end(), f.load_index.begin(), f.load_index.end());
  return CheckRecordableNames(paths, "--save-index");
}

int RunDedup(const DedupFlags& f) {
  if (Status st = CheckDecideJoin(f); !st.ok()) return Fail(st);
  auto fp_options = ToFingerprintOptions(f.fp);
  if (!fp_options.ok()) return Fail(fp_options.status());
  DedupOptions options;
  options.k = f.k;
  options.fingerprint = fp_options.value();
  options.recheck = f.recheck_options;
  options.sketch_dir = f.sketch_dir;
  options.sketch_without_recheck = !f.save_index.empty();
  auto created = Deduplicator::Create(options);
  if (!created.ok()) return Fail(created.status());
  if (Status st = CheckShardedOutput(f.output, f.output_shards); !st.ok()) return Fail(st);
  const auto outputs = OutputPaths({f.duplicates, f.clusters, f.stats_json, f.in.rejects}, f.output, f.output_shards);
  if (Status st = CheckDistinctOutputs(outputs); !st.ok()) return Fail(st);
  std::vector<std::pair<std::string, std::string>> dirs{{"--save-index", f.save_index}, {"--checkpoint", f.checkpoint}};
  for (const std::string& dir : f.load_index) dirs.emplace_back("--load-index", dir);
  if (Status st = CheckOutputsOutside(outputs, dirs); !st.ok()) return Fail(st);
  if (!f.checkpoint.empty()) {  // a resume lists the inputs again: it would find the outputs among them
    std::vector<std::string> written = outputs;
    written.insert(written.end(), {f.save_index, f.checkpoint});
    if (Status st = CheckOutputsNotInputs(written, f.in.inputs); !st.ok()) return Fail(st);
  }
  if (f.memory_limit > 0 && !f.spill_dir.empty()) {
    // Its scratch directory (ScratchDir: neardup-dedup-XXXXXX), left by a
    // killed run, would be listed as the next run's inputs. Not the spill
    // directory itself: `-i 'part.*' --spill-dir .` finds no scratch.
    const std::string scratch = (std::filesystem::path(f.spill_dir) / "neardup-dedup-XXXXXX").string();
    const Status st = CheckOutputsNotInputs({scratch}, f.in.inputs, "--spill-dir's scratch directory",
                                            "a killed run leaves it there, and the next run would read it");
    if (!st.ok()) return Fail(st);
  }
  if (Status st = CheckAnnotateField(f.annotate, f.in.text_field, f.in.id_field); !st.ok()) return Fail(st);
  if (!f.annotate.empty() && f.in.format != "jsonl") {
    return Fail(Status::InvalidArgument("--annotate adds a field to JSONL records: it needs --format jsonl"));
  }
  auto inputs = ExpandInputs(f.in.inputs.empty() ? std::vector<std::string>{"-"} : f.in.inputs);
  if (!inputs.ok()) return Fail(inputs.status());
  if (Status st = CheckRecordedNames(f, *inputs); !st.ok()) return Fail(st);
  if (f.memory_limit > 0) return RunDedupInRounds(f, *inputs);
  const bool all_first = f.keep == "longest" || f.decide == "join";  // reads the inputs twice
  DedupRun run(f, *created.value(), ResolveThreads(f.threads));
  // Every input is opened before the first output is created (a wrong
  // --input leaves no file behind), then closed: each is opened again when
  // its turn comes, so 10,000 inputs do not hold 10,000 descriptors. The
  // stream of one that can be read only once (standard input, a pipe) is
  // kept: its first bytes are read already.
  std::vector<std::unique_ptr<InputStream>> once(inputs->size());
  for (size_t i = 0; i < inputs->size(); ++i) {
    const std::string& path = (*inputs)[i].path;
    const bool read_once = ReadableOnce(path);
    const std::string once_name = path == "-" ? InputDisplayName(path) : path + " (read once: a pipe or a device)";
    if (read_once && all_first) {
      return Fail(Status::InvalidArgument(std::string(f.keep == "longest" ? "--keep longest" : "--decide join") +
                                          " reads the inputs twice: it needs files, not " + once_name));
    }
    if (read_once && !f.checkpoint.empty()) {
      return Fail(Status::InvalidArgument("--checkpoint cannot resume " + once_name + ": name files"));
    }
    auto s = OpenInput(path);
    if (!s.ok()) return Fail(s.status());
    if (read_once) once[i] = std::move(s).value();
  }
  if (Status st = CheckSaveIsNotLoaded(f.load_index, f.save_index); !st.ok()) return Fail(st);
  for (const std::string& dir : f.load_index) {
    if (Status st = run.LoadKept(dir); !st.ok()) return Fail(st);
  }
  if (all_first) {
    if (Status st = run.DecideAllFirst(*inputs); !st.ok()) return Fail(st);
  }
  auto resume = PrepareCheckpoint(f, *inputs, run);
  if (!resume.ok()) return Fail(resume.status());
  if (Status st = run.OpenOutputs(*inputs, resume->has_value() ? &**resume : nullptr); !st.ok()) return Fail(st);
  size_t first = 0;  // inputs a resumed run had finished
  if (resume->has_value()) {
    auto done = run.Resume(*inputs);
    if (!done.ok()) return Fail(done.status());
    first = *done;
  }
  bool stopped = false;  // too many bad lines (BadLines::Add)
  for (size_t i = first; i < inputs->size() && !stopped; ++i) {
    const std::string& path = (*inputs)[i].path;
    auto in = once[i] ? Result<std::unique_ptr<InputStream>>(std::move(once[i])) : OpenInput(path);
    if (!in.ok()) return Fail(in.status());
    if (Status st = run.ReadFile(std::move(in).value(), path, &stopped); !st.ok()) return Fail(st);
  }
  return run.Finish();
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
  AddInputFlags(cmd, &f->in, "Input documents", /*required=*/true, /*with_id=*/true, /*many=*/true);
  cmd->add_option("-o,--output", f->output,
                  "Kept (unique) documents: their input lines, byte for byte ('-' = stdout)")
      ->required();
  cmd->add_option("--output-shards", f->output_shards,
                  "Split --output into N files, \"{shard}\" in its name replaced by 00000..N-1; records go "
                  "round robin in output order. A name ending in .gz or .zst (any output) is compressed")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--annotate", f->annotate,
                  "Write every document to --output, not only the kept ones, with its decision in this "
                  "JSONL field: {\"kept\": true} or {\"kept\": false, \"duplicate_of\", \"similarity\", "
                  "\"similarity_exact\", \"distance\", \"exact\"} (a field of that name already in a record is replaced; not the --text-field or --id-field)");
  cmd->add_option("--progress", f->progress_seconds,
                  "Print a progress line (files, bytes, documents, ETA from the input sizes) every this many "
                  "seconds, wherever stderr goes; 0 (the default): redrawn on a terminal only")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--sketch-dir", f->sketch_dir,
                  "Keep the kept documents' re-check sketches in an unnamed temporary file in this directory "
                  "instead of memory (read back only for a check's few candidates): the same output in much "
                  "less memory. The file is gone when the run ends")
      ->check(CLI::ExistingDirectory);
  AddMemoryLimitFlags(cmd, &f->memory_limit, &f->spill_dir);
  cmd->add_option("--checkpoint", f->checkpoint,
                  "Make the run resumable: after each input file, make the outputs durable and save the run's "
                  "state in this directory. Run the same command again after an interruption: it continues "
                  "after the last completed input, with the same result as an uninterrupted run. Removed when "
                  "the run succeeds. With --memory-limit: after each round, and the rounds' files are kept there");
  cmd->add_option("-d,--duplicates", f->duplicates,
                  "Duplicates as JSONL: {\"id\", \"duplicate_of\", \"distance\", \"exact\", \"similarity\", "
                  "\"similarity_exact\"}");
  AddDecisionOutputFlags(cmd, &f->load_index, &f->save_index, &f->clusters, &f->keep);
  cmd->add_option("--decide", f->decide,
                  "stream (the default): each document searches the documents kept before it. join: every "
                  "candidate pair is listed first, by sorting, then each document is decided in input order; "
                  "faster on a whole corpus in memory, and its stop keys count earlier distinct documents, not "
                  "kept ones, so a few decisions differ (docs/cli.md). Reads the inputs twice")
      ->check(CLI::IsMember({"stream", "join"}));
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
  cmd->callback([f, exit_code, cmd] {
    RunningCommand() = cmd;
    *exit_code = RunDedup(*f);
  });
}

}  // namespace neardup::cli
