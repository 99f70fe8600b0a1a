// The API's routes: matching a path to a route, the methods each answers,
// and splitting a request target. Internal to the HTTP layer.
#ifndef NEARDUP_HTTP_ROUTES_H_
#define NEARDUP_HTTP_ROUTES_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace neardup::http_internal {

enum class Route {
  kNone,
  kHealthz,
  kMetrics,
  kNamespaces,  // /v1/namespaces
  kNamespace,   // /v1/namespaces/{ns}
  kCheck,       // /v1/namespaces/{ns}/check
  kQuery,
  kInsert,
  kBatch,
  kDocument,  // /v1/namespaces/{ns}/documents/{id}
};

struct RouteMatch {
  Route route = Route::kNone;
  std::string_view ns;  // raw (percent-encoded) segments
  std::string_view id;
};

// The template of a route ("/v1/namespaces/{ns}"), a bounded metrics label.
const char* RouteTemplate(Route r);
// Methods a route answers (HEAD goes with GET; OPTIONS everywhere).
const char* AllowedMethods(Route r);
bool MethodAllowed(Route r, std::string_view method);
RouteMatch MatchRoute(std::string_view path);
// Splits "path?query" and decodes the query ('+' is a space there).
void SplitTarget(std::string_view target, std::string* path,
                 std::vector<std::pair<std::string, std::string>>* query);

}  // namespace neardup::http_internal

#endif  // NEARDUP_HTTP_ROUTES_H_
