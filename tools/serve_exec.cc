// `neardup serve` (and `neardup pg-import`): the service lives in its own program, neardup-serve, so
// the batch program links no RocksDB, hiredis or HTTP code. This stub lists
// the command in `neardup --help` and replaces the process with
// neardup-serve (the same pid, so signals and supervisors see no change).
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"

namespace neardup::cli {

std::string ServeProgramPath() {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "neardup-serve";
  std::string dir(self, static_cast<size_t>(n));
  dir.resize(dir.rfind('/') + 1);
  return dir + "neardup-serve";
}

int ExecServe(int argc, char** argv) {
  const std::string program = ServeProgramPath();
  std::vector<char*> args;
  args.push_back(const_cast<char*>(program.c_str()));
  // neardup-serve takes serve's arguments alone, or "pg-import" and its own.
  const bool import = std::string(argv[1]) == "pg-import";
  for (int i = import ? 1 : 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(program.c_str(), args.data());
  std::fprintf(stderr,
               "neardup: cannot run %s: %s (the service is built when librocksdb-dev and libhiredis-dev are "
               "installed: scripts/install_deps.sh service, then scripts/build.sh)\n",
               program.c_str(), std::strerror(errno));
  return kExitError;
}

void AddServeStub(CLI::App& app) {
  // Never parsed here: main() hands `serve ...` to ExecServe first.
  app.add_subcommand("serve",
                     "Run the deduplication service: HTTP/JSON API over a durable local store "
                     "(docs/http-api.md); 'neardup serve --help' lists its options");
  app.add_subcommand("pg-import",
                     "Fill an empty namespace of a PostgreSQL store from a JSONL file in one transaction "
                     "(docs/postgresql.md); 'neardup pg-import --help' lists its options");
}

}  // namespace neardup::cli
