// A live local Redis Cluster (3 masters + 3 replicas) for tests, started by
// scripts/redis_cluster.sh on a port base derived from the pid (tests run in
// parallel under ctest -j2, one process per test) and stopped by pid when the
// object dies. Start() tries a few bases before giving up.
#ifndef NEARDUP_TESTS_REDIS_TEST_CLUSTER_H_
#define NEARDUP_TESTS_REDIS_TEST_CLUSTER_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace neardup::testing {

class LocalRedisCluster {
 public:
  // nullptr if no cluster could be started (the log says why).
  static std::unique_ptr<LocalRedisCluster> Start() {
    for (int attempt = 0; attempt < 4; ++attempt) {
      // Ports 10000..15999 (bus ports 20000..25999): below the usual ephemeral range.
      const int base = 10000 + static_cast<int>((static_cast<unsigned>(getpid()) * 7919u + attempt * 131u) % 1000u) * 6;
      std::unique_ptr<LocalRedisCluster> c(new LocalRedisCluster(base));
      if (c->Run("start")) return c;
      c->Run("stop");
      c->stopped_ = true;
    }
    return nullptr;
  }

  ~LocalRedisCluster() { Stop(); }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    Run("stop");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  int base() const { return base_; }
  std::string dir() const { return dir_; }
  std::vector<std::string> seeds() const {
    std::vector<std::string> s;
    for (int i = 0; i < 6; ++i) s.push_back("127.0.0.1:" + std::to_string(base_ + i));
    return s;
  }
  std::string uri() const {
    std::string u = "redis-cluster://";
    for (const std::string& s : seeds()) {
      if (u.back() != '/') u += ',';
      u += s;
    }
    return u;
  }
  // The pid of the node on `port` (0 if unknown).
  pid_t Pid(int port) const {
    std::ifstream in(dir_ + "/" + std::to_string(port) + "/redis.pid");
    long pid = 0;
    in >> pid;
    return static_cast<pid_t>(pid);
  }

 private:
  explicit LocalRedisCluster(int base)
      : base_(base),
        dir_((std::filesystem::temp_directory_path() /
              ("neardup-redis-" + std::to_string(getpid()) + "-" + std::to_string(base)))
                 .string()) {}

  bool Run(const char* what) const {
    const std::string cmd = std::string(NEARDUP_SOURCE_DIR) + "/scripts/redis_cluster.sh " + what + " " + dir_ + " " +
                            std::to_string(base_) + " >/dev/null";
    return std::system(cmd.c_str()) == 0;
  }

  int base_;
  std::string dir_;
  bool stopped_ = false;
};

}  // namespace neardup::testing

#endif  // NEARDUP_TESTS_REDIS_TEST_CLUSTER_H_
