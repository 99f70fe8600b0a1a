// HttpServer: see http_server.h.
#include "http_server.h"

#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <utility>

namespace neardup {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The message of an error httplib answered by itself (no handler ran).
std::string TransportErrorMessage(int status, size_t max_body_bytes) {
  switch (status) {
    case 400: return "malformed HTTP request";
    case 404: return "no route for this request";
    case 413: return "request body is over the limit of " + std::to_string(max_body_bytes) + " bytes";
    case 414: return "request target is too long";
    case 415: return "unsupported Content-Encoding";
    default: return "HTTP error " + std::to_string(status);
  }
}

std::string_view TransportErrorCode(int status) {
  switch (status) {
    case 404: return "not_found";
    case 413: return "resource_exhausted";
    case 500: return "internal";
    default: return "invalid_argument";
  }
}

void ApplyResponse(const HttpResponse& out, httplib::Response& res) {
  res.status = out.status;
  for (const auto& [k, v] : out.headers) res.set_header(k, v);
  if (!out.content_type.empty()) res.set_content(out.body, out.content_type.c_str());
}

}  // namespace

HttpServer::HttpServer(Engine& engine, HttpServerOptions options) : engine_(engine), options_(std::move(options)) {
  options_.api.metrics = &metrics_;
  Install();
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Install() {
  const size_t threads = options_.threads > 0 ? static_cast<size_t>(options_.threads) : 1;
  server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_.set_keep_alive_max_count(options_.keep_alive_max_count > 0 ? options_.keep_alive_max_count : 1);
  server_.set_keep_alive_timeout(options_.keep_alive_timeout_seconds > 0 ? options_.keep_alive_timeout_seconds : 1);
  server_.set_read_timeout(options_.read_timeout_seconds > 0 ? options_.read_timeout_seconds : 1, 0);
  server_.set_write_timeout(options_.write_timeout_seconds > 0 ? options_.write_timeout_seconds : 1, 0);
  // Small JSON answers on kept-alive connections: without TCP_NODELAY,
  // Nagle + delayed ACK can add ~40 ms to a request.
  server_.set_tcp_nodelay(true);
  // httplib's default sets SO_REUSEPORT, which lets a second server bind the
  // same port and silently take half the connections. SO_REUSEADDR only
  // allows a restart while old connections are in TIME_WAIT.
  server_.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const size_t max_body = options_.api.max_body_bytes;
  if (max_body != 0) server_.set_payload_max_length(max_body);

  // Requests without a body (GET, HEAD, OPTIONS).
  auto no_body = [this](const httplib::Request& req, httplib::Response& res) { Answer(req, res, std::string()); };
  // Requests with a body: read it here, stopping at the limit (httplib's own
  // limit only covers bodies with a Content-Length, not chunked ones).
  auto with_body = [this, max_body](const httplib::Request& req, httplib::Response& res,
                                    const httplib::ContentReader& reader) {
    const auto start = Clock::now();
    std::string body;
    bool too_large = false;
    // No Content-Length and no Transfer-Encoding: the request has no body
    // (RFC 9112 6.3); httplib would otherwise read until the peer closes.
    if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
      Answer(req, res, std::move(body));
      return;
    }
    const bool read_ok = reader([&](const char* data, size_t n) {
      if (max_body != 0 && body.size() + n > max_body) {
        too_large = true;
        return false;
      }
      body.append(data, n);
      return true;
    });
    if (too_large || res.status == 413) {
      const HttpResponse out = ErrorResponse(
          Status::ResourceExhausted("request body is over the limit of " + std::to_string(max_body) + " bytes"));
      ApplyResponse(out, res);
      // The rest of a chunked body is still unread: the connection is done.
      res.set_header("Connection", "close");
      metrics_.Record(RouteFor(req.target), req.method, out.status, SecondsSince(start));
      return;
    }
    if (!read_ok) {
      const HttpResponse out = ErrorResponse(Status::InvalidArgument("could not read the request body"));
      ApplyResponse(out, res);
      res.set_header("Connection", "close");
      metrics_.Record(RouteFor(req.target), req.method, out.status, SecondsSince(start));
      return;
    }
    Answer(req, res, std::move(body));
  };
  server_.Get(".*", no_body);
  server_.Options(".*", no_body);
  server_.Post(".*", with_body);
  server_.Put(".*", with_body);
  server_.Patch(".*", with_body);
  server_.Delete(".*", with_body);

  // `Expect: 100-continue` (curl sends it for bodies over 1 KiB): refuse an
  // oversized body before the client sends it.
  // (httplib 0.11.4 answers with res.status, not the returned code: set both.)
  server_.set_expect_100_continue_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    if (max_body != 0 && req.has_header("Content-Length") &&
        req.get_header_value<uint64_t>("Content-Length") > max_body) {
      res.status = 413;
      res.set_header("Connection", "close");  // the client must not send the body on this connection
      return 413;
    }
    return 100;
  });

  // Errors httplib answers itself (bad request line, URI too long, body over
  // the limit before any handler ran) get the same JSON error body. Answers
  // from HandleRequest already have a body and are left alone.
  server_.set_error_handler(httplib::Server::HandlerWithResponse([this, max_body](const httplib::Request& req,
                                                                                 httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string message = TransportErrorMessage(res.status, max_body);
    {
      std::string body = "{\"error\":{\"code\":\"";
      body += TransportErrorCode(res.status);
      body += "\",\"message\":\"";
      body += message;  // fixed ASCII text, nothing to escape
      body += "\"}}\n";
      res.set_content(body, "application/json");
    }
    metrics_.Record(RouteFor(req.target), req.method.empty() ? "other" : req.method, res.status, 0.0);
    return httplib::Server::HandlerResponse::Handled;
  }));
  server_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    ApplyResponse(ErrorResponse(Status::Internal("internal error: " + what)), res);
  });
}

