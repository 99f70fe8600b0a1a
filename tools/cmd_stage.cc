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
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "dedup_output.h"
#include "input_files.h"
#include "neardup/dedup/dedup.h"
#include "neardup/dedup/staged_files.h"

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
    if (in.path == "-") return Fail(Status::InvalidArgument("a staged run reads files, not standard input ('-')"));
    if (Status st = OpenInput(in.path).status(); !st.ok()) return Fail(st);
    j.push_back(Json{{"path", in.path}, {"bytes", in.size}});
  }
  std::printf("%s\n", j.dump().c_str());
  return kExitOk;
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
  Json header;
  header["stage"] = "signatures";
  header["settings"] = SettingsJson(f.run, dedup.scheme_id());
  header["input"] = path;
  header["input_bytes"] = FileSize(path);
  header["input_mtime_ns"] = FileMtimeNs(path);
  header["shard"] = f.shard;
  header["shards"] = f.shards;
  if (f.keep_existing && ShardIsCurrent(f.output, header.dump())) {
    if (!f.quiet) std::fprintf(stderr, "neardup stage fingerprint: %s is up to date\n", f.output.c_str());
    return kExitOk;
  }
  BadLines bad;
  if (Status st = bad.Open(f.run.in, f.quiet); !st.ok()) return Fail(st);
  bad.SetSource(path);
  auto writer = StageFileWriter::Create(f.output, StageFileKind::kSignatures, header.dump());
  if (!writer.ok()) return Fail(writer.status());

  const int threads = ResolveThreads(f.threads);
  RecordReader reader(std::move(in).value(), ToReaderOptions(f.run.in));
  LineDigest digest;
  std::vector<InputRecord> batch;
  std::vector<std::string_view> texts;
  std::vector<DocSignature> sigs;
  std::string record;
  uint64_t documents = 0, blank = 0, truncated = 0;
  bool stopped = false;
  while (!stopped) {
    if (Status st = reader.ReadBatch(f.batch_size, threads, &batch); !st.ok()) return Fail(st);
    if (batch.empty()) break;
    texts.clear();
    for (const InputRecord& r : batch) {
      if (r.kind == InputRecord::Kind::kDocument) texts.push_back(r.text());
    }
    dedup.Analyze(texts, &sigs, threads);  // counts invalid UTF-8 in dedup.stats()
    size_t next_sig = 0;
    for (size_t i = 0; i < batch.size() && !stopped; ++i) {
      InputRecord& r = batch[i];
      digest.Add(r.line);
      if (r.kind == InputRecord::Kind::kBlank) {
        ++blank;
        continue;
      }
      if (r.kind == InputRecord::Kind::kBad) {
        stopped = !bad.Add(r);
        continue;
      }
      truncated += r.truncated;
      ++documents;
      record.clear();
      EncodeStagedDoc(StagedDoc{r.line_number, std::move(r.id), std::move(sigs[next_sig++])}, &record);
      if (Status st = (*writer)->Add(record); !st.ok()) return Fail(st);
    }
  }
  // A task stopped by bad lines leaves no shard. Whether every line of the
  // run was bad is for decide to say (one file of them may be all bad).
  if (const int rc = bad.Finish(std::max<uint64_t>(documents, 1)); rc != kExitOk) return rc;
  Json summary;
  summary["lines"] = digest.lines();
  summary["documents"] = documents;
  summary["bad_lines"] = bad.count();
  summary["blank_lines"] = blank;
  summary["truncated_texts"] = truncated;
  summary["invalid_utf8"] = dedup.stats().invalid_utf8;
  summary["line_digest"] = FingerprintToHex(digest.digest());
  record = static_cast<char>(StageRecordType::kSummary) + summary.dump();
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
  bool quiet = false;
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

// Reads every shard's header and checks that they form one run: the same
// settings, shards 0..n-1 each exactly once. Returns them in shard order.
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

