// load_gen: a bounded HTTP load generator for `neardup serve` on loopback.
//
//   load_gen [--host 127.0.0.1] [--port 8080] [--ns load] [--preload 0] [--threads 16]
//            [--client-threads 1] [--seconds 20] [--max-requests 1000000] [--dup-rate 0.2]
//            [--batch 1] [--timeout-ms 10000] [--pregen-mb 200]
//            [--corpus data/sample/bench_zh.txt] [--json FILE] [--seed N]
//
// Texts: short Chinese posts of 60..140 characters made of pieces of random
// corpus lines joined end to end (so a new text is unique: two texts rarely
// share more than one piece, far below any near-duplicate threshold) with a
// 4-character random tag. Preload inserts N of them through the batch
// endpoint (mode=insert, 500 per request).
//
// The measured phase is a closed loop over `threads` keep-alive connections
// (the flag keeps its historical name: it is the number of concurrent
// connections, not of OS threads). Each connection sends check-and-insert
// requests of new texts, one at a time: it writes a request, reads the whole
// answer, then sends the next (no pipelining); `dup-rate` of the texts repost
// one of the connection's earlier texts with one character changed.
// The connections are driven by `client-threads` (default 1) event loops on
// epoll with non-blocking sockets and a minimal HTTP/1.1 client, so the
// generator costs little CPU next to the server on a small machine. Request
// bytes are generated before the timed phase (at most `pregen-mb` MB in all;
// a connection that runs out generates more, between two of its requests,
// never inside a request's latency). Latency is measured from just before a
// request's first write to the last byte of its answer.
// It stops issuing requests at `seconds` or `max-requests`, whichever comes
// first; a request unanswered after `timeout-ms` is an error (its connection
// is closed and reopened), and requests still open `seconds` + 30 s after the
// start are reported as errors. It prints one JSON line: requests/s, latency
// p50/p90/p99/max, errors (transport failures, timeouts and non-200 answers)
// and the duplicate share (which should be close to dup-rate).
// Only loopback hosts are accepted.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::u32string> LoadCorpus(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::u32string> out;
  std::string line;
  while (std::getline(in, line)) {
    std::u32string u;
    for (size_t i = 0; i < line.size();) {  // minimal UTF-8 decode (corpus is valid UTF-8)
      const auto c = static_cast<unsigned char>(line[i]);
      const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      char32_t cp = n == 1 ? c : c & (0xFF >> (n + 1));
      for (int j = 1; j < n && i + j < line.size(); ++j) cp = (cp << 6) | (line[i + j] & 0x3F);
      u.push_back(cp);
      i += n;
    }
    if (u.size() >= 10) out.push_back(u.substr(0, 140));
  }
  if (out.empty()) out.push_back(U"今天北京的天气很好我们一起去公园散步吧");
  return out;
}

std::string Utf8(const std::u32string& u) {
  std::string s;
  for (char32_t c : u) {
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else if (c < 0x800) {
      s += static_cast<char>(0xC0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      s += static_cast<char>(0xE0 | (c >> 12));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (c >> 18));
      s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return s;
}

std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      o += ' ';
      continue;
    }
    o += c;
  }
  return o;
}

char32_t RandomHan(std::mt19937_64& rng) { return 0x4E00 + static_cast<char32_t>(rng() % 0x5000); }

std::u32string RandomTail(std::mt19937_64& rng, int n) {
  std::u32string t;
  for (int i = 0; i < n; ++i) t.push_back(RandomHan(rng));
  return t;
}

// A new short post: pieces of at most 20 characters from random corpus lines
// (at random offsets, so long lines do not make texts share long prefixes)
// until 60..140 characters, then a tag.
std::u32string NewText(const std::vector<std::u32string>& corpus, std::mt19937_64& rng) {
  const size_t target = 60 + rng() % 81;
  std::u32string t;
  while (t.size() < target) {
    const std::u32string& line = corpus[rng() % corpus.size()];
    const size_t from = line.size() > 20 ? rng() % (line.size() - 20) : 0;
    t.append(line, from, std::min<size_t>(20, target - t.size()));
  }
  t += RandomTail(rng, 4);
  return t;
}

