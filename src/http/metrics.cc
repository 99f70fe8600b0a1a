#include "http/metrics.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <vector>

namespace neardup::http_internal {
namespace {

// /metrics lists per-namespace figures for at most this many namespaces.
constexpr size_t kMaxNamespacesInMetrics = 1000;

// The engine's and the process's gauges and counters.
void AppendEngineMetrics(Engine& engine, std::string* text) {
  std::string& out = *text;
  auto gauge = [&](const char* name, const char* help, const char* type, uint64_t v) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
    out += name;
    out += ' ';
    out += std::to_string(v);
    out += '\n';
  };
  const EngineMetrics em = engine.Metrics();
  gauge("neardup_namespaces", "Namespaces.", "gauge", em.namespaces);
  gauge("neardup_documents", "Stored, unexpired documents over all namespaces.", "gauge", em.documents);
  gauge("neardup_engine_memory_bytes", "Memory of the in-memory indexes and per-document state.", "gauge",
        em.memory_bytes);
  gauge("neardup_process_resident_memory_bytes", "Resident set size of the process (VmRSS).", "gauge",
        ProcessRssBytes());
  gauge("neardup_store_disk_bytes", "Approximate bytes of the document store on disk.", "gauge", em.disk_bytes);
  gauge("neardup_sketch_file_bytes", "Bytes of the re-check sketch files (page cache, not resident memory).", "gauge",
        em.sketch_file_bytes);
  gauge("neardup_store_commits_total", "Durable write batches (group commits) of the document store.", "counter",
        em.store_commits);
  gauge("neardup_store_commit_documents_total", "Documents written by the group commits.", "counter",
        em.store_commit_docs);

}

// Per-namespace figures (names are [A-Za-z0-9_.-]: no label escaping needed).
void AppendNamespaceMetrics(Engine& engine, std::string* text) {
  std::string& out = *text;
  std::vector<std::string> names = engine.ListNamespaces();
  std::sort(names.begin(), names.end());
  if (names.size() > kMaxNamespacesInMetrics) names.resize(kMaxNamespacesInMetrics);
  std::vector<NamespaceStats> stats;
  stats.reserve(names.size());
  for (const std::string& name : names) {
    auto st = engine.GetNamespace(name);
    if (st.ok()) stats.push_back(std::move(st).value());
  }
  struct Family {
    const char* name;
    const char* help;
    const char* type;
    uint64_t NamespaceStats::*field;
  };
  static constexpr Family kFamilies[] = {
      {"neardup_namespace_documents", "Stored, unexpired documents of a namespace.", "gauge",
       &NamespaceStats::documents},
      {"neardup_namespace_memory_bytes", "Memory of a namespace's index and per-document state.", "gauge",
       &NamespaceStats::memory_bytes},
      {"neardup_namespace_checks_total", "Check calls answered in a namespace.", "counter",
       &NamespaceStats::checks},
      {"neardup_namespace_duplicates_total", "Answers with duplicate = true in a namespace.", "counter",
       &NamespaceStats::duplicates},
      {"neardup_namespace_inserted_total", "Documents stored in a namespace.", "counter",
       &NamespaceStats::inserted},
      {"neardup_namespace_expired_total", "Documents removed by retention in a namespace.", "counter",
       &NamespaceStats::expired},
      {"neardup_namespace_deleted_total", "Documents removed by DELETE in a namespace.", "counter",
       &NamespaceStats::deleted},
  };
  for (const Family& f : kFamilies) {
    out += std::string("# HELP ") + f.name + ' ' + f.help + "\n# TYPE " + f.name + ' ' + f.type + '\n';
    for (const NamespaceStats& st : stats) {
      out += std::string(f.name) + "{namespace=\"" + st.name + "\"} " + std::to_string(st.*(f.field)) + '\n';
    }
  }
}

}  // namespace

std::string RenderServiceMetrics(Engine& engine, const HttpMetrics* http) {
  std::string out;
  out.reserve(4096);
  AppendEngineMetrics(engine, &out);
  AppendNamespaceMetrics(engine, &out);
  if (http != nullptr) out += http->Render();
  return out;
}

}  // namespace neardup::http_internal

namespace neardup {

// ---- metrics -----------------------------------------------------------------

namespace {

const char* MethodLabel(std::string_view m) {
  static constexpr const char* kKnown[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};
  for (const char* k : kKnown) {
    if (m == k) return k;
  }
  return "other";
}

std::string EscapeLabel(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char ch : v) {
    if (ch == '\\' || ch == '"') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string FormatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

}  // namespace

void HttpMetrics::Record(const std::string& route, const std::string& method, int status, double seconds) {
  size_t b = 0;
  while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
  // Looked up by views, so a request allocates nothing here once its
  // (route, method, status) has been seen: this runs for every request.
  const std::tuple<std::string_view, std::string_view, int> key{route, MethodLabel(method), status};
  std::lock_guard<std::mutex> lock(mu_);
  auto r = requests_.find(key);
  if (r == requests_.end()) r = requests_.emplace(std::tuple<std::string, std::string, int>(key), 0).first;
  ++r->second;
  auto l = latency_.find(std::string_view(route));
  if (l == latency_.end()) l = latency_.emplace(route, Histogram{}).first;
  Histogram& h = l->second;
  if (b < kBuckets.size()) ++h.buckets[b];
  ++h.count;
  h.sum += seconds;
}

uint64_t HttpMetrics::TotalRequests() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  for (const auto& [key, n] : requests_) total += n;
  return total;
}

std::string HttpMetrics::Render() const {
  std::string out;
  out +=
      "# HELP neardup_http_requests_total HTTP requests answered, by route, method and status.\n"
      "# TYPE neardup_http_requests_total counter\n";
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, n] : requests_) {
    const auto& [route, method, status] = key;
    out += "neardup_http_requests_total{route=\"" + EscapeLabel(route) + "\",method=\"" + method +
           "\",status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + '\n';
  }
  out +=
      "# HELP neardup_http_request_duration_seconds Time from the request's arrival (body read) to its answer, "
      "by route.\n"
      "# TYPE neardup_http_request_duration_seconds histogram\n";
  for (const auto& [route, h] : latency_) {
    const std::string label = "route=\"" + EscapeLabel(route) + "\"";
    uint64_t cumulative = 0;
    for (size_t b = 0; b < kBuckets.size(); ++b) {
      cumulative += h.buckets[b];
      out += "neardup_http_request_duration_seconds_bucket{" + label + ",le=\"" + FormatDouble(kBuckets[b]) +
             "\"} " + std::to_string(cumulative) + '\n';
    }
    out += "neardup_http_request_duration_seconds_bucket{" + label + ",le=\"+Inf\"} " + std::to_string(h.count) +
           '\n';
    out += "neardup_http_request_duration_seconds_sum{" + label + "} " + FormatDouble(h.sum) + '\n';
    out += "neardup_http_request_duration_seconds_count{" + label + "} " + std::to_string(h.count) + '\n';
  }
  out +=
      "# HELP neardup_http_requests_in_flight Requests being answered.\n"
      "# TYPE neardup_http_requests_in_flight gauge\n"
      "neardup_http_requests_in_flight " +
      std::to_string(in_flight_.load(std::memory_order_relaxed)) + '\n';
  return out;
}

uint64_t ProcessRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  for (int i = 0; i < 200 && std::getline(in, line); ++i) {
    if (line.rfind("VmRSS:", 0) == 0) {
      uint64_t kb = 0;
      if (std::sscanf(line.c_str() + 6, "%" SCNu64, &kb) == 1) return kb * 1024;
      return 0;
    }
  }
  return 0;
}

}  // namespace neardup
