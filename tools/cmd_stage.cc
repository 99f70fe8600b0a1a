// neardup stage: the batch job as stages whose intermediates are files, each
// stage a set of independent tasks a scheduler (Dask, a Slurm job array) can
// run on many machines (docs/SCALING.md, "The staged run"):
//   stage plan         the input files of a run, in the order dedup reads them
//   stage fingerprint  one task per input file: its documents' signatures
//   stage decide       the one sequential task: every document in stream order
//                      through Deduplicator (the rule of `neardup dedup`)
//   stage filter       one task per input file: its kept / annotated records
//                      and duplicate lines
// The filter outputs of files 0, 1, ... concatenate to exactly what
// `neardup dedup` writes for the same inputs and settings.
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <xxhash.h>

#include "commands.h"
#include "dedup_output.h"
#include "dir_lock.h"
#include "input_files.h"
#include "neardup/dedup/dedup.h"
#include "neardup/dedup/staged_files.h"
#include "checkpoint_log.h"
#include "dedup_checkpoint.h"
#include "pending_outputs.h"
#include "util/append_file.h"
#include "util/special_file.h"
#include "util/temp_file.h"

namespace neardup::cli {
namespace {

using Json = nlohmann::ordered_json;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- the settings of a run ---------------------------------------------------
// Given to `stage fingerprint`, carried in every stage file; decide refuses
// shards whose settings differ and takes its decision settings from them.

struct RunSettings {
  InputFlags in;
  FingerprintFlags fp;
  int k = 3;
  RecheckOptions recheck;
};

Json SettingJson(const SettingValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* d = std::get_if<double>(&v)) return *d;  // JSON keeps a double exactly
  return std::get<std::string>(v);
}

Json SettingsJson(const RunSettings& s, uint64_t scheme_id) {
  Json j;
  j["format"] = s.in.format;
  j["id_field"] = s.in.id_field;
  j["text_field"] = s.in.text_field;
  j["max_text_bytes"] = s.in.max_text_bytes;
  j["scheme_id"] = FingerprintToHex(scheme_id);  // tokenizer, n-gram, IDF table
  j["tokenizer"] = s.fp.tokenizer;
  j["cjk_ngram"] = s.fp.cjk_ngram;
  j["k"] = s.k;
  Json r;
  for (const Setting<RecheckOptions>& d : RecheckSettingTable()) r[d.flag] = SettingJson(d.get(s.recheck));
  j["recheck"] = r;
  return j;
}

// The decision settings of a run from its settings JSON.
Result<DedupOptions> OptionsFromSettings(const Json& j) {
  try {
    DedupOptions o;
    o.k = j.at("k").get<int>();
    o.fingerprint.tokenizer =
        j.at("tokenizer").get<std::string>() == "icu-words" ? TokenizerKind::kIcuWords : TokenizerKind::kMixedNgram;
    o.fingerprint.cjk_ngram = j.at("cjk_ngram").get<int>();
    const Json& r = j.at("recheck");
    for (const Setting<RecheckOptions>& d : RecheckSettingTable()) {
      const Json& v = r.at(d.flag);
      SettingValue value;
      switch (d.type) {
        case SettingType::kBool: value = v.get<bool>(); break;
        case SettingType::kInt:
        case SettingType::kDuration: value = v.get<int64_t>(); break;
        case SettingType::kDouble: value = v.get<double>(); break;
        case SettingType::kChoice: value = v.get<std::string>(); break;
      }
      NEARDUP_RETURN_IF_ERROR(CheckSettingValue(d, value));
      d.set(o.recheck, value);
    }
    return o;
  } catch (const Json::exception& e) {
    return Status::Corruption(std::string("settings of a stage file: ") + e.what());
  }
}

// A stage file's JSON header.
Result<Json> ParseHeader(const StageFileReader& r) {
  try {
    Json j = Json::parse(r.header());
    if (!j.is_object() || !j.contains("settings") || !j.contains("shard") || !j.contains("shards")) {
      return Status::Corruption(r.path() + ": stage file header lacks settings or shard");
    }
    return j;
  } catch (const Json::exception& e) {
    return Status::Corruption(r.path() + ": stage file header is not JSON: " + e.what());
  }
}

Result<Json> ParseSummary(std::string_view record, const std::string& path) {
  try {
    return Json::parse(record.substr(1));
  } catch (const Json::exception& e) {
    return Status::Corruption(path + ": summary record is not JSON: " + e.what());
  }
}

// The error of a record that does not decode: the file's checksum mismatch
// when the rest of it shows one (damage), else `st` (written malformed).
Status Malformed(StageFileReader& reader, const Status& st) {
  Status whole = reader.SkipToEnd();
  if (!whole.ok()) return whole;
  return Status::Corruption(st.message().starts_with(reader.path()) ? st.message()
                                                                     : reader.path() + ": " + st.message());
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

int64_t FileMtimeNs(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// ---- stage plan --------------------------------------------------------------

struct PlanFlags {
  std::vector<std::string> inputs;
};

int RunPlan(const PlanFlags& f) {
  auto inputs = ExpandInputs(f.inputs);
  if (!inputs.ok()) return Fail(inputs.status());
  Json j = Json::array();
  for (const InputFile& in : *inputs) {
    if (Status st = CheckRecordableNames({in.path}, "stage plan"); !st.ok()) return Fail(st);
    // Checked before opening: opening a pipe with no writer waits for one.
    if (ReadableOnce(in.path)) {
      return Fail(Status::InvalidArgument("a staged run reads each input twice: " +
                                          (in.path == "-" ? std::string("standard input ('-')") : in.path) +
                                          " can be read only once (a pipe or a device); copy it to a file"));
    }
    if (Status st = OpenInput(in.path).status(); !st.ok()) return Fail(st);
    j.push_back(Json{{"path", in.path}, {"bytes", in.size}});
  }
  std::printf("%s\n", j.dump().c_str());
  return kExitOk;
}

// The header of input `path`'s signatures: the run's settings, the input
// as it is now, its place in the run.
Json SignaturesHeader(const RunSettings& run, uint64_t scheme_id, const std::string& path, int shard, int shards) {
  Json header;
  header["stage"] = "signatures";
  header["settings"] = SettingsJson(run, scheme_id);
  header["input"] = path;
  header["input_bytes"] = FileSize(path);
  header["input_mtime_ns"] = FileMtimeNs(path);
  header["shard"] = shard;
  header["shards"] = shards;
  return header;
}

// Reads one input, analyzes its documents a batch at a time and calls
// each(doc) for every one in order; its bad lines go to `bad` (*stopped when
// bad.Add says stop: --strict, --max-bad-lines). Returns the input's summary:
// lines, documents, bad and blank lines, truncated texts, invalid UTF-8 and
// a digest of the lines (the filter checks the input against it).
// The first `skip` documents are parsed and counted but not analyzed: each()
// gets them with an empty signature (a round that starts past them).
// *bytes_read, when given, follows the bytes read from the file (compressed
// as they are), a batch at a time: progress.
// `id_source`: as ToReaderOptions'.
template <typename Each>
Result<Json> AnalyzeInput(const RunSettings& run, std::unique_ptr<InputStream> in, const std::string& id_source,
                          int threads, size_t batch_size, Deduplicator& analyzer, BadLines& bad, bool* stopped,
                          Each&& each, uint64_t skip = 0, uint64_t* bytes_read = nullptr) {
  RecordReader reader(std::move(in), ToReaderOptions(run.in, id_source));
  LineDigest digest;
  std::vector<InputRecord> batch;
  std::vector<std::string_view> texts;
  std::vector<DocSignature> sigs;
  uint64_t documents = 0, blank = 0, truncated = 0;
  const uint64_t bad_before = bad.count(), invalid_before = analyzer.stats().invalid_utf8;
  while (!*stopped) {
    NEARDUP_RETURN_IF_ERROR(reader.ReadBatch(batch_size, threads, &batch));
    if (bytes_read != nullptr) *bytes_read = reader.input_bytes();
    if (batch.empty()) break;
    texts.clear();
    uint64_t seen = documents;
    for (const InputRecord& r : batch) {
      if (r.kind == InputRecord::Kind::kDocument && seen++ >= skip) texts.push_back(r.text());
    }
    analyzer.Analyze(texts, &sigs, threads);  // counts invalid UTF-8 in analyzer.stats()
    size_t next_sig = 0;
    for (size_t i = 0; i < batch.size() && !*stopped; ++i) {
      InputRecord& r = batch[i];
      digest.Add(r.line);
      if (r.kind == InputRecord::Kind::kBlank) {
        ++blank;
        continue;
      }
      if (r.kind == InputRecord::Kind::kBad) {
        *stopped = !bad.Add(r);
        continue;
      }
      truncated += r.truncated;
      StagedDoc doc{r.line_number, std::move(r.id), documents++ >= skip ? std::move(sigs[next_sig++]) : DocSignature{}};
      NEARDUP_RETURN_IF_ERROR(each(doc));
    }
  }
  Json summary;
  summary["lines"] = digest.lines();
  summary["documents"] = documents;
  summary["bad_lines"] = bad.count() - bad_before;
  summary["blank_lines"] = blank;
  summary["truncated_texts"] = truncated;
  summary["invalid_utf8"] = analyzer.stats().invalid_utf8 - invalid_before;
  summary["line_digest"] = FingerprintToHex(digest.digest());
  return summary;
}

// ---- stage fingerprint ---------------------------------------------------------

struct FingerprintStageFlags {
  RunSettings run;
  std::string output;
  int shard = 0;
  int shards = 1;
  int threads = 0;
  size_t batch_size = 4096;
  bool quiet = false;
  bool keep_existing = false;  // --keep-existing: a complete shard of the same task is left alone
};

// Whether `path` already holds this task's complete shard: the same header
// (settings, input path, size and modification time, shard) and a good
// checksum. Anything else is rewritten.
bool ShardIsCurrent(const std::string& path, const std::string& header) {
  auto reader = StageFileReader::Open(path, StageFileKind::kSignatures);
  return reader.ok() && (*reader)->header() == header && (*reader)->SkipToEnd().ok();
}

int RunFingerprintStage(const FingerprintStageFlags& f) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string& path = f.run.in.input;
  if (path == "-") {
    return Fail(Status::InvalidArgument("stage fingerprint reads a file (the filter stage reads it again), "
                                        "not standard input"));
  }
  if (Status st = CheckRecordableNames({path}, "stage fingerprint (the shard's header)"); !st.ok()) return Fail(st);
  if (f.shard >= f.shards) {
    return Fail(Status::InvalidArgument("--shard " + std::to_string(f.shard) + " is not below --shards " +
                                        std::to_string(f.shards)));
  }
  auto fp_options = ToFingerprintOptions(f.run.fp);
  if (!fp_options.ok()) return Fail(fp_options.status());
  DedupOptions options;
  options.k = f.run.k;
  options.fingerprint = fp_options.value();
  options.recheck = f.run.recheck;
  auto created = Deduplicator::Create(options);
  if (!created.ok()) return Fail(created.status());
  Deduplicator& dedup = *created.value();
  for (const std::string* out : {&f.output, &f.run.in.rejects}) {
    if (Status st = CheckNotInput(path, *out); !st.ok()) return Fail(st);
  }
  auto in = OpenInput(path);
  if (!in.ok()) return Fail(in.status());
  const Json header = SignaturesHeader(f.run, dedup.scheme_id(), path, f.shard, f.shards);
  if (f.keep_existing && ShardIsCurrent(f.output, header.dump())) {
    if (!f.quiet) std::fprintf(stderr, "neardup stage fingerprint: %s is up to date\n", f.output.c_str());
    return kExitOk;
  }
  BadLines bad;
  if (Status st = bad.Open(f.run.in, f.quiet); !st.ok()) return Fail(st);
  bad.SetSource(path);
  auto writer = StageFileWriter::Create(f.output, StageFileKind::kSignatures, header.dump());
  if (!writer.ok()) return Fail(writer.status());

  bool stopped = false;
  std::string record;
  auto summary = AnalyzeInput(f.run, std::move(in).value(), f.shards > 1 ? path : "", ResolveThreads(f.threads),
                              f.batch_size, dedup, bad,
                              &stopped, [&](StagedDoc& doc) {
                                record.clear();
                                EncodeStagedDoc(doc, &record);
                                return (*writer)->Add(record);
                              });
  if (!summary.ok()) return Fail(summary.status());
  // A task stopped by bad lines leaves no shard. Whether every line of the
  // run was bad is for decide to say (one file of them may be all bad).
  const uint64_t documents = (*summary)["documents"].get<uint64_t>();
  if (const int rc = bad.Finish(std::max<uint64_t>(documents, 1)); rc != kExitOk) return rc;
  record = static_cast<char>(StageRecordType::kSummary) + summary->dump();
  if (Status st = (*writer)->Add(record); !st.ok()) return Fail(st);
  if (Status st = (*writer)->Finish(); !st.ok()) return Fail(st);
  if (!f.quiet) {
    std::fprintf(stderr, "neardup stage fingerprint: %s: %llu documents, %llu bytes of signatures, %.3f s\n",
                 path.c_str(), static_cast<unsigned long long>(documents),
                 static_cast<unsigned long long>((*writer)->bytes()), Since(t0));
  }
  return kExitOk;
}

// ---- stage decide --------------------------------------------------------------

struct DecideFlags {
  std::vector<std::string> signatures;
  std::string output_dir;
  std::string stats_json;
  std::string sketch_dir;               // --sketch-dir: as dedup's
  std::vector<std::string> load_index;  // --load-index: as dedup's
  std::string save_index;               // --save-index: as dedup's
  std::string clusters;                 // --clusters: as dedup's
  std::string keep = "first";           // --keep: as dedup's
  int threads = 1;                      // --threads: searches of a batch on this many threads
  size_t memory_limit = 0;              // --memory-limit: bytes, 0 = none (decide in rounds past it)
  std::string spill_dir;                // --spill-dir: the rounds' spill files
  double progress_seconds = 0;          // --progress: with --memory-limit, a line every this many seconds
  bool quiet = false;
  struct RoundCheckpoint* checkpoint = nullptr;  // dedup --memory-limit --checkpoint (no flag of stage decide)
  std::function<double()> fraction_read;         // dedup: the share of the input bytes read (progress)
  const char* command = "neardup stage decide";  // the summary lines' label; its shards are "inputs" otherwise
};

// The decision file of shard i in DIR (the name the driver passes to filter).
std::string DecisionsPath(const std::string& dir, int shard) {
  char name[32];
  std::snprintf(name, sizeof name, "%05d.dec", shard);
  return (std::filesystem::path(dir) / name).string();
}

struct ShardInfo {
  std::string path;
  Json header;
};

// Removes DIR's decision files of shards 0..n-1, before a decide (not a
// resumed one) writes them: one that fails then leaves no earlier run's
// file beside its own. It renamed its first shards' files over an earlier
// run's and failed, and filter took the mix, exit 0 (a tester, 2026-12-02).
Status RemoveDecisions(const std::string& dir, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const std::string path = DecisionsPath(dir, static_cast<int>(i));
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::IOError("cannot remove " + path + " (an earlier run's decisions): " + std::strerror(errno));
    }
  }
  return Status::OK();
}