// ---- request generation ---------------------------------------------------

struct Settings {
  std::string ns, host_header;
  int batch = 1;
  double dup_rate = 0.2;
  const std::vector<std::u32string>* corpus = nullptr;
};

// The texts of one connection: its own random stream, its earlier texts (for
// reposts) and its ids, exactly the model of the blocking generator this
// replaced (one stream per connection `w`, seeded seed * 7919 + 1000 + w).
class ConnGenerator {
 public:
  ConnGenerator(const Settings& s, uint64_t seed, int w)
      : s_(&s), rng_(seed * 7919 + 1000 + w),
        // Ids unique per run too: a re-sent id is a replay, answered without work.
        id_prefix_(std::to_string(seed) + "-w" + std::to_string(w) + "-") {}

  // Appends one complete HTTP request (head and body) to `out`.
  void AppendRequest(std::string* out) {
    body_.clear();
    if (s_->batch == 1) {
      AppendDoc(&body_);
    } else {
      body_ += "{\"documents\":[";
      for (int b = 0; b < s_->batch; ++b) {
        if (b) body_ += ',';
        AppendDoc(&body_);
      }
      body_ += "]}";
    }
    out->append(s_->batch == 1 ? "POST /v1/namespaces/" + s_->ns + "/check HTTP/1.1\r\nHost: "
                               : "POST /v1/namespaces/" + s_->ns + "/batch?mode=check HTTP/1.1\r\nHost: ");
    out->append(s_->host_header);
    out->append("\r\nContent-Type: application/json\r\nContent-Length: ");
    out->append(std::to_string(body_.size()));
    out->append("\r\n\r\n");
    out->append(body_);
  }

 private:
  void AppendDoc(std::string* body) {
    std::u32string text;
    if (!mine_.empty() && std::uniform_real_distribution<>(0, 1)(rng_) < s_->dup_rate) {
      text = mine_[rng_() % mine_.size()];
      text[rng_() % text.size()] = RandomHan(rng_);  // a repost with one character changed
    } else {
      text = NewText(*s_->corpus, rng_);
      if (mine_.size() < 1000) mine_.push_back(text);
    }
    *body += "{\"id\":\"" + id_prefix_ + std::to_string(next_id_++) + "\",\"text\":\"" + JsonEscape(Utf8(text)) + "\"}";
  }

  const Settings* s_;
  std::mt19937_64 rng_;
  std::string id_prefix_;
  std::vector<std::u32string> mine_;
  long long next_id_ = 0;
  std::string body_;
};

// Requests generated ahead, stored back to back.
struct Chunk {
  std::string data;
  std::vector<uint32_t> ends;  // request i is data[ends[i-1] (or 0), ends[i])
  size_t next = 0;             // the next request to hand out
};

// ---- the closed-loop HTTP client ------------------------------------------

struct Addr {
  sockaddr_storage sa{};
  socklen_t len = 0;
};

