// The HTTP/JSON API's entry points and THE Status -> HTTP mapping. The rest
// of the layer: routes.cc (matching), handlers.cc (the routes' handlers),
// json_writer.cc (answers), metrics.cc (/metrics). docs/http-api.md is the
// user-facing description of everything here.
#include "http/http_api.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>

#include "http/handlers.h"
#include "http/json_writer.h"

namespace neardup {

using http_internal::Dispatch;
using http_internal::ErrorWithStatus;
using http_internal::PendingChecks;
using http_internal::RenderChecks;

int HttpStatusFor(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return 200;
    case Status::Code::kInvalidArgument: return 400;
    case Status::Code::kNotFound: return 404;
    case Status::Code::kAlreadyExists: return 409;
    case Status::Code::kFailedPrecondition: return 409;
    case Status::Code::kResourceExhausted: return 413;
    case Status::Code::kNotSupported: return 501;
    case Status::Code::kUnavailable: return 503;
    case Status::Code::kStorageFull: return 507;  // RFC 4918 Insufficient Storage
    case Status::Code::kCorruption:
    case Status::Code::kIOError:
    case Status::Code::kInternal: return 500;
    case Status::Code::kUnauthenticated: return 401;
    case Status::Code::kPermissionDenied: return 403;
  }
  return 500;
}

std::string_view ErrorCodeFor(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return "ok";
    case Status::Code::kInvalidArgument: return "invalid_argument";
    case Status::Code::kNotFound: return "not_found";
    case Status::Code::kAlreadyExists: return "already_exists";
    case Status::Code::kFailedPrecondition: return "failed_precondition";
    case Status::Code::kCorruption: return "corruption";
    case Status::Code::kIOError: return "io_error";
    case Status::Code::kNotSupported: return "not_supported";
    case Status::Code::kResourceExhausted: return "resource_exhausted";
    case Status::Code::kUnavailable: return "unavailable";
    case Status::Code::kStorageFull: return "storage_full";
    case Status::Code::kInternal: return "internal";
    case Status::Code::kUnauthenticated: return "unauthenticated";
    case Status::Code::kPermissionDenied: return "permission_denied";
  }
  return "internal";
}

HttpResponse ErrorResponse(const Status& status) {
  const Status s = status.ok() ? Status::Internal("error response for an OK status") : status;
  HttpResponse r = ErrorWithStatus(HttpStatusFor(s.code()), ErrorCodeFor(s.code()), s.message());
  // Both clear by themselves (a restart, a store back, space freed on disk):
  // worth retrying, after a pause.
  if (s.code() == Status::Code::kUnavailable || s.code() == Status::Code::kStorageFull) {
    r.headers.emplace_back("Retry-After", "1");
  }
  // RFC 6750: a 401 names the scheme the client must use.
  if (s.code() == Status::Code::kUnauthenticated) r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"neardup\"");
  return r;
}

namespace {

HttpResponse ExceptionResponse(std::exception_ptr ep) {
  try {
    std::rethrow_exception(ep);
  } catch (const std::bad_alloc&) {
    return ErrorResponse(Status::ResourceExhausted("out of memory while answering the request"));
  } catch (const std::exception& e) {
    return ErrorResponse(Status::Internal(std::string("internal error: ") + e.what()));
  } catch (...) {
    return ErrorResponse(Status::Internal("internal error: unknown exception"));
  }
}

}  // namespace

void HandleRequestAsync(Engine& engine, const HttpRequest& request, const HttpApiOptions& options,
                        Responder respond, Poster post) {
  std::string route = "unmatched";
  std::optional<PendingChecks> pending;
  HttpResponse r;
  try {
    r = Dispatch(engine, request, options, &route, &pending);
  } catch (...) {
    r = ExceptionResponse(std::current_exception());
    pending.reset();
  }
  if (!pending) {
    r.route = std::move(route);
    respond(std::move(r));
    return;
  }
  // The engine reads the documents only during the call; the rendering
  // needs them afterwards, so they live in shared state.
  auto p = std::make_shared<PendingChecks>(std::move(*pending));
  auto finish = [p, route, respond](Status s, std::vector<Result<CheckOutcome>> outcomes) {
    HttpResponse out;
    try {
      out = RenderChecks(*p, s, outcomes);
    } catch (...) {
      out = ExceptionResponse(std::current_exception());
    }
    out.route = route;
    respond(std::move(out));
  };
  if (!post) post = [](std::function<void()> fn) { fn(); };
  auto done = [finish = std::move(finish), post = std::move(post)](Status s,
                                                                   std::vector<Result<CheckOutcome>> outcomes) mutable {
    post([finish = std::move(finish), s = std::move(s), outcomes = std::move(outcomes)]() mutable {
      finish(std::move(s), std::move(outcomes));
    });
  };
  if (p->valid.empty()) {  // nothing for the engine (a batch of invalid or no documents)
    done(Status::OK(), {});
    return;
  }
  try {
    engine.CheckBatchAsync(p->ns, std::span<const DocumentInput>(p->valid), p->mode, std::move(done));
  } catch (...) {
    // The engine threw before it could complete (done was not called).
    HttpResponse e = ExceptionResponse(std::current_exception());
    e.route = route;
    respond(std::move(e));
  }
}

HttpResponse HandleRequest(Engine& engine, const HttpRequest& request, const HttpApiOptions& options) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<HttpResponse> answer;
  HandleRequestAsync(engine, request, options, [&](HttpResponse r) {
    std::lock_guard lk(mu);
    answer = std::move(r);
    cv.notify_one();
  });
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return answer.has_value(); });
  return std::move(*answer);
}

}  // namespace neardup