// kInvalidArgument if two shards were made from one input file (the same
// path, size and modification time, as fingerprint recorded them): its
// second reading would be all duplicates, as `dedup` refuses a file named
// twice. decide took it and exited 0 (a tester, 2026-12-02).
Status CheckShardsOfDistinctInputs(const std::vector<ShardInfo>& shards) {
  std::map<std::tuple<std::string, uint64_t, int64_t>, size_t> seen;
  for (size_t i = 0; i < shards.size(); ++i) {
    const Json& h = shards[i].header;
    const auto key = std::make_tuple(h.value("input", std::string()), h.value("input_bytes", uint64_t{0}),
                                     h.value("input_mtime_ns", int64_t{0}));
    if (auto [it, fresh] = seen.emplace(key, i); !fresh) {
      return Status::InvalidArgument("signature shards " + std::to_string(it->second) + " and " + std::to_string(i) +
                                     " (" + shards[it->second].path + ", " + shards[i].path + ") were both made from " +
                                     std::get<0>(key) + ": the second would be all duplicates of the first");
    }
  }
  return Status::OK();
}

// Reads every shard's header and checks that they form one run: the same
// settings, shards 0..n-1 each exactly once, of distinct inputs. Returns
// them in shard order.
Result<std::vector<ShardInfo>> CheckShards(const std::vector<InputFile>& files) {
  std::vector<ShardInfo> shards;
  for (const InputFile& file : files) {
    NEARDUP_ASSIGN_OR_RETURN(auto reader, StageFileReader::Open(file.path, StageFileKind::kSignatures));
    NEARDUP_ASSIGN_OR_RETURN(Json header, ParseHeader(*reader));
    shards.push_back(ShardInfo{file.path, std::move(header)});
  }
  if (shards.empty()) return Status::InvalidArgument("no signature shard given");
  const Json& first = shards[0].header;
  const int64_t n = first["shards"].get<int64_t>();
  std::vector<const ShardInfo*> by_index(static_cast<size_t>(std::max<int64_t>(n, 0)), nullptr);
  for (const ShardInfo& s : shards) {
    if (s.header["settings"] != first["settings"]) {
      return Status::InvalidArgument(s.path + " was made with other settings than " + shards[0].path + " (" +
                                     s.header["settings"].dump() + " against " + first["settings"].dump() +
                                     "): every shard of a run needs the same fingerprint settings");
    }
    if (s.header["shards"] != first["shards"]) {
      return Status::InvalidArgument(s.path + " is shard " + s.header["shard"].dump() + " of " +
                                     s.header["shards"].dump() + ", " + shards[0].path + " one of " +
                                     first["shards"].dump() + ": shards of different runs");
    }
    const int64_t i = s.header["shard"].get<int64_t>();
    if (i < 0 || i >= n) return Status::Corruption(s.path + ": shard number out of range");
    if (by_index[static_cast<size_t>(i)] != nullptr) {
      return Status::InvalidArgument("shard " + std::to_string(i) + " is given twice: " +
                                     by_index[static_cast<size_t>(i)]->path + " and " + s.path);
    }
    by_index[static_cast<size_t>(i)] = &s;
  }
  std::vector<ShardInfo> ordered;
  for (size_t i = 0; i < by_index.size(); ++i) {
    if (by_index[i] == nullptr) {
      return Status::InvalidArgument("signature shard " + std::to_string(i) + " of " + std::to_string(n) +
                                     " is missing (did its fingerprint task finish?)");
    }
    ordered.push_back(*by_index[i]);
  }
  NEARDUP_RETURN_IF_ERROR(CheckShardsOfDistinctInputs(ordered));
  return ordered;
}

struct DecideTotals {
  LineCounts counts;
  uint64_t invalid_utf8 = 0;
};

// The state of the decision across the shards.
struct DecideState {
  explicit DecideState(Deduplicator& d) : dedup(d) {}
  Deduplicator& dedup;
  KeptIds kept_ids;
  DecideTotals totals;
  uint64_t loaded = 0;     // documents of --load-index, sequence numbers 0..loaded-1
  uint64_t documents = 0;  // this run's documents decided so far (sequence loaded + documents next)
  uint64_t kept = 0;       // of them kept
  std::unique_ptr<KeptFileWriter> saved;      // --save-index
  KeptFileWriter* segment = nullptr;          // --memory-limit --checkpoint: the round's kept documents of this shard
  std::unique_ptr<Clusters> clusters;         // --clusters
  std::vector<DedupDecision> longest;         // --keep longest: every decision, in input order
  bool keep_longest = false;
  int threads = 1;
};

// Calls each(doc) for every document record of a signature shard, in order;
// returns its summary.
template <typename Each>
Result<Json> ReadSignatureShard(const ShardInfo& shard, StageFileReader& reader, Each&& each) {
  std::string_view record;
  StagedDoc doc;
  std::optional<Json> summary;
  while (reader.Next(&record)) {
    if (record.empty() || summary) return Status::Corruption(shard.path + ": a record after the summary");
    if (record[0] == static_cast<char>(StageRecordType::kSummary)) {
      auto parsed = ParseSummary(record, shard.path);
      if (!parsed.ok()) return Malformed(reader, parsed.status());
      summary = std::move(parsed).value();
      continue;
    }
    if (Status st = DecodeStagedDoc(record, &doc); !st.ok()) return Malformed(reader, st);
    NEARDUP_RETURN_IF_ERROR(each(doc));
  }
  NEARDUP_RETURN_IF_ERROR(reader.status());
  if (!summary) return Status::Corruption(shard.path + ": no summary record");
  return std::move(*summary);
}

// --keep longest: every shard's documents, then the decision of them all from
// the longest text to the shortest (as dedup's). Every id is kept by
// sequence number: a kept one may come later in the input.
Status DecideAllLongestFirst(const std::vector<ShardInfo>& shards, DecideState& st) {
  std::vector<DocSignature> sigs;
  for (const ShardInfo& shard : shards) {
    NEARDUP_ASSIGN_OR_RETURN(auto reader, StageFileReader::Open(shard.path, StageFileKind::kSignatures));
    NEARDUP_RETURN_IF_ERROR(ReadSignatureShard(shard, *reader, [&](StagedDoc& doc) {
                              st.kept_ids.Add(st.loaded + sigs.size(), doc.id);
                              sigs.push_back(std::move(doc.sig));
                              return Status::OK();
                            }).status());
  }
  NEARDUP_ASSIGN_OR_RETURN(st.longest, DecideLongestFirst(st.dedup, sigs, st.loaded));
  st.keep_longest = true;
  return Status::OK();
}

// The best kept document the rounds of --memory-limit have found so far for
// a later document, and its raw id (its round's ids are gone by the time the
// document is decided).
struct Provisional {
  std::optional<DuplicateMatch> match;
  std::string id;
};

std::optional<std::string> EarlierId(const Provisional* earlier, uint64_t duplicate_of) {
  if (earlier == nullptr || !earlier->match || earlier->match->id != duplicate_of) return std::nullopt;
  return earlier->id;
}

// Writes the next document's decision record and keeps what later ones need
// (its id when kept, its cluster, the saved index).
// `earlier`: the document an earlier round of --memory-limit matched it to
// (its id is no longer in st.kept_ids), or null.
Status WriteDecision(StagedDoc& doc, const DedupDecision& d, DecideState& st, StageFileWriter& writer,
                     const Provisional* earlier = nullptr) {
  const uint64_t sequence = st.loaded + st.documents;
  ++st.documents;
  StagedDecision s{doc.line_number, d, {}, {}};
  if (d.duplicate) {
    s.duplicate_of_id = EarlierId(earlier, d.duplicate_of).value_or(std::string(st.kept_ids.Find(d.duplicate_of)));
    if (st.clusters) st.clusters->Add(d.duplicate_of, doc.id);
    s.id = std::move(doc.id);
  } else {
    ++st.kept;
    if (st.saved) NEARDUP_RETURN_IF_ERROR(st.saved->Add(sequence, doc.id, doc.sig));
    if (st.segment) NEARDUP_RETURN_IF_ERROR(st.segment->Add(sequence, doc.id, doc.sig));
    if (!st.keep_longest) st.kept_ids.Add(sequence, doc.id);
  }
  thread_local std::string out;
  out.clear();
  EncodeStagedDecision(s, &out);
  return writer.Add(out);
}

// A shard's decision file, opened when its first document is decided: its
// header says how many documents and kept documents the shards before it had
// (where its records fall in the --output-shards round robin).
Result<std::unique_ptr<StageFileWriter>> OpenDecisions(const ShardInfo& shard, const std::string& out_path,
                                                       const DecideState& st) {
  Json header = shard.header;
  header["stage"] = "decisions";
  header["first_sequence"] = st.loaded + st.documents;
  header["written_before"] = {{"documents", st.documents}, {"kept", st.kept}};
  return StageFileWriter::Create(out_path, StageFileKind::kDecisions, header.dump());
}

// Ends a shard's decision file with its summary (the filter checks the
// input against it) and counts its lines.
Status FinishDecisions(const ShardInfo& shard, const Json& summary, StageFileWriter& writer, DecideTotals& totals) {
  NEARDUP_RETURN_IF_ERROR(writer.Add(static_cast<char>(StageRecordType::kSummary) + summary.dump()));
  try {
    totals.counts.lines += summary["lines"].get<uint64_t>();
    totals.counts.bad_lines += summary["bad_lines"].get<uint64_t>();
    totals.counts.blank_lines += summary["blank_lines"].get<uint64_t>();
    totals.counts.truncated_texts += summary["truncated_texts"].get<uint64_t>();
    totals.invalid_utf8 += summary["invalid_utf8"].get<uint64_t>();
  } catch (const Json::exception& e) {
    return Status::Corruption(shard.path + ": summary: " + e.what());
  }
  ++totals.counts.files;
  return writer.Finish();
}

// Decides one shard's documents (or takes their --keep longest decisions),
// writing its decision file. Its header says how many documents and kept
// documents the shards before it had: where its records fall in the
// --output-shards round robin.
Status DecideShard(const ShardInfo& shard, const std::string& out_path, DecideState& st) {
  NEARDUP_ASSIGN_OR_RETURN(auto reader, StageFileReader::Open(shard.path, StageFileKind::kSignatures));
  NEARDUP_ASSIGN_OR_RETURN(auto writer, OpenDecisions(shard, out_path, st));
  // Documents are decided a batch at a time (Deduplicator::DecideBatch, on
  // --threads), then written in order.
  constexpr size_t kBatch = 4096;
  std::vector<StagedDoc> docs;
  std::vector<DocSignature> sigs;
  std::vector<DedupDecision> decisions;
  auto flush = [&]() -> Status {
    if (st.keep_longest) {
      if (st.documents + docs.size() > st.longest.size()) return Status::Corruption(shard.path + ": changed since it was read");
      decisions.assign(st.longest.begin() + static_cast<std::ptrdiff_t>(st.documents),
                       st.longest.begin() + static_cast<std::ptrdiff_t>(st.documents + docs.size()));
    } else {
      sigs.resize(docs.size());
      for (size_t i = 0; i < docs.size(); ++i) sigs[i] = std::move(docs[i].sig);
      NEARDUP_RETURN_IF_ERROR(st.dedup.DecideBatch(sigs, &decisions, st.threads));
      for (size_t i = 0; i < docs.size(); ++i) docs[i].sig = std::move(sigs[i]);
    }
    for (size_t i = 0; i < docs.size(); ++i) NEARDUP_RETURN_IF_ERROR(WriteDecision(docs[i], decisions[i], st, *writer));
    docs.clear();
    return Status::OK();
  };
  auto summary = ReadSignatureShard(shard, *reader, [&](StagedDoc& doc) -> Status {
    docs.push_back(std::move(doc));
    return docs.size() == kBatch ? flush() : Status::OK();
  });
  NEARDUP_RETURN_IF_ERROR(summary.status());
  NEARDUP_RETURN_IF_ERROR(flush());
  // The filter checks the input against the summary.
  return FinishDecisions(shard, *summary, *writer, st.totals);
}

// ---- stage decide --memory-limit: deciding in rounds ---------------------------
// docs/SCALING.md, "Deciding in bounded memory". A round decides documents in
// stream order, from the first one no round has decided, while its kept
// documents' structures fit the budget. The documents after that point are
// then only searched against the round's kept ones, and each one's best match
// so far is spilled to a file. The next round starts at that point with an
// empty set and those matches as priors (Deduplicator::DecideBatch), so every
// document is judged against every document kept before it while memory holds
// one round's kept documents. Each round reads the documents again (a
// ShardReader: the signature shards, or the inputs analyzed again).

// What a round's kept documents may hold of --memory-limit (their own
// accounting: Deduplicator::MemoryBytes and the raw ids). The rest is for
// what that accounting does not see: the heap's slack, a table's copy while
// it grows, a batch of signatures, buffers. 80 % was too much: 10M short
// documents under 512 MiB held 379 MB and peaked at 602 MB of RSS
// (docs/BENCHMARKS.md, "Deciding in bounded memory").
size_t RoundBudget(size_t limit) {
  constexpr size_t kFixed = size_t{48} << 20;
  const size_t share = limit / 10 * 6;
  return share > kFixed + limit / 4 ? share - kFixed : limit / 4;
}

// `dir`, or the system's temporary directory when it is empty.
Result<std::filesystem::path> ScratchParent(const std::string& dir) {
  if (!dir.empty()) return std::filesystem::path(dir);
  std::error_code ec;
  std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  if (ec) return Status::IOError("no temporary directory (TMPDIR): " + ec.message() + "; give --spill-dir");
  return tmp;
}

// One round's spill: per later document its Provisional, in stream order, in
// an unnamed temporary file (gone with the process, however it ends).
class SpillFile {
 public:
  static Result<std::unique_ptr<SpillFile>> Create(const std::string& dir) {
    NEARDUP_ASSIGN_OR_RETURN(const std::filesystem::path parent, ScratchParent(dir));
    const int fd = OpenUnnamedFile(parent.string());
    if (fd < 0) return Status::IOError("cannot create a spill file in " + parent.string() + ": " + std::strerror(errno));
    std::FILE* file = ::fdopen(fd, "w+b");
    if (file == nullptr) {
      ::close(fd);
      return Status::IOError("cannot open a spill file: " + std::string(std::strerror(errno)));
    }
    return std::unique_ptr<SpillFile>(new SpillFile(file));
  }
  // A named spill (--checkpoint: a resumed run reads it): created empty for
  // writing then reading, or opened for reading.
  static Result<std::unique_ptr<SpillFile>> Named(const std::string& path, bool create) {
    std::FILE* file = std::fopen(path.c_str(), create ? "w+b" : "rb");
    if (file == nullptr) {
      return Status::IOError("cannot " + std::string(create ? "create " : "open ") + path + ": " + std::strerror(errno));
    }
    return std::unique_ptr<SpillFile>(new SpillFile(file));
  }
  ~SpillFile() {
    std::fclose(file_);
    XXH3_freeState(hash_);
  }

  // Makes the spill durable (a checkpoint refers to it).
  Status Sync() { return SyncStream(file_, "a spill file of --memory-limit"); }

