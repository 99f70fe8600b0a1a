// HttpServer: see http_server.h.
#include "http/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "http/http_parser.h"

namespace neardup {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kListenTag = 0;
constexpr uint64_t kWakeTag = 1;
constexpr size_t kReadChunk = 64 * 1024;
// Connections answered 503 that a loop keeps open at once (see Refuse());
// past it a newcomer is closed without an answer.
constexpr int kMaxRefusing = 64;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

const char* Reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    default: return "Status";
  }
}

// An error the server answers itself (the request never reached the API):
// the same JSON body as every other error.
HttpResponse TransportError(int status, const std::string& message) {
  Status::Code code = Status::Code::kInvalidArgument;
  if (status == 413 || status == 431) code = Status::Code::kResourceExhausted;
  if (status == 501 || status == 505) code = Status::Code::kNotSupported;
  if (status == 503) code = Status::Code::kUnavailable;
  HttpResponse r = ErrorResponse(Status(code, message));
  r.status = status;  // 408, 414, 431 and 505 have no Status code of their own
  r.route = "unmatched";
  return r;
}

void AppendResponse(const HttpResponse& r, bool head, bool keep_alive, std::string* out) {
  out->append("HTTP/1.1 ");
  out->append(std::to_string(r.status));
  out->push_back(' ');
  out->append(Reason(r.status));
  out->append("\r\n");
  const bool no_body = r.status == 204 || r.status == 304 || r.status < 200;
  if (!no_body) {
    if (!r.content_type.empty()) {
      out->append("Content-Type: ");
      out->append(r.content_type);
      out->append("\r\n");
    }
    out->append("Content-Length: ");
    out->append(std::to_string(r.body.size()));
    out->append("\r\n");
  }
  for (const auto& [k, v] : r.headers) {
    out->append(k);
    out->append(": ");
    out->append(v);
    out->append("\r\n");
  }
  if (!keep_alive) out->append("Connection: close\r\n");
  out->append("\r\n");
  if (!no_body && !head) out->append(r.body);
}

