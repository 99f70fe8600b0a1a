// A live PostgreSQL 15 for the needs-postgres tests. Under ctest the
// fixture test PostgresStart (cmake/tests.cmake) starts one server for the
// run with scripts/postgres.sh and passes its directory in
// NEARDUP_TEST_PG_DIR; a test binary run by hand starts its own in a temp
// directory (initdb, ports 15432..15499) and stops it by pid when the
// object dies.
#ifndef NEARDUP_TESTS_PG_TEST_SERVER_H_
#define NEARDUP_TESTS_PG_TEST_SERVER_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace neardup::testing {

class LocalPostgres {
 public:
  // nullptr if no server could be found or started.
  static std::unique_ptr<LocalPostgres> Start() {
    if (const char* d = std::getenv("NEARDUP_TEST_PG_DIR"); d != nullptr && *d != '\0') {
      std::unique_ptr<LocalPostgres> p(new LocalPostgres(d, /*owned=*/false));
      if (p->ReadUri()) return p;
      return nullptr;
    }
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("neardup-pg-" + std::to_string(getpid()))).string();
    std::unique_ptr<LocalPostgres> p(new LocalPostgres(dir, /*owned=*/true));
    if (p->Run("start") && p->ReadUri()) return p;
    return nullptr;
  }

  // A server of its own even under ctest (a test that crashes it must not
  // disturb the others), in DIR = temp/neardup-pg-<pid>-<tag>.
  static std::unique_ptr<LocalPostgres> StartPrivate(const std::string& tag) {
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("neardup-pg-" + std::to_string(getpid()) + "-" + tag)).string();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::unique_ptr<LocalPostgres> p(new LocalPostgres(dir, /*owned=*/true));
    if (p->Run("start") && p->ReadUri()) return p;
    return nullptr;
  }

  ~LocalPostgres() {
    if (!owned_) return;
    Run("stop");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  const std::string& uri() const { return uri_; }
  const std::string& dir() const { return dir_; }
  // Crash (immediate shutdown) and start again on the same data and port.
  bool Crash() const { return Run("kill"); }
  bool Restart() const { return Run("start"); }

 private:
  LocalPostgres(std::string dir, bool owned) : dir_(std::move(dir)), owned_(owned) {}

  bool ReadUri() {
    std::ifstream in(dir_ + "/uri");
    return static_cast<bool>(std::getline(in, uri_)) && !uri_.empty();
  }
  bool Run(const char* what) const {
    const std::string cmd =
        std::string(NEARDUP_SOURCE_DIR) + "/scripts/postgres.sh " + what + " " + dir_ + " >/dev/null";
    return std::system(cmd.c_str()) == 0;
  }

  std::string dir_;
  std::string uri_;
  bool owned_;
};

}  // namespace neardup::testing

#endif  // NEARDUP_TESTS_PG_TEST_SERVER_H_