  Status Put(const Provisional& p) {
    record_.assign(1, static_cast<char>(p.match ? 1 : 0));
    if (p.match) {
      const DuplicateMatch& m = *p.match;
      const uint8_t flags = (m.exact ? 1 : 0) | (m.rechecked ? 2 : 0) | (m.similarity_exact ? 4 : 0);
      const uint64_t id = m.id;
      const int32_t distance = m.distance;
      const uint32_t len = static_cast<uint32_t>(p.id.size());
      Append(&id, sizeof id), Append(&distance, sizeof distance), Append(&flags, 1);
      Append(&m.similarity, sizeof m.similarity), Append(&len, sizeof len), Append(p.id.data(), len);
    }
    if (std::fwrite(record_.data(), 1, record_.size(), file_) != record_.size()) return WriteError();
    XXH3_64bits_update(hash_, record_.data(), record_.size());
    bytes_ += record_.size();
    return Status::OK();
  }

  // What Put wrote: its length and XXH3-64, for a checkpoint to record
  // (a resumed run must not take a damaged spill's matches as priors).
  Json Written() const { return {{"bytes", bytes_}, {"digest", XXH3_64bits_digest(hash_)}}; }

  // Checks the whole file against Written()'s record, then rewinds.
  // kCorruption when it differs.
  Status Verify(const Json& written, const std::string& path) {
    XXH3_state_t* h = XXH3_createState();
    XXH3_64bits_reset(h);
    const Status st = HashedPrefix(written, path, /*whole=*/true, h);
    XXH3_freeState(h);
    std::rewind(file_);
    return st;
  }

  // A spill a checkpoint left unfinished (`written`: its Written() then),
  // cut back to that length and appended to from there, as if this process
  // had written it. kCorruption when its first bytes are not those.
  static Result<std::unique_ptr<SpillFile>> Reopen(const std::string& path, const Json& written) {
    std::FILE* file = std::fopen(path.c_str(), "r+b");
    if (file == nullptr) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
    std::unique_ptr<SpillFile> spill(new SpillFile(file));
    NEARDUP_RETURN_IF_ERROR(spill->HashedPrefix(written, path, /*whole=*/false, spill->hash_));
    spill->bytes_ = written.at("bytes").get<uint64_t>();
    if (std::fflush(file) != 0 || ::ftruncate(fileno(file), static_cast<off_t>(spill->bytes_)) != 0 ||
        std::fseek(file, static_cast<long>(spill->bytes_), SEEK_SET) != 0) {
      return Status::IOError("cannot cut " + path + " back to the checkpoint: " + std::strerror(errno));
    }
    return spill;
  }

  // Where the reads stand (a checkpoint records it), and a return there.
  uint64_t Tell() const { return static_cast<uint64_t>(std::ftell(file_)); }
  Status Seek(uint64_t offset) {
    if (std::fseek(file_, static_cast<long>(offset), SEEK_SET) != 0) return ReadError();
    return Status::OK();
  }

  // Done writing: the reads start from the first record.
  Status Rewind() {
    if (std::fflush(file_) != 0) return WriteError();
    std::rewind(file_);
    return Status::OK();
  }

  Status Get(Provisional* p) {
    uint8_t tag = 0;
    if (std::fread(&tag, 1, 1, file_) != 1 || tag > 1) return ReadError();
    p->match.reset();
    p->id.clear();
    if (tag == 0) return Status::OK();
    DuplicateMatch m;
    uint64_t id = 0;
    int32_t distance = 0;
    uint8_t flags = 0;
    uint32_t len = 0;
    if (std::fread(&id, sizeof id, 1, file_) != 1 || std::fread(&distance, sizeof distance, 1, file_) != 1 ||
        std::fread(&flags, 1, 1, file_) != 1 || std::fread(&m.similarity, sizeof m.similarity, 1, file_) != 1 ||
        std::fread(&len, sizeof len, 1, file_) != 1 || len > (1u << 30)) {
      return ReadError();
    }
    p->id.resize(len);
    if (std::fread(p->id.data(), 1, len, file_) != len) return ReadError();
    m.id = id;
    m.distance = distance;
    m.exact = flags & 1, m.rechecked = flags & 2, m.similarity_exact = flags & 4;
    p->match = m;
    return Status::OK();
  }

 private:
  explicit SpillFile(std::FILE* file) : file_(file), hash_(XXH3_createState()) { XXH3_64bits_reset(hash_); }
  // Hashes into `h` the file's first written["bytes"] bytes (all of it, which
  // must be that long, when `whole`) and checks their XXH3 against
  // written["digest"]. kCorruption when either differs.
  Status HashedPrefix(const Json& written, const std::string& path, bool whole, XXH3_state_t* h) {
    const std::string damaged = path + ": damaged (not the length or checksum the checkpoint recorded)";
    uint64_t want = 0, want_digest = 0;
    try {
      want = written.at("bytes").get<uint64_t>(), want_digest = written.at("digest").get<uint64_t>();
    } catch (const Json::exception&) {
      return Status::Corruption(damaged);
    }
    uint64_t bytes = 0;
    std::vector<char> buf(1 << 20);
    for (size_t n; bytes < want || whole; bytes += n) {
      n = std::fread(buf.data(), 1, whole ? buf.size() : std::min<uint64_t>(buf.size(), want - bytes), file_);
      if (n == 0) break;
      XXH3_64bits_update(h, buf.data(), n);
    }
    if (std::ferror(file_)) return ReadError();
    if (bytes != want || XXH3_64bits_digest(h) != want_digest) return Status::Corruption(damaged);
    return Status::OK();
  }
  void Append(const void* data, size_t n) { record_.append(static_cast<const char*>(data), n); }
  static Status WriteError() { return FileWriteError("writing a spill file of --memory-limit", errno); }
  Status ReadError() const {
    return std::ferror(file_) ? Status::IOError("reading a spill file of --memory-limit: " +
                                                std::string(std::strerror(errno)))
                              : Status::Corruption("a spill file of --memory-limit ends early");
  }
  std::FILE* file_;
  XXH3_state_t* hash_;  // of every byte Put wrote
  uint64_t bytes_ = 0;
  std::string record_;  // Put's scratch
};

// Reads shard s's documents for a round: each(doc) for every one in order,
// then the shard's summary. From its signature file (stage decide) or from its
// input, analyzed again (dedup --memory-limit: no signature files on disk).
// `skip`: how many of its first documents the round does not need (they may
// come without their signatures).
using ShardReader =
    std::function<Result<Json>(size_t s, uint64_t skip, const std::function<Status(StagedDoc&)>& each)>;

// dedup --memory-limit --checkpoint DIR (docs/cli.md, "Resuming an
// interrupted run"): the rounds' files live in DIR/rounds. At the end of
// every input file a round reads (but the last), and at the end of every
// round (but the last), once they are durable, rounds.json records where
// the run stands and what the rounds carry: the counters, the unfinished
// decision file's and --save-index's length and checksum, the spills'
// lengths and checksums, the round's kept documents so far (kept-R-S.ndk:
// those it kept while reading input S). What does not change once written
// goes to rounds.log (CheckpointLog): the run's identity (command line, the
// inputs' headers), then each shard's first document and summary as round 1
// learns them. A restart with the same command line reloads them and
// continues with the next input file: a crash loses at most the file it
// interrupted.
struct RoundCheckpoint {
  std::string dir;                    // DIR/rounds: dec/, index/, spill-N, kept-R-S.ndk, rounds.json, rounds.log
  std::optional<Json> resume;         // the state of the run being resumed, or none
  Json identity;                      // the log's first line: command line, inputs, --load-index
  std::function<Status(Json*)> save;  // adds the caller's part (bad lines), made durable
  std::unique_ptr<CheckpointLog> log;  // once this process has saved
  std::string State() const { return dir + "/rounds.json"; }
  std::string Log() const { return dir + "/rounds.log"; }
  std::string Spill(int round) const { return dir + "/spill-" + std::to_string(round); }
  std::string Segment(int round, size_t shard) const {
    return dir + "/kept-" + std::to_string(round) + "-" + std::to_string(shard) + ".ndk";
  }
};

// Where a round stands between two shards: the next shard to read, the
// stream index of its first document, and whether the round still decides
// (else the index of the first document it left undecided).
struct RoundPosition {
  size_t shard = 0;
  uint64_t g = 0;
  bool deciding = true;
  uint64_t split = 0;
};

// What the rounds share: the shards, where the decision files stand, the budget.
struct Rounds {
  const std::vector<ShardInfo>& shards;
  ShardReader read;
  const std::string& output_dir;
  size_t budget = 0;  // bytes of a round's kept documents (index, sketches, anchors, raw ids)
  std::string spill_dir;
  size_t finished_shards = 0;            // shards whose decision files are complete
  std::vector<uint64_t> shard_first;     // each shard's first document (stream index), learned in round 0
  std::vector<Json> summaries;           // each shard's summary in round 0: later reads must match it
  std::unique_ptr<StageFileWriter> writer;  // the decision file of shard finished_shards, once opened
  size_t peak_memory = 0;
  int rounds = 0;
  double progress_seconds = 0;  // a progress line every this many seconds (0: none)
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now(), last_progress = started;
  uint64_t visits = 0;  // documents read by the rounds so far (each round reads all after its start)
  uint64_t last_decided = 0;  // how many documents the last round decided
  RoundCheckpoint* checkpoint = nullptr;  // dedup --checkpoint, or null
  DedupStats total;                       // of the rounds before this one
  uint64_t max_text_bytes = 0;            // the run's setting (the kept files' scheme)
  Json in_spill;                          // the round's input spill as its writer left it (Written()), or null
  std::unique_ptr<KeptFileWriter> segment;  // with a checkpoint: this shard's kept documents of the round
  std::vector<size_t> segments;             // the shards whose kept documents of this round are in files
  // The share of the inputs' bytes read so far (dedup: it reads the inputs),
  // or null: round 1's estimate of the number of documents.
  std::function<double()> fraction_read;
  const char* command = "neardup stage decide";  // the label of the rounds' lines
};

// The number of documents, once round 1 has counted them; until then an
// estimate from the share of the input bytes read (*estimated), or 0.
uint64_t DocumentsOfRun(const Rounds& r, uint64_t g, bool* estimated) {
  *estimated = false;
  if (r.rounds > 0) return r.shard_first.back();
  const double read = r.fraction_read ? r.fraction_read() : 0.0;
  if (read < 0.001) return 0;
  *estimated = true;
  return std::max(g, static_cast<uint64_t>(static_cast<double>(g) / std::min(read, 1.0)));
}

// What a round's kept documents hold: the set's structures and the raw ids.
size_t HeldBytes(const Deduplicator& dedup, const DecideState& st) {
  return dedup.MemoryBytes() + st.kept_ids.MemoryBytes();
}

// The documents the rounds still have to read from document g of a round that
// started at `start`, if every later round decides `per_round` documents:
// each round reads every document after its start.
uint64_t VisitsLeft(uint64_t n, uint64_t start, uint64_t g, uint64_t per_round) {
  uint64_t left = n > g ? n - g : 0;
  for (uint64_t next = start + per_round; per_round > 0 && next < n; next += per_round) left += n - next;
  return left;
}

// A progress line every r.progress_seconds: a run in rounds may take hours.
// The ETA assumes the later rounds decide as many documents as this one
// (until `split` once it stopped deciding; else as many as the last round,
// or as far as its budget goes at the pace it fills, whichever is more: the
// pace alone overshoots early in a round, when the set's fixed cost weighs
// most) and read them at the rate so far. The number of documents is known
// once round 1 has read them all; before, it is estimated from the bytes.
void ReportProgress(const Deduplicator& dedup, const DecideState& st, Rounds& r, uint64_t start, uint64_t g,
                    bool deciding, uint64_t split) {
  const auto now = std::chrono::steady_clock::now();
  if (r.progress_seconds <= 0 || now - r.last_progress < std::chrono::duration<double>(r.progress_seconds)) return;
  r.last_progress = now;
  const double elapsed = std::chrono::duration<double>(now - r.started).count();
  const size_t held = HeldBytes(dedup, st);
  std::string of, eta;
  bool estimated = false;
  if (const uint64_t n = DocumentsOfRun(r, g, &estimated); n > 0) {
    of = (estimated ? " of about " : " of ") + std::to_string(n);
    const double pace = held > 0 ? static_cast<double>(g - start) * static_cast<double>(r.budget) / held : 0.0;
    const double per_round =
        !deciding ? static_cast<double>(split - start) : std::max(pace, static_cast<double>(r.last_decided));
    const double left = static_cast<double>(VisitsLeft(n, start, g, static_cast<uint64_t>(per_round)));
    if (r.visits > 0) eta = ", ETA about " + Duration(left * elapsed / static_cast<double>(r.visits));
  }
  std::fprintf(stderr, "neardup: round %d, %s, document %llu%s, %.1f MB held, %.0f docs/s%s\n", r.rounds + 1,
               deciding ? "deciding" : "searching", static_cast<unsigned long long>(g), of.c_str(),
               static_cast<double>(held) / 1e6, static_cast<double>(r.visits) / std::max(elapsed, 1e-9), eta.c_str());
}

bool OverBudget(const Deduplicator& dedup, const DecideState& st, Rounds& r) {
  const size_t bytes = HeldBytes(dedup, st);
  r.peak_memory = std::max(r.peak_memory, bytes);
  return bytes > r.budget;
}

// A shard read again must be what round 0 read: the spilled matches and the
// documents are paired by position. Round 0's summary is the shard's.
Status SameAsFirstRead(const Json& summary, size_t s, Rounds& r) {
  if (r.summaries.size() == s) {
    r.summaries.push_back(summary);
    return Status::OK();
  }
  const Json& first = r.summaries[s];  // a later read skips analyzing, so it counts no invalid UTF-8
  if (summary["lines"] != first["lines"] || summary["line_digest"] != first["line_digest"] ||
      summary["documents"] != first["documents"]) {
    return Status::FailedPrecondition(r.shards[s].path + " changed while the run was reading it (round " +
                                      std::to_string(r.rounds + 1) + " read other lines than round 1)");
  }
  return Status::OK();
}

Status SaveInRound(const Deduplicator& dedup, uint64_t start, SpillFile* in, SpillFile* out,
                   const RoundPosition& at, const DecideState& st, Rounds& r);