// Writes the next document's decision record and keeps what later ones need
// (its id when kept, its cluster, the saved index).
Status WriteDecision(StagedDoc& doc, const DedupDecision& d, DecideState& st, StageFileWriter& writer) {
  const uint64_t sequence = st.loaded + st.documents;
  ++st.documents;
  StagedDecision s{doc.line_number, d, {}, {}};
  if (d.duplicate) {
    s.duplicate_of_id = st.kept_ids.Find(d.duplicate_of);
    if (st.clusters) st.clusters->Add(d.duplicate_of, doc.id);
    s.id = std::move(doc.id);
  } else {
    ++st.kept;
    if (st.saved) NEARDUP_RETURN_IF_ERROR(st.saved->Add(sequence, doc.id, doc.sig));
    if (!st.keep_longest) st.kept_ids.Add(sequence, doc.id);
  }
  thread_local std::string out;
  out.clear();
  EncodeStagedDecision(s, &out);
  return writer.Add(out);
}

// Decides one shard's documents (or takes their --keep longest decisions),
// writing its decision file. Its header says how many documents and kept
// documents the shards before it had: where its records fall in the
// --output-shards round robin.
Status DecideShard(const ShardInfo& shard, const std::string& out_path, DecideState& st) {
  NEARDUP_ASSIGN_OR_RETURN(auto reader, StageFileReader::Open(shard.path, StageFileKind::kSignatures));
  Json header = shard.header;
  header["stage"] = "decisions";
  header["first_sequence"] = st.loaded + st.documents;
  header["written_before"] = {{"documents", st.documents}, {"kept", st.kept}};
  NEARDUP_ASSIGN_OR_RETURN(auto writer, StageFileWriter::Create(out_path, StageFileKind::kDecisions, header.dump()));
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
  NEARDUP_RETURN_IF_ERROR(writer->Add(static_cast<char>(StageRecordType::kSummary) + summary->dump()));
  DecideTotals& totals = st.totals;
  try {
    totals.counts.lines += (*summary)["lines"].get<uint64_t>();
    totals.counts.bad_lines += (*summary)["bad_lines"].get<uint64_t>();
    totals.counts.blank_lines += (*summary)["blank_lines"].get<uint64_t>();
    totals.counts.truncated_texts += (*summary)["truncated_texts"].get<uint64_t>();
    totals.invalid_utf8 += (*summary)["invalid_utf8"].get<uint64_t>();
  } catch (const Json::exception& e) {
    return Status::Corruption(shard.path + ": summary: " + e.what());
  }
  ++totals.counts.files;
  return writer->Finish();
}