// Connects a blocking socket, then makes it non-blocking. Returns the fd or -errno.
int ConnectNow(const Addr& a) {
  const int fd = ::socket(a.sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a.sa), a.len) != 0) {
    const int e = errno;
    ::close(fd);
    return -e;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

struct Shared {
  // Fixed before the timed phase starts.
  Addr addr;
  long long max_requests = 0;
  Clock::time_point t0, deadline, hard_deadline;
  Clock::duration timeout{};
  size_t lazy_chunk = 64;
  std::atomic<long long> issued{0};
  std::atomic<int> error_logs{0};
};

// The first few errors, on stderr.
void LogError(Shared& sh, const std::string& what) {
  const int n = sh.error_logs.fetch_add(1);
  if (n < 5) std::fprintf(stderr, "load_gen: %s\n", what.c_str());
  if (n == 5) std::fprintf(stderr, "load_gen: further errors not shown\n");
}

constexpr int kMaxConnectAttempts = 8;  // per request: 1, 2, 4, ... 128 ms apart (~255 ms in all)
constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr long long kMaxBodyBytes = 256LL * 1024 * 1024;

struct Conn {
  enum State { kIdle, kConnecting, kRetryWait, kSending, kReceiving, kDone };
  explicit Conn(ConnGenerator g) : gen(std::move(g)) {}

  ConnGenerator gen;
  std::deque<Chunk> queue;
  long long generated = 0;

  int fd = -1;
  uint32_t index = 0;  // in its client thread's vector
  State st = kIdle;
  int uses = 0;  // answers read on the current socket
  // The request in flight.
  const char* req = nullptr;
  size_t req_len = 0, woff = 0;
  Clock::time_point issued, wstart, retry_at;
  bool written = false;  // wstart is set
  bool retried = false;  // already resent once after a stale keep-alive close
  int connect_attempts = 0;
  // The answer being read.
  std::vector<char> rbuf = std::vector<char>(16 * 1024);
  size_t rlen = 0, hdr_end = 0;
  size_t total = 0;  // head + body, once the head is parsed
  int status = 0;
  bool close_after = false;
};

class ClientLoop {
 public:
  ClientLoop(Shared& sh, std::vector<Conn*> conns) : sh_(sh), conns_(std::move(conns)) {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    for (uint32_t i = 0; i < conns_.size(); ++i) conns_[i]->index = i;
  }
  ~ClientLoop() {
    for (Conn* c : conns_) CloseFd(*c);
    ::close(ep_);
  }

  // Before the timed phase: opens every connection (the caller retried the
  // address already; a connection that still fails is opened by its first request).
  void Preconnect() {
    for (Conn* c : conns_) {
      const int fd = ConnectNow(sh_.addr);
      if (fd >= 0) Adopt(*c, fd);
    }
  }

  void Run(size_t expected_requests) {
    latencies_.reserve(expected_requests);
    active_ = conns_.size();
    Clock::time_point now = Clock::now();
    for (Conn* c : conns_) StartNext(*c, now);
    std::vector<epoll_event> evs(std::max<size_t>(16, conns_.size()));
    Clock::time_point next_scan = now;
    while (active_ > 0) {
      const int n = ::epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), 5);
      if (n < 0 && errno != EINTR) {
        std::perror("epoll_wait");
        std::exit(1);
      }
      for (int i = 0; i < n; ++i) {
        Conn& c = *conns_[evs[i].data.u64 >> 32];
        if (c.fd != static_cast<int>(evs[i].data.u64 & 0xFFFFFFFF)) continue;  // a closed socket's event
        OnEvent(c, evs[i].events);
      }
      now = Clock::now();
      if (now >= next_scan) {
        Scan(now);
        next_scan = now + std::chrono::milliseconds(2);
      }
    }
  }

  std::vector<double>& latencies() { return latencies_; }
  long long errors() const { return errors_; }
  long long duplicates() const { return duplicates_; }
  long long lazily_generated() const { return lazy_; }

 private:
  void CloseFd(Conn& c) {
    if (c.fd >= 0) ::close(c.fd);  // also leaves the epoll set
    c.fd = -1;
    c.uses = 0;
  }

  void Adopt(Conn& c, int fd) {
    c.fd = fd;
    c.uses = 0;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = (static_cast<uint64_t>(c.index) << 32) | static_cast<uint32_t>(fd);
    if (::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      std::perror("epoll_ctl");
      std::exit(1);
    }
  }

  // The next request of `c` (generating more when its queue is empty), or finish it.
  void StartNext(Conn& c, Clock::time_point now) {
    // Drop what the last request used.
    while (!c.queue.empty() && c.queue.front().next >= c.queue.front().ends.size()) c.queue.pop_front();
    if (now >= sh_.deadline || now >= sh_.hard_deadline || sh_.issued.fetch_add(1) >= sh_.max_requests) {
      CloseFd(c);
      c.st = Conn::kDone;
      --active_;
      return;
    }
    if (c.queue.empty()) {  // ran out: a few more, before this request's clock starts
      Chunk ch;
      for (size_t i = 0; i < sh_.lazy_chunk; ++i) {
        c.gen.AppendRequest(&ch.data);
        ch.ends.push_back(static_cast<uint32_t>(ch.data.size()));
      }
      lazy_ += static_cast<long long>(sh_.lazy_chunk);
      c.queue.push_back(std::move(ch));
      now = Clock::now();
    }
    Chunk& ch = c.queue.front();
    const size_t from = ch.next == 0 ? 0 : ch.ends[ch.next - 1];
    c.req = ch.data.data() + from;
    c.req_len = ch.ends[ch.next] - from;
    ++ch.next;
    c.issued = now;
    c.written = false;
    c.retried = false;
    c.connect_attempts = 0;
    if (c.fd < 0) {
      BeginConnect(c, now);
    } else {
      BeginSend(c);
    }
  }

  void BeginConnect(Conn& c, Clock::time_point now) {
    CloseFd(c);
    const int fd = ::socket(sh_.addr.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      ConnectFailed(c, now, errno);
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const int r = ::connect(fd, reinterpret_cast<const sockaddr*>(&sh_.addr.sa), sh_.addr.len);
    if (r != 0 && errno != EINPROGRESS) {
      const int e = errno;
      ::close(fd);
      ConnectFailed(c, now, e);
      return;
    }
    Adopt(c, fd);
    if (r == 0) {
      BeginSend(c);
    } else {
      c.st = Conn::kConnecting;  // EPOLLOUT says when
    }
  }

  void ConnectFailed(Conn& c, Clock::time_point now, int err) {
    CloseFd(c);
    if (++c.connect_attempts >= kMaxConnectAttempts) {
      Fail(c, now, std::string("connect: ") + std::strerror(err));
      return;
    }
    c.st = Conn::kRetryWait;
    c.retry_at = now + std::chrono::milliseconds(1 << (c.connect_attempts - 1));
  }

  void BeginSend(Conn& c) {
    c.woff = 0;
    c.rlen = c.hdr_end = c.total = 0;
    c.status = 0;
    c.close_after = false;
    c.st = Conn::kSending;
    if (!c.written) {  // a resend after a stale close keeps the first write's time
      c.wstart = Clock::now();
      c.written = true;
    }
    TrySend(c);
  }

  void TrySend(Conn& c) {
    while (c.woff < c.req_len) {
      const ssize_t n = ::send(c.fd, c.req + c.woff, c.req_len - c.woff, MSG_NOSIGNAL);
      if (n > 0) {
        c.woff += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;  // EPOLLOUT (edge-triggered) resumes it
      } else {
        TransportError(c, n < 0 ? errno : EPIPE);
        return;
      }
    }
    c.st = Conn::kReceiving;
  }

  void OnEvent(Conn& c, uint32_t ev) {
    if (c.st == Conn::kConnecting) {
      if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err == 0 && (ev & EPOLLERR)) err = ECONNREFUSED;
      if (err != 0) {
        ConnectFailed(c, Clock::now(), err);
        return;
      }
      BeginSend(c);
      return;
    }
    const int fd = c.fd;
    if (c.st == Conn::kSending && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) TrySend(c);
    // An answer may come before the request is all written (an early error).
    if (c.fd == fd && (c.st == Conn::kSending || c.st == Conn::kReceiving) &&
        (ev & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) {
      TryRecv(c);
    }
  }

  void TryRecv(Conn& c) {
    while (true) {
      if (c.rlen == c.rbuf.size()) c.rbuf.resize(c.rbuf.size() * 2);
      const ssize_t n = ::recv(c.fd, c.rbuf.data() + c.rlen, c.rbuf.size() - c.rlen, 0);
      if (n > 0) {
        c.rlen += static_cast<size_t>(n);
        std::string why;
        const int r = Parse(c, &why);
        if (r < 0) {
          Fail(c, Clock::now(), why);
          return;
        }
        if (r > 0) {
          Complete(c, Clock::now());
          return;
        }
      } else if (n == 0) {
        TransportError(c, 0);
        return;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return;  // the rest comes with the next EPOLLIN edge
      } else {
        TransportError(c, errno);
        return;
      }
    }
  }

  // 1: the answer is complete, 0: more bytes needed, -1: not an answer we accept.
  int Parse(Conn& c, std::string* why) {
    while (c.hdr_end == 0) {
      const void* p = ::memmem(c.rbuf.data(), c.rlen, "\r\n\r\n", 4);
      if (p == nullptr) {
        if (c.rlen > kMaxHeaderBytes) {
          *why = "answer head over 64 KiB";
          return -1;
        }
        return 0;
      }
      const size_t head_len = static_cast<const char*>(p) - c.rbuf.data() + 4;
      const std::string_view head(c.rbuf.data(), head_len);
      // Status line: HTTP/1.x SSS reason
      if (head.size() < 12 || head.substr(0, 7) != "HTTP/1." || head[8] != ' ') {
        *why = "bad status line: " + std::string(head.substr(0, std::min<size_t>(head.size(), 40)));
        return -1;
      }
      const bool http10 = head[7] == '0';
      int status = 0;
      for (int i = 9; i < 12; ++i) {
        if (head[i] < '0' || head[i] > '9') {
          *why = "bad status code";
          return -1;
        }
        status = status * 10 + (head[i] - '0');
      }
      long long clen = -1;
      bool chunked = false, conn_close = false, conn_keep = false;
      size_t at = head.find("\r\n") + 2;
      while (at + 2 < head_len) {
        const size_t eol = head.find("\r\n", at);
        const std::string_view line = head.substr(at, eol - at);
        at = eol + 2;
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        const std::string_view name = line.substr(0, colon);
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
        while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
        auto is = [](std::string_view a, const char* b) {
          return a.size() == std::strlen(b) && ::strncasecmp(a.data(), b, a.size()) == 0;
        };
        auto has = [](std::string_view a, const char* b) {  // token inside a list, any case
          std::string lower(a);
          for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          return lower.find(b) != std::string::npos;
        };
        if (is(name, "Content-Length")) {
          clen = 0;
          for (char ch : value) {
            if (ch < '0' || ch > '9' || clen > kMaxBodyBytes) {
              *why = "bad Content-Length: " + std::string(value);
              return -1;
            }
            clen = clen * 10 + (ch - '0');
          }
        } else if (is(name, "Transfer-Encoding")) {
          chunked = chunked || has(value, "chunked");
        } else if (is(name, "Connection")) {
          if (has(value, "close")) conn_close = true;
          if (has(value, "keep-alive")) conn_keep = true;
        }
      }
      if (status >= 100 && status < 200) {  // an interim answer: skip it
        std::memmove(c.rbuf.data(), c.rbuf.data() + head_len, c.rlen - head_len);
        c.rlen -= head_len;
        continue;
      }
      if (chunked) {
        *why = "chunked answer (load_gen reads Content-Length answers only)";
        return -1;
      }
      if (clen < 0) {
        if (status != 204 && status != 304) {
          *why = "answer without Content-Length (status " + std::to_string(status) + ")";
          return -1;
        }
        clen = 0;
      }
      if (clen > kMaxBodyBytes) {
        *why = "answer body too large";
        return -1;
      }
      c.status = status;
      c.close_after = conn_close || (http10 && !conn_keep);
      c.hdr_end = head_len;
      c.total = head_len + static_cast<size_t>(clen);
      if (c.total > c.rbuf.size()) c.rbuf.resize(c.total);
    }
    if (c.rlen < c.total) return 0;
    if (c.rlen > c.total) c.close_after = true;  // bytes nobody asked for: start afresh
    return 1;
  }

  void Complete(Conn& c, Clock::time_point now) {
    latencies_.push_back(std::chrono::duration<double, std::micro>(now - c.wstart).count());
    if (c.status != 200) {
      ++errors_;
      LogError(sh_, "answer " + std::to_string(c.status) + ": " +
                        std::string(c.rbuf.data() + c.hdr_end, std::min<size_t>(200, c.total - c.hdr_end)));
    } else {  // per document: a batch answer holds one per document
      const std::string_view body(c.rbuf.data() + c.hdr_end, c.total - c.hdr_end);
      for (size_t at = body.find("\"duplicate\":true"); at != std::string_view::npos;
           at = body.find("\"duplicate\":true", at + 1)) {
        ++duplicates_;
      }
    }
    ++c.uses;
    if (c.close_after) CloseFd(c);
    StartNext(c, now);
  }

  // The connection broke (err 0: closed by the server) while a request was open.
  void TransportError(Conn& c, int err) {
    const auto now = Clock::now();
    // A kept-alive connection the server closed just as the request went out:
    // nothing of an answer came, so send it again, once, on a new connection.
    if (c.rlen == 0 && c.uses > 0 && !c.retried && (err == 0 || err == ECONNRESET || err == EPIPE)) {
      c.retried = true;
      c.connect_attempts = 0;
      BeginConnect(c, now);
      return;
    }
    Fail(c, now, err == 0 ? std::string("connection closed by the server") : std::string(std::strerror(err)));
  }

  // The open request of `c` failed: an error; the connection is closed.
  void Fail(Conn& c, Clock::time_point now, const std::string& why) {
    ++errors_;
    latencies_.push_back(std::chrono::duration<double, std::micro>(now - (c.written ? c.wstart : c.issued)).count());
    LogError(sh_, "request failed: " + why);
    CloseFd(c);
    StartNext(c, now);
  }

  void Scan(Clock::time_point now) {
    for (Conn* cp : conns_) {
      Conn& c = *cp;
      if (c.st == Conn::kDone || c.st == Conn::kIdle) continue;
      if (now >= sh_.hard_deadline) {
        ++errors_;
        latencies_.push_back(std::chrono::duration<double, std::micro>(now - (c.written ? c.wstart : c.issued)).count());
        LogError(sh_, "request still open at the hard deadline (seconds + 30 s)");
        CloseFd(c);
        c.st = Conn::kDone;
        --active_;
        continue;
      }
      if (now - c.issued >= sh_.timeout) {
        Fail(c, now, "timeout");
        continue;
      }
      if (c.st == Conn::kRetryWait && now >= c.retry_at) BeginConnect(c, now);
    }
  }

  Shared& sh_;
  std::vector<Conn*> conns_;
  int ep_ = -1;
  size_t active_ = 0;
  std::vector<double> latencies_;
  long long errors_ = 0, duplicates_ = 0, lazy_ = 0;
};