// A round's kept-document files are read again only after a crash, and at
// 200M they come to about 20 GB: their pages, clean once the file is
// fsynced, must not push the sketch file (--sketch-dir), which the round's
// search reads at random, out of the page cache.
void DropFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// One round from stream index `start`, from `at` (a resumed round's place, or
// its first shard): returns the index of the first document it left
// undecided (the number of documents when it decided them all), and in *out
// the spill for the next round.
Result<uint64_t> DecideRound(Deduplicator& dedup, uint64_t start, SpillFile* in, std::unique_ptr<SpillFile>* out,
                             DecideState& st, Rounds& r, RoundPosition at) {
  constexpr size_t kBatch = 4096;
  const bool first_round = r.rounds == 0;
  bool deciding = at.deciding;
  uint64_t g = at.g, split = at.split;
  std::vector<StagedDoc> docs;
  std::vector<Provisional> priors;
  std::vector<DocSignature> sigs;
  std::vector<std::optional<DuplicateMatch>> matches;
  std::vector<DedupDecision> decisions;
  auto flush = [&]() -> Status {
    sigs.resize(docs.size());
    matches.resize(docs.size());
    for (size_t i = 0; i < docs.size(); ++i) sigs[i] = std::move(docs[i].sig), matches[i] = priors[i].match;
    if (deciding) {
      NEARDUP_RETURN_IF_ERROR(dedup.DecideBatch(sigs, &decisions, st.threads, matches));
      for (size_t i = 0; i < docs.size(); ++i) {
        docs[i].sig = std::move(sigs[i]);
        NEARDUP_RETURN_IF_ERROR(WriteDecision(docs[i], decisions[i], st, *r.writer, &priors[i]));
      }
    } else {
      NEARDUP_RETURN_IF_ERROR(dedup.ProbeBatch(sigs, &matches, st.threads));
      if (!*out) {
        NEARDUP_ASSIGN_OR_RETURN(*out, r.checkpoint ? SpillFile::Named(r.checkpoint->Spill(r.rounds + 1), true)
                                                    : SpillFile::Create(r.spill_dir));
      }
      for (size_t i = 0; i < docs.size(); ++i) {
        Provisional p{matches[i], {}};
        if (p.match) {  // the earlier round's document, or one of this round's
          p.id = EarlierId(&priors[i], p.match->id).value_or(std::string(st.kept_ids.Find(p.match->id)));
        }
        NEARDUP_RETURN_IF_ERROR((*out)->Put(p));
      }
    }
    docs.clear(), priors.clear();
    CrashPointForTests();
    return Status::OK();
  };
  auto stop_deciding_when_full = [&] {
    if (deciding && OverBudget(dedup, st, r)) deciding = false, split = g;
  };
  for (size_t s = at.shard; s < r.shards.size(); ++s) {
    const ShardInfo& shard = r.shards[s];
    if (first_round) r.shard_first.push_back(g);
    g = r.shard_first[s];
    auto summary = r.read(s, start > g ? start - g : 0, [&](StagedDoc& doc) -> Status {
      if (g++ < start) return Status::OK();
      Provisional p;
      if (in != nullptr) NEARDUP_RETURN_IF_ERROR(in->Get(&p));
      if (deciding && !r.writer) {
        NEARDUP_ASSIGN_OR_RETURN(r.writer, OpenDecisions(shard, DecisionsPath(r.output_dir, static_cast<int>(s)), st));
        if (r.checkpoint) r.writer->KeepIfUnfinished();
      }
      if (deciding && r.checkpoint && !r.segment) {
        NEARDUP_ASSIGN_OR_RETURN(r.segment, KeptFileWriter::Create(r.checkpoint->Segment(r.rounds, s),
                                                                   SchemeOf(dedup, r.max_text_bytes)));
        st.segment = r.segment.get();
      }
      ++r.visits;
      docs.push_back(std::move(doc));
      priors.push_back(std::move(p));
      if (docs.size() < kBatch) return Status::OK();
      NEARDUP_RETURN_IF_ERROR(flush());
      stop_deciding_when_full();
      ReportProgress(dedup, st, r, start, g, deciding, split);
      return Status::OK();
    });
    NEARDUP_RETURN_IF_ERROR(summary.status());
    NEARDUP_RETURN_IF_ERROR(SameAsFirstRead(*summary, s, r));
    NEARDUP_RETURN_IF_ERROR(flush());
    // Every document of the shard is decided: it was decided through, or the
    // round stopped deciding exactly at its end.
    if (deciding || (split == g && r.finished_shards == s)) {
      if (!r.writer) {
        NEARDUP_ASSIGN_OR_RETURN(r.writer, OpenDecisions(shard, DecisionsPath(r.output_dir, static_cast<int>(s)), st));
      }
      NEARDUP_RETURN_IF_ERROR(FinishDecisions(shard, r.summaries[s], *r.writer, st.totals));
      r.writer.reset();
      ++r.finished_shards;
    }
    stop_deciding_when_full();
    if (r.segment) {
      st.segment = nullptr;
      NEARDUP_RETURN_IF_ERROR(r.segment->Finish());
      r.segment.reset();
      r.segments.push_back(s);
      DropFromPageCache(r.checkpoint->Segment(r.rounds, s));
    }
    if (r.checkpoint && s + 1 < r.shards.size()) {
      NEARDUP_RETURN_IF_ERROR(SaveInRound(dedup, start, in, out->get(), {s + 1, g, deciding, split}, st, r));
    }
  }
  if (first_round) r.shard_first.push_back(g);
  ++r.rounds;
  return deciding ? g : split;
}

void AddStats(const DedupStats& s, DedupStats* into) {
  into->documents += s.documents, into->kept += s.kept, into->exact_duplicates += s.exact_duplicates;
  into->near_duplicates += s.near_duplicates, into->without_features += s.without_features;
}

Json StatsJson(const DedupStats& s) {
  return {{"documents", s.documents}, {"kept", s.kept}, {"exact_duplicates", s.exact_duplicates},
          {"near_duplicates", s.near_duplicates}, {"without_features", s.without_features}};
}

// Length, count and checksum of a file a checkpoint leaves unfinished.
template <typename Writer>
Json UnfinishedJson(const Writer& w, uint64_t count) {
  return {{"bytes", w.bytes()}, {"records", count}, {"digest", w.digest()}};
}

// What rounds.json records of the rounds (RoundCheckpoint), the unfinished
// files made durable first. `start`: where the round to continue starts.
Result<Json> RoundsJson(uint64_t start, const DecideState& st, Rounds& r) {
  Json j;
  // 2: inside rounds (2026-11-30); 3: sealed (CheckpointFiles::Sealed); 4:
  // with rounds.log, segments as ranges (2026-12-01)
  j["version"] = 4;
  j["rounds"] = r.rounds, j["start"] = start, j["finished_shards"] = r.finished_shards;
  // Past round 1, the number of documents (shard_first's last).
  j["documents_of_run"] = r.shard_first.size() > r.shards.size() ? Json(r.shard_first.back()) : Json();
  j["visits"] = r.visits, j["last_decided"] = r.last_decided, j["peak_memory"] = r.peak_memory;
  j["elapsed_seconds"] = Since(r.started);
  j["stats"] = StatsJson(r.total);
  const LineCounts& n = st.totals.counts;
  j["totals"] = {{"files", n.files},       {"lines", n.lines},
                 {"bad_lines", n.bad_lines}, {"blank_lines", n.blank_lines},
                 {"truncated_texts", n.truncated_texts}, {"invalid_utf8", st.totals.invalid_utf8}};
  j["documents"] = st.documents, j["kept"] = st.kept, j["loaded"] = st.loaded;
  j["writer"] = nullptr, j["saved"] = nullptr, j["in_round"] = nullptr;
  if (r.writer) {
    NEARDUP_RETURN_IF_ERROR(r.writer->Sync());
    j["writer"] = UnfinishedJson(*r.writer, r.writer->records());
  }
  if (st.saved) {
    NEARDUP_RETURN_IF_ERROR(st.saved->Sync());
    j["saved"] = UnfinishedJson(*st.saved, st.saved->documents());
  }
  NEARDUP_RETURN_IF_ERROR(CheckpointFiles::SyncPath(r.output_dir));  // the finished decision files' names
  return j;
}

// rounds.json written, with the caller's part, durably, after rounds.log:
// the identity when the log is new (a new run, or one resumed from a
// version without a log), then the shards round 1 finished since.
Status WriteRounds(Json& j, Rounds& r) {
  RoundCheckpoint& c = *r.checkpoint;
  NEARDUP_RETURN_IF_ERROR(c.save(&j));
  if (!c.log) {
    NEARDUP_ASSIGN_OR_RETURN(c.log, CheckpointLog::ForRun(c.Log(), c.resume ? &*c.resume : nullptr, c.State(),
                                                          c.identity.dump()));
  }
  for (size_t s = c.log->lines() - 1; s < r.summaries.size(); ++s) {
    NEARDUP_RETURN_IF_ERROR(c.log->Append(Json{{"first", r.shard_first[s]}, {"summary", r.summaries[s]}}.dump()));
  }
  NEARDUP_ASSIGN_OR_RETURN(const CheckpointLog::Mark mark, c.log->Sync());
  j["log"] = mark.ToJson<Json>();
  return CheckpointFiles::WriteDurably(c.State(), CheckpointFiles::Sealed(j));
}

// Shard numbers in increasing order as [first, end) ranges: a round's
// segments, which would otherwise make each checkpoint O(shards).
Json Ranges(const std::vector<size_t>& sorted) {
  Json ranges = Json::array();
  for (size_t i = 0; i < sorted.size();) {
    size_t end = i + 1;
    while (end < sorted.size() && sorted[end] == sorted[end - 1] + 1) ++end;
    ranges.push_back({sorted[i], sorted[end - 1] + 1});
    i = end;
  }
  return ranges;
}

// Ranges' shard numbers; version 3 recorded the numbers themselves.
std::vector<size_t> ShardsOfRanges(const Json& j) {
  std::vector<size_t> shards;
  for (const Json& e : j) {
    if (!e.is_array()) {
      shards.push_back(e.get<size_t>());
      continue;
    }
    const size_t first = e.at(0).get<size_t>(), end = e.at(1).get<size_t>();
    if (end <= first || (!shards.empty() && first <= shards.back())) throw std::out_of_range("segments");
    for (size_t s = first; s < end; ++s) shards.push_back(s);
  }
  return shards;
}

// The end of a round that a next one follows (`start`, reading spill `in`),
// made durable and recorded in rounds.json (RoundCheckpoint).
Status SaveRounds(uint64_t start, SpillFile& in, const DecideState& st, Rounds& r) {
  RoundCheckpoint& c = *r.checkpoint;
  NEARDUP_RETURN_IF_ERROR(in.Sync());
  r.in_spill = in.Written();
  NEARDUP_ASSIGN_OR_RETURN(Json j, RoundsJson(start, st, r));
  j["spill"] = r.in_spill;
  NEARDUP_RETURN_IF_ERROR(WriteRounds(j, r));
  std::remove(c.Spill(r.rounds - 1).c_str());  // the finished round's
  for (size_t s : r.segments) std::remove(c.Segment(r.rounds - 1, s).c_str());
  r.segments.clear();
  return Status::OK();
}

// The end of a shard inside a round (`at`: where the round goes on), made
// durable and recorded in rounds.json: the round's spills (where `in` is
// read, what `out` holds), its kept documents' files, its counters.
Status SaveInRound(const Deduplicator& dedup, uint64_t start, SpillFile* in, SpillFile* out,
                   const RoundPosition& at, const DecideState& st, Rounds& r) {
  Json round = {{"next_shard", at.shard}, {"g", at.g},         {"deciding", at.deciding},
                {"split", at.split},      {"in_offset", 0},     {"out", nullptr},
                {"stats", StatsJson(dedup.stats())}, {"segments", Ranges(r.segments)}};
  if (in != nullptr) round["in_offset"] = in->Tell();
  if (out != nullptr) {
    NEARDUP_RETURN_IF_ERROR(out->Sync());
    round["out"] = out->Written();
  }
  NEARDUP_ASSIGN_OR_RETURN(Json j, RoundsJson(start, st, r));
  j["spill"] = r.in_spill;
  j["in_round"] = std::move(round);
  return WriteRounds(j, r);
}

DedupStats StatsOfJson(const Json& s) {
  DedupStats d;
  d.documents = s.at("documents"), d.kept = s.at("kept");
  d.exact_duplicates = s.at("exact_duplicates"), d.near_duplicates = s.at("near_duplicates");
  d.without_features = s.at("without_features");
  return d;
}

// The rounds as rounds.json left them: *start and *in for the round to
// continue (none in round 1).
Status RestoreRounds(const Json& j, uint64_t* start, std::unique_ptr<SpillFile>* in, DecideState& st, Rounds& r) {
  const Json* round = nullptr;
  try {
    r.rounds = j.at("rounds").get<int>(), *start = j.at("start").get<uint64_t>();
    r.finished_shards = j.at("finished_shards").get<size_t>();
    r.shard_first = j.at("shard_first").get<std::vector<uint64_t>>();
    r.summaries = j.at("summaries").get<std::vector<Json>>();
    r.visits = j.at("visits").get<uint64_t>(), r.last_decided = j.at("last_decided").get<uint64_t>();
    r.peak_memory = j.at("peak_memory").get<size_t>();
    r.started -= std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(j.at("elapsed_seconds").get<double>()));
    r.total = StatsOfJson(j.at("stats"));
    const Json& t = j.at("totals");
    LineCounts& n = st.totals.counts;
    n.files = t.at("files"), n.lines = t.at("lines"), n.bad_lines = t.at("bad_lines");
    n.blank_lines = t.at("blank_lines"), n.truncated_texts = t.at("truncated_texts");
    st.totals.invalid_utf8 = t.at("invalid_utf8");
    st.documents = j.at("documents"), st.kept = j.at("kept");
    if (j.contains("in_round") && !j["in_round"].is_null()) round = &j["in_round"];
    // Round 1's shards are known up to where it stopped; later rounds' all.
    const size_t known = r.rounds > 0 || round == nullptr ? r.shards.size() : round->at("next_shard").get<size_t>();
    if (r.shard_first.size() != known + (known == r.shards.size()) || r.summaries.size() != known ||
        r.finished_shards >= r.shards.size() || (known == r.shards.size() && *start >= r.shard_first.back())) {
      return Status::Corruption(r.checkpoint->State() + ": the rounds do not fit the inputs");
    }
    if (const Json& w = j.at("writer"); !w.is_null()) {
      NEARDUP_ASSIGN_OR_RETURN(r.writer, StageFileWriter::Resume(DecisionsPath(r.output_dir, static_cast<int>(r.finished_shards)),
                                                                 w.at("bytes"), w.at("records"), w.at("digest")));
      r.writer->KeepIfUnfinished();
    }
    if (j.contains("spill")) r.in_spill = j["spill"];
  } catch (const Json::exception& e) {
    return Status::Corruption(r.checkpoint->State() + ": " + e.what());
  }
  if (r.rounds == 0) return Status::OK();  // round 1 reads no spill
  NEARDUP_ASSIGN_OR_RETURN(*in, SpillFile::Named(r.checkpoint->Spill(r.rounds), false));
  // Checkpoints written before 2026-11-28 recorded no checksum of the spill.
  if (!r.in_spill.is_null()) NEARDUP_RETURN_IF_ERROR((*in)->Verify(r.in_spill, r.checkpoint->Spill(r.rounds)));
  return Status::OK();
}

// The round rounds.json's `in_round` left between two shards: its kept
// documents reloaded in their order (the same index, the same stop keys),
// its counters, its spills where they stood. Returns where it goes on.
Result<RoundPosition> RestoreInRound(const Json& j, Deduplicator& dedup, SpillFile* in, std::unique_ptr<SpillFile>* out,
                                     DecideState& st, Rounds& r) {
  RoundPosition at;
  try {
    at = {j.at("next_shard").get<size_t>(), j.at("g").get<uint64_t>(), j.at("deciding").get<bool>(),
          j.at("split").get<uint64_t>()};
    r.segments = ShardsOfRanges(j.at("segments"));
    if (at.shard >= r.shards.size() || (r.rounds > 0 && at.g != r.shard_first[at.shard])) {
      return Status::Corruption(r.checkpoint->State() + ": the round's place does not fit the inputs");
    }
    if (in != nullptr) NEARDUP_RETURN_IF_ERROR(in->Seek(j.at("in_offset").get<uint64_t>()));
    if (!j.at("out").is_null()) {
      NEARDUP_ASSIGN_OR_RETURN(*out, SpillFile::Reopen(r.checkpoint->Spill(r.rounds + 1), j["out"]));
    }
    for (size_t s : r.segments) {
      NEARDUP_RETURN_IF_ERROR(ReadKeptFile(r.checkpoint->Segment(r.rounds, s), SchemeOf(dedup, r.max_text_bytes),
                                           [&](uint64_t seq, std::string_view id, const DocSignature& sig) {
                                             st.kept_ids.Add(seq, id);
                                             return dedup.AddKeptAt(seq, sig);
                                           })
                                  .status());
    }
    dedup.RestoreProgress(StatsOfJson(j.at("stats")), st.loaded + (at.deciding ? at.g : at.split));
  } catch (const std::exception& e) {  // of Json, or of ShardsOfRanges
    return Status::Corruption(r.checkpoint->State() + ": " + e.what());
  }
  return at;
}

