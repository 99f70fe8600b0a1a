// Shared pieces of the `neardup` command-line program: subcommand
// registration, the flags several commands share, and THE mapping from a
// Status to an exit code (docs/cli.md, "Exit codes").
#ifndef NEARDUP_TOOLS_COMMANDS_H_
#define NEARDUP_TOOLS_COMMANDS_H_

#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <vector>
#include <string>
#include <thread>

#include "input_files.h"
#include "io/input_stream.h"
#include "io/jsonl.h"
#include "io/output_file.h"
#include "neardup/text/fingerprint.h"
#include "neardup/text/idf.h"
#include "neardup/dedup/near_dup_set.h"
#include "neardup/dedup/setting.h"
#include "neardup/util/status.h"
#include "util/utf8.h"

namespace neardup::cli {

inline constexpr const char* kVersion = "0.1.0";

// ---- exit codes ------------------------------------------------------------

enum ExitCode : int {
  kExitOk = 0,        // success (skipped bad lines are reported, still 0)
  kExitError = 1,     // I/O error, corrupt or truncated file, internal error
  kExitUsage = 2,     // bad command line or option value, a directory as --input
  kExitBadInput = 3,  // a bad input line under --strict
  // More bad lines than --max-bad-lines, or every non-blank line was bad:
  // the input is probably not what the command expects (wrong format or
  // field names), so the run is not a success.
  kExitTooManyBadLines = 4,
};

// What a failing Status was about: the command line / files named on it,
// one record of the input data (--strict), or the input's bad lines as a
// whole (tools/bad_lines.h).
enum class ErrorSource { kSetup, kInputData, kBadLines };

// The one place a Status becomes an exit code.
inline int ExitCodeFor(const Status& status, ErrorSource source = ErrorSource::kSetup) {
  if (status.ok()) return kExitOk;
  if (status.code() == Status::Code::kInvalidArgument) {
    switch (source) {
      case ErrorSource::kSetup: return kExitUsage;
      case ErrorSource::kInputData: return kExitBadInput;
      case ErrorSource::kBadLines: return kExitTooManyBadLines;
    }
  }
  return kExitError;
}

// CLI11 parse errors: --help / --version are successes, the rest usage errors.
inline int ExitCodeForParseError(const CLI::ParseError& e) {
  return e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success) ? kExitOk : kExitUsage;
}

// Prints "neardup: <message>" to stderr and returns ExitCodeFor(status).
inline int Fail(const Status& status, ErrorSource source = ErrorSource::kSetup) {
  std::fprintf(stderr, "neardup: %s\n", status.message().c_str());
  return ExitCodeFor(status, source);
}

// The whole command line of this process, as main received it (a resumable
// run's checkpoint must match it).
inline std::vector<std::string>& CommandLine() {
  static std::vector<std::string> args;
  return args;
}

// The subcommand whose callback runs, parsed (set by that callback): its
// options as given, whatever their spelling (-t2, -qt1, --threads=2).
inline const CLI::App*& RunningCommand() {
  static const CLI::App* app = nullptr;
  return app;
}

// ---- subcommands -----------------------------------------------------------
// Each adds its subcommand to `app`; when it runs, it stores its exit code in
// *exit_code.

void AddDedupCommand(CLI::App& app, int* exit_code);
void AddFingerprintCommand(CLI::App& app, int* exit_code);
void AddDistanceCommand(CLI::App& app, int* exit_code);
void AddPairsCommand(CLI::App& app, int* exit_code);    // tools/cmd_pairs.cc
void AddIdfCommand(CLI::App& app, int* exit_code);
void AddServeCommand(CLI::App& app, int* exit_code);  // tools/cmd_serve.cc (neardup-serve)
void AddPgImportCommand(CLI::App& app, int* exit_code);  // tools/cmd_pg_import.cc (neardup-serve)
// `neardup serve` in the batch program: listed in --help, run by ExecServe,
// which replaces the process with neardup-serve (tools/serve_exec.cc).
void AddServeStub(CLI::App& app);
int ExecServe(int argc, char** argv);
void AddEvalCommand(CLI::App& app, int* exit_code);   // tools/cmd_eval.cc
void AddStageCommand(CLI::App& app, int* exit_code);  // tools/cmd_stage.cc (the staged run)

