// HttpServer: cpp-httplib wiring of the HTTP API (src/http_api.h).
//
// The server moves bytes only: every request goes to HandleRequest(); the
// server adds the body size limit (413 while reading, also for chunked
// bodies), JSON bodies for the errors httplib makes itself (400, 414, ...),
// request metrics (HttpMetrics, shown by GET /metrics) and a graceful stop.
//
// httplib's model: one worker thread per connection for its whole keep-alive
// life (`threads` workers; further connections wait in an unbounded queue),
// listen backlog 5 (a compile-time constant of Debian's libcpp-httplib).
//
// Debian's libcpp-httplib is a compiled library built with OpenSSL, zlib and
// brotli support; those macros change the classes' layout, so every
// translation unit must see the same definitions. Include this header, never
// <httplib.h> directly (link with -lcpp-httplib).
//
// Thread-safety: Serve() runs in one thread; Stop() may be called from any
// thread (not from a signal handler).
#ifndef NEARDUP_HTTP_SERVER_H_
#define NEARDUP_HTTP_SERVER_H_

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "http_api.h"
#include "neardup/engine.h"
#include "neardup/status.h"

namespace neardup {

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // address to bind; only this one
  int port = 8080;                 // 0: the kernel picks a free port (see Bind())
  int threads = 8;                 // worker threads = concurrent connections served
  int keep_alive_max_count = 1000;      // requests per connection before it is closed
  int keep_alive_timeout_seconds = 5;   // idle time before a kept-alive connection is closed
  int read_timeout_seconds = 10;        // per read of a request
  int write_timeout_seconds = 10;       // per write of an answer
  HttpApiOptions api;                   // batch and body limits, default namespace settings
};

class HttpServer {
 public:
  HttpServer(Engine& engine, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (port 0: any free port). Returns the bound port;
  // kInvalidArgument for bad options, kIOError if the address cannot be bound.
  Result<int> Bind();
  // Serves on the bound socket until Stop(). Returns after the requests in
  // flight (and connections already accepted) were answered.
  Status Serve();
  // Stops accepting connections; Serve() returns once the workers are done.
  // Idempotent; may come before Serve() started (Serve() then returns at once).
  void Stop();

  int port() const { return port_; }
  const HttpMetrics& metrics() const { return metrics_; }

 private:
  void Answer(const httplib::Request& req, httplib::Response& res, std::string body);
  void Install();

  Engine& engine_;
  HttpServerOptions options_;
  HttpMetrics metrics_;
  httplib::Server server_;
  int port_ = -1;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> serving_{false};
};

}  // namespace neardup

#endif  // NEARDUP_HTTP_SERVER_H_