// Every shard decided in rounds of at most r.budget bytes of kept documents;
// *dedup ends as the last round's. Returns the stats of all rounds.
Result<DedupStats> DecideInRounds(std::unique_ptr<Deduplicator>* dedup, DecideState& st, Rounds& r, bool quiet) {
  std::unique_ptr<SpillFile> in, out;
  uint64_t start = 0;
  RoundPosition at;
  if (r.checkpoint && r.checkpoint->resume) {
    const Json& j = *r.checkpoint->resume;
    NEARDUP_RETURN_IF_ERROR(RestoreRounds(j, &start, &in, st, r));
    if (r.rounds > 0) {  // round 1's --load-index documents are DecideRun's to load again
      const DedupOptions options = (*dedup)->options();
      dedup->reset();
      NEARDUP_ASSIGN_OR_RETURN(*dedup, Deduplicator::Create(options));
      (*dedup)->RestoreProgress(DedupStats{}, st.loaded + start);
    }
    at.shard = r.finished_shards;
    if (j.contains("in_round") && !j["in_round"].is_null()) {
      NEARDUP_ASSIGN_OR_RETURN(at, RestoreInRound(j["in_round"], **dedup, in.get(), &out, st, r));
    }
  }
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    NEARDUP_ASSIGN_OR_RETURN(const uint64_t next, DecideRound(**dedup, start, in.get(), &out, st, r, at));
    AddStats((*dedup)->stats(), &r.total);
    if (!quiet) {
      std::fprintf(stderr, "%s: round %d decided documents %llu to %llu (%.1f MB held), %.1f s\n", r.command,
                   r.rounds, static_cast<unsigned long long>(start), static_cast<unsigned long long>(next),
                   static_cast<double>(HeldBytes(**dedup, st)) / 1e6, Since(t0));
    }
    if (next == r.shard_first.back()) return r.total;
    r.last_decided = next - start;
    const DedupOptions options = (*dedup)->options();
    dedup->reset();  // this round's memory goes before the next round's is taken
#ifdef __GLIBC__
    // Gives this round's freed heap back to the system before the next
    // round allocates in other sizes and order (a 5M trace: RSS falls from
    // 187 to 19 MiB between rounds).
    ::malloc_trim(0);
#endif
    st.kept_ids = KeptIds();
    NEARDUP_ASSIGN_OR_RETURN(*dedup, Deduplicator::Create(options));
    (*dedup)->RestoreProgress(DedupStats{}, st.loaded + next);
    NEARDUP_RETURN_IF_ERROR(out->Rewind());
    in = std::move(out);
    start = next;
    at = RoundPosition{r.finished_shards, 0, true, 0};
    if (r.checkpoint) NEARDUP_RETURN_IF_ERROR(SaveRounds(start, *in, st, r));
  }
}

// Reads shard s from its signature file.
ShardReader SignatureFiles(const std::vector<ShardInfo>& shards) {
  return [&shards](size_t s, uint64_t, const std::function<Status(StagedDoc&)>& each) -> Result<Json> {
    NEARDUP_ASSIGN_OR_RETURN(auto reader, StageFileReader::Open(shards[s].path, StageFileKind::kSignatures));
    return ReadSignatureShard(shards[s], *reader, each);
  };
}

int DecideRun(const DecideFlags& f, const std::vector<ShardInfo>* shards, const ShardReader& read);

// Drops the NAME.tmp files a directory or a pattern found: a writer renames
// NAME.tmp to NAME when it is complete, so a .tmp is a task's that is running
// or was killed, never a shard (a missing shard is then reported as one). A
// .tmp named on its own is kept: the user asked for it.
std::vector<InputFile> WithoutUnfinished(const std::vector<InputFile>& files, const std::vector<std::string>& args) {
  std::vector<InputFile> out;
  for (const InputFile& file : files) {
    const bool named = std::find(args.begin(), args.end(), file.path) != args.end();
    if (named || !file.path.ends_with(".tmp")) out.push_back(file);
  }
  return out;
}

int RunDecide(const DecideFlags& f) {
  auto files = ExpandInputs(f.signatures);
  if (!files.ok()) return Fail(files.status());
  auto shards = CheckShards(WithoutUnfinished(*files, f.signatures));
  if (!shards.ok()) return Fail(shards.status());
  // Its outputs must not overwrite the shards it reads, nor lie in an index
  // directory it reads or writes.
  const std::vector<std::string> outputs{f.stats_json, f.clusters};
  if (Status st = CheckDistinctOutputs(outputs); !st.ok()) return Fail(st);
  for (const ShardInfo& shard : *shards) {
    for (const std::string& out : outputs) {
      if (Status st = CheckNotInput(shard.path, out); !st.ok()) return Fail(st);
    }
  }
  std::vector<std::pair<std::string, std::string>> dirs{{"--save-index", f.save_index}};
  for (const std::string& dir : f.load_index) dirs.emplace_back("--load-index", dir);
  if (Status st = CheckOutputsOutside(outputs, dirs); !st.ok()) return Fail(st);
  return DecideRun(f, &*shards, SignatureFiles(*shards));
}

// --save-index's file as a checkpoint left it (`saved`: UnfinishedJson).
Result<std::unique_ptr<KeptFileWriter>> ResumeSavedIndex(const std::string& dir, const Json& saved) {
  try {
    return KeptFileWriter::Resume(KeptFilePath(dir), saved.at("bytes"), saved.at("records"), saved.at("digest"));
  } catch (const Json::exception& e) {
    return Status::Corruption("the checkpoint's --save-index: " + std::string(e.what()));
  }
}

// stage decide over `shards`, read by `read` in rounds (--memory-limit), or
// else from their signature files.
int DecideRun(const DecideFlags& f, const std::vector<ShardInfo>* shards, const ShardReader& read) {
  const auto t0 = std::chrono::steady_clock::now();
  auto options = OptionsFromSettings((*shards)[0].header["settings"]);
  if (!options.ok()) return Fail(options.status());
  options->sketch_dir = f.sketch_dir;  // where the decision keeps its data: not a setting of the run
  auto created = Deduplicator::Create(*options);
  if (!created.ok()) return Fail(created.status());
  Deduplicator& dedup = *created.value();
  const uint64_t max_text_bytes = (*shards)[0].header["settings"].value("max_text_bytes", uint64_t{1} << 20);
  if (Status st = CheckMemoryLimit(f.memory_limit, f.keep, f.clusters); !st.ok()) return Fail(st);
  if (Status st = CheckSaveIsNotLoaded(f.load_index, f.save_index); !st.ok()) return Fail(st);
  if (!f.save_index.empty()) {  // the manifest names the loaded indexes
    if (Status st = CheckRecordableNames(f.load_index, "--save-index"); !st.ok()) return Fail(st);
  }
  std::error_code ec;
  std::filesystem::create_directories(f.output_dir, ec);
  if (ec) return Fail(Status::IOError("cannot create " + f.output_dir + ": " + ec.message()));
  DecideState state(dedup);
  state.threads = ResolveThreads(f.threads);
  const Json* resume = f.checkpoint && f.checkpoint->resume ? &*f.checkpoint->resume : nullptr;
  if (resume == nullptr) {
    if (Status st = RemoveDecisions(f.output_dir, shards->size()); !st.ok()) return Fail(st);
  }
  if (resume != nullptr && resume->value("rounds", 0) > 0) {
    // Past the first round: the loaded documents' matches are in the spill.
    state.loaded = resume->value("loaded", uint64_t{0});
  } else {
    for (const std::string& dir : f.load_index) {
      auto n = LoadKeptIndex(dir, dedup, state.kept_ids, max_text_bytes);
      if (!n.ok()) return Fail(n.status());
      state.loaded += *n;
    }
    if (resume != nullptr && resume->value("loaded", uint64_t{0}) != state.loaded) {
      return Fail(Status::InvalidArgument(f.checkpoint->State() + ": the --load-index directories hold other "
                                          "documents than the interrupted run loaded; remove the checkpoint to "
                                          "start afresh"));
    }
  }
  if (!f.save_index.empty()) {
    auto saved = resume != nullptr ? ResumeSavedIndex(f.save_index, (*resume)["saved"]) : CreateSavedIndex(f.save_index, dedup, max_text_bytes);
    if (!saved.ok()) return Fail(saved.status());
    state.saved = std::move(saved).value();
    if (f.checkpoint) state.saved->KeepIfUnfinished();
  }
  if (!f.clusters.empty()) state.clusters = std::make_unique<Clusters>();
  if (f.keep == "longest") {
    if (Status st = DecideAllLongestFirst(*shards, state); !st.ok()) return Fail(st);
  }
  DedupStats s;
  size_t memory_bytes = 0;
  int round_count = 0;
  if (f.memory_limit > 0) {
    Rounds rounds{*shards, read, f.output_dir, RoundBudget(f.memory_limit), f.spill_dir};
    rounds.progress_seconds = f.quiet ? 0 : f.progress_seconds;
    rounds.checkpoint = f.checkpoint;
    rounds.max_text_bytes = max_text_bytes;
    rounds.fraction_read = f.fraction_read;
    rounds.command = f.command;
    auto decided = DecideInRounds(&created.value(), state, rounds, f.quiet);
    if (!decided.ok()) return Fail(decided.status());
    s = *decided;
    memory_bytes = rounds.peak_memory;
    round_count = rounds.rounds;
  } else {
    for (size_t i = 0; i < shards->size(); ++i) {
      Status st = DecideShard((*shards)[i], DecisionsPath(f.output_dir, static_cast<int>(i)), state);
      if (!st.ok()) return Fail(st);
    }
    s = dedup.stats();
    memory_bytes = dedup.MemoryBytes();
  }
  const Deduplicator& last = *created.value();  // the last round's, with --memory-limit
  const DecideTotals& totals = state.totals;
  if (state.clusters) {
    auto out = OpenOutput(f.clusters);
    if (!out.ok()) return Fail(out.status());
    state.clusters->Write(out->get(), state.kept_ids);
    if (Status st = FinishOutput(std::move(out).value(), f.clusters); !st.ok()) return Fail(st);
  }
  s.invalid_utf8 = totals.invalid_utf8;  // counted where the texts were analyzed
  const double seconds = Since(t0);
  if (!f.stats_json.empty()) {
    Json j;
    AddRunStats(s, totals.counts, &j);
    j["elapsed_seconds"] = seconds;
    j["memory_bytes"] = memory_bytes;  // with --memory-limit: the largest round's
    if (f.memory_limit > 0) j["rounds"] = round_count;
    j["settings"] = (*shards)[0].header["settings"];
    auto out = OpenOutput(f.stats_json);
    if (!out.ok()) return Fail(out.status());
    const std::string text = j.dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), out->get());
    if (Status st = FinishOutput(std::move(out).value(), f.stats_json); !st.ok()) return Fail(st);
  }
  if (!f.quiet) {
    const bool staged = std::string_view(f.command) == "neardup stage decide";
    std::fprintf(stderr, "%s: %llu documents in %llu %s%s: %llu kept, %llu duplicates, %.3f s\n", f.command,
                 static_cast<unsigned long long>(s.documents), static_cast<unsigned long long>(totals.counts.files),
                 staged ? "shard" : "input", totals.counts.files == 1 ? "" : "s",
                 static_cast<unsigned long long>(s.kept), static_cast<unsigned long long>(s.duplicates()), seconds);
  }
  if (totals.counts.bad_lines > 0 && s.documents == 0) {
    return Fail(Status::InvalidArgument("every line was bad (" + std::to_string(totals.counts.bad_lines) +
                                        "): is --format or --text-field right?"),
                ErrorSource::kBadLines);
  }
  if (state.saved) {
    std::vector<std::string> inputs;
    for (const ShardInfo& shard : *shards) inputs.push_back(shard.header.value("input", std::string()));
    Status st = FinishSavedIndex(std::move(state.saved), f.save_index, last, inputs, state.loaded, f.load_index);
    if (!st.ok()) return Fail(st);
  }
  return kExitOk;
}

// ---- stage filter --------------------------------------------------------------

struct FilterFlags {
  std::string input;
  std::string decisions;
  std::string output;
  std::string duplicates;
  std::string annotate;
  int output_shards = 1;  // --output-shards: --output holds "{shard}"
  bool quiet = false;
};

// The decisions of one file in line order, then its summary.
class DecisionStream {
 public:
  explicit DecisionStream(std::unique_ptr<StageFileReader> reader) : reader_(std::move(reader)) {}

  // Advances to the next decision; false at the end of the decisions (or on
  // an error: status()).
  bool Next() {
    std::string_view record;
    while (reader_->Next(&record)) {
      if (!record.empty() && record[0] == static_cast<char>(StageRecordType::kSummary)) {
        auto s = ParseSummary(record, reader_->path());
        if (!s.ok()) return Error(Malformed(*reader_, s.status()));
        summary_ = std::move(s).value();
        continue;
      }
      if (summary_) return Error(Status::Corruption(reader_->path() + ": a record after the summary"));
      if (Status st = DecodeStagedDecision(record, &current_); !st.ok()) return Error(Malformed(*reader_, st));
      return true;
    }
    if (status_.ok()) status_ = reader_->status();
    return false;
  }
  const StagedDecision& current() const { return current_; }
  const std::optional<Json>& summary() const { return summary_; }
  Status status() const { return status_; }

 private:
  bool Error(Status st) {
    if (status_.ok()) status_ = std::move(st);
    return false;
  }
  std::unique_ptr<StageFileReader> reader_;
  StagedDecision current_;
  std::optional<Json> summary_;
  Status status_;
};

// Writes one file's records: record w of the run (`*written` counts them,
// from the records of the files before) to outs[w % outs.size()], dedup's
// round robin.
Status Filter(const FilterFlags& f, InputStream* in, DecisionStream& decisions, const std::vector<FilePtr>& outs,
              std::FILE* dups, uint64_t* written) {
  LineReader lines(in);
  LineDigest digest;
  std::string line;
  bool more = decisions.Next();
  while (lines.Next(&line)) {
    digest.Add(line);
    if (!more || decisions.current().line_number != lines.line_number()) continue;
    const StagedDecision& s = decisions.current();
    const DedupDecision& d = s.decision;
    std::FILE* out = outs[*written % outs.size()].get();
    if (!f.annotate.empty()) {
      WriteAnnotated(out, line, f.annotate, d, s.duplicate_of_id);
    } else if (!d.duplicate) {
      std::fwrite(line.data(), 1, line.size(), out);
      std::fputc('\n', out);
    }
    *written += !f.annotate.empty() || !d.duplicate;
    if (d.duplicate && dups != nullptr) WriteDuplicateLine(dups, s.id, s.duplicate_of_id, d);
    more = decisions.Next();
  }
  NEARDUP_RETURN_IF_ERROR(lines.status());
  if (more) {
    return Status::FailedPrecondition(f.input + " ends before line " + std::to_string(decisions.current().line_number) +
                                      " of its decisions: it is not the file that was fingerprinted");
  }
  NEARDUP_RETURN_IF_ERROR(decisions.status());
  if (!decisions.summary()) return Status::Corruption(f.decisions + ": no summary record");
  const Json& summary = *decisions.summary();
  if (summary.value("lines", uint64_t{0}) != digest.lines() ||
      summary.value("line_digest", std::string()) != FingerprintToHex(digest.digest())) {
    return Status::FailedPrecondition(f.input + " has changed since it was fingerprinted (its lines differ from "
                                      "those the decisions in " + f.decisions + " were made from)");
  }
  return Status::OK();
}

