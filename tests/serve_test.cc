// End-to-end tests of `neardup serve` (NEARDUP_CLI_PATH): the real binary on
// 127.0.0.1 with a kernel-chosen port (--listen 127.0.0.1:0; the port is read
// from the start line), spoken to with httplib::Client.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "neardup/engine/settings.h"
#include "http/http_server.h"
#include "util/httplib_client.h"  // httplib with the ABI macros of Debian's build
#include "util/raw_socket.h"

namespace {

using json = nlohmann::json;
const std::string kCli = NEARDUP_CLI_PATH;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A running `neardup serve`.
class ServeProcess {
 public:
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
  }

  // Starts `neardup serve ARGS` and waits (at most 30 s) for the start line.
  bool Start(const std::vector<std::string>& args, const std::string& stderr_path) {
    // Everything the child needs is prepared before fork(): between fork and
    // exec it only makes async-signal-safe calls.
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kCli.c_str()));
    static const char* kServe = "serve";
    argv.push_back(const_cast<char*>(kServe));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe(fds) != 0) return false;
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
      ::close(fds[0]);
      ::execv(kCli.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_fd_ = fds[0];
    // Read the first line: "neardup: listening on 127.0.0.1:PORT, data in DIR".
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (line_.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[256];
      const ssize_t n = ::read(out_fd_, buf, sizeof(buf));
      if (n <= 0) break;  // exited
      line_.append(buf, static_cast<size_t>(n));
    }
    const std::string prefix = "neardup: listening on 127.0.0.1:";
    if (line_.rfind(prefix, 0) != 0) return false;
    port_ = std::atoi(line_.c_str() + prefix.size());
    return port_ > 0;
  }

  // Sends `sig` and waits (at most `seconds`) for the exit; the exit code, or
  // -1 for a timeout or a death by signal.
  int Signal(int sig, int seconds = 30) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    return Wait(seconds);
  }

  int Wait(int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  int port() const { return port_; }
  const std::string& line() const { return line_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int port_ = 0;
  std::string line_;
};

class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/neardup_serve_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Starts the server on a free port with the test's data directory, made
  // on first use (--init; harmless on an existing store). These tests use
  // namespaces without creating them first: auto-create is on unless
  // `auto_create` is false (then the serve default, off, applies).
  void Start(ServeProcess* p, std::vector<std::string> extra = {}, bool auto_create = true) {
    std::vector<std::string> args = {"--data", Path("data"), "--listen", "127.0.0.1:0", "--threads", "4", "--init"};
    if (auto_create) args.insert(args.end(), {"--auto-create-namespaces", "true"});
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(p->Start(args, Path("stderr"))) << "start line: " << p->line() << "\nstderr: "
                                                << ReadFile(Path("stderr"));
    EXPECT_NE(p->line().find(", data in " + Path("data")), std::string::npos) << p->line();
  }

  // Runs `neardup serve ARGS` to completion (for usage errors); the exit code.
  int RunToExit(const std::string& args) {
    const std::string cmd = "'" + kCli + "' serve " + args + " </dev/null >'" + Path("run.out") + "' 2>'" +
                            Path("run.err") + "'";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string dir_;
};

json Parse(const httplib::Result& r) {
  if (!r) return json();
  json j = json::parse(r->body, nullptr, false);
  return j.is_discarded() ? json() : j;
}

TEST_F(ServeTest, ServesStopsOnSigtermAndKeepsDataAcrossRestart) {
  std::string fingerprint;
  {
    ServeProcess p;
    Start(&p);
    httplib::Client c("127.0.0.1", p.port());
    c.set_read_timeout(30, 0);
    auto health = c.Get("/healthz");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    EXPECT_EQ(Parse(health), json({{"status", "ok"}}));

    auto put = c.Put("/v1/namespaces/news", R"({"k": 4, "retention_seconds": 0})", "application/json");
    ASSERT_TRUE(put);
    EXPECT_EQ(put->status, 201) << put->body;

    auto a = c.Post("/v1/namespaces/news/check",
                    R"({"id": "a1", "text": "The quick brown fox jumps over the lazy dog"})", "application/json");
    ASSERT_TRUE(a);
    ASSERT_EQ(a->status, 200) << a->body;
    EXPECT_EQ(Parse(a)["stored"], true);
    fingerprint = Parse(a)["fingerprint"];

    auto b = c.Post("/v1/namespaces/news/check",
                    R"({"id": "a2", "text": "the quick brown fox jumps over the lazy dog!"})", "application/json");
    ASSERT_TRUE(b);
    EXPECT_EQ(Parse(b)["duplicate"], true);

    auto batch = c.Post("/v1/namespaces/news/batch?mode=check",
                        R"({"documents": [{"id": "b1", "text": "Completely different words about databases"},
                                          {"id": 7, "text": "Gardening tomatoes in a small greenhouse"}]})",
                        "application/json");
    ASSERT_TRUE(batch);
    ASSERT_EQ(batch->status, 200) << batch->body;
    EXPECT_EQ(Parse(batch)["results"][1]["id"], "7");

    auto wrong = c.Get("/v1/namespaces/news/check");
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 405);
    EXPECT_EQ(wrong->get_header_value("Allow"), "POST, OPTIONS");

    auto metrics = c.Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200);
    EXPECT_NE(metrics->body.find("neardup_documents 3\n"), std::string::npos) << metrics->body;
    EXPECT_NE(metrics->body.find("neardup_http_requests_total{route=\"/v1/namespaces/{ns}/check\",method=\"POST\","
                                 "status=\"200\"} 2\n"),
              std::string::npos)
        << metrics->body;
    EXPECT_NE(metrics->body.find("neardup_http_request_duration_seconds_bucket"), std::string::npos);

    EXPECT_EQ(p.Signal(SIGTERM), 0) << ReadFile(Path("stderr"));
    const std::string err = ReadFile(Path("stderr"));
    EXPECT_NE(err.find("SIGTERM"), std::string::npos) << err;
    EXPECT_NE(err.find("stopped"), std::string::npos) << err;
  }
  {
    ServeProcess p;
    Start(&p);
    httplib::Client c("127.0.0.1", p.port());
    c.set_read_timeout(30, 0);
    auto ns = c.Get("/v1/namespaces/news");
    ASSERT_TRUE(ns);
    ASSERT_EQ(ns->status, 200) << ns->body;
    EXPECT_EQ(Parse(ns)["stats"]["documents"], 3);
    EXPECT_EQ(Parse(ns)["settings"]["k"], 4);
    auto doc = c.Get("/v1/namespaces/news/documents/a1");
    ASSERT_TRUE(doc);
    ASSERT_EQ(doc->status, 200) << doc->body;
    EXPECT_EQ(Parse(doc)["fingerprint"], fingerprint);
    auto again = c.Post("/v1/namespaces/news/check",
                        R"({"id": "a1", "text": "The quick brown fox jumps over the lazy dog"})", "application/json");
    ASSERT_TRUE(again);
    EXPECT_EQ(Parse(again)["replay"], true);
    auto dup = c.Post("/v1/namespaces/news/query",
                      R"({"id": "x", "text": "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG"})", "application/json");
    ASSERT_TRUE(dup);
    EXPECT_EQ(Parse(dup)["matches"][0]["id"], "a1");
    EXPECT_EQ(p.Signal(SIGINT), 0) << ReadFile(Path("stderr"));
  }
}

