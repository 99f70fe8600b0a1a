// neardup pairs: every pair of fingerprints within k bits of each other, by
// the sort-based self-join (neardup/index/self_join.h), for batch users who
// already have fingerprints (`neardup fingerprint` output).
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "neardup/index/self_join.h"

namespace neardup::cli {
namespace {

struct PairsFlags {
  std::string input = "-";
  std::string output = "-";
  int k = 3;
  int threads = 0;
};

struct Fingerprints {
  std::vector<std::string> ids;
  std::vector<uint64_t> fps;
};

// One line: "<id>\t<hex>" (as `neardup fingerprint` prints) or "<hex>" alone,
// whose id is then the line number. "-" (a text without features) and blank
// lines are skipped: they have no meaningful fingerprint.
Status ParseLine(const std::string& line, size_t number, Fingerprints* out) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return Status::OK();
  const size_t tab = line.find('\t');
  std::string id = tab == std::string::npos ? std::to_string(number) : line.substr(0, tab);
  std::string hex = tab == std::string::npos ? line : line.substr(tab + 1);
  while (!hex.empty() && (hex.back() == '\r' || hex.back() == ' ')) hex.pop_back();
  if (hex == "-") return Status::OK();
  auto fp = ParseFingerprintHex(hex);
  if (!fp.ok()) {
    return Status::InvalidArgument("line " + std::to_string(number) + ": invalid fingerprint \"" + hex +
                                   "\": " + fp.status().message());
  }
  out->ids.push_back(std::move(id));
  out->fps.push_back(fp.value());
  return Status::OK();
}

Status ReadFingerprints(std::istream& in, Fingerprints* out) {
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (Status s = ParseLine(line, number, out); !s.ok()) return s;
  }
  return in.bad() ? Status::IOError("error reading the input") : Status::OK();
}

int RunPairs(const PairsFlags& f) {
  if (Status st = CheckNotInput(f.input, f.output); !st.ok()) return Fail(st);
  std::ifstream file;
  if (f.input != "-") {
    file.open(f.input);
    if (!file) return Fail(Status::IOError("cannot open " + f.input));
  }
  Fingerprints data;
  if (Status s = ReadFingerprints(f.input == "-" ? std::cin : file, &data); !s.ok()) {
    return Fail(s, ErrorSource::kInputData);
  }
  SelfJoinOptions opt;
  opt.threads = f.threads > 0 ? f.threads : static_cast<int>(std::thread::hardware_concurrency());
  std::vector<JoinPair> pairs;
  if (Status s = SelfJoin(data.fps, f.k, opt, &pairs); !s.ok()) return Fail(s);
  std::ofstream file_out;
  if (f.output != "-") {
    file_out.open(f.output);
    if (!file_out) return Fail(Status::IOError("cannot create " + f.output));
  }
  std::ostream& out = f.output == "-" ? std::cout : file_out;
  for (const auto& p : pairs) out << data.ids[p.i] << '\t' << data.ids[p.j] << '\t' << p.distance << '\n';
  out.flush();
  if (!out) return Fail(Status::IOError("error writing " + f.output));
  return kExitOk;
}

}  // namespace

void AddPairsCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<PairsFlags>();
  CLI::App* cmd = app.add_subcommand(
      "pairs", "Print every pair of fingerprints within k bits (a sort-based self-join), in input order");
  cmd->add_option("-i,--input", f->input, "Fingerprints, one a line: '<id>\\t<hex>' or '<hex>'; - = stdin");
  cmd->add_option("-o,--output", f->output, "'<id>\\t<id>\\t<distance>' lines; - = stdout");
  cmd->add_option("-k,--max-distance", f->k, "Largest Hamming distance (as in dedup)")->check(CLI::Range(0, kMaxSelfJoinK));
  cmd->add_option("-t,--threads", f->threads, "Threads (0 = one per core)")->check(CLI::NonNegativeNumber);
  cmd->callback([f, exit_code] { *exit_code = RunPairs(*f); });
}

}  // namespace neardup::cli