// SIGINT, SIGTERM or SIGHUP during `dedup --memory-limit` or `stage filter`:
// the former's scratch directory (not a --checkpoint's) and the outputs'
// temporary files go
// (with only async-signal-safe calls: getdents64, unlinkat), then the
// process ends of the signal as it would have.
char g_scratch_dir[4096];
// The outputs' temporary paths, each ending with a NUL, then an empty one;
// published once complete (RoundOutputs).
std::atomic<const char*> g_outputs{nullptr};

void RemoveTreeAt(int dirfd, int depth) {
  struct Dirent64 {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[1];
  };
  alignas(8) char buf[4096];
  for (bool removed = true; removed;) {  // removing while listing may skip entries: list again
    removed = false;
    ::lseek(dirfd, 0, SEEK_SET);
    for (long n; (n = ::syscall(SYS_getdents64, dirfd, buf, sizeof buf)) > 0;) {
      for (long at = 0; at < n;) {
        const auto* d = reinterpret_cast<const Dirent64*>(buf + at);
        at += d->reclen;
        if (d->name[0] == '.' && (d->name[1] == 0 || (d->name[1] == '.' && d->name[2] == 0))) continue;
        if (d->type == DT_DIR && depth > 0) {
          const int sub = ::openat(dirfd, d->name, O_RDONLY | O_DIRECTORY);
          if (sub >= 0) RemoveTreeAt(sub, depth - 1), ::close(sub);
        }
        removed |= ::unlinkat(dirfd, d->name, d->type == DT_DIR ? AT_REMOVEDIR : 0) == 0;
      }
    }
  }
}

extern "C" void RemoveScratchOnSignal(int sig) {
  const int fd = g_scratch_dir[0] != 0 ? ::open(g_scratch_dir, O_RDONLY | O_DIRECTORY) : -1;
  if (fd >= 0) RemoveTreeAt(fd, 2), ::close(fd), ::rmdir(g_scratch_dir);
  for (const char* p = g_outputs.load(); p != nullptr && *p != 0;) {
    ::unlink(p);
    while (*p++ != 0) {
    }
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// While one lives, SIGINT, SIGTERM and SIGHUP run RemoveScratchOnSignal:
// the scratch directory and the outputs' temporary files published in
// g_outputs go, then the signal's default action ends the process.
// A signal ignored when the process started stays ignored (nohup: a hangup
// must not end the run).
class CleanupOnSignal {
 public:
  CleanupOnSignal() {
    struct sigaction on {};
    on.sa_handler = RemoveScratchOnSignal;
    sigemptyset(&on.sa_mask);
    for (int i = 0; i < 3; ++i) {
      ::sigaction(kSignals[i], nullptr, &previous_[i]);
      if (previous_[i].sa_handler != SIG_IGN) ::sigaction(kSignals[i], &on, nullptr);
    }
  }
  ~CleanupOnSignal() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
  }
  CleanupOnSignal(const CleanupOnSignal&) = delete;
  CleanupOnSignal& operator=(const CleanupOnSignal&) = delete;

  // While one lives, those signals wait in this thread: a file made in the
  // meantime is published to the handler before it can run.
  class Deferred {
   public:
    Deferred() {
      sigset_t set;
      sigemptyset(&set);
      for (int s : kSignals) sigaddset(&set, s);
      ::pthread_sigmask(SIG_BLOCK, &set, &previous_);
    }
    ~Deferred() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
    Deferred(const Deferred&) = delete;
    Deferred& operator=(const Deferred&) = delete;

   private:
    sigset_t previous_;
  };

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction previous_[3] {};
};

// The outputs' temporary names as the signal handler sees them (g_outputs),
// published again before each one is created (PendingOutputs::
// OnTemporaryNames): an open may block (a FIFO without a reader) with the
// earlier ones already on disk. Every version stays alive while published:
// the handler may be reading an older one.
class PublishedOutputs {
 public:
  PublishedOutputs() = default;
  PublishedOutputs(const PublishedOutputs&) = delete;
  PublishedOutputs& operator=(const PublishedOutputs&) = delete;
  ~PublishedOutputs() { Unpublish(); }
  void Publish(const std::vector<std::string>& paths) {
    std::string& names = versions_.emplace_back();
    for (const std::string& path : paths) names += path + '\0';
    names += '\0';
    g_outputs.store(names.c_str());
  }
  void Unpublish() { g_outputs.store(nullptr); }

 private:
  std::deque<std::string> versions_;  // a deque: adding one moves none
};

int RunFilter(const FilterFlags& f) {
  const auto t0 = std::chrono::steady_clock::now();
  auto reader = StageFileReader::Open(f.decisions, StageFileKind::kDecisions);
  if (!reader.ok()) return Fail(reader.status());
  auto header = ParseHeader(**reader);
  if (!header.ok()) return Fail(header.status());
  const Json& h = *header;
  if (!f.annotate.empty() && h["settings"].value("format", std::string()) != "jsonl") {
    return Fail(Status::InvalidArgument("--annotate adds a field to JSONL records: the run needs --format jsonl"));
  }
  const Status field = CheckAnnotateField(f.annotate, h["settings"].value("text_field", std::string()),
                                          h["settings"].value("id_field", std::string()));
  if (!field.ok()) return Fail(field);
  if (Status st = CheckShardedOutput(f.output, f.output_shards); !st.ok()) return Fail(st);
  for (int i = 0; i < f.output_shards; ++i) {
    if (Status st = CheckNotInput(f.input, ShardPath(f.output, i, f.output_shards)); !st.ok()) return Fail(st);
  }
  const auto outputs = OutputPaths({f.duplicates}, f.output, f.output_shards);
  for (const std::string& out : outputs) {
    if (Status st = CheckNotInput(f.input, out); !st.ok()) return Fail(st);
    if (Status st = CheckNotInput(f.decisions, out); !st.ok()) return Fail(st);
  }
  if (Status st = CheckDistinctOutputs(outputs); !st.ok()) return Fail(st);
  auto in = OpenInput(f.input);  // a missing input is reported as such, before its size is compared
  if (!in.ok()) return Fail(in.status());
  const uint64_t expected_bytes = h.value("input_bytes", uint64_t{0});
  if (FileSize(f.input) != expected_bytes) {
    return Fail(Status::InvalidArgument(f.input + " is not the input of " + f.decisions + " (" +
                                        std::to_string(FileSize(f.input)) + " bytes; the fingerprinted " +
                                        h.value("input", std::string("file")) + " had " +
                                        std::to_string(expected_bytes) + ")"));
  }
  // A failed or killed task leaves no partial output, and a task run again
  // keeps the last complete one until it replaces it.
  CleanupOnSignal cleanup;
  PublishedOutputs published;  // outlives pending: the handler knows the files until they go
  PendingOutputs pending;
  pending.OnTemporaryNames([&](const std::vector<std::string>& names) { published.Publish(names); });
  std::vector<FilePtr> outs;
  std::vector<std::string> out_paths;
  for (int i = 0; i < f.output_shards; ++i) {
    out_paths.push_back(ShardPath(f.output, i, f.output_shards));
    auto out = pending.Open(out_paths.back());
    if (!out.ok()) return Fail(out.status());
    outs.push_back(std::move(out).value());
  }
  FilePtr dups;
  if (!f.duplicates.empty()) {
    auto d = pending.Open(f.duplicates);
    if (!d.ok()) return Fail(d.status());
    dups = std::move(d).value();
  }
  DecisionStream decisions(std::move(reader).value());
  // The run's records before this file's: where they fall in the round robin.
  const uint64_t before = h.value("written_before", Json::object()).value(f.annotate.empty() ? "kept" : "documents",
                                                                          uint64_t{0});
  uint64_t written = before;
  Status st = Filter(f, in->get(), decisions, outs, dups.get(), &written);
  written -= before;
  for (size_t i = 0; i < outs.size(); ++i) {
    Status closed = FinishOutput(std::move(outs[i]), out_paths[i]);
    if (st.ok()) st = closed;
  }
  Status closed_dups = FinishOutput(std::move(dups), f.duplicates);
  if (st.ok()) st = closed_dups;
  if (st.ok()) st = pending.Commit();
  if (!st.ok()) return Fail(st);  // the outputs of a failed task go (PendingOutputs)
  if (!f.quiet) {
    std::fprintf(stderr, "neardup stage filter: %s: %llu records written, %.3f s\n", f.input.c_str(),
                 static_cast<unsigned long long>(written), Since(t0));
  }
  return kExitOk;
}


// `dir`/lock, created locked (under another name until it is), naming this
// host: a scan never finds it unlocked while its run lives.
FileLock CreateScratchLock(const std::string& dir) {
  const std::string tmp = dir + "/lock.tmp", lock = dir + "/lock";
  FileLock l = FileLock::Take(tmp, O_CREAT | O_EXCL);
  if (!l.held()) return l;
  const std::string host = HostName();
  if (::write(l.fd(), host.data(), host.size()) != static_cast<ssize_t>(host.size()) ||
      std::rename(tmp.c_str(), lock.c_str()) != 0) {
    return FileLock();
  }
  return l;
}

// Removes the neardup-dedup-* directories in `parent` that runs on this host
// left when they were killed (SIGKILL, a crash: nothing removed them): their
// lock is free. A directory without a lock file, or of another host (a
// shared disk, where a lock may not reach), is left alone.
void RemoveDeadScratch(const std::filesystem::path& parent, bool quiet) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
    if (!e.path().filename().string().starts_with("neardup-dedup-")) continue;
    const FileLock lock = FileLock::Take((e.path() / "lock").string(), 0);
    if (!lock.held()) continue;
    char host[256] = {};
    const ssize_t n = ::pread(lock.fd(), host, sizeof host - 1, 0);
    if (n > 0 && std::string(host, static_cast<size_t>(n)) == HostName()) {
      std::filesystem::remove_all(e.path(), ec);  // while locked: no other scan takes it meanwhile
      if (!ec && !quiet) std::fprintf(stderr, "neardup: removed %s, left by a run that was killed\n", e.path().c_str());
    }
  }
}

// The temporary directory of `dedup --memory-limit`, removed with its files
// however the run ends but by SIGKILL (it is named neardup-dedup-*; the next
// run in the same --spill-dir removes it then: RemoveDeadScratch); or,
// with --checkpoint, DIR/rounds, which stays for a restart unless the run
// succeeds.
class ScratchDir {
 public:
  // DIR/rounds of --checkpoint DIR. Two runs on one checkpoint would mix
  // their files: DIR/lock is held while this one lives, before anything in
  // DIR is read (a second run is refused, whatever its arguments).
  static Result<std::unique_ptr<ScratchDir>> Checkpoint(const std::string& dir) {
    const std::string path = (std::filesystem::path(dir) / "rounds").string();
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return Status::IOError("cannot create --checkpoint directory " + path + ": " + ec.message());
    NEARDUP_ASSIGN_OR_RETURN(FileLock lock, LockCheckpoint(dir));
    auto d = std::unique_ptr<ScratchDir>(new ScratchDir(path, /*temporary=*/false));
    d->lock_ = std::move(lock), d->lock_path_ = dir + "/lock";
    return d;
  }
  static Result<std::unique_ptr<ScratchDir>> Create(const std::string& parent, bool quiet) {
    NEARDUP_ASSIGN_OR_RETURN(const std::filesystem::path where, ScratchParent(parent));
    RemoveDeadScratch(where, quiet);
    std::string path = (where / "neardup-dedup-XXXXXX").string();
    // A signal before the handler knows the directory (or before its lock
    // exists, which the next run's scan needs) would leave it for good.
    const CleanupOnSignal::Deferred deferred;
    if (::mkdtemp(path.data()) == nullptr) {
      return Status::IOError("cannot create a directory in " + parent + " for --memory-limit: " +
                             std::strerror(errno));
    }
    auto d = std::unique_ptr<ScratchDir>(new ScratchDir(path, /*temporary=*/true));
    d->lock_ = CreateScratchLock(path);  // without it (an odd file system) only the cleanup is lost
    return d;
  }
  ~ScratchDir() {
    std::error_code ec;
    // The handler stays armed until the directory is gone: a signal halfway
    // through remove_all finishes the job.
    if (temporary_ || done_) std::filesystem::remove_all(path_, ec);
    g_scratch_dir[0] = 0;
    if (!temporary_ && done_) {
      std::filesystem::remove(lock_path_, ec);
      std::filesystem::remove(std::filesystem::path(path_).parent_path(), ec);  // if empty
    }
  }
  // The run succeeded: a checkpoint's directory goes too.
  void Done() { done_ = true; }
  // A checkpoint that recorded no round: what a crash left in it is of no use.
  Status Empty() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::create_directories(path_, ec);
    if (ec) return Status::IOError("cannot empty --checkpoint directory " + path_ + ": " + ec.message());
    return Status::OK();
  }
  std::string Path(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  ScratchDir(std::string path, bool temporary) : path_(std::move(path)), temporary_(temporary) {
    if (temporary) std::snprintf(g_scratch_dir, sizeof g_scratch_dir, "%s", path_.c_str());
  }
  std::string path_;
  bool temporary_ = true, done_ = false;
  FileLock lock_;          // held while the run lives
  std::string lock_path_;  // a checkpoint's (DIR/lock)
  CleanupOnSignal cleanup_;
};

// The outputs of dedup --memory-limit: opened before the first round (a path
// that cannot be written fails at once) under temporary names, and renamed
// into place by Commit() once everything else succeeded (PendingOutputs).
// --stats-json and --save-index are written to the scratch directory and
// moved here then too.
class RoundOutputs {
 public:
  Status Open(const StagedDedupArgs& a) {
    pending_.OnTemporaryNames([this](const std::vector<std::string>& names) { published_.Publish(names); });
    for (int i = 0; i < a.output_shards; ++i) {
      paths_.push_back(ShardPath(a.output, i, a.output_shards));
      auto out = pending_.Open(paths_.back());
      NEARDUP_RETURN_IF_ERROR(out.status());
      outs_.push_back(std::move(out).value());
    }
    if (!a.duplicates.empty()) {
      auto dups = pending_.Open(a.duplicates);
      NEARDUP_RETURN_IF_ERROR(dups.status());
      dups_ = std::move(dups).value();
    }
    return Status::OK();
  }

