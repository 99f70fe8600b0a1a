// neardup-serve: the service program, normally started as `neardup serve`
// (tools/serve_exec.cc). Its arguments are those that follow "serve", or
// "pg-import" and that command's (`neardup pg-import`).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"

int main(int argc, char** argv) {
  using namespace neardup::cli;
  CLI::App app{"neardup: near-duplicate text detection (64-bit simhash + exact Hamming index)", "neardup"};
  app.option_defaults()->always_capture_default();
  app.require_subcommand(1);
  int exit_code = kExitOk;
  AddServeCommand(app, &exit_code);
  AddPgImportCommand(app, &exit_code);
  RefuseEmptyValues(&app);  // `--api-keys "$UNSET"` must not start an open server
  // "pg-import ..." names its command; anything else is serve's arguments.
  const bool import = argc >= 2 && std::string(argv[1]) == "pg-import";
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) args.emplace_back(argv[i]);
  if (!import) args.emplace_back("serve");  // CLI11 takes the arguments reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return ExitCodeForParseError(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "neardup: internal error: %s\n", e.what());
    return kExitError;
  }
  return exit_code;
}
