// neardup idf build: learn an IDF table from a corpus.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "neardup/dedup/dedup.h"  // ParallelFor

namespace neardup::cli {
namespace {

struct IdfBuildFlags {
  InputFlags in;
  FingerprintFlags fp;  // --idf is not offered: the table is built without one
  std::string output;
  uint32_t min_df = 2;
  int threads = 0;
  bool quiet = false;
};

int RunIdfBuild(const IdfBuildFlags& f) {
  auto fingerprinter = MakeFingerprinter(f.fp);
  if (!fingerprinter.ok()) return Fail(fingerprinter.status());
  const Fingerprinter& fpr = fingerprinter.value();
  const int threads = ResolveThreads(f.threads);

  for (const std::string* path : {&f.output, &f.in.rejects}) {
    if (Status st = CheckNotInput(f.in.input, *path); !st.ok()) return Fail(st);
  }
  auto in = OpenInput(f.in.input);
  if (!in.ok()) return Fail(in.status());
  BadLines bad;
  if (Status st = bad.Open(f.in, f.quiet); !st.ok()) return Fail(st);
  InputFlags in_flags = f.in;
  in_flags.id_field.clear();  // ids are not needed (nor required)
  RecordReader reader(std::move(in).value(), ToReaderOptions(in_flags));
  uint64_t documents = 0;
  IdfTable::Builder builder;
  std::vector<InputRecord> batch;
  std::vector<TextAnalysis> analyses;
  bool stopped = false;
  while (!stopped) {
    Status read = reader.ReadBatch(4096, threads, &batch);
    if (!read.ok()) return Fail(read);
    if (batch.empty()) break;
    analyses.resize(batch.size());
    ParallelFor(batch.size(), threads, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        if (batch[i].kind == InputRecord::Kind::kDocument) fpr.Analyze(batch[i].text(), &analyses[i]);
      }
    });
    for (size_t i = 0; i < batch.size(); ++i) {
      const InputRecord& r = batch[i];
      if (r.kind == InputRecord::Kind::kBlank) continue;
      if (r.kind == InputRecord::Kind::kBad) {
        if (!bad.Add(r)) {
          stopped = true;
          break;
        }
        continue;
      }
      ++documents;
      builder.AddDocument(analyses[i].features);
    }
  }
  // A run that stopped, or saw only bad lines, writes no table.
  if (int rc = bad.Finish(documents); rc != kExitOk) {
    std::fputs("neardup: nothing written\n", stderr);
    return rc;
  }
  auto table = builder.Build(f.min_df);
  Status saved = table->Save(f.output);
  if (!saved.ok()) return Fail(saved);
  std::printf("documents: %llu\ntokens: %llu\nbad lines: %llu\nwritten: %s\n",
              static_cast<unsigned long long>(table->num_documents()),
              static_cast<unsigned long long>(table->size()), static_cast<unsigned long long>(bad.count()),
              f.output.c_str());
  return kExitOk;
}

}  // namespace

void AddIdfCommand(CLI::App& app, int* exit_code) {
  CLI::App* idf = app.add_subcommand("idf", "IDF tables for tf*idf weighted fingerprints");
  idf->require_subcommand(1);
  auto f = std::make_shared<IdfBuildFlags>();
  CLI::App* cmd = idf->add_subcommand(
      "build",
      "Count in how many documents each token occurs and save the IDF table. Use the same "
      "--tokenizer/--cjk-ngram as the commands that will load it with --idf.");
  AddInputFlags(cmd, &f->in, "Corpus to learn from", /*required=*/true, /*with_id=*/false);
  AddFingerprintFlags(cmd, &f->fp, /*with_idf=*/false);
  cmd->add_option("--min-df", f->min_df,
                  "Keep only tokens found in at least this many documents (rarer tokens get the "
                  "table's default idf)")
      ->check(CLI::Range(1u, 1u << 30));
  cmd->add_option("-o,--output", f->output, "IDF table file to write")->required();
  cmd->add_option("-t,--threads", f->threads, "Worker threads (0 = hardware concurrency)")
      ->check(CLI::Range(0, 1024));
  cmd->add_flag("-q,--quiet", f->quiet, "No bad-line messages on stderr (errors still shown)");
  cmd->callback([f, exit_code] { *exit_code = RunIdfBuild(*f); });
}

}  // namespace neardup::cli