TEST_F(ServeTest, BodyOverTheLimitIs413Json) {
  ServeProcess p;
  Start(&p, {"--max-body-bytes", "1000"});
  httplib::Client c("127.0.0.1", p.port());
  c.set_read_timeout(30, 0);
  const std::string big = json({{"id", "big"}, {"text", std::string(5000, 'x')}}).dump();
  auto r = c.Post("/v1/namespaces/news/check", big, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(Parse(r)["error"]["code"], "resource_exhausted") << r->body;

  // A chunked body has no Content-Length; the limit holds while reading it.
  {
    const int fd = neardup::rawsock::ConnectLoopback(p.port());
    ASSERT_GE(fd, 0);
    std::string req =
        "POST /v1/namespaces/news/check HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
        "Content-Type: application/json\r\n\r\n";
    for (int i = 0; i < 4; ++i) req += "3e8\r\n" + std::string(1000, 'x') + "\r\n";
    req += "0\r\n\r\n";
    ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    std::string answer;
    neardup::rawsock::ReadUntil(fd, &answer, [](const std::string& s) { return s.find("}}") != std::string::npos; });
    ::close(fd);
    EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
    EXPECT_NE(answer.find("\"resource_exhausted\""), std::string::npos) << answer;
  }

  // The server is still fine, and the body just under the limit is answered.
  auto ok = c.Post("/v1/namespaces/news/check", R"({"id": "small", "text": "fits"})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(p.Signal(SIGTERM), 0);
}

// The largest send buffer the kernel may give a TCP socket (tcp_wmem max).
size_t MaxTcpSendBuffer() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_wmem");
  size_t min = 0, def = 0, max = 0;
  if (in >> min >> def >> max) return max;
  return 4 << 20;
}

// SIGTERM while a request is in flight: it is answered in full, then the
// server exits 0, and what it stored is there after a restart.
//
// No sleep decides the order: the client reads nothing until the signal is
// sent, through a receive buffer of a few KB, and the answer is larger than
// that plus the largest send buffer the kernel allows. So when the first
// bytes of the answer arrive the request was decided and its answer cannot
// have been handed to the kernel whole: the server holds the request when
// SIGTERM arrives, whatever the timing.
TEST_F(ServeTest, SigtermDrainsRequestsInFlight) {
  // Identical texts inserted with mode=insert: the i-th lists min(i, 1000)
  // matches, so the answer is ~85 bytes * 180k matches (~15 MB).
  constexpr int kDocs = 600;
  json docs = json::array();
  for (int i = 0; i < kDocs; ++i) {
    std::string id = "d";  // not "d" + to_string(i): GCC 12's false -Wrestrict
    id += std::to_string(i);
    docs.push_back({{"id", id}, {"text", "the same document about rivers, markets and winter gardens, sent many times"}});
  }
  const std::string body = json({{"documents", docs}}).dump();
  size_t stored = 0;
  {
    ServeProcess p;
    Start(&p, {"--max-body-bytes", "10000000"});
    {
      httplib::Client c("127.0.0.1", p.port());
      auto put = c.Put("/v1/namespaces/drain", R"({"max_matches": 1000})", "application/json");
      ASSERT_TRUE(put);
      ASSERT_TRUE(put->status == 200 || put->status == 201) << put->body;
    }
    const int fd = neardup::rawsock::ConnectLoopback(p.port(), /*receive_buffer=*/4096);
    ASSERT_GE(fd, 0);
    const std::string req = "POST /v1/namespaces/drain/batch?mode=insert HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    // The answer has begun: the request is decided, its answer not yet sent.
    pollfd pfd{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&pfd, 1, 30'000), 1) << "no answer within 30 s";
    std::thread stopper([&] { EXPECT_EQ(p.Signal(SIGTERM), 0); });
    std::string answer;
    // Connection: close: the whole answer is read when the server closes.
    neardup::rawsock::ReadUntil(fd, &answer, [](const std::string&) { return false; }, std::chrono::seconds(60));
    ::close(fd);
    stopper.join();
    ASSERT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer.substr(0, 200);
    const size_t start = answer.find("\r\n\r\n");
    ASSERT_NE(start, std::string::npos);
    const json j = json::parse(answer.substr(start + 4), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "a truncated answer: " << answer.size() << " bytes";
    ASSERT_EQ(j["results"].size(), static_cast<size_t>(kDocs));
    ASSERT_GT(answer.size(), MaxTcpSendBuffer() + (1 << 20))
        << "the answer must not fit in the kernel's buffers, or the request was not in flight at SIGTERM";
    for (const json& r : j["results"]) {
      EXPECT_FALSE(r.contains("error")) << r.dump().substr(0, 200);
      stored += r.value("stored", false) ? 1 : 0;
    }
    EXPECT_EQ(stored, static_cast<size_t>(kDocs));
  }
  ServeProcess p;
  Start(&p);
  httplib::Client c("127.0.0.1", p.port());
  auto ns = c.Get("/v1/namespaces/drain");
  ASSERT_TRUE(ns);
  ASSERT_EQ(ns->status, 200) << ns->body;
  EXPECT_EQ(Parse(ns)["stats"]["documents"], stored);
  EXPECT_EQ(p.Signal(SIGTERM), 0);
}

TEST_F(ServeTest, ConfigFileAndFlagsThatOverrideIt) {
  {
    std::ofstream cfg(Path("serve.json"));
    cfg << R"({"max-body-bytes": 200, "default-k": 5, "default-retention": "7d", "sync": false})";
  }
  const std::string text = json({{"id", "a"}, {"text", std::string(300, 'y')}}).dump();
  {
    ServeProcess p;
    Start(&p, {"--config", Path("serve.json")});
    httplib::Client c("127.0.0.1", p.port());
    auto r = c.Post("/v1/namespaces/news/check", text, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
    auto put = c.Put("/v1/namespaces/cfg", "{}", "application/json");
    ASSERT_TRUE(put);
    EXPECT_EQ(Parse(put)["settings"]["k"], 5);
    EXPECT_EQ(Parse(put)["settings"]["retention_seconds"], 7 * 86400);
    EXPECT_EQ(p.Signal(SIGTERM), 0);
  }
  {
    ServeProcess p;
    Start(&p, {"--config", Path("serve.json"), "--max-body-bytes", "5000", "--default-retention", "90m"});
    httplib::Client c("127.0.0.1", p.port());
    auto r = c.Post("/v1/namespaces/news/check", text, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    auto put = c.Put("/v1/namespaces/cfg2", "{}", "application/json");
    ASSERT_TRUE(put);
    EXPECT_EQ(Parse(put)["settings"]["k"], 5);
    EXPECT_EQ(Parse(put)["settings"]["retention_seconds"], 90 * 60);
    EXPECT_EQ(p.Signal(SIGTERM), 0);
  }
}

TEST_F(ServeTest, AutoCreateIsOffByDefault) {
  ServeProcess p;
  Start(&p, {}, /*auto_create=*/false);
  httplib::Client c("127.0.0.1", p.port());
  auto r = c.Post("/v1/namespaces/news/check", R"({"id": "a", "text": "hello world"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Parse(r)["error"]["code"], "not_found");
  EXPECT_EQ(p.Signal(SIGTERM), 0);
}

TEST_F(ServeTest, UsageErrorsExitTwo) {
  const std::string data = "--data '" + Path("data") + "' ";
  EXPECT_EQ(RunToExit("--listen 127.0.0.1:0"), 2);  // no --data
  EXPECT_NE(ReadFile(Path("run.err")).find("--data"), std::string::npos);
  EXPECT_EQ(RunToExit(data + "--listen nonsense"), 2);
  EXPECT_EQ(RunToExit(data + "--listen 127.0.0.1:70000"), 2);
  EXPECT_EQ(RunToExit(data + "--listen 127.0.0.1:0 --threads 0"), 2);
  EXPECT_EQ(RunToExit(data + "--listen 127.0.0.1:0 --default-k 9"), 2);
  EXPECT_EQ(RunToExit(data + "--listen 127.0.0.1:0 --default-retention 2w"), 2);
  EXPECT_EQ(RunToExit(data + "--listen 127.0.0.1:0 --sync maybe"), 2);
  EXPECT_EQ(RunToExit(data + "--listen 127.0.0.1:0 --max-namespaces 0"), 2);
  EXPECT_EQ(RunToExit(data + "--listen 127.0.0.1:0 --no-auto-create --auto-create-namespaces true"), 2);
  {
    std::ofstream cfg(Path("bad.json"));
    cfg << R"({"thread": 4})";
  }
  EXPECT_EQ(RunToExit(data + "--listen 127.0.0.1:0 --config '" + Path("bad.json") + "'"), 2);
  EXPECT_NE(ReadFile(Path("run.err")).find("unknown key \"thread\""), std::string::npos) << ReadFile(Path("run.err"));
  EXPECT_EQ(RunToExit("--help"), 0);
  const std::string help = ReadFile(Path("run.out"));
  for (const char* flag : {"--data", "--listen", "--config", "--threads", "--max-body-bytes", "--max-batch", "--sync",
                           "--default-k", "--default-retention", "--no-auto-create", "--init", "--api-keys",
                           "--max-namespaces", "--auto-create-namespaces"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
  // Every namespace setting has its --default-* flag (generated from the table).
  for (const auto& d : neardup::NamespaceSettingTable()) {
    const std::string flag = "--" + neardup::DefaultsFlagName(d) + " ";
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
}

TEST_F(ServeTest, PortInUseFailsWithExitOne) {
  ServeProcess p;
  Start(&p);
  EXPECT_EQ(RunToExit("--data '" + Path("data2") + "' --init --listen 127.0.0.1:" + std::to_string(p.port())), 1);
  EXPECT_NE(ReadFile(Path("run.err")).find("cannot bind"), std::string::npos) << ReadFile(Path("run.err"));
  EXPECT_EQ(p.Signal(SIGTERM), 0);
}

// Issue 15: a new store only with --init. A mistyped --data, an empty
// directory or one of other files is refused with a message and exit 1, and
// nothing is created.
TEST_F(ServeTest, StoreIsCreatedOnlyWithInit) {
  const std::string listen = " --listen 127.0.0.1:0";
  EXPECT_EQ(RunToExit("--data '" + Path("typo") + "'" + listen), 1);
  std::string err = ReadFile(Path("run.err"));
  EXPECT_NE(err.find("does not exist"), std::string::npos) << err;
  EXPECT_NE(err.find("--init"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(Path("typo")));

  std::filesystem::create_directories(Path("empty"));
  EXPECT_EQ(RunToExit("--data '" + Path("empty") + "'" + listen), 1);
  err = ReadFile(Path("run.err"));
  EXPECT_NE(err.find("empty"), std::string::npos) << err;
  EXPECT_TRUE(std::filesystem::is_empty(Path("empty")));

  std::filesystem::create_directories(Path("other"));
  { std::ofstream(Path("other/readme.txt")) << "x"; }
  EXPECT_EQ(RunToExit("--data '" + Path("other") + "' --init" + listen), 1);
  err = ReadFile(Path("run.err"));
  EXPECT_NE(err.find("not a neardup store"), std::string::npos) << err;

  // --init creates; later starts need no flag, and --init again is harmless.
  for (const bool init : {true, false, true}) {
    ServeProcess p;
    std::vector<std::string> args = {"--data", Path("new"), "--listen", "127.0.0.1:0"};
    if (init) args.push_back("--init");
    ASSERT_TRUE(p.Start(args, Path("stderr"))) << ReadFile(Path("stderr"));
    httplib::Client c("127.0.0.1", p.port());
    if (init) {
      ASSERT_TRUE(c.Put("/v1/namespaces/kept", "{}", "application/json"));
    }
    auto r = c.Get("/v1/namespaces/kept");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(p.Signal(SIGTERM), 0);
  }
}

// A damaged store stops the start with exit 1 and a message naming the file
// (every file kind and damage: tests/rocks_store_test.cc RocksStoreDamageTest).
TEST_F(ServeTest, DamagedManifestIsRefusedAtStart) {
  {
    ServeProcess p;
    Start(&p);
    httplib::Client c("127.0.0.1", p.port());
    ASSERT_TRUE(c.Put("/v1/namespaces/news", "{}", "application/json"));
    EXPECT_EQ(p.Signal(SIGTERM), 0);
  }
  std::string manifest;
  for (const auto& e : std::filesystem::directory_iterator(Path("data"))) {
    if (e.path().filename().string().starts_with("MANIFEST-")) manifest = e.path().string();
  }
  ASSERT_FALSE(manifest.empty());
  {
    std::fstream f(manifest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(manifest) / 2));
    f.write("\xff\xff\xff\xff\xff\xff\xff\xff", 8);
  }
  for (const char* init : {"", " --init"}) {
    EXPECT_EQ(RunToExit("--data '" + Path("data") + "'" + init + " --listen 127.0.0.1:0"), 1);
    const std::string err = ReadFile(Path("run.err"));
    EXPECT_NE(err.find(std::filesystem::path(manifest).filename().string()), std::string::npos) << err;
    EXPECT_NE(err.find("would be lost"), std::string::npos) << err;
    EXPECT_EQ(err.find("not a neardup store"), std::string::npos) << err;
  }
}

// Issue 15 part 6, through the real server: the header reaches the check,
// 401 carries WWW-Authenticate, the namespace cap answers 409.
TEST_F(ServeTest, ApiKeysAndNamespaceCap) {
  {
    std::ofstream f(Path("keys"));
    f << "# test keys\nadmin-0123456789abcdef admin\nreader-0123456789abcde read news\n";
  }
  ASSERT_EQ(::chmod(Path("keys").c_str(), 0600), 0);
  ServeProcess p;
  Start(&p, {"--api-keys", Path("keys"), "--max-namespaces", "2"}, /*auto_create=*/false);
  httplib::Client c("127.0.0.1", p.port());
  auto r = c.Get("/v1/namespaces");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(Parse(r)["error"]["code"], "unauthenticated");
  EXPECT_EQ(r->get_header_value("WWW-Authenticate").rfind("Bearer", 0), 0u);
  EXPECT_EQ(c.Get("/healthz")->status, 200);
  const httplib::Headers admin = {{"Authorization", "Bearer admin-0123456789abcdef"}};
  const httplib::Headers reader = {{"Authorization", "Bearer reader-0123456789abcde"}};
  EXPECT_EQ(c.Put("/v1/namespaces/news", admin, "{}", "application/json")->status, 201);
  EXPECT_EQ(c.Put("/v1/namespaces/b", admin, "{}", "application/json")->status, 201);
  r = c.Put("/v1/namespaces/c", admin, "{}", "application/json");
  EXPECT_EQ(r->status, 409);
  EXPECT_NE(r->body.find("--max-namespaces"), std::string::npos) << r->body;
  EXPECT_EQ(c.Post("/v1/namespaces/news/query", reader, R"({"id": "q", "text": "hello"})", "application/json")->status,
            200);
  r = c.Post("/v1/namespaces/news/check", reader, R"({"id": "q", "text": "hello"})", "application/json");
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(Parse(r)["error"]["code"], "permission_denied");
  EXPECT_EQ(c.Get("/v1/namespaces/b", reader)->status, 403);
  EXPECT_EQ(c.Get("/metrics", admin)->status, 200);
  // Two Authorization fields: ambiguous, refused.
  const httplib::Headers twice = {{"Authorization", "Bearer admin-0123456789abcdef"},
                                  {"Authorization", "Bearer reader-0123456789abcde"}};
  r = c.Get("/v1/namespaces", twice);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(p.Signal(SIGTERM), 0);
  EXPECT_EQ(ReadFile(Path("stderr")).find("warning"), std::string::npos) << ReadFile(Path("stderr"));
}

TEST_F(ServeTest, BadKeyFileFailsWithItsLine) {
  {
    std::ofstream f(Path("keys"));
    f << "admin-0123456789abcdef admin\n\nreader-0123456789abcde reader\n";
  }
  ASSERT_EQ(::chmod(Path("keys").c_str(), 0600), 0);
  const std::string args = "--data '" + Path("data") + "' --init --listen 127.0.0.1:0 --api-keys '" + Path("keys") + "'";
  EXPECT_EQ(RunToExit(args), 2);
  const std::string err = ReadFile(Path("run.err"));
  EXPECT_NE(err.find(Path("keys") + ":3: unknown role \"reader\""), std::string::npos) << err;
  EXPECT_EQ(err.find("reader-0123456789abcde"), std::string::npos) << "the token was echoed: " << err;
  EXPECT_EQ(RunToExit("--data '" + Path("data") + "' --init --listen 127.0.0.1:0 --api-keys '" + Path("nope") + "'"),
            2);
}

TEST_F(ServeTest, WarnsWhenOpenToTheNetworkWithoutKeysOrWithAReadableKeyFile) {
  {
    std::ofstream f(Path("keys"));
    f << "admin-0123456789abcdef admin\n";
  }
  ASSERT_EQ(::chmod(Path("keys").c_str(), 0644), 0);
  for (const bool keys : {false, true}) {
    ServeProcess p;
    std::vector<std::string> args = {"--data", Path("data"), "--init", "--listen", keys ? "127.0.0.1:0" : "0.0.0.0:0"};
    if (keys) args.insert(args.end(), {"--api-keys", Path("keys")});
    p.Start(args, Path("stderr"));  // the start line of 0.0.0.0 is not the one Start() looks for
    const std::string expected = keys ? "chmod 600" : "without --api-keys";
    std::string err;
    for (int i = 0; i < 100 && err.find(expected) == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      err = ReadFile(Path("stderr"));
    }
    EXPECT_NE(err.find(expected), std::string::npos) << err;
    EXPECT_EQ(p.Signal(SIGTERM), 0);
  }
}

}  // namespace