  // Every input's records through its decision file: what the run's filter
  // tasks write, concatenated.
  // `names`: the inputs as given (a spooled one is read from its copy).
  Status Write(const StagedDedupArgs& a, const std::vector<std::string>& names, const ScratchDir& dir) {
    uint64_t written = 0;
    for (size_t i = 0; i < a.in.inputs.size(); ++i) {
      FilterFlags f;
      f.input = a.in.inputs[i];
      f.decisions = DecisionsPath(dir.Path("dec"), static_cast<int>(i));
      f.annotate = a.annotate;
      NEARDUP_ASSIGN_OR_RETURN(auto reader, StageFileReader::Open(f.decisions, StageFileKind::kDecisions));
      NEARDUP_ASSIGN_OR_RETURN(auto in, OpenInput(f.input, InputDisplayName(names[i])));
      DecisionStream decisions(std::move(reader));
      NEARDUP_RETURN_IF_ERROR(Filter(f, in.get(), decisions, outs_, dups_.get(), &written));
    }
    for (size_t i = 0; i < outs_.size(); ++i) NEARDUP_RETURN_IF_ERROR(FinishOutput(std::move(outs_[i]), paths_[i]));
    if (dups_) NEARDUP_RETURN_IF_ERROR(FinishOutput(std::move(dups_), a.duplicates));
    return Status::OK();
  }
  // The run succeeded: the outputs take their names. The handler keeps them
  // until then: a signal during the fsyncs removes them.
  Status Commit() {
    Status st = pending_.Commit();
    published_.Unpublish();
    return st;
  }

 private:
  // Destroyed in reverse: the streams close, pending_ removes the files, and
  // only then does the handler forget their names.
  PublishedOutputs published_;  // pending_'s temporary names for the signal handler
  PendingOutputs pending_;
  std::vector<std::string> paths_;
  std::vector<FilePtr> outs_;
  FilePtr dups_;
};

// Moves a file made in the scratch directory to where the user asked for it
// (a copy when they are on different file systems).
Status MoveInto(const std::string& from, const std::string& to) {
  if (to == "-" || IsSpecialFile(to)) {  // copied in: a rename would replace /dev/null
    std::FILE* in = std::fopen(from.c_str(), "rb");
    if (in == nullptr) return Status::IOError("cannot read " + from);
    std::FILE* out = to == "-" ? stdout : std::fopen(to.c_str(), "wb");
    if (out == nullptr) {
      std::fclose(in);
      return Status::IOError("cannot write " + to + ": " + std::strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) std::fwrite(buf, 1, n, out);
    std::fclose(in);
    const bool ok = std::fflush(out) == 0 && std::ferror(out) == 0 && (out == stdout || std::fclose(out) == 0);
    return ok ? Status::OK() : Status::IOError("cannot write " + to);
  }
  std::error_code ec;
  std::filesystem::rename(from, to, ec);
  if (!ec) return Status::OK();
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return Status::IOError("cannot write " + to + ": " + ec.message());
  return Status::OK();
}

// `stage decide`'s --stats-json, in the shape of `dedup`'s (tools/cmd_dedup.cc
// StatsJson) so that a reader of one reads the other: memory_bytes.total is
// the largest round's kept documents; reading and analyzing happen inside
// the rounds, so their time is in stage_seconds.decide and read is 0.
Status ReshapeStats(const std::string& path, const Deduplicator& analyzer, const StagedDedupArgs& a,
                    double decide_s, double write_s) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (in == nullptr) return Status::IOError("cannot read " + path);
  Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::fclose(in);
  if (j.is_discarded()) return Status::Internal(path + " is not the JSON its run wrote");
  const double seconds = decide_s + write_s;
  j["elapsed_seconds"] = seconds;
  j["stage_seconds"] = {{"read", 0.0}, {"decide", decide_s}, {"write", write_s}};
  j["docs_per_second"] = seconds > 0 ? j["documents"].get<double>() / seconds : 0.0;
  j["k"] = a.k;
  j["scheme"] = analyzer.fingerprinter().scheme_name();
  j["scheme_id"] = FingerprintToHex(analyzer.scheme_id());
  j["threads"] = a.threads;
  j["memory_bytes"] = {{"total", j["memory_bytes"]}};
  j["memory_limit_bytes"] = a.memory_limit;
  NEARDUP_ASSIGN_OR_RETURN(FilePtr out, OpenOutput(path));
  const std::string text = j.dump(2) + "\n";
  std::fwrite(text.data(), 1, text.size(), out.get());
  return FinishOutput(std::move(out), path);
}

Status MoveResults(const StagedDedupArgs& a, const ScratchDir& dir) {
  if (!a.save_index.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(a.save_index, ec);
    if (ec) return Status::IOError("cannot create --save-index directory " + a.save_index + ": " + ec.message());
    for (const char* name : {"kept.ndk", "manifest.json"}) {  // the manifest last: it says the index is whole
      NEARDUP_RETURN_IF_ERROR(MoveInto(dir.Path(std::string("index/") + name),
                                       (std::filesystem::path(a.save_index) / name).string()));
    }
  }
  if (!a.stats_json.empty()) NEARDUP_RETURN_IF_ERROR(MoveInto(dir.Path("stats.json"), a.stats_json));
  return Status::OK();
}

// Copies an input that can be read only once into the scratch directory, as
// it comes (compressed data stays compressed: it is decompressed on each
// read), and returns the copy's path.
Result<std::string> Spool(const std::string& input, const std::string& copy) {
  std::FILE* in = input == "-" ? stdin : std::fopen(input.c_str(), "rb");
  if (in == nullptr) return Status::IOError("cannot open " + input + ": " + std::strerror(errno));
  const std::string what = "the copy of " + InputDisplayName(input) + " in " + copy;
  std::FILE* out = std::fopen(copy.c_str(), "wb");
  Status st = out == nullptr ? Status::IOError("cannot create " + what + ": " + std::strerror(errno)) : Status::OK();
  std::vector<char> buf(1 << 20);
  for (size_t n; st.ok() && (n = std::fread(buf.data(), 1, buf.size(), in)) > 0;) {
    if (std::fwrite(buf.data(), 1, n, out) != n) st = FileWriteError(what, errno);
  }
  if (st.ok() && std::ferror(in)) st = Status::IOError("cannot read " + input + ": " + std::strerror(errno));
  if (out != nullptr && std::fclose(out) != 0 && st.ok()) st = FileWriteError(what, errno);
  if (in != stdin) std::fclose(in);
  if (!st.ok()) return st;
  return copy;
}

// Replaces each input that can be read only once with its copy in `dir`.
Status SpoolReadableOnce(const ScratchDir& dir, std::vector<std::string>* inputs) {
  for (size_t i = 0; i < inputs->size(); ++i) {
    if (!ReadableOnce((*inputs)[i])) continue;
    NEARDUP_ASSIGN_OR_RETURN((*inputs)[i], Spool((*inputs)[i], dir.Path("input-" + std::to_string(i))));
  }
  return Status::OK();
}

// What --memory-limit refuses before it opens anything: an output that would
// overwrite an input.
Status CheckRoundInputs(const StagedDedupArgs& a) {
  const auto outputs = OutputPaths({a.duplicates, a.in.rejects, a.stats_json}, a.output, a.output_shards);
  NEARDUP_RETURN_IF_ERROR(CheckDistinctOutputs(outputs));
  for (const std::string& in : a.in.inputs) {
    for (const std::string& out : outputs) NEARDUP_RETURN_IF_ERROR(CheckNotInput(in, out));
  }
  return CheckSaveIsNotLoaded(a.load_index, a.save_index);
}

// Reads shard s by analyzing its input again. The first read of each input
// (round 0 reads them all) reports its bad lines; later reads skip the same
// lines silently.
class AnalyzedInputs {
 public:
  // `a` reads the inputs' copies where they were spooled; `names` are the
  // inputs as the user gave them, for messages.
  AnalyzedInputs(const StagedDedupArgs& a, const std::vector<std::string>& names, Deduplicator& analyzer,
                 BadLines& bad)
      : a_(a), names_(names), analyzer_(analyzer), bad_(bad) {
    InputFlags quiet = a.in;
    quiet.rejects.clear(), quiet.max_bad_lines = 0, quiet.strict = false;
    (void)silent_.Open(quiet, /*quiet=*/true);  // no file to open
    run_.in = a.in, run_.fp = a.fp, run_.k = a.k, run_.recheck = a.recheck;
  }
  // The inputs as shards, their sizes and modification times as of now.
  const std::vector<ShardInfo>& Shards() {
    const int n = static_cast<int>(a_.in.inputs.size());
    for (int i = 0; i < n; ++i) {
      const std::string& path = a_.in.inputs[static_cast<size_t>(i)];
      shards_.push_back(ShardInfo{path, SignaturesHeader(run_, analyzer_.scheme_id(), path, i, n)});
    }
    return shards_;
  }
  Result<Json> Read(size_t s, uint64_t skip, const std::function<Status(StagedDoc&)>& each) {
    const std::string& path = a_.in.inputs[s];
    const bool first = s == read_;
    const Json& header = shards_[s].header;
    if (!first && (FileSize(path) != header["input_bytes"].get<uint64_t>() ||
                   FileMtimeNs(path) != header["input_mtime_ns"].get<int64_t>())) {
      return Status::FailedPrecondition(names_[s] + " changed while the run was reading it (its size or modification time)");
    }
    BadLines& bad = first ? bad_ : silent_;
    if (a_.in.inputs.size() > 1) bad.SetSource(names_[s]);
    // A spooled copy's errors name what it copied, not a scratch file gone by then.
    NEARDUP_ASSIGN_OR_RETURN(auto in, OpenInput(path, InputDisplayName(names_[s])));
    NEARDUP_ASSIGN_OR_RETURN(Json summary,
                             AnalyzeInput(run_, std::move(in), a_.in.inputs.size() > 1 ? names_[s] : "", a_.threads,
                                          a_.batch_size, analyzer_, bad, &stopped_, each,
                                          skip, first ? &reading_ : nullptr));
    if (stopped_) return Status::InvalidArgument("bad input lines stopped the run");
    if (first) read_bytes_ += header["input_bytes"].get<uint64_t>(), reading_ = 0;
    read_ += first;
    return summary;
  }
  // The share of the inputs' bytes read by their first reads.
  double FractionRead() const {
    uint64_t total = 0;
    for (const ShardInfo& shard : shards_) total += shard.header["input_bytes"].get<uint64_t>();
    return total > 0 ? static_cast<double>(read_bytes_ + reading_) / static_cast<double>(total) : 1.0;
  }
  bool stopped() const { return stopped_; }
  // A resumed run: its first n inputs were read once before (their bad
  // lines reported).
  void SetRead(size_t n) {
    read_ = std::min(n, shards_.size());
    for (size_t i = 0; i < read_; ++i) read_bytes_ += shards_[i].header["input_bytes"].get<uint64_t>();
  }

 private:
  const StagedDedupArgs& a_;
  const std::vector<std::string>& names_;
  RunSettings run_;
  Deduplicator& analyzer_;
  BadLines& bad_;
  BadLines silent_;
  std::vector<ShardInfo> shards_;
  size_t read_ = 0;  // inputs read once
  uint64_t read_bytes_ = 0, reading_ = 0;  // bytes of those inputs, and of the one being read first
  bool stopped_ = false;
};

}  // namespace

Status CheckMemoryLimit(size_t limit, const std::string& keep, const std::string& clusters) {
  if (limit == 0) return Status::OK();
  const char* refused = keep != "first"     ? "--keep longest (it holds every signature)"
                        : !clusters.empty() ? "--clusters (it holds every kept document's id; --duplicates names them)"
                                            : nullptr;
  if (refused == nullptr) return Status::OK();
  return Status::InvalidArgument(std::string("--memory-limit cannot be used with ") + refused);
}

void AddMemoryLimitFlags(CLI::App* cmd, size_t* limit, std::string* spill_dir) {
  cmd->add_option("--memory-limit", *limit,
                  "Bound the memory of the kept documents' structures: past 60% of this size (e.g. 8G, 500M; "
                  "minus 48 MB for buffers) the decision continues in rounds, each holding only its own kept "
                  "documents, the later documents' best matches spilled to --spill-dir. Decisions as without it "
                  "except where an anchor is a stop key in one but not the other (docs/SCALING.md). 0 (the "
                  "default): no bound")
      ->transform(CLI::AsSizeValue(false))
      ->transform(UnsignedText());  // a transform runs before those added earlier
  cmd->add_option("--spill-dir", *spill_dir,
                  "Directory for --memory-limit's spill files (unnamed: gone when the run ends); default the "
                  "system's temporary directory. With dedup --checkpoint DIR they are in DIR instead")
      ->check(CLI::ExistingDirectory);
}

// What --checkpoint cannot resume (kInvalidArgument), refused before its
// directory is made.
Status CheckCheckpointArgs(const StagedDedupArgs& a) {
  if (a.checkpoint.empty()) return Status::OK();
  for (const std::string& in : a.in.inputs) {
    if (ReadableOnce(in)) return Status::InvalidArgument("--checkpoint cannot resume " + in + " (read once): name files");
  }
  if (a.in.rejects == "-") return Status::InvalidArgument("--checkpoint cannot cut back standard output: name a --rejects file");
  return Status::OK();
}

// What identifies the run (rounds.log's first line): a resumed run must
// repeat it.
Json RunIdentity(const StagedDedupArgs& a, const std::vector<ShardInfo>& shards) {
  Json headers = Json::array();
  for (const ShardInfo& shard : shards) headers.push_back(shard.header);
  return {{"command_line", CheckpointFiles::ResumeKey()},
          {"shards", std::move(headers)},
          {"load_index", LoadedIndexIdentity(a.load_index)}};
}

// Puts what version 4 keeps in rounds.log where version 3 had it in
// rounds.json: the identity, and each shard's first document and summary.
Status ReadRoundsLog(const std::string& state, const std::string& log, Json* j) {
  NEARDUP_ASSIGN_OR_RETURN(std::vector<Json> lines, CheckpointLog::ReadJson(log, *j, state));
  try {
    for (const auto& [key, value] : lines.at(0).items()) (*j)[key] = value;
    Json first = Json::array(), summaries = Json::array();
    for (size_t i = 1; i < lines.size(); ++i) {
      Json& line = lines[i];
      first.push_back(line.at("first"));
      summaries.push_back(std::move(line.at("summary")));
    }
    if (!j->at("documents_of_run").is_null()) first.push_back(j->at("documents_of_run"));
    (*j)["shard_first"] = std::move(first);
    (*j)["summaries"] = std::move(summaries);
  } catch (const std::exception& e) {
    return Status::Corruption(log + ": does not fit " + state + " (" + e.what() + "); remove it to start afresh");
  }
  return Status::OK();
}