// A small pool for requests that may block (see http_server.h).
class WorkerPool {
 public:
  void Start(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Run(); });
  }
  void Submit(std::function<void()> fn) {
    {
      std::lock_guard lk(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }
  // Runs what was queued, then joins.
  void StopAndJoin() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

struct HttpServer::Impl {
  struct Conn {
    int fd = -1;
    uint64_t id = 0;
    HttpRequestParser parser;
    std::string in;         // bytes read, not yet parsed
    std::string out;        // answer bytes not yet sent
    size_t out_off = 0;
    bool busy = false;      // a request is being answered (with the API, or its answer being sent)
    bool answered = false;  // `out` ends with the busy request's final answer
    bool close_after = false;  // close once the answer is out
    bool read_eof = false;  // the peer sent FIN: it may still read, it sends no more requests
    bool broken = false;    // the peer is gone (reset, hang-up): nothing more to send
    bool draining = false;  // answer sent, our side shut down: reading until the peer closes
    bool refused = false;   // accepted over the limit only to be answered 503 (Refuse())
    Clock::time_point draining_since;
    int served = 0;
    uint32_t interest = 0;
    Clock::time_point last_active;    // last byte read or written
    Clock::time_point request_start;  // first byte of the request being read
    explicit Conn(HttpParseLimits l) : parser(l) {}
  };

  struct Loop {
    int epfd = -1;
    int wakefd = -1;
    std::thread thread;
    std::thread::id thread_id;
    std::mutex mu;
    std::vector<std::function<void()>> posted;  // from other threads, guarded by mu
    std::vector<std::function<void()>> local;   // from this loop's own thread
    std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
    uint64_t next_id = 2;
    int in_flight = 0;  // requests of this loop's connections with the API
    bool listening = false;
    int refusing = 0;  // connections with refused set
    // Idle connections as of this loop's last Tick(), less those other loops
    // have since claimed (MakeRoom()): read and decremented by other loops.
    std::atomic<int> idle_hint{0};

    // Runs fn on this loop's thread, soon.
    void Post(std::function<void()> fn) {
      if (std::this_thread::get_id() == thread_id) {
        local.push_back(std::move(fn));
        return;
      }
      bool wake;
      {
        std::lock_guard lk(mu);
        wake = posted.empty();
        posted.push_back(std::move(fn));
      }
      if (wake) {
        const uint64_t one = 1;
        ssize_t ignored = ::write(wakefd, &one, sizeof(one));
        (void)ignored;
      }
    }
  };

  Engine& engine;
  HttpServerOptions options;
  HttpMetrics metrics;
  HttpParseLimits limits;
  int listen_fd = -1;
  int port = -1;
  std::vector<std::unique_ptr<Loop>> loops;
  WorkerPool pool;
  std::atomic<bool> stopping{false};
  std::atomic<int> connections{0};
  const bool inline_checks;

  Impl(Engine& e, HttpServerOptions o)
      : engine(e), options(std::move(o)), inline_checks(e.CheckBatchAsyncNeverBlocks()) {
    options.api.metrics = &metrics;
    limits.max_body_bytes = options.api.max_body_bytes;
  }

  ~Impl() {
    for (auto& l : loops) {
      for (auto& [id, c] : l->conns) ::close(c->fd);
      if (l->epfd >= 0) ::close(l->epfd);
      if (l->wakefd >= 0) ::close(l->wakefd);
    }
    if (listen_fd >= 0) ::close(listen_fd);
  }

  // ---- connections -----------------------------------------------------------

  void SetInterest(Loop& l, Conn& c, uint32_t events) {
    if (c.interest == events) return;
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = c.id;
    ::epoll_ctl(l.epfd, EPOLL_CTL_MOD, c.fd, &ev);
    c.interest = events;
  }

  void Close(Loop& l, Conn& c) {
    ::epoll_ctl(l.epfd, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    connections.fetch_sub(1);
    if (c.refused) --l.refusing;
    l.conns.erase(c.id);  // destroys c
  }

  void Accept(Loop& l) {
    while (true) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: stop listening on this loop until the next
          // tick, or the level-triggered listener would spin.
          ::epoll_ctl(l.epfd, EPOLL_CTL_DEL, listen_fd, nullptr);
          l.listening = false;
        }
        return;
      }
      if (stopping.load()) {
        ::close(fd);
        continue;
      }
      const bool room = connections.load() < options.max_connections || MakeRoom(l);
      if (!room && l.refusing >= kMaxRefusing) {
        ::close(fd);
        continue;
      }
      Conn* c = Register(l, fd);
      if (c != nullptr && !room) Refuse(l, *c);
    }
  }

  // A new connection on this loop, reading; nullptr if epoll refused it.
  Conn* Register(Loop& l, int fd) {
    int yes = 1;
    // Small JSON answers: without TCP_NODELAY, Nagle + delayed ACK can add
    // ~40 ms to a request.
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    auto c = std::make_unique<Conn>(limits);
    c->fd = fd;
    c->id = l.next_id++;
    c->interest = EPOLLIN;
    c->last_active = Clock::now();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c->id;
    if (::epoll_ctl(l.epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      return nullptr;
    }
    connections.fetch_add(1);
    Conn* raw = c.get();
    l.conns.emplace(c->id, std::move(c));
    return raw;
  }

  // Over the limit with nothing idle to close: a 503 the client can read
  // (a bare close would reach it as a reset, indistinguishable from a
  // crash). The answer goes out at once, then the connection drains like
  // any closing one, so the client's unread request cannot turn the close
  // into a reset that destroys the answer.
  void Refuse(Loop& l, Conn& c) {
    c.refused = true;
    ++l.refusing;
    c.busy = true;
    c.answered = true;
    c.close_after = true;
    HttpResponse e = TransportError(503, "too many connections");
    metrics.Record("unmatched", "other", e.status, 0);
    AppendResponse(e, false, false, &c.out);
    Flush(l, c);
  }

  // A kept-alive connection between requests: nothing read, nothing to send.
  static bool Idle(const Conn& c) {
    return !c.busy && !c.draining && c.out.empty() && c.in.empty() && !c.parser.in_progress();
  }

  // Closes this loop's longest-idle connection; false if none is idle.
  // Linear in the loop's connections, and only run at the limit.
  bool CloseLongestIdle(Loop& l) {
    Conn* oldest = nullptr;
    for (auto& [id, c] : l.conns) {
      if (Idle(*c) && (oldest == nullptr || c->last_active < oldest->last_active)) oldest = c.get();
    }
    if (oldest == nullptr) return false;
    Close(l, *oldest);
    return true;
  }

  // At the limit, room for one more: idle connections go first, so clients
  // that hold sockets open without using them cannot lock others out. This
  // loop closes its own longest-idle one; else it claims one that another
  // loop reported idle at its last tick and asks that loop to close it (the
  // count may then exceed the limit by the claims in transit, at most the
  // idle connections reported). False if nothing is idle anywhere.
  bool MakeRoom(Loop& l) {
    if (CloseLongestIdle(l)) return true;
    for (auto& other : loops) {
      if (other.get() == &l) continue;
      int hint = other->idle_hint.load();
      while (hint > 0 && !other->idle_hint.compare_exchange_weak(hint, hint - 1)) {
      }
      if (hint <= 0) continue;
      Loop* o = other.get();
      o->Post([this, o] { CloseLongestIdle(*o); });
      return true;
    }
    return false;
  }

  void OnReadable(Loop& l, Conn& c) {
    char buf[kReadChunk];
    if (c.draining) {
      // Discard what the peer still sends until it closes: closing with
      // unread data would reset the connection and could destroy the answer
      // before the client read it.
      while (true) {
        const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        Close(l, c);
        return;
      }
    }
    // While a request is being answered, what arrives (a pipelined request,
    // or the end of the stream) is buffered, not parsed; past a bound the
    // connection is not read until the answer is out. Leaving EPOLLIN on
    // saves two epoll_ctl calls per request.
    if (c.busy && c.in.size() > limits.max_header_bytes + limits.max_body_bytes) {
      SetInterest(l, c, 0);
      return;
    }
    // Read what is there now, at most a few chunks per wake-up so one
    // connection cannot starve the others.
    for (int i = 0; i < 4; ++i) {
      const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        if (c.in.empty() && !c.parser.in_progress()) c.request_start = Clock::now();
        c.in.append(buf, static_cast<size_t>(n));
        c.last_active = Clock::now();
        if (static_cast<size_t>(n) < sizeof(buf)) break;
        continue;
      }
      if (n == 0) {
        c.read_eof = true;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      Close(l, c);  // reset by the peer
      return;
    }
    Process(l, c);
  }

  // Parses buffered bytes into requests while the connection is free.
  void Process(Loop& l, Conn& c) {
    size_t off = 0;
    while (!c.busy && off < c.in.size()) {
      size_t used = 0;
      const auto r = c.parser.Feed(std::string_view(c.in).substr(off), &used);
      off += used;
      if (r == HttpRequestParser::Result::kNeedMore) break;
      if (r == HttpRequestParser::Result::kHeaders) {
        // The client waits for this before it sends the body.
        if (c.parser.request().expect_continue) c.out.append("HTTP/1.1 100 Continue\r\n\r\n");
        continue;
      }
      if (r == HttpRequestParser::Result::kError) {
        c.in.clear();
        off = 0;
        const std::string target = c.parser.request().target;
        HttpResponse e = TransportError(c.parser.error_status(), c.parser.error_message());
        metrics.Record(target.empty() ? std::string("unmatched") : RouteFor(target), "other", e.status,
                       SecondsSince(c.request_start));
        c.busy = true;
        c.answered = true;
        c.close_after = true;  // the framing is lost
        AppendResponse(e, false, false, &c.out);
        break;
      }
      // kDone: a whole request.
      ParsedHttpRequest req = std::move(c.parser.mutable_request());
      c.parser.Reset();
      c.busy = true;
      Dispatch(l, c, std::move(req));
    }
    if (off > 0) c.in.erase(0, off);
    if (!c.out.empty()) {
      Flush(l, c);
      return;
    }
    if (c.busy) {  // with the API; Complete() goes on
      // After the peer's FIN the socket stays readable: stop watching it,
      // or the level-triggered loop would spin until the answer.
      if (c.read_eof) SetInterest(l, c, 0);
      return;
    }
    if (c.read_eof) {  // no further request can arrive
      Close(l, c);
      return;
    }
    SetInterest(l, c, EPOLLIN);
  }

  void Dispatch(Loop& l, Conn& c, ParsedHttpRequest req) {
    ++l.in_flight;
    metrics.AddInFlight(1);
    const auto start = Clock::now();
    ++c.served;
    const bool keep_alive = req.keep_alive && c.served < options.keep_alive_max_count && !stopping.load();
    const bool head = req.method == "HEAD";
    auto request = std::make_shared<HttpRequest>(HttpRequest::FromTarget(std::move(req.method), req.target,
                                                                        std::move(req.body)));
    request->authorization = std::move(req.authorization);
    Loop* loop = &l;
    const uint64_t id = c.id;
    Responder respond = [this, loop, id, keep_alive, head, start, request](HttpResponse r) {
      loop->Post([this, loop, id, keep_alive, head, start, method = request->method, r = std::move(r)]() {
        Complete(*loop, id, r, method, head, keep_alive, start);
      });
    };
    if (inline_checks && IsCheckRoute(request->path)) {
      Poster post = [loop](std::function<void()> fn) { loop->Post(std::move(fn)); };
      HandleRequestAsync(engine, *request, options.api, std::move(respond), std::move(post));
    } else {
      pool.Submit([this, request, respond = std::move(respond)]() mutable {
        HandleRequestAsync(engine, *request, options.api, std::move(respond));
      });
    }
  }

  void Complete(Loop& l, uint64_t id, const HttpResponse& r, const std::string& method, bool head, bool keep_alive,
                Clock::time_point start) {
    --l.in_flight;
    metrics.AddInFlight(-1);
    metrics.Record(r.route.empty() ? std::string("unmatched") : r.route, method, r.status, SecondsSince(start));
    auto it = l.conns.find(id);
    if (it == l.conns.end()) return;  // closed meanwhile
    Conn& c = *it->second;
    if (c.broken) {
      Close(l, c);
      return;
    }
    const bool keep = keep_alive && !stopping.load() && !c.read_eof;
    AppendResponse(r, head, keep, &c.out);
    c.answered = true;
    if (!keep) c.close_after = true;
    Flush(l, c);
  }

  // Sends what is pending; once a final answer is out, goes on with the
  // connection's next request (or closes it).
  void Flush(Loop& l, Conn& c) {
    while (c.out_off < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_off += static_cast<size_t>(n);
        c.last_active = Clock::now();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        SetInterest(l, c, EPOLLOUT);
        return;
      }
      // The peer is gone. A request still with the API completes into nothing.
      if (c.answered || !c.busy) {
        Close(l, c);
        return;
      }
      c.out.clear();
      c.out_off = 0;
      c.broken = true;
      SetInterest(l, c, 0);
      return;
    }
    c.out.clear();
    c.out_off = 0;
    if (!c.answered) {
      // Only an interim "100 Continue" went out: the request goes on.
      SetInterest(l, c, c.read_eof ? 0u : static_cast<uint32_t>(EPOLLIN));
      return;
    }
    c.answered = false;
    c.busy = false;
    if (c.close_after) {
      // Our side is done; read until the peer closes (see OnReadable).
      ::shutdown(c.fd, SHUT_WR);
      c.in.clear();
      c.draining = true;
      c.draining_since = Clock::now();
      SetInterest(l, c, EPOLLIN);
      return;
    }
    if (!c.in.empty()) {
      Process(l, c);
      return;
    }
    if (c.read_eof) {
      Close(l, c);
      return;
    }
    SetInterest(l, c, EPOLLIN);
  }

  // ---- loop ------------------------------------------------------------------

  void Tick(Loop& l) {
    const auto now = Clock::now();
    const auto idle = std::chrono::seconds(std::max(1, options.keep_alive_timeout_seconds));
    const auto read_limit = std::chrono::seconds(std::max(1, options.read_timeout_seconds));
    const auto write_limit = std::chrono::seconds(std::max(1, options.write_timeout_seconds));
    std::vector<Conn*> to_close, timed_out;
    for (auto& [id, cp] : l.conns) {
      Conn& c = *cp;
      if (c.draining) {
        if (now - c.draining_since > std::chrono::seconds(1) || stopping.load()) to_close.push_back(&c);
      } else if (!c.out.empty()) {
        if (now - c.last_active > write_limit) to_close.push_back(&c);
      } else if (c.busy) {
        continue;  // with the API
      } else if (!c.in.empty() || c.parser.in_progress()) {
        if (now - c.request_start > read_limit) timed_out.push_back(&c);
      } else if (now - c.last_active > idle || stopping.load()) {
        to_close.push_back(&c);
      }
    }
    for (Conn* c : to_close) Close(l, *c);
    int idle_now = 0;
    for (auto& [id, cp] : l.conns) idle_now += Idle(*cp) ? 1 : 0;
    l.idle_hint.store(idle_now);
    for (Conn* c : timed_out) {
      if (stopping.load()) {
        Close(l, *c);
        continue;
      }
      c->in.clear();
      c->busy = true;
      c->answered = true;
      c->close_after = true;
      HttpResponse e = TransportError(408, "the request did not arrive whole within " +
                                               std::to_string(options.read_timeout_seconds) + " s");
      metrics.Record("unmatched", "other", e.status, SecondsSince(c->request_start));
      AppendResponse(e, false, false, &c->out);
      Flush(l, *c);
    }
    if (!l.listening && !stopping.load()) Listen(l);
  }

  void Listen(Loop& l) {
    epoll_event ev{};
    // EPOLLEXCLUSIVE: one loop wakes per new connection, not all of them.
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;
    ev.data.u64 = kListenTag;
    l.listening = ::epoll_ctl(l.epfd, EPOLL_CTL_ADD, listen_fd, &ev) == 0;
  }

  void RunLocal(Loop& l) {
    // Tasks may post more local tasks: run until none is left.
    while (!l.local.empty()) {
      std::vector<std::function<void()>> tasks;
      tasks.swap(l.local);
      for (auto& t : tasks) t();
    }
  }

  void Run(Loop& l) {
    l.thread_id = std::this_thread::get_id();
    Listen(l);
    std::vector<epoll_event> events(256);
    auto last_tick = Clock::now();
    bool stop_seen = false;
    while (true) {
      const int n = ::epoll_wait(l.epfd, events.data(), static_cast<int>(events.size()), 250);
      for (int i = 0; i < n; ++i) {
        const uint64_t tag = events[i].data.u64;
        if (tag == kListenTag) {
          Accept(l);
        } else if (tag == kWakeTag) {
          uint64_t count;
          ssize_t ignored = ::read(l.wakefd, &count, sizeof(count));
          (void)ignored;
          std::vector<std::function<void()>> tasks;
          {
            std::lock_guard lk(l.mu);
            tasks.swap(l.posted);
          }
          for (auto& t : tasks) t();
        } else {
          auto it = l.conns.find(tag);
          if (it == l.conns.end()) continue;
          Conn& c = *it->second;
          const uint32_t ev = events[i].events;
          if (ev & EPOLLOUT) {
            Flush(l, c);
          } else if (c.interest == 0) {
            // Not reading (a full buffer behind a request the API holds);
            // only HUP/ERR arrive here, and they would repeat: stop
            // watching, drop the answer.
            c.broken = true;
            ::epoll_ctl(l.epfd, EPOLL_CTL_DEL, c.fd, nullptr);
            c.interest = 0;
          } else if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            OnReadable(l, c);
          }
        }
        RunLocal(l);
      }
      RunLocal(l);
      const auto now = Clock::now();
      if (stopping.load() && !stop_seen) {
        stop_seen = true;
        if (l.listening) ::epoll_ctl(l.epfd, EPOLL_CTL_DEL, listen_fd, nullptr);
        l.listening = false;
        Tick(l);  // closes idle connections now
        last_tick = now;
      } else if (now - last_tick >= std::chrono::milliseconds(500)) {
        Tick(l);
        last_tick = now;
      }
      if (stop_seen) {
        bool posted_empty;
        {
          std::lock_guard lk(l.mu);
          posted_empty = l.posted.empty();
        }
        // Done when nothing of ours is with the API and every answer is out.
        if (l.in_flight == 0 && posted_empty && l.local.empty()) {
          bool pending_out = false;
          for (auto& [id, c] : l.conns) pending_out = pending_out || !c->out.empty();
          if (!pending_out) break;
        }
      }
    }
    std::vector<Conn*> rest;
    for (auto& [id, c] : l.conns) rest.push_back(c.get());
    for (Conn* c : rest) Close(l, *c);
  }

  void WakeAll() {
    for (auto& l : loops) {
      const uint64_t one = 1;
      ssize_t ignored = ::write(l->wakefd, &one, sizeof(one));
      (void)ignored;
    }
  }
};

