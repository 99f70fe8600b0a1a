// neardup: near-duplicate text detection from the command line.
// Builds the CLI11 app from the subcommands in cmd_*.cc and dispatches;
// docs/cli.md documents every command.
#include <sys/resource.h>

#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"

namespace {

// A run over thousands of input files or --output-shards needs many
// descriptors, and the soft limit (often 1024) is only a default below the
// hard one, which the user may raise to. When raising fails the old limit
// stays: what needs more descriptors says so then.
void RaiseOpenFileLimit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace neardup::cli;
  CommandLine().assign(argv, argv + argc);
  RaiseOpenFileLimit();
  if (argc >= 2 && (std::string(argv[1]) == "serve" || std::string(argv[1]) == "pg-import")) {
    return ExecServe(argc, argv);
  }
  const std::string version = std::string("neardup ") + kVersion + " (fingerprint scheme v" +
                              std::to_string(neardup::kSchemeVersion) + ")";
  CLI::App app{"neardup: near-duplicate text detection (64-bit simhash + exact Hamming index)",
               "neardup"};
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", version, "Print the version and exit");
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 success (bad input lines skipped and reported still count as success), "
      "1 I/O or internal error, 2 usage error, 3 bad input line with --strict, "
      "4 too many bad lines (--max-bad-lines, or every line bad).\n"
      "Run 'neardup COMMAND --help' for a command's options; see docs/cli.md.");

  int exit_code = kExitOk;
  AddDedupCommand(app, &exit_code);
  AddFingerprintCommand(app, &exit_code);
  AddDistanceCommand(app, &exit_code);
  AddPairsCommand(app, &exit_code);
  AddIdfCommand(app, &exit_code);
  AddServeStub(app);
  AddEvalCommand(app, &exit_code);
  AddStageCommand(app, &exit_code);
  app.add_subcommand("version", "Print the version and exit")->callback([&] {
    std::printf("%s\n", version.c_str());
  });
  RefuseEmptyValues(&app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints help, version or the error
    return ExitCodeForParseError(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "neardup: internal error: %s\n", e.what());
    return kExitError;
  }
  if (std::fflush(stdout) != 0 && exit_code == kExitOk) {
    std::fprintf(stderr, "neardup: error writing standard output\n");
    return kExitError;
  }
  return exit_code;
}
