// neardup eval: precision / recall / F1 of the deduplication decision, per
// bucket, for neardup's policy, the seed's plain simhash and a MinHash-LSH
// baseline side by side, with the cost per document and the memory per kept
// document. docs/ACCURACY.md defines the metric:
//
//  --truth exact (the default): the truth is the exact stream outcome by the
//  definition of text/shingles.h (ExactStream): a document is a positive
//  when some document kept before it has similarity >= the threshold.
//    TP  flagged and a positive;  FP  flagged, not a positive;
//    FN  a positive not flagged.
//  --truth family (labeled synthetic data, scripts/prepare_eval.py): a
//  document is a positive when an earlier document of the stream has its
//  family; a flag is right when the kept document it names has the family.
//  P = TP / (TP + FP), R = TP / (TP + FN), F1 = 2PR / (P + R).
#include <algorithm>
#include <ctime>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "commands.h"
#include "neardup/dedup/dedup.h"
#include "neardup/dedup/exact_stream.h"
#include "neardup/dedup/minhash_lsh.h"
#include "neardup/text/shingles.h"
#include "neardup/text/similarity.h"

namespace neardup::cli {
namespace {

struct EvalFlags {
  std::string input;
  std::string text_field = "text";
  std::string family_field = "family";
  std::string bucket_field = "bucket";
  std::string level_field = "level";
  std::string truth = "exact";
  std::string policy = "all";
  std::string json_out;
  std::string errors_out;
  FingerprintFlags fp;
  int k = 3;
  RecheckOptions recheck_options;
  bool threshold_given = false;  // else every threshold of kDefaultThresholds
  int runs = 1;
  bool by_level = false;
};

// The thresholds the evaluation reports when none is given (docs/ACCURACY.md).
constexpr double kDefaultThresholds[] = {0.5, 0.7, 0.8};

struct Doc {
  std::string text;
  std::string family;
  std::string bucket;  // from the data, or derived
  std::string level;
  uint64_t line = 0;
};

struct Counts {
  uint64_t docs = 0, positives = 0, tp = 0, fp = 0, fn = 0;
  double seconds = 0;  // analysis + decision
  void Add(const Counts& o) {
    docs += o.docs, positives += o.positives, tp += o.tp, fp += o.fp, fn += o.fn;
    seconds += o.seconds;
  }
  double Precision() const { return tp + fp ? static_cast<double>(tp) / static_cast<double>(tp + fp) : 1.0; }
  double Recall() const { return tp + fn ? static_cast<double>(tp) / static_cast<double>(tp + fn) : 1.0; }
  double F1() const {
    const double p = Precision(), r = Recall();
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
  }
  double MicrosPerDoc() const { return docs ? 1e6 * seconds / static_cast<double>(docs) : 0.0; }
};

// A family label is any JSON scalar; its dump is the key.
std::string FamilyKey(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

Status ReadDocs(const EvalFlags& f, std::vector<Doc>* docs) {
  auto in = OpenInput(f.input);
  if (!in.ok()) return in.status();
  LineReader lines(in.value().get());  // gzip/zstd decompressed
  std::string line;
  while (lines.Next(&line)) {
    if (IsBlankLine(line)) continue;
    const std::string where = "line " + std::to_string(lines.line_number()) + ": ";
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return Status::InvalidArgument(where + "not a JSON object");
    auto text = j.find(f.text_field);
    if (text == j.end() || !text->is_string()) {
      return Status::InvalidArgument(where + "field \"" + f.text_field + "\" missing or not a string");
    }
    auto family = j.find(f.family_field);
    const bool has_family = family != j.end() && !family->is_null() && !family->is_structured();
    if (f.truth == "family" && !has_family) {
      return Status::InvalidArgument(where + "field \"" + f.family_field + "\" missing or not a scalar");
    }
    Doc d;
    d.text = text->get<std::string>();
    if (has_family) d.family = FamilyKey(*family);
    if (auto b = j.find(f.bucket_field); b != j.end() && b->is_string()) d.bucket = b->get<std::string>();
    if (auto l = j.find(f.level_field); l != j.end() && l->is_string()) d.level = l->get<std::string>();
    d.line = lines.line_number();
    docs->push_back(std::move(d));
  }
  return lines.status();
}

// "zh" when at least 30% of the letters are CJK, else "en"; "short" when the
// normalized text has at most 200 code points.
std::string DerivedBucket(const TextAnalysis& a) {
  size_t letters = 0, cjk = 0;
  const std::string& s = a.normalized;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = c < 0x80 ? c : c < 0xE0 ? (c & 0x1F) : c < 0xF0 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    i += len;
    if (cp == ' ') continue;
    ++letters;
    cjk += IsCjkCodePoint(cp);
  }
  return std::string(letters > 0 && cjk * 10 >= letters * 3 ? "zh" : "en") + (a.num_chars <= 200 ? "-short" : "-long");
}

// What a policy decided about one document.
struct Verdict {
  bool duplicate = false;
  size_t duplicate_of = 0;  // index of the kept document it names
  double similarity = 0;
  int distance = 0;
};

struct PolicyRun {
  std::string name;
  std::string description;
  std::vector<Verdict> verdicts;
  std::vector<double> seconds;  // per document: analysis + decision
  double analyze_seconds = 0, decide_seconds = 0;
  uint64_t kept = 0;
  size_t memory_bytes = 0;  // the policy's kept state at the end
};

// CPU time of this thread: unlike wall time it does not count the time other
// processes run on the core (the numbers are for a shared machine).
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// neardup's policy or the plain rule, through the batch job's Deduplicator.
Result<PolicyRun> RunDeduplicator(const DedupOptions& options, const std::vector<Doc>& docs) {
  auto created = Deduplicator::Create(options);
  if (!created.ok()) return created.status();
  Deduplicator& dedup = *created.value();
  PolicyRun r;
  TextAnalysis analysis;
  DocSignature sig;
  for (const Doc& d : docs) {
    const double t0 = ThreadSeconds();
    dedup.fingerprinter().Analyze(d.text, &analysis);
    if (options.recheck.enabled) {
      sig = MakeSignature(analysis, d.text, options.recheck.shingle_size);
    } else {
      sig = DocSignature{analysis.content_hash, analysis.fingerprint, analysis.has_features()};
    }
    const double t1 = ThreadSeconds();
    auto decided = dedup.ProcessSignature(sig);
    const double t2 = ThreadSeconds();
    if (!decided.ok()) return decided.status();
    const DedupDecision& dec = decided.value();
    r.verdicts.push_back({dec.duplicate, dec.duplicate_of, dec.similarity, dec.distance});
    r.seconds.push_back(t2 - t0);
    r.analyze_seconds += t1 - t0;
    r.decide_seconds += t2 - t1;
    r.kept += !dec.duplicate;
  }
  r.memory_bytes = dedup.MemoryBytes();
  return r;
}

// The MinHash-LSH baseline (dedup/minhash_lsh.h) at `threshold`.
PolicyRun RunMinHash(double threshold, int shingle_size, const std::vector<Doc>& docs) {
  MinHashLsh lsh(threshold);
  PolicyRun r;
  std::vector<uint64_t> set;
  for (const Doc& d : docs) {
    const double t0 = ThreadSeconds();
    ShingleHashes(d.text, shingle_size, &set);
    const double t1 = ThreadSeconds();
    const StreamDecision dec = lsh.Add(set);
    const double t2 = ThreadSeconds();
    r.verdicts.push_back({dec.duplicate, dec.duplicate_of, dec.similarity, 0});
    r.seconds.push_back(t2 - t0);
    r.analyze_seconds += t1 - t0;
    r.decide_seconds += t2 - t1;
    r.kept += !dec.duplicate;
  }
  r.memory_bytes = lsh.MemoryBytes();
  char buf[128];
  std::snprintf(buf, sizeof buf, "MinHash-LSH, 128 permutations, %d bands x %d rows, n=%d", lsh.bands().bands,
                lsh.bands().rows, shingle_size);
  r.description = buf;
  return r;
}

// Per document: a positive of the truth, and (family truth) its family.
struct Truth {
  std::vector<uint8_t> positive;
  bool by_family = false;
};

Truth ExactTruth(double threshold, int shingle_size, const std::vector<Doc>& docs) {
  Truth t;
  ExactStream stream(threshold);
  std::vector<uint64_t> set;
  for (const Doc& d : docs) {
    ShingleHashes(d.text, shingle_size, &set);
    t.positive.push_back(stream.Add(std::move(set)).duplicate);
  }
  return t;
}

Truth FamilyTruth(const std::vector<Doc>& docs) {
  Truth t;
  t.by_family = true;
  std::unordered_map<std::string, uint64_t> seen;
  for (const Doc& d : docs) t.positive.push_back(seen[d.family]++ > 0);
  return t;
}

// One document's contribution to its bucket's counts.
Counts Score(const Truth& truth, const std::vector<Doc>& docs, size_t i, const Verdict& v) {
  Counts c;
  c.docs = 1;
  c.positives = truth.positive[i];
  bool right = false;
  if (v.duplicate) {
    right = truth.by_family ? docs[v.duplicate_of].family == docs[i].family : truth.positive[i] != 0;
    (right ? c.tp : c.fp) = 1;
  }
  if (truth.positive[i] && !right) c.fn = 1;
  return c;
}

struct Scored {
  std::map<std::string, Counts> by_bucket;
  std::map<std::string, Counts> by_level;  // "bucket/level"
  Counts all;
};

Scored ScoreRun(const PolicyRun& run, const Truth& truth, const std::vector<Doc>& docs,
                const std::vector<std::string>& buckets, std::FILE* errors, double threshold) {
  Scored s;
  for (size_t i = 0; i < docs.size(); ++i) {
    Counts c = Score(truth, docs, i, run.verdicts[i]);
    c.seconds = run.seconds[i];
    s.by_bucket[buckets[i]].Add(c);
    s.by_level[buckets[i] + "/" + (docs[i].level.empty() ? "-" : docs[i].level)].Add(c);
    s.all.Add(c);
    if (errors == nullptr || !(c.fp || c.fn)) continue;
    nlohmann::json e;
    e["policy"] = run.name;
    e["threshold"] = threshold;
    e["line"] = docs[i].line;
    e["bucket"] = buckets[i];
    e["error"] = c.fp ? "FP" : "FN";
    e["text"] = docs[i].text;
    const Verdict& v = run.verdicts[i];
    if (v.duplicate) {
      e["duplicate_of_line"] = docs[v.duplicate_of].line;
      e["duplicate_of_text"] = docs[v.duplicate_of].text;
      e["similarity"] = v.similarity;
    }
    const std::string line = e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(line.data(), 1, line.size(), errors);
  }
  return s;
}

nlohmann::json CountsJson(const Counts& c) {
  nlohmann::json j;
  j["docs"] = c.docs;
  j["positives"] = c.positives;
  j["tp"] = c.tp;
  j["fp"] = c.fp;
  j["fn"] = c.fn;
  j["precision"] = c.Precision();
  j["recall"] = c.Recall();
  j["f1"] = c.F1();
  j["us_per_doc"] = c.MicrosPerDoc();
  return j;
}

// The runs of one threshold, each the fastest of `runs` (the others were
// disturbed more; decisions are deterministic).
Result<std::vector<PolicyRun>> RunPolicies(const EvalFlags& f, double threshold, const std::vector<Doc>& docs) {
  std::vector<PolicyRun> out;
  auto fastest = [&](auto run_once) -> Result<PolicyRun> {
    Result<PolicyRun> best = run_once();
    for (int i = 1; i < f.runs && best.ok(); ++i) {
      Result<PolicyRun> r = run_once();
      if (!r.ok()) return r;
      if (r->analyze_seconds + r->decide_seconds < best->analyze_seconds + best->decide_seconds) best = std::move(r);
    }
    return best;
  };
  const bool all = f.policy == "all";
  if (all || f.policy == "default") {
    auto fp = ToFingerprintOptions(f.fp);
    if (!fp.ok()) return fp.status();
    DedupOptions o;
    o.k = f.k;
    o.fingerprint = fp.value();
    o.recheck = f.recheck_options;
    o.recheck.threshold = threshold;
    auto r = fastest([&] { return RunDeduplicator(o, docs); });
    if (!r.ok()) return r.status();
    r->name = "neardup";
    char buf[256];
    std::snprintf(buf, sizeof buf, "neardup: similarity >= %.2f (n=%d); candidates: simhash k=%d (short: %d) + %d anchors "
                  "(stop at %d)%s", threshold, o.recheck.shingle_size, o.k, std::max(o.k, o.recheck.short_k),
                  o.recheck.anchors, o.recheck.anchor_max_postings, o.recheck.enabled ? "" : " [re-check off]");
    r->description = buf;
    out.push_back(std::move(r).value());
  }
  if (all || f.policy == "plain") {
    // The seed's method: ICU word features, 64-bit simhash, k = 3, no re-check.
    DedupOptions o;
    o.k = 3;
    o.fingerprint.tokenizer = TokenizerKind::kIcuWords;
    o.recheck.enabled = false;
    auto r = fastest([&] { return RunDeduplicator(o, docs); });
    if (!r.ok()) return r.status();
    r->name = "plain";
    r->description = "the seed's plain simhash: simhash64-v1/icu-words/logtf, k=3, no re-check";
    out.push_back(std::move(r).value());
  }
  if (all || f.policy == "minhash") {
    auto r = fastest([&]() -> Result<PolicyRun> { return RunMinHash(threshold, f.recheck_options.shingle_size, docs); });
    r->name = "minhash";
    out.push_back(std::move(r).value());
  }
  return out;
}

// Each document's bucket: from the data, or {zh,en}-{short,long}.
std::vector<std::string> Buckets(const EvalFlags& f, const std::vector<Doc>& docs) {
  auto fp = MakeFingerprinter(f.fp);
  std::vector<std::string> out;
  TextAnalysis a;
  for (const Doc& d : docs) {
    if (!d.bucket.empty() || !fp.ok()) {
      out.push_back(d.bucket.empty() ? "all" : d.bucket);
      continue;
    }
    fp->Analyze(d.text, &a);
    out.push_back(DerivedBucket(a));
  }
  return out;
}

void PrintTable(double threshold, const std::vector<PolicyRun>& runs, const std::vector<Scored>& scored,
                const std::vector<std::string>& order) {
  std::printf("\nthreshold %.2f\n", threshold);
  for (const PolicyRun& r : runs) std::printf("  %-8s %s\n", r.name.c_str(), r.description.c_str());
  std::printf("\n| bucket | docs | positives | policy | precision | recall | F1 | µs/doc | bytes/kept doc |\n");
  std::printf("|---|---:|---:|---|---:|---:|---:|---:|---:|\n");
  auto row = [&](const std::string& bucket, size_t p, const Counts& c) {
    const PolicyRun& r = runs[p];
    std::printf("| %s | %llu | %llu | %s | %.4f | %.4f | **%.4f** | %.1f | %.0f |\n", bucket.c_str(),
                static_cast<unsigned long long>(c.docs), static_cast<unsigned long long>(c.positives),
                r.name.c_str(), c.Precision(), c.Recall(), c.F1(), c.MicrosPerDoc(),
                r.kept ? static_cast<double>(r.memory_bytes) / static_cast<double>(r.kept) : 0.0);
  };
  for (const std::string& b : order) {
    for (size_t p = 0; p < runs.size(); ++p) row(b, p, scored[p].by_bucket.at(b));
  }
  if (order.size() > 1) {
    for (size_t p = 0; p < runs.size(); ++p) row("all", p, scored[p].all);
  }
}

void PrintLevels(const std::vector<PolicyRun>& runs, const std::vector<Scored>& scored) {
  std::printf("\n| bucket/level | docs | positives | policy | precision | recall | F1 |\n|---|---:|---:|---|---:|---:|---:|\n");
  for (const auto& [key, c0] : scored[0].by_level) {
    for (size_t p = 0; p < runs.size(); ++p) {
      const Counts& c = scored[p].by_level.at(key);
      std::printf("| %s | %llu | %llu | %s | %.4f | %.4f | %.4f |\n", key.c_str(),
                  static_cast<unsigned long long>(c.docs), static_cast<unsigned long long>(c.positives),
                  runs[p].name.c_str(), c.Precision(), c.Recall(), c.F1());
    }
  }
}

nlohmann::json ThresholdJson(double threshold, const std::vector<PolicyRun>& runs, const std::vector<Scored>& scored) {
  nlohmann::json j;
  j["threshold"] = threshold;
  for (size_t p = 0; p < runs.size(); ++p) {
    const PolicyRun& r = runs[p];
    nlohmann::json o;
    o["description"] = r.description;
    for (const auto& [b, c] : scored[p].by_bucket) o["buckets"][b] = CountsJson(c);
    o["all"] = CountsJson(scored[p].all);
    o["kept"] = r.kept;
    o["memory_bytes"] = r.memory_bytes;
    o["analyze_us_per_doc"] = 1e6 * r.analyze_seconds / static_cast<double>(r.verdicts.size());
    o["decide_us_per_doc"] = 1e6 * r.decide_seconds / static_cast<double>(r.verdicts.size());
    j["policies"][r.name] = o;
  }
  return j;
}

Status WriteJson(const std::string& path, const nlohmann::json& j) {
  auto out = OpenOutput(path);
  if (!out.ok()) return out.status();
  const std::string s = j.dump(2) + "\n";
  std::fwrite(s.data(), 1, s.size(), out.value().get());
  return FinishOutput(std::move(out).value(), path);
}

int RunEval(const EvalFlags& f) {
  for (const std::string* out : {&f.errors_out, &f.json_out}) {
    if (Status st = CheckNotInput(f.input, *out); !st.ok()) return Fail(st);
  }
  if (Status st = CheckDistinctOutputs({f.errors_out, f.json_out}); !st.ok()) return Fail(st);
  std::vector<Doc> docs;
  Status st = ReadDocs(f, &docs);
  if (!st.ok()) return Fail(st, ErrorSource::kInputData);
  if (docs.empty()) return Fail(Status::InvalidArgument("no documents in " + f.input));
  const std::vector<std::string> buckets = Buckets(f, docs);
  std::vector<std::string> order;
  for (const char* b : {"zh-short", "zh-long", "en-short", "en-long"}) {
    if (std::find(buckets.begin(), buckets.end(), b) != buckets.end()) order.push_back(b);
  }
  for (const std::string& b : buckets) {
    if (std::find(order.begin(), order.end(), b) == order.end()) order.push_back(b);
  }
  FilePtr errors;
  if (!f.errors_out.empty()) {
    auto e = OpenOutput(f.errors_out);
    if (!e.ok()) return Fail(e.status());
    errors = std::move(e).value();
  }
  std::vector<double> thresholds(std::begin(kDefaultThresholds), std::end(kDefaultThresholds));
  if (f.threshold_given) thresholds = {f.recheck_options.threshold};
  std::printf("neardup eval: %s, %zu documents, truth: %s\n", f.input.c_str(), docs.size(),
              f.truth == "family" ? "family labels" : "exact stream outcome");
  nlohmann::json j;
  j["input"] = f.input;
  j["documents"] = docs.size();
  j["truth"] = f.truth;
  for (double t : thresholds) {
    const Truth truth =
        f.truth == "family" ? FamilyTruth(docs) : ExactTruth(t, f.recheck_options.shingle_size, docs);
    auto runs = RunPolicies(f, t, docs);
    if (!runs.ok()) return Fail(runs.status());
    std::vector<Scored> scored;
    for (const PolicyRun& r : runs.value()) scored.push_back(ScoreRun(r, truth, docs, buckets, errors.get(), t));
    PrintTable(t, runs.value(), scored, order);
    if (f.by_level) PrintLevels(runs.value(), scored);
    j["thresholds"].push_back(ThresholdJson(t, runs.value(), scored));
  }
  if (!f.json_out.empty()) {
    st = WriteJson(f.json_out, j);
    if (!st.ok()) return Fail(st);
  }
  if (errors) {
    st = FinishOutput(std::move(errors), f.errors_out);
    if (!st.ok()) return Fail(st);
  }
  return kExitOk;
}

}  // namespace

void AddEvalCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<EvalFlags>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Measure precision/recall/F1 of the duplicate decision against the exact stream outcome (or family "
      "labels), per bucket, for neardup's policy, the seed's plain simhash and MinHash-LSH; see "
      "docs/ACCURACY.md");
  cmd->add_option("-i,--input", f->input, "JSONL: text, optional bucket, family (for --truth family) and level")
      ->required();
  cmd->add_option("--truth", f->truth,
                  "'exact': the exact stream outcome of the similarity at the threshold; 'family': equal "
                  "family labels are near-duplicates (synthetic data)")
      ->check(CLI::IsMember({"exact", "family"}));
  cmd->add_option("--text-field", f->text_field, "JSONL field holding the text");
  cmd->add_option("--family-field", f->family_field,
                  "JSONL field holding the ground-truth family (equal = near-duplicates)");
  cmd->add_option("--bucket-field", f->bucket_field,
                  "JSONL field naming the bucket; absent: {zh,en}-{short,long} from the text");
  cmd->add_option("--level-field", f->level_field, "JSONL field naming the edit level (for --by-level)");
  cmd->add_option("--policy", f->policy,
                  "Which to run: 'default' (the options below), 'plain' (icu-words, k=3, no re-check), "
                  "'minhash' (MinHash-LSH, 128 permutations) or 'all'")
      ->check(CLI::IsMember({"default", "plain", "minhash", "all"}));
  cmd->add_option("-k,--max-distance", f->k, "Default policy: radius for long texts")
      ->check(CLI::Range(0, kMaxSupportedK));
  AddFingerprintFlags(cmd, &f->fp, /*with_idf=*/true);
  AddRecheckFlags(cmd, &f->recheck_options);
  cmd->add_option("--runs", f->runs, "Run each policy this many times; timings are the fastest run's")
      ->check(CLI::Range(1, 100));
  cmd->add_flag("--by-level", f->by_level, "Also print a table per bucket and edit level");
  cmd->add_option("--json", f->json_out, "Also write the results as JSON to this file ('-' = stdout)");
  cmd->add_option("--errors", f->errors_out, "Write every false positive / negative as JSONL to this file");
  cmd->callback([f, cmd, exit_code] {
    f->threshold_given = cmd->count("--threshold") > 0;
    *exit_code = RunEval(*f);
  });
}

}  // namespace neardup::cli