int RunDecide(const DecideFlags& f) {
  const auto t0 = std::chrono::steady_clock::now();
  auto files = ExpandInputs(f.signatures);
  if (!files.ok()) return Fail(files.status());
  auto shards = CheckShards(*files);
  if (!shards.ok()) return Fail(shards.status());
  auto options = OptionsFromSettings((*shards)[0].header["settings"]);
  if (!options.ok()) return Fail(options.status());
  options->sketch_dir = f.sketch_dir;  // where the decision keeps its data: not a setting of the run
  auto created = Deduplicator::Create(*options);
  if (!created.ok()) return Fail(created.status());
  Deduplicator& dedup = *created.value();
  std::error_code ec;
  std::filesystem::create_directories(f.output_dir, ec);
  if (ec) return Fail(Status::IOError("cannot create " + f.output_dir + ": " + ec.message()));
  if (Status st = CheckSaveIsNotLoaded(f.load_index, f.save_index); !st.ok()) return Fail(st);
  DecideState state(dedup);
  state.threads = ResolveThreads(f.threads);
  for (const std::string& dir : f.load_index) {
    auto n = LoadKeptIndex(dir, dedup, state.kept_ids);
    if (!n.ok()) return Fail(n.status());
    state.loaded += *n;
  }
  if (!f.save_index.empty()) {
    auto saved = CreateSavedIndex(f.save_index, dedup);
    if (!saved.ok()) return Fail(saved.status());
    state.saved = std::move(saved).value();
  }
  if (!f.clusters.empty()) state.clusters = std::make_unique<Clusters>();
  if (f.keep == "longest") {
    if (Status st = DecideAllLongestFirst(*shards, state); !st.ok()) return Fail(st);
  }
  for (size_t i = 0; i < shards->size(); ++i) {
    Status st = DecideShard((*shards)[i], DecisionsPath(f.output_dir, static_cast<int>(i)), state);
    if (!st.ok()) return Fail(st);
  }
  const DecideTotals& totals = state.totals;
  if (state.clusters) {
    auto out = OpenOutput(f.clusters);
    if (!out.ok()) return Fail(out.status());
    state.clusters->Write(out->get(), state.kept_ids);
    if (Status st = FinishOutput(std::move(out).value(), f.clusters); !st.ok()) return Fail(st);
  }
  DedupStats s = dedup.stats();
  s.invalid_utf8 = totals.invalid_utf8;  // counted where the texts were analyzed
  const double seconds = Since(t0);
  if (!f.stats_json.empty()) {
    Json j;
    AddRunStats(s, totals.counts, &j);
    j["elapsed_seconds"] = seconds;
    j["memory_bytes"] = dedup.MemoryBytes();
    j["settings"] = (*shards)[0].header["settings"];
    auto out = OpenOutput(f.stats_json);
    if (!out.ok()) return Fail(out.status());
    const std::string text = j.dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), out->get());
    if (Status st = FinishOutput(std::move(out).value(), f.stats_json); !st.ok()) return Fail(st);
  }
  if (!f.quiet) {
    std::fprintf(stderr, "neardup stage decide: %llu documents in %llu shards: %llu kept, %llu duplicates, %.3f s\n",
                 static_cast<unsigned long long>(s.documents), static_cast<unsigned long long>(totals.counts.files),
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
    Status st = FinishSavedIndex(std::move(state.saved), f.save_index, dedup, inputs, state.loaded, f.load_index);
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
  if (Status st = CheckShardedOutput(f.output, f.output_shards); !st.ok()) return Fail(st);
  for (int i = 0; i < f.output_shards; ++i) {
    if (Status st = CheckNotInput(f.input, ShardPath(f.output, i, f.output_shards)); !st.ok()) return Fail(st);
  }
  if (Status st = CheckNotInput(f.input, f.duplicates); !st.ok()) return Fail(st);
  auto in = OpenInput(f.input);  // a missing input is reported as such, before its size is compared
  if (!in.ok()) return Fail(in.status());
  const uint64_t expected_bytes = h.value("input_bytes", uint64_t{0});
  if (FileSize(f.input) != expected_bytes) {
    return Fail(Status::InvalidArgument(f.input + " is not the input of " + f.decisions + " (" +
                                        std::to_string(FileSize(f.input)) + " bytes; the fingerprinted " +
                                        h.value("input", std::string("file")) + " had " +
                                        std::to_string(expected_bytes) + ")"));
  }
  std::vector<FilePtr> outs;
  std::vector<std::string> out_paths;
  for (int i = 0; i < f.output_shards; ++i) {
    out_paths.push_back(ShardPath(f.output, i, f.output_shards));
    auto out = OpenOutput(out_paths.back());
    if (!out.ok()) return Fail(out.status());
    outs.push_back(std::move(out).value());
  }
  FilePtr dups;
  if (!f.duplicates.empty()) {
    auto d = OpenOutput(f.duplicates);
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
  if (!st.ok()) {
    // Outputs of a failed task must not be mistaken for a result.
    out_paths.push_back(f.duplicates);
    for (const std::string& path : out_paths) {
      if (!path.empty() && path != "-") std::remove(path.c_str());
    }
    return Fail(st);
  }
  if (!f.quiet) {
    std::fprintf(stderr, "neardup stage filter: %s: %llu records written, %.3f s\n", f.input.c_str(),
                 static_cast<unsigned long long>(written), Since(t0));
  }
  return kExitOk;
}

}  // namespace

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