// The re-check policy flags (--recheck, --short-threshold, ...), shared by
// dedup and eval; defined in tools/cmd_dedup.cc.
void AddRecheckFlags(CLI::App* cmd, RecheckOptions* options);

// ---- shared flags ----------------------------------------------------------

// The --help placeholder of a setting's value.
inline std::string SettingTypeName(const SettingSpec& d) {
  switch (d.type) {
    case SettingType::kBool: return "BOOLEAN";
    case SettingType::kInt: return "INT";
    case SettingType::kDouble: return "FLOAT";
    case SettingType::kDuration: return "DURATION";
    case SettingType::kChoice: break;
  }
  std::string s;
  for (const std::string& c : d.choices) s += (s.empty() ? "{" : ",") + c;
  return s + "}";
}

// The flags of a setting table (neardup/dedup/setting.h): "--" + prefix +
// flag, each checked against its descriptor's type and range and stored
// into *target when given. A kBool setting is a pair --x / --no-x when
// prefix is empty (the batch program), else an option taking true/false.
template <typename S>
void AddSettingFlags(CLI::App* cmd, std::span<const Setting<S>> table, S* target, const std::string& prefix) {
  const S defaults{};
  for (const Setting<S>& d : table) {
    const std::string name = "--" + prefix + d.flag;
    if (d.type == SettingType::kBool && prefix.empty()) {
      // Said in a sentence of its own: "(default)" after a doc that ends
      // with what "off" does read as if off were the default.
      const bool on = std::get<bool>(d.get(defaults));
      cmd->add_flag_callback(name, [&d, target] { d.set(*target, true); }, d.doc + (on ? ". On by default" : ". Off by default"));
      cmd->add_flag_callback("--no-" + d.flag, [&d, target] { d.set(*target, false); }, "Turns " + name + " off");
      continue;
    }
    cmd->add_option_function<std::string>(
           name,
           [&d, target](const std::string& text) {
             auto v = ParseSettingText(d, text);
             if (!v.ok()) throw CLI::ValidationError(v.status().message());
             d.set(*target, v.value());
           },
           d.doc)
        ->default_str(SettingValueText(d.get(defaults)))
        ->type_name(SettingTypeName(d));
  }
}


struct FingerprintFlags {
  std::string tokenizer = "mixed";
  int cjk_ngram = 2;
  std::string idf_path;  // empty: no IDF weighting
};

inline void AddFingerprintFlags(CLI::App* cmd, FingerprintFlags* f, bool with_idf) {
  cmd->add_option("--tokenizer", f->tokenizer,
                  "Tokenizer: 'mixed' (words + character n-grams over CJK runs) or "
                  "'icu-words' (ICU word segmentation)")
      ->check(CLI::IsMember({"mixed", "icu-words"}));
  cmd->add_option("--cjk-ngram", f->cjk_ngram,
                  "Character n-gram length over Han/Kana/Hangul runs (mixed tokenizer only)")
      ->check(CLI::Range(1, 4));
  if (with_idf) {
    cmd->add_option("--idf", f->idf_path,
                    "IDF table from 'neardup idf build' (same --tokenizer/--cjk-ngram); "
                    "weights tokens by tf*idf")
        ->check(CLI::ExistingFile);
  }
}

inline Result<FingerprintOptions> ToFingerprintOptions(const FingerprintFlags& f) {
  FingerprintOptions options;
  options.tokenizer = f.tokenizer == "icu-words" ? TokenizerKind::kIcuWords : TokenizerKind::kMixedNgram;
  options.cjk_ngram = f.cjk_ngram;
  if (!f.idf_path.empty()) {
    auto idf = IdfTable::Load(f.idf_path);
    if (!idf.ok()) return idf.status();
    options.idf = std::move(idf).value();
  }
  return options;
}

