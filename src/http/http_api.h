// The HTTP/JSON API of `neardup serve`, independent of any transport.
//
// HandleRequest() turns one HTTP request (method, raw path, query, body) into
// one response by calling an Engine. All routing, JSON parsing and
// validation, answer building and THE mapping from Status::Code to an HTTP
// status (HttpStatusFor) live here; src/http_server.* only moves bytes
// between sockets and this function, and the fuzzer and most tests drive it
// directly. docs/http-api.md documents every route.
//
// HttpMetrics is the service's request accounting (counters and latency
// histograms per route), rendered by GET /metrics together with the engine's
// and the process's figures in the Prometheus text format.
//
// Thread-safety: HandleRequest may be called concurrently (the Engine is
// thread-safe); HttpMetrics is thread-safe.
#ifndef NEARDUP_HTTP_API_H_
#define NEARDUP_HTTP_API_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "neardup/engine/engine.h"
#include "neardup/util/status.h"

namespace neardup {

struct HttpRequest {
  std::string method;  // "GET", "POST", ... (HEAD is answered like GET)
  // The path as sent, still percent-encoded ("/v1/namespaces/a/documents/x%2Fy").
  // It may carry a "?query" suffix, which is parsed into `query` as well.
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;  // decoded
  std::string body;
  std::string authorization;  // the Authorization header's value, "" if none

  // Splits a request target ("/path?a=b&c") into path and decoded query.
  static HttpRequest FromTarget(std::string method, std::string_view target, std::string body);
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers, e.g. Allow
  // The route template that answered ("/v1/namespaces/{ns}/check"), or
  // "unmatched"; a bounded label for metrics.
  std::string route;
};

class HttpMetrics;
class ApiKeys;

struct HttpApiOptions {
  // Settings of namespaces created by PUT (fields not given in the body).
  NamespaceSettings default_settings;
  // Most documents in one batch request; more is 413.
  size_t max_batch_documents = 1000;
  // Largest request body; more is 413. The server enforces it while reading
  // the body; HandleRequest checks it again (0 = no limit).
  size_t max_body_bytes = size_t{1} << 20;
  // Rendered by GET /metrics; without it /metrics shows only the engine's
  // and the process's figures.
  const HttpMetrics* metrics = nullptr;
  // Without keys every request is served (the service trusts its network).
  // With keys, every route but GET /healthz needs "Authorization: Bearer"
  // with a key whose role and scope cover the request (http/auth.h): else
  // 401 (no or unknown key) or 403 (the key lacks the right), before the
  // request is looked at further.
  std::shared_ptr<const ApiKeys> api_keys;
};

// The one place a Status code becomes an HTTP status.
int HttpStatusFor(Status::Code code);
// The "code" string of an error body: "invalid_argument", "not_found", ...
std::string_view ErrorCodeFor(Status::Code code);

// {"error": {"code": ..., "message": ...}} with HttpStatusFor(status.code()).
HttpResponse ErrorResponse(const Status& status);

// Answers one request, blocking until the answer is ready. Never throws.
HttpResponse HandleRequest(Engine& engine, const HttpRequest& request, const HttpApiOptions& options = {});

// The same answer, delivered to respond() exactly once. Check-type routes
// (IsCheckRoute) go through Engine::CheckBatchAsync: respond may then run
// later, from the engine's completion. With `post`, that completion only
// hands the rendering and respond() to post(fn) (the server's event loop),
// so the engine's commit thread never formats JSON; without it they run on
// the completing thread. Every other route answers before this returns.
// `request` is read only during the call. Never throws.
using Responder = std::function<void(HttpResponse)>;
using Poster = std::function<void(std::function<void()>)>;
void HandleRequestAsync(Engine& engine, const HttpRequest& request, const HttpApiOptions& options,
                        Responder respond, Poster post = {});

// True for the check-type routes (check, query, insert, batch): the ones
// HandleRequestAsync answers through Engine::CheckBatchAsync.
bool IsCheckRoute(std::string_view path);

// The route template a path belongs to (for metrics of responses made
// outside HandleRequest, e.g. a 413 while reading the body).
std::string RouteFor(std::string_view path);

// Decodes %XX escapes ('+' stays '+'); kInvalidArgument on a bad escape.
Result<std::string> PercentDecode(std::string_view s);

// Counters and latency histograms of the HTTP layer.
class HttpMetrics {
 public:
  // Histogram bucket upper bounds, seconds.
  static constexpr std::array<double, 14> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                      0.1,    0.25,  0.5,    1.0,   2.5,   5.0,  10.0};

  void Record(const std::string& route, const std::string& method, int status, double seconds);
  void AddInFlight(int delta) { in_flight_.fetch_add(delta, std::memory_order_relaxed); }
  // Prometheus text of these metrics only.
  std::string Render() const;
  uint64_t TotalRequests() const;

 private:
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> buckets{};  // non-cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  // Looked up by string_views without building a key (transparent).
  struct KeyLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return View(a) < View(b);
    }
    template <typename T>
    static std::tuple<std::string_view, std::string_view, int> View(const T& t) {
      return {std::get<0>(t), std::get<1>(t), std::get<2>(t)};
    }
  };
  std::map<std::tuple<std::string, std::string, int>, uint64_t, KeyLess> requests_;  // route, method, status
  std::map<std::string, Histogram, std::less<>> latency_;                                // by route
  std::atomic<int64_t> in_flight_{0};
};

// Resident set size of this process (VmRSS of /proc/self/status), 0 if unknown.
uint64_t ProcessRssBytes();

}  // namespace neardup

#endif  // NEARDUP_HTTP_API_H_
