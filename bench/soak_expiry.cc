// soak_expiry: does memory (and disk) stay flat over a long run with expiry?
// (issue 3, §3: "an expired document never matches, and its memory and disk
// are reclaimed (measure that memory stays flat over a long run with
// expiry)".)
//
//   soak_expiry [--cli build-svc/neardup] [--minutes 9] [--rate 2000] [--retention 60]
//               [--sample 5] [--threads 8] [--sync true] [--sweep-ms 1000]
//               [--out bench/results/soak-expiry-DATE.txt]
//
// Starts `neardup serve` (the real server, its own process) on 127.0.0.1 with
// a kernel-chosen port and a fresh data directory, creates namespace "soak"
// with retention_seconds = --retention, and check-and-inserts unique short
// Chinese texts (30..80 random characters, so none near-duplicates another)
// at a fixed rate from --threads kept-alive connections, for --minutes
// (bounded: at most 60 minutes, at most rate x seconds requests). Every
// --sample seconds it records, in a table:
//   the server's RSS (VmRSS of /proc/PID/status) and its peak (VmHWM),
//   live documents and the engine's memory_bytes (GET /v1/namespaces/soak),
//   documents expired so far, the data directory's size (sum of file sizes,
//   and of allocated blocks), its number of SST files,
//   the achieved rate and p99 latency of the interval, and
//   expiry checks: the exact text of a document acknowledged more than
//   retention + 2 s ago is queried (mode query) and must NOT match
//   ("expired-matched" counts violations), and one acknowledged retention/2
//   ago must match (a positive control).
// At the end: the steady-state window (after 2 retention periods), min / max
// and the linear trend of RSS, documents and disk in it.
//
// Loopback only. The server is stopped with SIGTERM (by its pid) at the end.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http/http_server.h"
#include "util/httplib_client.h"  // httplib with the ABI macros of Debian's build

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Options {
  std::string cli;
  double minutes = 9;
  double rate = 2000;
  int retention = 60;
  double sample = 5;
  int threads = 8;
  std::string sync = "true";
  int sweep_ms = 1000;
  std::string out;
};

FILE* g_out = nullptr;

void Log(const char* fmt, ...) {
  va_list a, b;
  va_start(a, fmt);
  va_copy(b, a);
  std::vfprintf(stdout, fmt, a);
  std::fflush(stdout);
  if (g_out != nullptr) {
    std::vfprintf(g_out, fmt, b);
    std::fflush(g_out);
  }
  va_end(b);
  va_end(a);
}

// A unique short Chinese text: 30..80 characters drawn from 3000 CJK code
// points (U+4E00..), seeded by its number; random bigrams, so no two texts
// are near-duplicates.
std::string UniqueText(uint64_t i) {
  std::mt19937_64 r(i * 0x9E3779B97F4A7C15ULL + 12345);
  const int n = 30 + static_cast<int>(r() % 51);
  std::string s;
  for (int k = 0; k < n; ++k) {
    const uint32_t cp = 0x4E00 + static_cast<uint32_t>(r() % 3000);
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
    if (k % 15 == 14) s += "，";
  }
  s += "。";
  return s;
}

std::string Body(uint64_t i) { return "{\"id\":\"s" + std::to_string(i) + "\",\"text\":\"" + UniqueText(i) + "\"}"; }

// kB from a "Key:   123 kB" line of /proc/PID/status.
long ProcStatusKb(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(in, line)) {
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') return std::atol(line.c_str() + n + 1);
  }
  return -1;
}

struct DiskUsage {
  uint64_t bytes = 0;      // sum of file sizes
  uint64_t allocated = 0;  // sum of allocated blocks
  int sst_files = 0;
};

DiskUsage Disk(const std::string& dir) {
  DiskUsage d;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // files come and go
    d.bytes += static_cast<uint64_t>(st.st_size);
    d.allocated += static_cast<uint64_t>(st.st_blocks) * 512;
    if (it->path().extension() == ".sst") ++d.sst_files;
  }
  return d;
}

// Extracts an integer field ("documents":123) from a flat JSON answer.
long long JsonInt(const std::string& body, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  const size_t p = body.find(k);
  return p == std::string::npos ? -1 : std::atoll(body.c_str() + p + k.size());
}

bool JsonTrue(const std::string& body, const std::string& key) {
  return body.find("\"" + key + "\":true") != std::string::npos;
}

struct Sample {
  double t;
  long rss_kb, hwm_kb;
  long long docs, mem_bytes, expired;
  DiskUsage disk;
};

