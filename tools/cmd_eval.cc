// neardup eval: precision / recall / F1 of the deduplication decision on a
// labeled JSONL stream (scripts/prepare_eval.py), per bucket, for the default
// policy and the seed's plain method side by side, with the cost per
// document. The metric is defined in docs/ACCURACY.md:
//
//  Documents are decided in input order, first occurrence wins. A document is
//  a positive when an earlier document of the stream has its family. For a
//  document flagged as a duplicate of kept document j:
//    TP  family(j) == family(doc)
//    FP  family(j) != family(doc)
//  FN: a positive that is not a TP (not flagged, or flagged with a wrong
//  family - that document is then both an FP and an FN).
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
#include "neardup/text/similarity.h"

namespace neardup::cli {
namespace {

struct EvalFlags {
  std::string input;
  std::string text_field = "text";
  std::string family_field = "family";
  std::string bucket_field = "bucket";
  std::string level_field = "level";
  std::string policy = "both";
  std::string json_out;
  std::string errors_out;
  FingerprintFlags fp;
  int k = 3;
  RecheckOptions recheck_options;  // --recheck/--no-recheck: .enabled
  int runs = 1;
  bool by_level = false;
};

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
  LineReader lines(in.value().get());
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
    if (family == j.end() || family->is_null() || family->is_structured()) {
      return Status::InvalidArgument(where + "field \"" + f.family_field + "\" missing or not a scalar");
    }
    Doc d;
    d.text = text->get<std::string>();
    d.family = FamilyKey(*family);
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

struct PolicyResult {
  std::string name;
  std::string description;
  std::map<std::string, Counts> by_bucket;
  std::map<std::string, Counts> by_level;  // "bucket/level"
  Counts all;
  uint64_t kept = 0;
  uint64_t sketches_kept = 0;
  uint64_t sketch_bytes = 0;
  double analyze_seconds = 0, decide_seconds = 0;
};

// CPU time of this thread: unlike wall time it does not count the time other
// processes run on the core (the numbers are for a shared machine).
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Policy {
  std::string name;
  std::string description;
  DedupOptions options;
  bool sketch = true;  // compute the re-check signature
};

Result<PolicyResult> RunPolicy(const Policy& policy, const std::vector<Doc>& docs, int runs, std::FILE* errors) {
  PolicyResult best;
  for (int run = 0; run < std::max(1, runs); ++run) {
    auto created = Deduplicator::Create(policy.options);
    if (!created.ok()) return created.status();
    Deduplicator& dedup = *created.value();
    PolicyResult r;
    r.name = policy.name;
    r.description = policy.description;
    std::unordered_map<std::string, uint64_t> family_seen;  // family -> docs so far
    std::vector<const std::string*> family_of;
    family_of.reserve(docs.size());
    TextAnalysis analysis;
    DocSignature sig;
    for (size_t i = 0; i < docs.size(); ++i) {
      const Doc& d = docs[i];
      const double t0 = ThreadSeconds();
      dedup.fingerprinter().Analyze(d.text, &analysis);
      if (policy.sketch) {
        sig = MakeSignature(analysis);
      } else {
        sig = DocSignature{analysis.content_hash, analysis.fingerprint, analysis.has_features()};
      }
      const double t1 = ThreadSeconds();
      auto decided = dedup.ProcessSignature(sig);
      const double t2 = ThreadSeconds();
      if (!decided.ok()) return decided.status();
      const DedupDecision& dec = decided.value();
      const double a = t1 - t0;
      const double b = t2 - t1;
      r.analyze_seconds += a;
      r.decide_seconds += b;

      const std::string bucket = d.bucket.empty() ? DerivedBucket(analysis) : d.bucket;
      Counts c;
      c.docs = 1;
      c.seconds = a + b;
      uint64_t& seen = family_seen[d.family];
      const bool positive = seen > 0;
      ++seen;
      family_of.push_back(&d.family);
      c.positives = positive;
      bool right = false;
      if (dec.duplicate) {
        right = *family_of[dec.duplicate_of] == d.family;
        (right ? c.tp : c.fp) = 1;
      }
      if (positive && !right) c.fn = 1;
      if (!dec.duplicate) {
        ++r.kept;
        if (sig.has_sketch() && sig.num_chars <= static_cast<uint32_t>(policy.options.recheck.sketch_max_chars)) {
          ++r.sketches_kept;
          r.sketch_bytes += 12 + 4 * sig.sketch.mins.size();
        }
      }
      r.by_bucket[bucket].Add(c);
      r.by_level[bucket + "/" + (d.level.empty() ? "-" : d.level)].Add(c);
      r.all.Add(c);
      if (errors != nullptr && run == 0 && (c.fp || c.fn)) {
        nlohmann::json e;
        e["policy"] = policy.name;
        e["line"] = d.line;
        e["bucket"] = bucket;
        e["level"] = d.level;
        e["error"] = c.fp ? "FP" : "FN";
        e["family"] = d.family;
        e["text"] = d.text;
        if (dec.duplicate) {
          e["duplicate_of_line"] = docs[dec.duplicate_of].line;
          e["duplicate_of_family"] = docs[dec.duplicate_of].family;
          e["duplicate_of_text"] = docs[dec.duplicate_of].text;
          e["distance"] = dec.distance;
          e["similarity"] = dec.similarity;
        }
        const std::string s = e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
        std::fwrite(s.data(), 1, s.size(), errors);
      }
    }
    // Timing: keep the fastest run (the others were disturbed more).
    if (run == 0 || r.all.seconds < best.all.seconds) best = std::move(r);
  }
  return best;
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

int RunEval(const EvalFlags& f) {
  std::vector<Doc> docs;
  Status st = ReadDocs(f, &docs);
  if (!st.ok()) return Fail(st, ErrorSource::kInputData);
  if (docs.empty()) return Fail(Status::InvalidArgument("no documents in " + f.input));

  std::vector<Policy> policies;
  if (f.policy == "default" || f.policy == "both") {
    auto fp = ToFingerprintOptions(f.fp);
    if (!fp.ok()) return Fail(fp.status());
    Policy p;
    p.name = "default";
    p.options.k = f.k;
    p.options.fingerprint = fp.value();
    p.options.recheck = f.recheck_options;
    p.sketch = f.recheck_options.enabled;
    auto fpr = Fingerprinter::Create(p.options.fingerprint);
    if (!fpr.ok()) return Fail(fpr.status());
    const RecheckOptions& r = p.options.recheck;
    char buf[512];
    if (f.recheck_options.enabled) {
      std::snprintf(buf, sizeof buf,
                    "%s, k=%d (short <= %d chars: k=%d) + %d anchors (stop at %d); re-check: Jaccard >= %.2f "
                    "(>= %.2f below %d shingles)",
                    fpr->scheme_name().c_str(), p.options.k, r.short_max_chars, std::max(r.short_k, p.options.k),
                    r.anchors, r.anchor_max_postings, r.min_similarity, r.min_similarity_small,
                    r.small_text_shingles);
    } else {
      std::snprintf(buf, sizeof buf, "%s, k=%d, no re-check", fpr->scheme_name().c_str(), p.options.k);
    }
    p.description = buf;
    policies.push_back(p);
  }
  if (f.policy == "plain" || f.policy == "both") {
    // The seed's method: ICU word features, 64-bit simhash, k = 3, no re-check.
    Policy p;
    p.name = "plain";
    p.options.k = 3;
    p.options.fingerprint.tokenizer = TokenizerKind::kIcuWords;
    p.options.recheck.enabled = false;
    p.sketch = false;
    p.description = "simhash64-v1/icu-words/logtf, k=3, no re-check";
    policies.push_back(p);
  }

  FilePtr errors;
  if (!f.errors_out.empty()) {
    auto e = OpenOutput(f.errors_out);
    if (!e.ok()) return Fail(e.status());
    errors = std::move(e).value();
  }
  std::vector<PolicyResult> results;
  for (const Policy& p : policies) {
    auto r = RunPolicy(p, docs, f.runs, errors.get());
    if (!r.ok()) return Fail(r.status());
    results.push_back(std::move(r).value());
  }

  // Buckets in a fixed order, then any others.
  std::vector<std::string> buckets;
  for (const char* b : {"zh-short", "zh-long", "en-short", "en-long"}) {
    if (results[0].by_bucket.count(b)) buckets.push_back(b);
  }
  for (const auto& [b, c] : results[0].by_bucket) {
    if (std::find(buckets.begin(), buckets.end(), b) == buckets.end()) buckets.push_back(b);
  }

  std::printf("neardup eval: %s, %zu documents\n", f.input.c_str(), docs.size());
  for (const PolicyResult& r : results) std::printf("  %-8s %s\n", r.name.c_str(), r.description.c_str());
  std::printf("\n| bucket | docs | positives | policy | precision | recall | F1 | µs/doc |\n");
  std::printf("|---|---:|---:|---|---:|---:|---:|---:|\n");
  auto row = [&](const std::string& bucket, const PolicyResult& r, const Counts& c) {
    std::printf("| %s | %llu | %llu | %s | %.4f | %.4f | **%.4f** | %.1f |\n", bucket.c_str(),
                static_cast<unsigned long long>(c.docs), static_cast<unsigned long long>(c.positives),
                r.name.c_str(), c.Precision(), c.Recall(), c.F1(), c.MicrosPerDoc());
  };
  for (const std::string& b : buckets) {
    for (const PolicyResult& r : results) row(b, r, r.by_bucket.at(b));
  }
  for (const PolicyResult& r : results) row("all", r, r.all);
  std::printf("\n");
  for (const PolicyResult& r : results) {
    const double n = static_cast<double>(r.all.docs);
    std::printf("%s: %.1f µs/doc analysis+signature, %.1f µs/doc decision; %llu kept, %llu sketches kept "
                "(%.0f bytes each on average)\n",
                r.name.c_str(), 1e6 * r.analyze_seconds / n, 1e6 * r.decide_seconds / n,
                static_cast<unsigned long long>(r.kept), static_cast<unsigned long long>(r.sketches_kept),
                r.sketches_kept ? static_cast<double>(r.sketch_bytes) / static_cast<double>(r.sketches_kept) : 0.0);
  }
  if (f.by_level) {
    std::printf("\n| bucket/level | docs | positives | policy | precision | recall | F1 |\n|---|---:|---:|---|---:|---:|---:|\n");
    for (const auto& [key, c0] : results[0].by_level) {
      for (const PolicyResult& r : results) {
        const Counts& c = r.by_level.at(key);
        std::printf("| %s | %llu | %llu | %s | %.4f | %.4f | %.4f |\n", key.c_str(),
                    static_cast<unsigned long long>(c.docs), static_cast<unsigned long long>(c.positives),
                    r.name.c_str(), c.Precision(), c.Recall(), c.F1());
      }
    }
  }

  if (!f.json_out.empty()) {
    nlohmann::json j;
    j["input"] = f.input;
    j["documents"] = docs.size();
    for (const PolicyResult& r : results) {
      nlohmann::json p;
      p["description"] = r.description;
      for (const auto& [b, c] : r.by_bucket) p["buckets"][b] = CountsJson(c);
      for (const auto& [b, c] : r.by_level) p["levels"][b] = CountsJson(c);
      p["all"] = CountsJson(r.all);
      p["kept"] = r.kept;
      p["sketches_kept"] = r.sketches_kept;
      p["sketch_bytes"] = r.sketch_bytes;
      p["analyze_us_per_doc"] = 1e6 * r.analyze_seconds / static_cast<double>(r.all.docs);
      p["decide_us_per_doc"] = 1e6 * r.decide_seconds / static_cast<double>(r.all.docs);
      j["policies"][r.name] = p;
    }
    auto out = OpenOutput(f.json_out);
    if (!out.ok()) return Fail(out.status());
    const std::string s = j.dump(2) + "\n";
    std::fwrite(s.data(), 1, s.size(), out.value().get());
    st = FinishOutput(std::move(out).value(), f.json_out);
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
      "Measure precision/recall/F1 of the duplicate decision on a labeled JSONL stream "
      "(scripts/prepare_eval.py), per bucket, for the default policy and the plain simhash "
      "method; see docs/ACCURACY.md");
  cmd->add_option("-i,--input", f->input, "Labeled JSONL: text, family, optional bucket and level")
      ->required();
  cmd->add_option("--text-field", f->text_field, "JSONL field holding the text");
  cmd->add_option("--family-field", f->family_field,
                  "JSONL field holding the ground-truth family (equal = near-duplicates)");
  cmd->add_option("--bucket-field", f->bucket_field,
                  "JSONL field naming the bucket; absent: {zh,en}-{short,long} from the text");
  cmd->add_option("--level-field", f->level_field, "JSONL field naming the edit level (for --by-level)");
  cmd->add_option("--policy", f->policy, "Which to run: 'default' (the options below), 'plain' (icu-words, "
                                         "k=3, no re-check) or 'both'")
      ->check(CLI::IsMember({"default", "plain", "both"}));
  cmd->add_option("-k,--max-distance", f->k, "Default policy: radius for long texts")
      ->check(CLI::Range(0, kMaxSupportedK));
  AddFingerprintFlags(cmd, &f->fp, /*with_idf=*/true);
  AddRecheckFlags(cmd, &f->recheck_options);
  cmd->add_option("--runs", f->runs, "Run each policy this many times; timings are the fastest run's")
      ->check(CLI::Range(1, 100));
  cmd->add_flag("--by-level", f->by_level, "Also print a table per bucket and edit level");
  cmd->add_option("--json", f->json_out, "Also write the results as JSON to this file ('-' = stdout)");
  cmd->add_option("--errors", f->errors_out, "Write every false positive / negative as JSONL to this file");
  cmd->callback([f, exit_code] { *exit_code = RunEval(*f); });
}

}  // namespace neardup::cli