// --checkpoint: the state of the interrupted run in DIR/rounds to continue,
// or none (start afresh); DIR is locked by then. kInvalidArgument when DIR
// holds another run's rounds.
Result<std::optional<Json>> LoadRoundCheckpoint(const StagedDedupArgs& a) {
  if (a.checkpoint.empty()) return std::optional<Json>();
  const CheckpointFiles files(a.checkpoint);
  if (std::filesystem::exists(files.State())) {  // a run without --memory-limit (dedup_checkpoint.h)
    return Status::InvalidArgument("--checkpoint " + a.checkpoint +
                                   " holds another run (one without --memory-limit); remove it to start afresh");
  }
  const std::string path = files.RoundsState();
  std::ifstream in(path);
  if (!in) return std::optional<Json>();
  Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  // Version 1 (before 2026-11-30) recorded only the ends of rounds; 1 and 2
  // have no checksum; 1 to 3 no log.
  const int version = j.is_object() ? j.value("version", 0) : 0;
  if (j.is_discarded() || version < 1 || version > 4) {
    return Status::Corruption(path + ": not a checkpoint this version can read; remove it to start afresh");
  }
  NEARDUP_RETURN_IF_ERROR(CheckpointFiles::Unseal(&j, version >= 3, path));
  if (version >= 4) NEARDUP_RETURN_IF_ERROR(ReadRoundsLog(path, files.RoundsLog(), &j));
  if (!CheckpointFiles::SameRun(j["command_line"])) {
    return Status::InvalidArgument("--checkpoint " + a.checkpoint + " holds another run (other arguments); remove it to start afresh");
  }
  return std::optional<Json>(std::move(j));
}

// The inputs must be those the checkpoint read (each round reads them again).
Status CheckResumedInputs(const Json& state, const std::vector<ShardInfo>& shards, const StagedDedupArgs& a) {
  const Json& was = state["shards"];
  const std::string fix = "; remove the checkpoint to start afresh";
  auto path = [&](size_t i) { return was[i].is_object() ? was[i].value("input", std::string("?")) : std::string("?"); };
  // A file added or removed changes every header (each records the number
  // of shards): name the first file out of place, not the first header.
  size_t i = 0;
  while (i < shards.size() && i < was.size() && path(i) == shards[i].path) ++i;
  if (i < shards.size() || i < was.size()) {
    const std::string what = i < shards.size() && i < was.size() ? "input " + std::to_string(i + 1) + " was " +
                                                                        path(i) + ", now " + shards[i].path
                             : i < was.size() ? path(i) + " is no longer given"
                                              : shards[i].path + " was not among them";
    return Status::InvalidArgument("--checkpoint " + a.checkpoint + ": the inputs are not the " +
                                   std::to_string(was.size()) + " files the interrupted run read (" + what + ")" +
                                   fix);
  }
  for (i = 0; i < shards.size(); ++i) {
    if (was[i] != shards[i].header) {
      return Status::InvalidArgument("--checkpoint " + a.checkpoint + ": " + shards[i].path +
                                     " is not what the interrupted run read (changed since)" + fix);
    }
  }
  if (state.contains("load_index") && state["load_index"] != Json(LoadedIndexIdentity(a.load_index))) {
    return Status::InvalidArgument("--checkpoint " + a.checkpoint +
                                   ": the --load-index directories are not those the interrupted run loaded "
                                   "(changed since); remove the checkpoint to start afresh");
  }
  return Status::OK();
}

// --rejects of a resumed run: cut back to what the checkpoint recorded, then
// appended to, and the count restored (--max-bad-lines counts the run).
Status ResumeBadLines(const Json& state, const StagedDedupArgs& a, BadLines& bad) {
  if (!a.in.rejects.empty()) {
    NEARDUP_RETURN_IF_ERROR(CheckpointFiles::CutBack(a.in.rejects, state.value("rejects_bytes", off_t{0})));
  }
  NEARDUP_RETURN_IF_ERROR(bad.Open(a.in, a.quiet, /*append=*/true));
  bad.RestoreCount(state.value("bad_lines", uint64_t{0}));
  return Status::OK();
}

// The caller's part of a round's checkpoint: the bad lines (--rejects made
// durable, its length).
Status SaveRunPart(const StagedDedupArgs& a, BadLines& bad, Json* j) {
  (*j)["bad_lines"] = bad.count();
  if (FilePtr& rejects = bad.rejects_file()) {
    NEARDUP_RETURN_IF_ERROR(FinishOutput(std::move(rejects), a.in.rejects));
    NEARDUP_RETURN_IF_ERROR(CheckpointFiles::SyncPath(a.in.rejects));
    (*j)["rejects_bytes"] = std::filesystem::file_size(a.in.rejects);
    NEARDUP_ASSIGN_OR_RETURN(rejects, OpenOutput(a.in.rejects, /*append=*/true));
  }
  return Status::OK();
}

int RunStagedDedup(const StagedDedupArgs& given) {
  const auto t0 = std::chrono::steady_clock::now();
  if (Status st = CheckRoundInputs(given); !st.ok()) return Fail(st);
  StagedDedupArgs a = given;  // with the spooled inputs' copies, below
  auto fp_options = ToFingerprintOptions(a.fp);
  if (!fp_options.ok()) return Fail(fp_options.status());
  DedupOptions options;
  options.k = a.k, options.fingerprint = *fp_options, options.recheck = a.recheck;
  options.sketch_without_recheck = !a.save_index.empty();
  auto analyzer = Deduplicator::Create(options);
  if (!analyzer.ok()) return Fail(analyzer.status());
  for (const std::string& in : a.in.inputs) {
    // Opening one reads its first bytes (the compression check): not yet.
    if (ReadableOnce(in)) continue;
    if (Status st = OpenInput(in).status(); !st.ok()) return Fail(st);
  }
  if (Status st = CheckCheckpointArgs(a); !st.ok()) return Fail(st);
  auto dir = a.checkpoint.empty() ? ScratchDir::Create(a.spill_dir, a.quiet) : ScratchDir::Checkpoint(a.checkpoint);
  if (!dir.ok()) return Fail(dir.status());
  auto resume = LoadRoundCheckpoint(a);
  if (!resume.ok()) return Fail(resume.status());
  if (!a.checkpoint.empty() && !*resume) {
    if (Status st = (*dir)->Empty(); !st.ok()) return Fail(st);
  }
  if (Status st = SpoolReadableOnce(**dir, &a.in.inputs); !st.ok()) return Fail(st);
  BadLines bad;
  AnalyzedInputs inputs(a, given.in.inputs, **analyzer, bad);
  const std::vector<ShardInfo> shards = inputs.Shards();
  if (*resume) {
    if (Status st = CheckResumedInputs(**resume, shards, a); !st.ok()) return Fail(st);
    if (Status st = ResumeBadLines(**resume, a, bad); !st.ok()) return Fail(st);
    const Json& was = **resume;
    inputs.SetRead(was.contains("summaries") ? was["summaries"].size() : shards.size());
    if (!a.quiet) {
      const Json& round = was.contains("in_round") ? was["in_round"] : Json();
      const std::string input = round.is_object() ? ", input " + std::to_string(round.value("next_shard", 0) + 1) +
                                                        " of " + std::to_string(shards.size())
                                                  : "";
      std::fprintf(stderr, "neardup: resuming from --checkpoint %s at round %d%s, document %llu\n",
                   a.checkpoint.c_str(), was.value("rounds", 0) + 1, input.c_str(),
                   static_cast<unsigned long long>(round.is_object() ? round.value("g", uint64_t{0})
                                                                     : was.value("start", uint64_t{0})));
    }
  } else if (Status st = bad.Open(a.in, a.quiet); !st.ok()) {
    return Fail(st);
  }
  RoundOutputs outputs;
  if (Status st = outputs.Open(a); !st.ok()) return Fail(st);
  RoundCheckpoint checkpoint{(*dir)->path(), *resume, RunIdentity(a, shards),
                             [&](Json* j) { return SaveRunPart(a, bad, j); }, nullptr};
  DecideFlags d;
  d.output_dir = (*dir)->Path("dec");
  d.stats_json = a.stats_json.empty() ? "" : (*dir)->Path("stats.json");
  d.save_index = a.save_index.empty() ? "" : (*dir)->Path("index");
  d.sketch_dir = a.sketch_dir, d.load_index = a.load_index;
  d.threads = a.threads, d.memory_limit = a.memory_limit, d.spill_dir = (*dir)->path(), d.quiet = a.quiet;
  d.progress_seconds = a.progress_seconds;
  d.command = "neardup dedup --memory-limit";
  d.checkpoint = a.checkpoint.empty() ? nullptr : &checkpoint;
  d.fraction_read = [&inputs] { return inputs.FractionRead(); };
  const int decided = DecideRun(d, &shards, [&](size_t s, uint64_t skip, const std::function<Status(StagedDoc&)>& each) {
    return inputs.Read(s, skip, each);
  });
  const int bad_rc = bad.Finish(1);  // "every line was bad" is decide's to say
  if (decided != kExitOk) return inputs.stopped() ? bad_rc : decided;
  if (bad_rc != kExitOk) return bad_rc;
  CrashPointForTests();
  // A resumed run counts the rounds its earlier processes completed.
  const double decide_s = Since(t0) + (*resume ? (**resume).value("elapsed_seconds", 0.0) : 0.0);
  const auto t1 = std::chrono::steady_clock::now();
  if (Status st = outputs.Write(a, given.in.inputs, **dir); !st.ok()) return Fail(st);
  if (!a.stats_json.empty()) {
    Status st = ReshapeStats((*dir)->Path("stats.json"), **analyzer, a, decide_s, Since(t1));
    if (!st.ok()) return Fail(st);
  }
  // From here a restart starts afresh: the results leave the checkpoint.
  if (!a.checkpoint.empty()) std::remove(checkpoint.State().c_str());
  if (Status st = MoveResults(a, **dir); !st.ok()) return Fail(st);
  if (Status st = outputs.Commit(); !st.ok()) return Fail(st);
  (*dir)->Done();
  if (!a.quiet) {
    std::fprintf(stderr, "neardup dedup --memory-limit: analyze and decide %.1f s, write %.1f s\n", decide_s, Since(t1));
  }
  return kExitOk;
}

void AddStageCommand(CLI::App& app, int* exit_code) {
  CLI::App* stage = app.add_subcommand(
      "stage",
      "The dedup job as stages whose intermediates are files, for a scheduler to run as tasks on many "
      "machines (docs/SCALING.md): plan, fingerprint (one task per input file), decide (sequential), "
      "filter (one task per input file)");
  stage->require_subcommand(1);

  auto plan = std::make_shared<PlanFlags>();
  CLI::App* p = stage->add_subcommand("plan", "Print the run's input files as JSON [{\"path\", \"bytes\"}], in "
                                              "the order `neardup dedup` reads them (the order of the shards)");
  p->add_option("-i,--input", plan->inputs,
                "Input files; repeat it, or name a directory or a glob pattern (as for dedup)")
      ->required();
  p->callback([plan, exit_code] { *exit_code = RunPlan(*plan); });

  auto fp = std::make_shared<FingerprintStageFlags>();
  CLI::App* c = stage->add_subcommand(
      "fingerprint",
      "One task: read one input file and write its documents' signatures (line, id, hashes, fingerprint, "
      "re-check sketch) to a checksummed signature shard, with the run's settings");
  AddInputFlags(c, &fp->run.in, "The input file of this task (a file: the filter stage reads it again)",
                /*required=*/true, /*with_id=*/true);
  c->add_option("-o,--output", fp->output, "The signature shard to write (appears only when complete)")->required();
  c->add_option("--shard", fp->shard, "This input's place in the run's input order (0-based)")
      ->check(CLI::Range(0, 99999999));
  c->add_option("--shards", fp->shards, "The number of input files of the run")->check(CLI::Range(1, 100000000));
  c->add_option("-k,--max-distance", fp->run.k,
                "Largest Hamming distance (inclusive) between fingerprints of near-duplicates")
      ->check(CLI::Range(0, kMaxSupportedK));
  AddFingerprintFlags(c, &fp->run.fp, /*with_idf=*/true);
  AddRecheckFlags(c, &fp->run.recheck);
  c->add_option("-t,--threads", fp->threads, "Threads for parsing and fingerprinting (0 = hardware concurrency)")
      ->check(CLI::Range(0, 1024));
  c->add_option("--batch-size", fp->batch_size, "Lines read and analyzed per batch")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  c->add_flag("--keep-existing", fp->keep_existing,
              "Leave --output alone when it already is this task's complete shard (same settings, input "
              "path, size and modification time, shard; checksum verified): re-running a run redoes only "
              "the shards that are missing or stale");
  c->add_flag("-q,--quiet", fp->quiet, "No summary or bad-line messages on stderr");
  c->callback([fp, exit_code] { *exit_code = RunFingerprintStage(*fp); });

  auto dec = std::make_shared<DecideFlags>();
  CLI::App* d = stage->add_subcommand(
      "decide",
      "The sequential task: read every signature shard in shard order and decide each document in stream "
      "order (first occurrence wins, the rule of `neardup dedup`); write one decision file per shard, "
      "OUTPUT_DIR/NNNNN.dec");
  d->add_option("-s,--signatures", dec->signatures,
                "Signature shards: files, a directory or a glob pattern; all shards of the run, any order")
      ->required();
  d->add_option("-o,--output-dir", dec->output_dir, "Directory for the decision files")->required();
  d->add_option("--stats-json", dec->stats_json, "Also write the run's statistics as JSON to this file");
  d->add_option("--sketch-dir", dec->sketch_dir,
                "Keep the kept documents' re-check sketches in an unnamed temporary file in this directory "
                "instead of memory, as dedup's --sketch-dir: the same decisions in much less memory")
      ->check(CLI::ExistingDirectory);
  AddDecisionOutputFlags(d, &dec->load_index, &dec->save_index, &dec->clusters, &dec->keep);
  d->add_option("-t,--threads", dec->threads,
                "Threads searching each batch's documents against the ones kept before it (0 = hardware "
                "concurrency); the decisions are the same for any number")
      ->check(CLI::Range(0, 1024));
  AddMemoryLimitFlags(d, &dec->memory_limit, &dec->spill_dir);
  d->add_option("--progress", dec->progress_seconds,
                "With --memory-limit: a progress line (round, document, memory held, ETA) every this many seconds; "
                "0 (the default): none")
      ->check(CLI::Range(0.0, 86400.0));
  d->add_flag("-q,--quiet", dec->quiet, "No summary on stderr");
  d->callback([dec, exit_code] { *exit_code = RunDecide(*dec); });

  auto fil = std::make_shared<FilterFlags>();
  CLI::App* x = stage->add_subcommand(
      "filter",
      "One task: write one input file's kept records (or all, annotated) and its duplicate lines from its "
      "decision file; the outputs of the run's files, concatenated in order, are what `neardup dedup` writes");
  x->add_option("-i,--input", fil->input, "The input file (the one fingerprinted for this shard)")->required();
  x->add_option("--decisions", fil->decisions, "Its decision file (stage decide's OUTPUT_DIR/NNNNN.dec)")
      ->required();
  x->add_option("-o,--output", fil->output, "Kept records, byte for byte ('-' = stdout; .gz/.zst compressed)")
      ->required();
  x->add_option("-d,--duplicates", fil->duplicates, "Duplicate lines, as dedup's --duplicates");
  x->add_option("--annotate", fil->annotate, "Write every record with its decision in this field, as dedup's");
  x->add_option("--output-shards", fil->output_shards,
                "Split --output into N files, \"{shard}\" in its name replaced by 00000..N-1, continuing the "
                "run's round robin from the files before this one (dedup's --output-shards): shard s of the run "
                "is shard s of every file, concatenated in order")
      ->check(CLI::Range(1, 100000));
  x->add_flag("-q,--quiet", fil->quiet, "No summary on stderr");
  x->callback([fil, exit_code] { *exit_code = RunFilter(*fil); });
}

}  // namespace neardup::cli