// Least-squares slope of y over x.
double Slope(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  if (n < 2) return 0;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= n;
  my /= n;
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; ++i) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
  return sxx > 0 ? sxy / sxx : 0;
}

std::string Today() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%F", std::localtime(&t));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.cli = (fs::path(argv[0]).parent_path() / "neardup").string();
  o.out = "bench/results/soak-expiry-" + Today() + ".txt";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--cli") o.cli = v;
    else if (a == "--minutes") o.minutes = std::stod(v);
    else if (a == "--rate") o.rate = std::stod(v);
    else if (a == "--retention") o.retention = std::stoi(v);
    else if (a == "--sample") o.sample = std::stod(v);
    else if (a == "--threads") o.threads = std::stoi(v);
    else if (a == "--sync") o.sync = v;
    else if (a == "--sweep-ms") o.sweep_ms = std::stoi(v);
    else if (a == "--out") o.out = v;
    else {
      std::fprintf(stderr, "unknown option %s (see the comment at the top of bench/soak_expiry.cc)\n", a.c_str());
      return 2;
    }
  }
  o.minutes = std::clamp(o.minutes, 0.1, 60.0);
  o.rate = std::clamp(o.rate, 1.0, 100000.0);
  // The server runs 32 workers and each kept-alive connection holds one:
  // leave room for the sampler's connection.
  o.threads = std::clamp(o.threads, 1, 24);
  o.retention = std::max(1, o.retention);
  const double seconds = o.minutes * 60;
  const uint64_t max_requests = static_cast<uint64_t>(o.rate * seconds) + 1;

  char tmpl[] = "/tmp/neardup_soak_expiry.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  const std::string tmp = tmpl, data = tmp + "/data";

  // ---- start the server -------------------------------------------------
  int pipefd[2];
  if (::pipe(pipefd) != 0) return 1;
  const std::string retention = std::to_string(o.retention) + "s";
  const std::string sweep = std::to_string(o.sweep_ms);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], 1);
    const int err = ::open((tmp + "/serve.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) ::dup2(err, 2);
    ::close(pipefd[0]);
    std::vector<const char*> args = {o.cli.c_str(), "serve", "--data", data.c_str(), "--init", "--auto-create-namespaces", "true",
                                     "--listen", "127.0.0.1:0",
                                     "--threads", "32", "--sync", o.sync.c_str(), "--default-retention",
                                     retention.c_str(), "--sweep-interval-ms", sweep.c_str(), nullptr};
    ::execv(o.cli.c_str(), const_cast<char* const*>(args.data()));
    _exit(127);
  }
  ::close(pipefd[1]);
  std::string line;
  {
    char c;
    while (line.size() < 1000 && ::read(pipefd[0], &c, 1) == 1 && c != '\n') line += c;
  }
  const std::string prefix = "neardup: listening on 127.0.0.1:";
  if (line.compare(0, prefix.size(), prefix) != 0) {
    std::fprintf(stderr, "server did not start (%s): %s\n", o.cli.c_str(), line.c_str());
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return 1;
  }
  const int port = std::atoi(line.c_str() + prefix.size());

  fs::create_directories(fs::path(o.out).parent_path());
  g_out = std::fopen(o.out.c_str(), "w");
  if (g_out == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", o.out.c_str());
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return 1;
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host);
  Log("# soak_expiry %s: neardup serve (pid %d, 127.0.0.1:%d, --sync %s, --sweep-interval-ms %d), "
      "namespace retention %d s,\n# check-and-insert of unique short Chinese texts at %.0f/s from %d connections "
      "for %.1f min; %u cpus\n",
      Today().c_str(), static_cast<int>(pid), port, o.sync.c_str(), o.sweep_ms, o.retention, o.rate, o.threads,
      o.minutes, std::thread::hardware_concurrency());
  Log("# expected steady state: rate x retention = %.0f documents\n", o.rate * o.retention);
  std::fflush(stdout);

  {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Put("/v1/namespaces/soak", "{\"retention_seconds\":" + std::to_string(o.retention) + "}",
                   "application/json");
    if (!r || (r->status != 201 && r->status != 200)) {
      std::fprintf(stderr, "PUT /v1/namespaces/soak failed: %s %s\n",
                   r ? std::to_string(r->status).c_str() : httplib::to_string(r.error()).c_str(),
                   r ? r->body.c_str() : "");
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return 1;
    }
  }

  // ---- load -----------------------------------------------------------------
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration<double>(seconds);
  std::atomic<uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sent{0}, stored{0}, duplicates{0}, errors{0};
  // ack time (ms since t0) of request i, 0 until acknowledged as stored.
  std::vector<std::atomic<int64_t>> acked(max_requests);
  std::mutex lat_mu;
  std::vector<double> latencies_ms;  // of the current interval
  std::vector<std::thread> senders;
  for (int t = 0; t < o.threads; ++t) {
    senders.emplace_back([&] {
      httplib::Client c("127.0.0.1", port);
      c.set_keep_alive(true);
      c.set_tcp_nodelay(true);  // else Nagle + delayed ACK add ~40 ms per request
      c.set_read_timeout(30, 0);
      std::vector<double> local;
      while (!stop.load()) {
        const uint64_t i = next.fetch_add(1);
        if (i >= max_requests) break;
        const auto due = t0 + std::chrono::duration<double>(static_cast<double>(i) / o.rate);
        if (due >= deadline) break;
        std::this_thread::sleep_until(due);
        const auto s = Clock::now();
        auto r = c.Post("/v1/namespaces/soak/check", Body(i), "application/json");
        const auto e = Clock::now();
        sent.fetch_add(1);
        if (!r || r->status != 200) {
          errors.fetch_add(1);
          continue;
        }
        if (JsonTrue(r->body, "stored")) {
          stored.fetch_add(1);
          acked[i].store(std::chrono::duration_cast<std::chrono::milliseconds>(e - t0).count() + 1);
        } else {
          duplicates.fetch_add(1);
        }
        local.push_back(std::chrono::duration<double, std::milli>(e - s).count());
        if (local.size() >= 64) {
          std::lock_guard lk(lat_mu);
          latencies_ms.insert(latencies_ms.end(), local.begin(), local.end());
          local.clear();
        }
      }
    });
  }

  // ---- samples --------------------------------------------------------------
  Log("%7s %9s %9s %7s %8s %8s %9s %9s %9s %9s %9s %5s %8s %8s %8s\n", "t_s", "sent", "rate/s", "p99_ms",
      "rss_MB", "hwm_MB", "docs", "idx_MB", "expired", "disk_MB", "alloc_MB", "sst", "exp_chk", "exp_hit",
      "live_ok");
  httplib::Client probe("127.0.0.1", port);
  probe.set_tcp_nodelay(true);
  probe.set_read_timeout(30, 0);
  std::vector<Sample> samples;
  uint64_t last_sent = 0;
  double last_t = 0;
  uint64_t expiry_checks = 0, expired_matched = 0, live_checks = 0, live_matched = 0;
  uint64_t probe_id = 0;
  uint64_t old_cursor = 0, live_cursor = 0;
  int64_t old_found = -1, live_found = -1;
  for (int k = 1;; ++k) {
    const auto when = t0 + std::chrono::duration<double>(k * o.sample);
    std::this_thread::sleep_until(std::min(when, deadline));
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();

    // Expiry checks: the newest document acknowledged more than retention +
    // 2 s ago must not match; one acknowledged about retention / 2 ago must.
    const int64_t now_ms = static_cast<int64_t>(t * 1000);
    // Requests are acknowledged in roughly index order, but the load may lag
    // its schedule by any amount: scan forward from the last answer (each
    // limit only grows), remembering the newest index acknowledged before it.
    auto find_acked_before = [&](int64_t limit_ms, uint64_t* cursor, int64_t* found) -> int64_t {
      if (limit_ms <= 0) return -1;
      const uint64_t issued = std::min<uint64_t>(next.load(), max_requests);
      uint64_t slack = 0;  // tolerate out-of-order acknowledgements
      for (uint64_t i = *cursor; i < issued && slack < 10000; ++i) {
        const int64_t a = acked[i].load();
        if (a != 0 && a < limit_ms) {
          *found = static_cast<int64_t>(i);
          *cursor = i + 1;
          slack = 0;
        } else {
          ++slack;
        }
      }
      return *found;
    };
    auto query = [&](int64_t i) {
      auto r = probe.Post("/v1/namespaces/soak/query",
                          "{\"id\":\"p" + std::to_string(probe_id++) + "\",\"text\":\"" + UniqueText(i) + "\"}",
                          "application/json");
      return r && r->status == 200 && JsonTrue(r->body, "duplicate");
    };
    if (const int64_t old = find_acked_before(now_ms - (o.retention + 2) * 1000LL, &old_cursor, &old_found);
        old >= 0) {
      ++expiry_checks;
      if (query(old)) ++expired_matched;
    }
    if (const int64_t live = find_acked_before(now_ms - o.retention * 500LL, &live_cursor, &live_found);
        live >= 0) {
      ++live_checks;
      if (query(live)) ++live_matched;
    }

    Sample s{};
    s.t = t;
    s.rss_kb = ProcStatusKb(pid, "VmRSS");
    s.hwm_kb = ProcStatusKb(pid, "VmHWM");
    if (auto r = probe.Get("/v1/namespaces/soak"); r && r->status == 200) {
      s.docs = JsonInt(r->body, "documents");
      s.mem_bytes = JsonInt(r->body, "memory_bytes");
      s.expired = JsonInt(r->body, "expired");
    }
    s.disk = Disk(data);
    samples.push_back(s);
    std::vector<double> lat;
    {
      std::lock_guard lk(lat_mu);
      lat.swap(latencies_ms);
    }
    double p99 = 0;
    if (!lat.empty()) {
      const size_t n = lat.size() * 99 / 100;
      std::nth_element(lat.begin(), lat.begin() + static_cast<std::ptrdiff_t>(n), lat.end());
      p99 = lat[n];
    }
    const uint64_t now_sent = sent.load();
    Log("%7.1f %9llu %9.0f %7.2f %8.1f %8.1f %9lld %9.1f %9lld %9.1f %9.1f %5d %8llu %8llu %8s\n", t,
        static_cast<unsigned long long>(now_sent), (now_sent - last_sent) / std::max(1e-9, t - last_t), p99,
        s.rss_kb / 1024.0, s.hwm_kb / 1024.0, s.docs, s.mem_bytes / 1048576.0, s.expired,
        s.disk.bytes / 1048576.0, s.disk.allocated / 1048576.0, s.disk.sst_files,
        static_cast<unsigned long long>(expiry_checks), static_cast<unsigned long long>(expired_matched),
        (std::to_string(live_matched) + "/" + std::to_string(live_checks)).c_str());
    last_sent = now_sent;
    last_t = t;
    if (Clock::now() >= deadline) break;
  }
  stop = true;
  for (auto& th : senders) th.join();

  // ---- summary --------------------------------------------------------------
  const double warm = 2.0 * o.retention;
  std::vector<double> x, rss, docs, disk, mem;
  for (const Sample& s : samples) {
    if (s.t < warm) continue;
    x.push_back(s.t / 60.0);
    rss.push_back(s.rss_kb / 1024.0);
    docs.push_back(static_cast<double>(s.docs));
    disk.push_back(s.disk.bytes / 1048576.0);
    mem.push_back(s.mem_bytes / 1048576.0);
  }
  auto range = [](const std::vector<double>& v, const char* name, const char* unit, const std::vector<double>& x) {
    if (v.empty()) return;
    double sum = 0;
    for (double d : v) sum += d;
    Log("#   %-22s min %10.1f  max %10.1f  mean %10.1f  trend %+9.2f %s/min\n", name,
        *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()), sum / v.size(),
        Slope(x, v), unit);
  };
  Log("# requests %llu sent, %llu stored, %llu duplicates, %llu errors; achieved %.0f/s\n",
      static_cast<unsigned long long>(sent.load()), static_cast<unsigned long long>(stored.load()),
      static_cast<unsigned long long>(duplicates.load()), static_cast<unsigned long long>(errors.load()),
      sent.load() / std::max(1e-9, samples.empty() ? 1.0 : samples.back().t));
  Log("# expiry: %llu documents acknowledged > retention + 2 s earlier were queried, %llu matched (must be 0); "
      "%llu/%llu acknowledged retention/2 earlier matched (control)\n",
      static_cast<unsigned long long>(expiry_checks), static_cast<unsigned long long>(expired_matched),
      static_cast<unsigned long long>(live_matched), static_cast<unsigned long long>(live_checks));
  Log("# steady state (t >= %.0f s, %zu samples):\n", warm, x.size());
  range(rss, "rss MB", "MB", x);
  range(mem, "engine memory_bytes MB", "MB", x);
  range(docs, "documents", "docs", x);
  range(disk, "disk MB", "MB", x);

  // ---- stop -----------------------------------------------------------------
  ::kill(pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 600; ++i) {  // at most 60 s
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (i == 599) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
  }
  Log("# server exit status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  if (g_out != nullptr) std::fclose(g_out);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return expired_matched == 0 ? 0 : 1;
}
