#include "http/routes.h"

#include <algorithm>

#include "http/http_api.h"

namespace neardup::http_internal {

const char* RouteTemplate(Route r) {
  switch (r) {
    case Route::kHealthz: return "/healthz";
    case Route::kMetrics: return "/metrics";
    case Route::kNamespaces: return "/v1/namespaces";
    case Route::kNamespace: return "/v1/namespaces/{ns}";
    case Route::kCheck: return "/v1/namespaces/{ns}/check";
    case Route::kQuery: return "/v1/namespaces/{ns}/query";
    case Route::kInsert: return "/v1/namespaces/{ns}/insert";
    case Route::kBatch: return "/v1/namespaces/{ns}/batch";
    case Route::kDocument: return "/v1/namespaces/{ns}/documents/{id}";
    case Route::kNone: break;
  }
  return "unmatched";
}

const char* AllowedMethods(Route r) {
  switch (r) {
    case Route::kHealthz:
    case Route::kMetrics:
    case Route::kNamespaces: return "GET, HEAD, OPTIONS";
    case Route::kNamespace: return "GET, HEAD, PUT, DELETE, OPTIONS";
    case Route::kCheck:
    case Route::kQuery:
    case Route::kInsert:
    case Route::kBatch: return "POST, OPTIONS";
    case Route::kDocument: return "GET, HEAD, DELETE, OPTIONS";
    case Route::kNone: break;
  }
  return "";
}

bool MethodAllowed(Route r, std::string_view method) {
  const std::string_view allowed = AllowedMethods(r);
  // Exact token match in the comma-separated list.
  size_t pos = 0;
  for (int guard = 0; guard < 16 && pos < allowed.size(); ++guard) {
    size_t end = allowed.find(',', pos);
    if (end == std::string_view::npos) end = allowed.size();
    if (allowed.substr(pos, end - pos) == method) return true;
    pos = end + 2;  // ", "
  }
  return false;
}

RouteMatch MatchRoute(std::string_view path) {
  RouteMatch m;
  if (path == "/healthz") return {Route::kHealthz, {}, {}};
  if (path == "/metrics") return {Route::kMetrics, {}, {}};
  constexpr std::string_view kPrefix = "/v1/namespaces";
  if (!path.starts_with(kPrefix)) return m;
  std::string_view rest = path.substr(kPrefix.size());
  if (rest.empty()) return {Route::kNamespaces, {}, {}};
  if (rest.front() != '/') return m;
  rest.remove_prefix(1);
  // At most 3 more segments: {ns}[/action | /documents/{id}].
  std::string_view seg[3];
  int n = 0;
  for (; n < 3 && !rest.empty(); ++n) {
    const size_t slash = rest.find('/');
    seg[n] = rest.substr(0, slash);
    if (seg[n].empty()) return m;  // "//"
    if (slash == std::string_view::npos) {
      rest = {};
    } else {
      rest.remove_prefix(slash + 1);
      if (rest.empty()) return m;  // trailing slash
    }
  }
  if (!rest.empty() || n == 0) return m;  // too many segments or "/v1/namespaces/"
  m.ns = seg[0];
  if (n == 1) {
    m.route = Route::kNamespace;
  } else if (n == 2) {
    if (seg[1] == "check") m.route = Route::kCheck;
    else if (seg[1] == "query") m.route = Route::kQuery;
    else if (seg[1] == "insert") m.route = Route::kInsert;
    else if (seg[1] == "batch") m.route = Route::kBatch;
  } else if (seg[1] == "documents") {
    m.route = Route::kDocument;
    m.id = seg[2];
  }
  return m;
}

void SplitTarget(std::string_view target, std::string* path,
                 std::vector<std::pair<std::string, std::string>>* query) {
  const size_t q = target.find('?');
  *path = std::string(target.substr(0, q));
  if (q == std::string_view::npos) return;
  std::string_view rest = target.substr(q + 1);
  if (const size_t hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  // Bounded: each iteration consumes at least one character.
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    std::string_view item = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    auto decode = [](std::string_view s) {
      std::string plus(s);
      std::replace(plus.begin(), plus.end(), '+', ' ');
      auto d = PercentDecode(plus);
      return d.ok() ? std::move(d).value() : plus;  // a bad escape stays as written
    };
    query->emplace_back(decode(item.substr(0, eq)),
                        eq == std::string_view::npos ? std::string() : decode(item.substr(eq + 1)));
  }
}

}  // namespace neardup::http_internal

namespace neardup {

using http_internal::MatchRoute;
using http_internal::Route;
using http_internal::RouteTemplate;
using http_internal::SplitTarget;

HttpRequest HttpRequest::FromTarget(std::string method, std::string_view target, std::string body) {
  HttpRequest r;
  r.method = std::move(method);
  SplitTarget(target, &r.path, &r.query);
  r.body = std::move(body);
  return r;
}

bool IsCheckRoute(std::string_view path) {
  const size_t q = path.find('?');
  const Route r = MatchRoute(path.substr(0, q)).route;
  return r == Route::kCheck || r == Route::kQuery || r == Route::kInsert || r == Route::kBatch;
}

std::string RouteFor(std::string_view path) {
  const size_t q = path.find('?');
  return RouteTemplate(MatchRoute(path.substr(0, q)).route);
}

Result<std::string> PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    const int hi = i + 2 < s.size() ? hex(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? hex(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      return Status::InvalidArgument("invalid percent-encoding in the path (\"%\" must be followed by two hex digits)");
    }
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace neardup