// The fingerprinter the flags describe (an IDF table is loaded from disk).
inline Result<Fingerprinter> MakeFingerprinter(const FingerprintFlags& f) {
  auto options = ToFingerprintOptions(f);
  if (!options.ok()) return options.status();
  return Fingerprinter::Create(options.value());
}

struct InputFlags {
  std::string input = "-";
  std::vector<std::string> inputs;  // commands that read many (AddInputFlags' `many`)
  std::string format = "jsonl";
  std::string id_field = "id";
  std::string text_field = "text";
  bool strict = false;
  std::string rejects;          // --rejects: bad lines as JSONL; empty: none
  uint64_t max_bad_lines = 1000;  // 0: no limit
  size_t max_text_bytes = size_t{1} << 20;  // 0: no limit
};

// For an unsigned option: CLI11 reads "-1" as 2^64 - 1 and a number past it
// as 2^64 - 1, both a silent "no limit"; refused here instead (exit 2). Run
// before a size transform (CLI::AsSizeValue), on the text as given.
inline CLI::Validator UnsignedText() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        // As CLI11's strtoull reads it: any white space, then one sign.
        size_t at = 0;
        while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
        if (at < text.size() && text[at] == '-') return "must not be negative: " + text;
        if (at < text.size() && text[at] == '+') ++at;
        const bool hex = text.compare(at, 2, "0x") == 0 || text.compare(at, 2, "0X") == 0;
        const char* first = text.data() + at + (hex ? 2 : 0);
        uint64_t value = 0;
        if (std::from_chars(first, text.data() + text.size(), value, hex ? 16 : 10).ec == std::errc::result_out_of_range) {
          return "too large: " + text;
        }
        return "";
      },
      "", "unsigned");
}

// Every option of `app`'s commands that takes a value refuses an empty one
// (exit 2), except --id-field ('' = the line number): an empty path or field
// name would otherwise mean "not given", and a script's unset variable
// (`--annotate "$FIELD"`, `--save-index "$DIR"`) would silently drop what
// it asked for.
inline void RefuseEmptyValues(CLI::App* app) {
  for (CLI::App* cmd : app->get_subcommands({})) {
    for (CLI::Option* o : cmd->get_options()) {
      if (o->get_items_expected_min() == 0 || o->check_lname("id-field")) continue;
      o->check(CLI::Validator([](std::string& v) { return v.empty() ? std::string("must not be empty") : ""; },
                              "", "non-empty"));
    }
    RefuseEmptyValues(cmd);
  }
}

// `input_help` describes --input; with_id adds --id-field; many lets --input
// repeat (f->inputs; tools/input_files.h says what each may name).
inline void AddInputFlags(CLI::App* cmd, InputFlags* f, const std::string& input_help, bool required,
                          bool with_id, bool many = false) {
  auto* in = many ? cmd->add_option("-i,--input", f->inputs,
                                    input_help + " ('-' = standard input); repeat it, or name a directory "
                                                 "(every file below it) or a glob pattern ('shards/*.jsonl.zst'): "
                                                 "read in that order, a directory's or pattern's files by name")
                  : cmd->add_option("-i,--input", f->input, input_help + " ('-' = standard input)");
  if (required) in->required()->default_str("");
  cmd->add_option("--format", f->format,
                  "Input format: 'jsonl' (one JSON object per line) or 'lines' (each line is a "
                  "text; id = 1-based line number)")
      ->check(CLI::IsMember({"jsonl", "lines"}));
  if (with_id) {
    cmd->add_option("--id-field", f->id_field,
                    "JSONL field holding the document id (string or number, echoed verbatim); "
                    "'' = use the line number");
  }
  cmd->add_option("--text-field", f->text_field, "JSONL field holding the text (a string)");
  cmd->add_flag("--strict", f->strict,
                "Stop at the first bad input line with exit code 3 (default: report it on "
                "stderr, skip it, go on)");
  cmd->add_option("--rejects", f->rejects,
                  "Write each bad line as JSONL: {\"line\", \"error\", \"text\"} (the raw line)");
  cmd->add_option("--max-bad-lines", f->max_bad_lines,
                  "Stop with exit code 4 at the bad line after this many (0 = no limit); a run where "
                  "every line is bad also exits 4")
      ->capture_default_str()
      ->check(UnsignedText());
  cmd->add_option("--max-text-bytes", f->max_text_bytes,
                  "Analyze at most this many bytes of each text (cut at a UTF-8 boundary; "
                  "0 = no limit); outputs still copy the whole line")
      ->capture_default_str()
      ->check(UnsignedText());
}

