// The figures GET /metrics renders besides HttpMetrics: the engine's, each
// namespace's and the process's. Internal to the HTTP layer.
#ifndef NEARDUP_HTTP_METRICS_H_
#define NEARDUP_HTTP_METRICS_H_

#include <string>

#include "http/http_api.h"

namespace neardup::http_internal {

// The Prometheus text of the engine, its namespaces (the first 1000 by
// name), the process and `http` (if given).
std::string RenderServiceMetrics(Engine& engine, const HttpMetrics* http);

}  // namespace neardup::http_internal

#endif  // NEARDUP_HTTP_METRICS_H_
