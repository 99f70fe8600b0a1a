// HttpServer: the event-driven HTTP/1.1 front end of `neardup serve`.
//
// The server moves bytes only: every request goes to HandleRequestAsync()
// (src/http_api.h), which owns routing, JSON and the Status -> HTTP mapping.
// The server adds the body size limit (413 while reading, for chunked bodies
// too), JSON error bodies for the errors it finds itself (400, 408, 413, 414,
// 431, 501, 505), request metrics (HttpMetrics, shown by GET /metrics) and a
// graceful stop.
//
// Why event-driven (docs/service.md, "The front end"): a check-and-insert is
// decided in memory in microseconds and then waits ~1 ms for the group
// commit's fsync. With a thread per connection, every request cost several
// context switches (wake on read, hand the write to the committer, park,
// wake on commit), which were most of the CPU on two cores. Here:
//  * `io_threads` event loops (epoll) read, parse and answer connections;
//  * check-type requests run inline on the loop when the engine's checks
//    never block (Engine::CheckBatchAsyncNeverBlocks): fingerprint, decide,
//    queue the write, and go on with other connections; the commit thread's
//    completion posts the answer back to the loop, one wake-up per group
//    commit rather than per request;
//  * everything that may block (namespace and document routes, or checks of
//    an engine that does I/O, e.g. Redis) runs on `threads` workers.
// A connection has at most one request in progress; pipelined requests wait
// in its buffer and are answered in order.
//
// Thread-safety: Bind() and Serve() from one thread; Stop() from any thread
// (not from a signal handler).
#ifndef NEARDUP_HTTP_SERVER_H_
#define NEARDUP_HTTP_SERVER_H_

#include <memory>
#include <string>

#include "http/http_api.h"
#include "neardup/engine/engine.h"
#include "neardup/util/status.h"

namespace neardup {

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // address to bind; only this one
  int port = 8080;                 // 0: the kernel picks a free port (see Bind())
  int io_threads = 2;              // event loops (1..64)
  int threads = 8;                 // workers for requests that may block (1..1024)
  int keep_alive_max_count = 1000;      // requests per connection before it is closed
  int keep_alive_timeout_seconds = 5;   // idle time before a kept-alive connection is closed
  int read_timeout_seconds = 10;        // a started request must arrive whole within this (408)
  int write_timeout_seconds = 10;       // an answer the client does not read within this: closed
  // At the limit the longest-idle kept-alive connection is closed to make
  // room; if none is idle, the newcomer gets a 503 and is closed.
  int max_connections = 10000;
  HttpApiOptions api;                   // batch and body limits, default namespace settings
};

class HttpServer {
 public:
  HttpServer(Engine& engine, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (port 0: any free port) and listens. Returns the bound
  // port; kInvalidArgument for bad options, kIOError if it cannot be bound.
  Result<int> Bind();
  // Serves on the bound socket until Stop(). Returns after every request in
  // flight was answered (connections are then closed).
  Status Serve();
  // Stops accepting connections and requests; Serve() returns once the
  // requests in flight are answered. Idempotent; may come before Serve()
  // (Serve() then returns at once).
  void Stop();

  int port() const;
  const HttpMetrics& metrics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace neardup

#endif  // NEARDUP_HTTP_SERVER_H_