// `id_source`: in a run of several inputs, the input's name as given, which
// line-numbered ids ("a.txt:3") then start with; else empty (the number).
inline RecordReaderOptions ToReaderOptions(const InputFlags& f, const std::string& id_source = "") {
  RecordReaderOptions options;
  if (!id_source.empty()) {
    options.line_id_prefix = nlohmann::json(id_source + ":").dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    options.line_id_prefix.pop_back();  // the closing '"': the number comes first
  }
  options.format = f.format == "lines" ? InputFormat::kLines : InputFormat::kJsonl;
  options.id_field = f.id_field;
  options.text_field = f.text_field;
  options.max_text_bytes = f.max_text_bytes;
  return options;
}

inline int ResolveThreads(int threads) {
  if (threads > 0) return threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// A duration for a progress line: "42s", "7m05s", "3h12m".
inline std::string Duration(double s) {
  char b[32];
  if (s < 60) std::snprintf(b, sizeof b, "%.0fs", s);
  else if (s < 3600) std::snprintf(b, sizeof b, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else std::snprintf(b, sizeof b, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  return b;
}

// A FILE* that closes itself unless it is stdin/stdout.
struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f != nullptr && f != stdin && f != stdout) std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// '-' means stdin; gzip and zstd are decompressed (io/input_stream.h). A
// directory is a usage error. Commands open their input before creating any
// output, so a wrong --input leaves no file behind.
inline Result<std::unique_ptr<InputStream>> OpenInput(const std::string& path, std::string name = "") {
  return InputStream::Open(path, std::move(name));
}

// The file `path` names, for the checks below: '-' is the standard stream
// `dash_fd` (0 for an input, 1 for an output), so `-i - < f -o f` and
// `-o - -d /dev/stdout` are seen as one file named twice.
inline bool StatOf(const std::string& path, int dash_fd, struct stat* st) {
  if (path.empty()) return false;
  return path == "-" ? ::fstat(dash_fd, st) == 0 : ::stat(path.c_str(), st) == 0;
}

// True if both paths name the same existing file. Through '-' only a
// regular file or a pipe counts: a terminal or /dev/null shared by standard
// output and another name loses nothing.
inline bool SameFile(const std::string& a, int a_dash_fd, const std::string& b, int b_dash_fd) {
  struct stat sa, sb;
  if (!StatOf(a, a_dash_fd, &sa) || !StatOf(b, b_dash_fd, &sb)) return false;
  if (sa.st_dev != sb.st_dev || sa.st_ino != sb.st_ino) return false;
  return (a != "-" && b != "-") || S_ISREG(sa.st_mode) || S_ISFIFO(sa.st_mode);
}

// kInvalidArgument if an output would overwrite the input (opening it for
// writing would truncate the data before it is read), also through '-'.
inline Status CheckNotInput(const std::string& input, const std::string& output) {
  if (SameFile(input, STDIN_FILENO, output, STDOUT_FILENO)) {
    return Status::InvalidArgument("refusing to overwrite the input file " +
                                   (input == "-" ? std::string("on standard input") : input) + " with an output" +
                                   (output == "-" ? " on standard output" : " (" + output + ")"));
  }
  return Status::OK();
}

// `p` with its symlinks and "x/../" resolved, as far as it exists
// (weakly_canonical), then normalized: the form PathBelow compares. Empty
// if the file system cannot be asked.
// A symlink whose target does not exist yet is followed too (`d/klink` ->
// k is `d/k`): weakly_canonical leaves it as it is, and `-o d/k -d d/klink`
// was then two names of one file (an adversarial test, 2026-12-01).
inline std::filesystem::path Resolved(const std::string& p) {
  std::error_code ec;
  std::filesystem::path name = p;
  for (int hops = 0; hops < 40 && std::filesystem::is_symlink(std::filesystem::symlink_status(name, ec)); ++hops) {
    const std::filesystem::path target = std::filesystem::read_symlink(name, ec);
    if (ec) break;
    name = target.is_absolute() ? target : name.parent_path() / target;
  }
  return std::filesystem::weakly_canonical(name, ec).lexically_normal();
}

// kInvalidArgument if --annotate names the field the documents' text or id
// is read from: the decision would replace it in every record, and the
// text or id would be lost from the output (a tester, 2026-12-02).
inline Status CheckAnnotateField(const std::string& annotate, const std::string& text_field,
                                 const std::string& id_field) {
  for (const auto& [field, flag] : {std::pair{&text_field, "--text-field"}, std::pair{&id_field, "--id-field"}}) {
    if (!annotate.empty() && annotate == *field) {
      return Status::InvalidArgument("--annotate " + annotate + " would replace each record's " + flag + " " +
                                     annotate + ": name another field");
    }
  }
  return Status::OK();
}

// kInvalidArgument unless every name is valid UTF-8. A file whose JSON
// records names (a --checkpoint's command line and inputs, a saved index's
// manifest, a signature shard's header, `stage plan`'s list) can hold no
// other strings: such a name ended the run with "internal error:
// [json.exception.type_error.316]" (exit 1) after it had written outputs,
// and a checkpoint that can never be resumed (a tester, 2026-11-30).
// Checked before anything is written; `recorder` says what records them.
inline Status CheckRecordableNames(const std::vector<std::string>& names, const std::string& recorder) {
  for (const std::string& name : names) {
    if (IsValidUtf8(name)) continue;
    return Status::InvalidArgument(recorder + " records file names as JSON, which holds only UTF-8 text, and " +
                                   EscapeInvalidUtf8(name) + " is not valid UTF-8: rename it");
  }
  return Status::OK();
}

// kInvalidArgument if two outputs name one file (by path with its
// directories' symlinks resolved, or an existing file by identity), or both
// are standard output ('-'): both would write it, each over or among the
// other's lines. Empty names (no such output) are not compared.
inline Status CheckDistinctOutputs(const std::vector<std::string>& outputs) {
  if (std::count(outputs.begin(), outputs.end(), std::string("-")) > 1) {
    return Status::InvalidArgument("two outputs name standard output ('-'): their lines would be mixed; name files");
  }
  auto normal = [](const std::string& p) {
    // Resolved: `-o d/x -d link/x` with link -> d, before either exists,
    // was two names for one file (an adversarial test, 2026-11-30).
    if (std::filesystem::path resolved = Resolved(p); !resolved.empty()) return resolved;
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(p, ec);
    return (ec ? std::filesystem::path(p) : abs).lexically_normal();
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].empty()) continue;
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      if (outputs[j].empty()) continue;
      const bool dash = outputs[i] == "-" || outputs[j] == "-";
      struct stat st;  // a device such as /dev/null may take both
      if (StatOf(outputs[i], STDOUT_FILENO, &st) && S_ISCHR(st.st_mode)) continue;
      if ((!dash && normal(outputs[i]) == normal(outputs[j])) ||
          SameFile(outputs[i], STDOUT_FILENO, outputs[j], STDOUT_FILENO)) {
        auto name = [](const std::string& p) { return p == "-" ? std::string("standard output ('-')") : p; };
        return Status::InvalidArgument("two outputs name one file: " + name(outputs[i]) +
                                       (outputs[i] == outputs[j] ? "" : " and " + name(outputs[j])));
      }
    }
  }
  return Status::OK();
}

