// neardup fingerprint: one "<id>\t<16 hex digits>" line per input text.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "neardup/dedup/dedup.h"  // ParallelFor

namespace neardup::cli {
namespace {

struct FingerprintCmdFlags {
  InputFlags in;
  FingerprintFlags fp;
  std::string output = "-";
  int threads = 0;
  bool quiet = false;
};

int RunFingerprint(const FingerprintCmdFlags& f) {
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
  auto out = OpenOutput(f.output);
  if (!out.ok()) return Fail(out.status());
  RecordReader reader(std::move(in).value(), ToReaderOptions(f.in));
  uint64_t documents = 0;
  std::vector<InputRecord> batch;
  std::vector<uint64_t> fps;
  std::vector<char> has;
  bool stopped = false;
  while (!stopped) {
    Status read = reader.ReadBatch(4096, threads, &batch);
    if (!read.ok()) return Fail(read);
    if (batch.empty()) break;
    fps.assign(batch.size(), 0);
    has.assign(batch.size(), 0);
    ParallelFor(batch.size(), threads, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        if (batch[i].kind != InputRecord::Kind::kDocument) continue;
        bool has_features = false;
        fps[i] = fpr.Compute(batch[i].text(), &has_features);
        has[i] = has_features ? 1 : 0;
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
      const std::string hex = has[i] ? FingerprintToHex(fps[i]) : "-";
      std::fprintf(out.value().get(), "%s\t%s\n", r.id.c_str(), hex.c_str());
    }
    if (std::ferror(out.value().get())) break;
  }
  Status finished = FinishOutput(std::move(out).value(), f.output);
  const int bad_rc = bad.Finish(documents);
  if (!finished.ok()) return Fail(finished);
  return bad_rc;
}

}  // namespace

void AddFingerprintCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<FingerprintCmdFlags>();
  CLI::App* cmd = app.add_subcommand(
      "fingerprint",
      "Print '<id>\\t<fingerprint>' for every input text: 16 lower-case hex digits, or '-' for a "
      "text without features (empty or punctuation only), which has no meaningful fingerprint.");
  AddInputFlags(cmd, &f->in, "Input texts", /*required=*/false, /*with_id=*/true);
  AddFingerprintFlags(cmd, &f->fp, /*with_idf=*/true);
  cmd->add_option("-o,--output", f->output, "Where to write ('-' = stdout)");
  cmd->add_option("-t,--threads", f->threads, "Worker threads (0 = hardware concurrency)")
      ->check(CLI::Range(0, 1024));
  cmd->add_flag("-q,--quiet", f->quiet, "No bad-line messages on stderr (errors still shown)");
  cmd->callback([f, exit_code] { *exit_code = RunFingerprint(*f); });
}

}  // namespace neardup::cli