HttpServer::HttpServer(Engine& engine, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port; }
const HttpMetrics& HttpServer::metrics() const { return impl_->metrics; }

Result<int> HttpServer::Bind() {
  const HttpServerOptions& o = impl_->options;
  if (o.host.empty()) return Status::InvalidArgument("empty listen address");
  if (o.port < 0 || o.port > 65535) {
    return Status::InvalidArgument("port must be in [0, 65535], got " + std::to_string(o.port));
  }
  if (o.io_threads < 1 || o.io_threads > 64) {
    return Status::InvalidArgument("io_threads must be in [1, 64], got " + std::to_string(o.io_threads));
  }
  if (o.threads < 1 || o.threads > 1024) {
    return Status::InvalidArgument("threads must be in [1, 1024], got " + std::to_string(o.threads));
  }
  if (impl_->listen_fd >= 0) return Status::FailedPrecondition("HttpServer::Bind() called twice");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port_text = std::to_string(o.port);
  const int gai = ::getaddrinfo(o.host.c_str(), port_text.c_str(), &hints, &res);
  if (gai != 0 || res == nullptr) {
    return Status::IOError("cannot resolve listen address " + o.host + ": " + ::gai_strerror(gai));
  }
  const std::string where = o.host + ":" + port_text;
  int fd = -1;
  std::string why;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR only allows a restart while old connections are in
    // TIME_WAIT; no SO_REUSEPORT, which would let a second server bind the
    // same port and silently take half the connections.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    return Status::IOError("cannot bind " + where + " (" + (why.empty() ? "no usable address" : why) + ")");
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  impl_->port = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                                 : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  impl_->listen_fd = fd;
  for (int i = 0; i < o.io_threads; ++i) {
    auto l = std::make_unique<Impl::Loop>();
    l->epfd = ::epoll_create1(EPOLL_CLOEXEC);
    l->wakefd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->epfd < 0 || l->wakefd < 0) return Status::IOError(std::string("epoll/eventfd: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeTag;
    ::epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev);
    impl_->loops.push_back(std::move(l));
  }
  return impl_->port;
}

Status HttpServer::Serve() {
  Impl& s = *impl_;
  if (s.listen_fd < 0) return Status::FailedPrecondition("HttpServer::Serve() before a successful Bind()");
  if (s.stopping.load()) return Status::OK();
  s.pool.Start(s.options.threads);
  for (auto& l : s.loops) {
    Impl::Loop* loop = l.get();
    l->thread = std::thread([&s, loop] { s.Run(*loop); });
  }
  for (auto& l : s.loops) l->thread.join();
  s.pool.StopAndJoin();
  // Refuse connections from now on rather than leave them in the backlog.
  ::close(s.listen_fd);
  s.listen_fd = -1;
  return Status::OK();
}

void HttpServer::Stop() {
  if (impl_->stopping.exchange(true)) return;
  impl_->WakeAll();
}

}  // namespace neardup
