// Fingerprint throughput (bytes/s of UTF-8 input) on the sample corpora.
//
//   ./build/bench_fingerprint [--benchmark_filter=...]
//
// Data: $NEARDUP_DATA or "data/sample" relative to the working directory
// (bench_zh.txt, bench_en.txt). Benchmarks report an error if it is missing.
//
// "doc" benchmarks fingerprint each fortune (entries separated by a blank
// line, a few hundred bytes each) separately, which includes the per-call
// overhead; "file" benchmarks fingerprint the whole file as one text.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "neardup/text/fingerprint.h"

namespace {

std::string DataDir() {
  const char* env = std::getenv("NEARDUP_DATA");
  return (env != nullptr && *env != '\0') ? env : "data/sample";
}

struct Corpus {
  bool ok = false;
  std::string path;
  std::string text;
  std::vector<std::string> docs;
};

const Corpus& LoadCorpus(const std::string& name) {
  static std::vector<std::pair<std::string, Corpus>> cache;
  for (auto& [n, c] : cache) {
    if (n == name) return c;
  }
  Corpus c;
  c.path = DataDir() + "/" + name;
  std::ifstream in(c.path, std::ios::binary);
  if (in) {
    std::ostringstream ss;
    ss << in.rdbuf();
    c.text = ss.str();
    c.ok = !c.text.empty();
    size_t pos = 0;
    while (pos < c.text.size()) {
      size_t end = c.text.find("\n\n", pos);
      if (end == std::string::npos) end = c.text.size();
      if (end > pos) c.docs.push_back(c.text.substr(pos, end - pos));
      pos = end + 2;
    }
  }
  cache.emplace_back(name, std::move(c));
  return cache.back().second;
}

void Run(benchmark::State& state, const std::string& file, neardup::TokenizerKind kind,
         bool per_doc) {
  const Corpus& corpus = LoadCorpus(file);
  if (!corpus.ok) {
    state.SkipWithError(("cannot read " + corpus.path +
                         " (set NEARDUP_DATA to the data/sample directory)").c_str());
    return;
  }
  neardup::FingerprintOptions options;
  options.tokenizer = kind;
  auto fp = neardup::Fingerprinter::Create(options);
  if (!fp.ok()) {
    state.SkipWithError(fp.status().ToString().c_str());
    return;
  }
  uint64_t sink = 0;
  for (auto _ : state) {
    if (per_doc) {
      for (const std::string& d : corpus.docs) sink += fp->Compute(d);
    } else {
      sink += fp->Compute(corpus.text);
    }
  }
  benchmark::DoNotOptimize(sink);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(corpus.text.size()));
}

}  // namespace

int main(int argc, char** argv) {
  using neardup::TokenizerKind;
  struct Lang { const char* name; const char* file; };
  struct Tok { const char* name; TokenizerKind kind; };
  for (Lang lang : {Lang{"zh", "bench_zh.txt"}, Lang{"en", "bench_en.txt"}}) {
    for (Tok tok : {Tok{"mixed", TokenizerKind::kMixedNgram}, Tok{"icu", TokenizerKind::kIcuWords}}) {
      for (bool per_doc : {true, false}) {
        const std::string name = std::string("BM_Fingerprint/") + lang.name + "/" + tok.name +
                                 (per_doc ? "/doc" : "/file");
        const std::string file = lang.file;
        const TokenizerKind kind = tok.kind;
        benchmark::RegisterBenchmark(name.c_str(), [file, kind, per_doc](benchmark::State& st) {
          Run(st, file, kind, per_doc);
        })->Unit(benchmark::kMillisecond);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