// The components of `path` below the directory `dir` (empty if `path` is
// `dir`), or nullopt if it is not there. Both already Resolved, so a
// symlink or "x/../" does not hide where a file is.
inline std::optional<std::filesystem::path> PathBelow(std::filesystem::path dir, const std::filesystem::path& path) {
  if (!dir.has_filename()) dir = dir.parent_path();  // "x/"
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  if (d != dir.end()) return std::nullopt;
  std::filesystem::path rest;
  for (; p != path.end(); ++p) rest /= *p;
  return rest;
}

// kInvalidArgument if an output is or lies inside one of `dirs`, (flag,
// directory) pairs: an index or checkpoint directory the run reads or
// writes, whose files an output there would overwrite or be deleted with.
inline Status CheckOutputsOutside(const std::vector<std::string>& outputs,
                                  const std::vector<std::pair<std::string, std::string>>& dirs) {
  for (const auto& [flag, dir] : dirs) {
    if (dir.empty()) continue;
    const std::filesystem::path d = Resolved(dir);
    for (const std::string& out : outputs) {
      if (out.empty() || out == "-") continue;
      const auto rest = PathBelow(d, Resolved(out));
      if (rest && !rest->empty()) {
        return Status::InvalidArgument("output " + out + " is inside the " + flag + " directory " + dir +
                                       ", whose files the run reads or writes; write it elsewhere");
      }
      // Regression (adversarial test, 2026-11-30): `-o x --save-index x`
      // truncated x, then failed (exit 1) to make the directory.
      if (rest) {
        return Status::InvalidArgument("output " + out + " is the " + flag + " directory " + dir +
                                       "; name another file or directory");
      }
    }
  }
  return Status::OK();
}