void HttpServer::Answer(const httplib::Request& req, httplib::Response& res, std::string body) {
  const auto start = Clock::now();
  metrics_.AddInFlight(1);
  const HttpRequest request = HttpRequest::FromTarget(req.method, req.target, std::move(body));
  const HttpResponse out = HandleRequest(engine_, request, options_.api);
  ApplyResponse(out, res);
  metrics_.AddInFlight(-1);
  metrics_.Record(out.route, req.method, out.status, SecondsSince(start));
}

Result<int> HttpServer::Bind() {
  if (options_.host.empty()) return Status::InvalidArgument("empty listen address");
  if (options_.port < 0 || options_.port > 65535) {
    return Status::InvalidArgument("port must be in [0, 65535], got " + std::to_string(options_.port));
  }
  if (options_.port == 0) {
    const int port = server_.bind_to_any_port(options_.host);
    if (port <= 0) return Status::IOError("cannot bind " + options_.host + " (any port)");
    port_ = port;
  } else {
    if (!server_.bind_to_port(options_.host, options_.port)) {
      return Status::IOError("cannot bind " + options_.host + ":" + std::to_string(options_.port) +
                             " (address in use, not local, or not permitted)");
    }
    port_ = options_.port;
  }
  return port_;
}

Status HttpServer::Serve() {
  if (port_ < 0) return Status::FailedPrecondition("HttpServer::Serve() before a successful Bind()");
  serving_ = true;
  // Stop() may come before listen_after_bind() marks the server running (then
  // httplib's stop() does nothing); this watcher repeats it once it runs.
  std::atomic<bool> done{false};
  std::thread watcher([this, &done] {
    while (!done.load()) {
      if (stop_requested_.load() && server_.is_running()) {
        server_.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  bool ok = true;
  if (!stop_requested_.load()) ok = server_.listen_after_bind();
  done = true;
  watcher.join();
  serving_ = false;
  if (!ok && !stop_requested_.load()) return Status::IOError("the HTTP server stopped accepting connections");
  return Status::OK();
}

void HttpServer::Stop() {
  stop_requested_ = true;
  server_.stop();
}

}  // namespace neardup