bool Resolve(const std::string& host, int port, std::vector<Addr>* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string h = host.size() > 2 && host.front() == '[' ? host.substr(1, host.size() - 2) : host;
  if (::getaddrinfo(h.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return false;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    Addr x;
    std::memcpy(&x.sa, a->ai_addr, a->ai_addrlen);
    x.len = a->ai_addrlen;
    out->push_back(x);
  }
  ::freeaddrinfo(res);
  return !out->empty();
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1", ns = "load", corpus_path = "data/sample/bench_zh.txt", json_path;
  int port = 8080, threads = 16, batch = 1, client_threads = 1;
  double seconds = 20, dup_rate = 0.2, pregen_mb = 200;
  long long preload = 0, max_requests = 1000000, timeout_ms = 10000;
  // Runs against the same namespace must not resend the same texts (they
  // would all be exact duplicates): a fresh seed per run unless given.
  uint64_t seed = std::random_device{}();
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[i + 1];
    try {
      if (a == "--host") host = v;
      else if (a == "--port") port = std::stoi(v);
      else if (a == "--ns") ns = v;
      else if (a == "--preload") preload = std::stoll(v);
      else if (a == "--threads") threads = std::max(1, std::stoi(v));
      else if (a == "--client-threads") client_threads = std::max(1, std::stoi(v));
      else if (a == "--seconds") seconds = std::stod(v);
      else if (a == "--max-requests") max_requests = std::stoll(v);
      else if (a == "--dup-rate") dup_rate = std::stod(v);
      else if (a == "--batch") batch = std::max(1, std::stoi(v));
      else if (a == "--timeout-ms") timeout_ms = std::max(1LL, std::stoll(v));
      else if (a == "--pregen-mb") pregen_mb = std::max(0.0, std::stod(v));
      else if (a == "--corpus") corpus_path = v;
      else if (a == "--json") json_path = v;
      else if (a == "--seed") seed = std::stoull(v);
      else {
        std::fprintf(stderr, "unknown option %s\n", a.c_str());
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "bad value for %s: %s\n", a.c_str(), v.c_str());
      return 2;
    }
  }
  if (host != "127.0.0.1" && host != "localhost" && host != "::1" && host != "[::1]" && host.rfind("127.", 0) != 0) {
    std::fprintf(stderr, "load_gen only targets loopback addresses\n");
    return 2;
  }
  client_threads = std::min(client_threads, threads);
  const auto corpus = LoadCorpus(corpus_path);

  if (preload > 0) {
    const auto t0 = Clock::now();
    std::atomic<long long> next{0};
    std::vector<std::thread> loaders;
    for (int w = 0; w < 2; ++w) {
      loaders.emplace_back([&, w] {
        httplib::Client cli(host, port);
        cli.set_read_timeout(120);
        std::mt19937_64 rng(seed * 7919 + w);
        while (true) {
          const long long begin = next.fetch_add(500);
          if (begin >= preload) break;
          const long long end = std::min(preload, begin + 500);
          std::string body = "{\"documents\":[";
          for (long long i = begin; i < end; ++i) {
            if (i > begin) body += ',';
            body += "{\"id\":\"pre-" + std::to_string(seed) + "-" + std::to_string(i) + "\",\"text\":\"" +
                    JsonEscape(Utf8(NewText(corpus, rng))) + "\"}";
          }
          body += "]}";
          auto res = cli.Post(("/v1/namespaces/" + ns + "/batch?mode=insert").c_str(), body, "application/json");
          if (!res || res->status != 200) {
            std::fprintf(stderr, "preload failed at %lld: %s\n", begin, res ? res->body.substr(0, 200).c_str() : "no response");
            std::exit(1);
          }
        }
      });
    }
    for (auto& t : loaders) t.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::fprintf(stderr, "preloaded %lld documents in %.1f s (%.0f docs/s)\n", preload, s, preload / s);
  }

  std::vector<double> latencies;
  long long errors = 0, duplicates = 0;
  double elapsed = 0;
  if (seconds > 0 && max_requests > 0) {
    Shared sh;
    sh.max_requests = max_requests;
    sh.timeout = std::chrono::milliseconds(timeout_ms);
    sh.lazy_chunk = std::max<size_t>(1, 8 / static_cast<size_t>(batch));
    std::vector<Addr> addrs;
    if (!Resolve(host, port, &addrs)) {
      std::fprintf(stderr, "load_gen: cannot resolve %s\n", host.c_str());
      return 1;
    }
    // The address to use: the first that accepts a connection, waiting a
    // little (bounded) for a server that is still starting.
    sh.addr = addrs.front();
    bool reachable = false;
    for (int round = 0; round < 10 && !reachable; ++round) {
      if (round > 0) std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1000, 10 << round)));
      for (const Addr& a : addrs) {
        const int fd = ConnectNow(a);
        if (fd >= 0) {
          ::close(fd);
          sh.addr = a;
          reachable = true;
          break;
        }
      }
    }
    if (!reachable) std::fprintf(stderr, "load_gen: cannot connect to %s:%d (carrying on; requests will fail)\n", host.c_str(), port);

    Settings settings;
    settings.ns = ns;
    settings.host_header = (host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host) +
                           ":" + std::to_string(port);
    settings.batch = batch;
    settings.dup_rate = dup_rate;
    settings.corpus = &corpus;

    std::vector<Conn> conns;
    conns.reserve(threads);
    for (int w = 0; w < threads; ++w) conns.emplace_back(ConnGenerator(settings, seed, w));

    // Pre-generation, before the clock starts: each connection its share of
    // max-requests, within pregen-mb in all, on every core (the server is idle).
    const auto g0 = Clock::now();
    const long long per_conn = (max_requests + threads - 1) / threads;
    const double per_conn_bytes = pregen_mb * 1024 * 1024 / threads;
    std::atomic<int> next_conn{0};
    std::vector<std::thread> gens;
    const int gen_threads = std::max(1, std::min<int>(threads, static_cast<int>(std::thread::hardware_concurrency())));
    for (int g = 0; g < gen_threads; ++g) {
      gens.emplace_back([&] {
        for (int w; (w = next_conn.fetch_add(1)) < threads;) {
          Conn& c = conns[w];
          double bytes = 0;
          while (c.generated < per_conn && bytes < per_conn_bytes) {
            Chunk ch;
            while (ch.ends.size() < 256 && c.generated < per_conn && bytes + static_cast<double>(ch.data.size()) < per_conn_bytes) {
              c.gen.AppendRequest(&ch.data);
              ch.ends.push_back(static_cast<uint32_t>(ch.data.size()));
              ++c.generated;
            }
            ch.data.shrink_to_fit();
            bytes += static_cast<double>(ch.data.size());
            c.queue.push_back(std::move(ch));
          }
        }
      });
    }
    for (auto& t : gens) t.join();
    double gen_bytes = 0;
    long long gen_reqs = 0;
    for (const Conn& c : conns) {
      gen_reqs += c.generated;
      for (const Chunk& ch : c.queue) gen_bytes += static_cast<double>(ch.data.size());
    }
    std::fprintf(stderr, "load_gen: pre-generated %lld requests (%.0f MB) in %.1f s\n", gen_reqs, gen_bytes / 1048576,
                 std::chrono::duration<double>(Clock::now() - g0).count());

    // One event loop per client thread, connection w on loop w % client_threads.
    std::vector<std::unique_ptr<ClientLoop>> loops;
    for (int t = 0; t < client_threads; ++t) {
      std::vector<Conn*> mine;
      for (int w = t; w < threads; w += client_threads) mine.push_back(&conns[w]);
      loops.push_back(std::make_unique<ClientLoop>(sh, std::move(mine)));
      loops.back()->Preconnect();
    }
    auto cpu_s = [] {
      rusage ru{};
      ::getrusage(RUSAGE_SELF, &ru);
      return std::array<double, 2>{ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6};
    };
    const auto cpu0 = cpu_s();
    sh.t0 = Clock::now();
    sh.deadline = sh.t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    sh.hard_deadline = sh.deadline + std::chrono::seconds(30);
    // Room for every latency (up to 4M in all, then the vectors grow).
    const size_t expected = static_cast<size_t>(std::min<long long>(max_requests, 1 << 22) / client_threads + threads);
    std::vector<std::thread> workers;
    for (int t = 1; t < client_threads; ++t) workers.emplace_back([&, t] { loops[t]->Run(expected); });
    loops[0]->Run(expected);
    for (auto& t : workers) t.join();
    elapsed = std::chrono::duration<double>(Clock::now() - sh.t0).count();
    const auto cpu1 = cpu_s();
    long long lazy = 0;
    for (auto& l : loops) {
      latencies.insert(latencies.end(), l->latencies().begin(), l->latencies().end());
      errors += l->errors();
      duplicates += l->duplicates();
      lazy += l->lazily_generated();
    }
    if (lazy > 0) std::fprintf(stderr, "load_gen: %lld more requests generated during the run\n", lazy);
    std::fprintf(stderr, "load_gen: client CPU in the timed phase: user %.2f s, sys %.2f s (%.0f us per request)\n",
                 cpu1[0] - cpu0[0], cpu1[1] - cpu0[1],
                 latencies.empty() ? 0.0 : (cpu1[0] - cpu0[0] + cpu1[1] - cpu0[1]) * 1e6 / latencies.size());
  }

  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    return latencies.empty() ? 0.0 : latencies[std::min(latencies.size() - 1, static_cast<size_t>(p * latencies.size()))];
  };
  const double reqs = static_cast<double>(latencies.size());
  const double rate = elapsed > 0 ? reqs / elapsed : 0.0;
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "{\"requests\": %.0f, \"docs_per_request\": %d, \"threads\": %d, \"client_threads\": %d, "
                "\"elapsed_s\": %.2f, \"requests_per_s\": %.0f, \"docs_per_s\": %.0f, \"p50_us\": %.0f, "
                "\"p90_us\": %.0f, \"p99_us\": %.0f, \"max_us\": %.0f, \"errors\": %lld, \"duplicate_docs\": %lld, "
                "\"preload\": %lld, \"seed\": %llu}",
                reqs, batch, threads, client_threads, elapsed, rate, rate * batch, pct(0.5), pct(0.9), pct(0.99),
                latencies.empty() ? 0.0 : latencies.back(), errors, duplicates, preload,
                static_cast<unsigned long long>(seed));
  std::printf("%s\n", buf);
  if (!json_path.empty()) std::ofstream(json_path) << buf << "\n";
  return errors > 0 ? 1 : 0;
}