// kInvalidArgument if an output (a file or a directory the run writes) lies
// where an --input directory or pattern finds files: the resume of a
// --checkpoint run, which lists the inputs again, would read it as an input
// (and refuse to go on, or read this run's output). `what` names the output
// and `why` says what would read it, in the message.
inline Status CheckOutputsNotInputs(const std::vector<std::string>& outputs, const std::vector<std::string>& inputs,
                                   const std::string& what = "output",
                                   const std::string& why = "a resume would read it as an input") {
  namespace fs = std::filesystem;
  std::error_code ec;
  // Hidden components, as a directory's listing skips dot names.
  auto hidden = [](auto from, auto to) {
    return std::any_of(from, to, [](const fs::path& c) { return !c.empty() && c.string()[0] == '.'; });
  };
  for (const std::string& given : inputs) {
    if (given == "-" || given.empty()) continue;
    std::string in = given;
    const bool dir = fs::is_directory(in, ec);
    if (!dir && (fs::exists(in, ec) || !input_files_internal::IsPattern(in))) continue;
    while (in.size() > 1 && in.back() == '/') in.pop_back();
    // A pattern: its fixed directory part resolved as the output is
    // (symlinks), its glob part matched on the output's components below.
    const size_t meta = in.find_first_of("*?["), slash = dir ? std::string::npos : in.rfind('/', meta);
    const fs::path base = Resolved(dir ? in : slash == std::string::npos ? "." : in.substr(0, slash + 1));
    const std::string glob = dir ? "" : in.substr(slash == std::string::npos ? 0 : slash + 1);
    const fs::path glob_path(glob);  // one object: its iterators may not be mixed with another's
    const auto glob_depth = std::distance(glob_path.begin(), glob_path.end());
    for (const std::string& out : outputs) {
      if (out.empty() || out == "-") continue;
      const std::optional<fs::path> rest = PathBelow(base, Resolved(out));
      if (!rest) continue;
      bool found = false;
      if (dir || rest->empty()) {
        // Also the directory itself, or a pattern's: a --checkpoint or
        // --save-index there writes files the listing may find.
        found = !hidden(rest->begin(), rest->end());
      } else if (::fnmatch(glob.c_str(), rest->c_str(), FNM_PATHNAME | FNM_PERIOD | FNM_LEADING_DIR) == 0) {
        // FNM_LEADING_DIR: also inside a directory the pattern matches.
        auto past = rest->begin();
        for (auto k = glob_depth; k > 0 && past != rest->end(); --k) ++past;
        found = !hidden(past, rest->end());
      }
      if (found) {
        return Status::InvalidArgument(what + " " + out + " is where the --input " + (dir ? "directory " : "pattern ") +
                                       given + " finds files: " + why + "; write it elsewhere");
      }
    }
  }
  return Status::OK();
}

// '-' means stdout. Output is fully buffered.
// A name ending in .gz or .zst is written compressed (io/output_file.h).
// With `append`, adds to the file's end (resuming a run).
inline Result<FilePtr> OpenOutput(const std::string& path, bool append = false) {
  std::FILE* f = stdout;
  if (path != "-") {
    auto opened = OpenOutputFile(path, append);
    if (!opened.ok()) return opened.status();
    f = *opened;
  }
  std::setvbuf(f, nullptr, _IOFBF, size_t{1} << 16);
  return FilePtr(f);
}

// Flushes and closes (or just flushes stdout); kIOError if anything written
// to it was lost.
inline Status FinishOutput(FilePtr file, const std::string& path) {
  std::FILE* f = file.release();
  if (f == nullptr) return Status::OK();
  bool failed = std::fflush(f) != 0 || std::ferror(f) != 0;
  if (f != stdout && std::fclose(f) != 0) failed = true;
  if (failed) return Status::IOError("error writing " + path + ": " + std::strerror(errno));
  return Status::OK();
}

inline bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

// `dedup --memory-limit` (tools/cmd_stage.cc; docs/SCALING.md, "Deciding in
// bounded memory"): stage decide in rounds, each round analyzing the inputs
// again, then stage filter's writing, in this process; the decision files
// and spills in a temporary directory under spill_dir. Returns the exit code.
struct StagedDedupArgs {
  InputFlags in;                     // in.inputs: the expanded input files, in order
  FingerprintFlags fp;
  int k = 3;
  RecheckOptions recheck;
  std::string output, duplicates, annotate, stats_json, sketch_dir, save_index, spill_dir;
  std::string checkpoint;  // --checkpoint DIR: resumable at every round's end
  std::vector<std::string> load_index;
  int output_shards = 1, threads = 1;
  size_t batch_size = 4096, memory_limit = 0;
  double progress_seconds = 0;  // a progress line every this many seconds (0: none)
  bool quiet = false;
};
int RunStagedDedup(const StagedDedupArgs& args);

// NEARDUP_DEDUP_CRASH_AFTER_BATCHES=N (tests only): the process dies like
// kill -9, buffers unwritten, at the N-th call (after a batch: dedup's read
// batches, or a round's decide batches with --memory-limit).
inline void CrashPointForTests() {
  static const long after = [] {
    const char* e = std::getenv("NEARDUP_DEDUP_CRASH_AFTER_BATCHES");
    return e ? std::atol(e) : 0L;
  }();
  static long calls = 0;
  if (after > 0 && ++calls == after) ::_exit(137);
}
void AddMemoryLimitFlags(CLI::App* cmd, size_t* limit, std::string* spill_dir);
// kInvalidArgument when --memory-limit (limit > 0) comes with a setting it
// cannot bound: --keep longest, --clusters.
Status CheckMemoryLimit(size_t limit, const std::string& keep, const std::string& clusters);

}  // namespace neardup::cli

#include "bad_lines.h"  // IWYU pragma: export (uses the pieces above)

#endif  // NEARDUP_TOOLS_COMMANDS_H_
