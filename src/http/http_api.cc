// The HTTP/JSON API: routing, validation, answers, the Status -> HTTP mapping.
// docs/http-api.md is the user-facing description of everything here.
#include "http/http_api.h"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <exception>
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <tuple>

#include "neardup/text/fingerprint.h"
#include "util/utf8.h"

namespace neardup {
namespace {

using json = nlohmann::ordered_json;

// Largest accepted timestamp: 9999-12-31T23:59:59.999Z in ms.
constexpr int64_t kMaxTimestampMs = 253402300799999;
// /metrics lists per-namespace figures for at most this many namespaces.
constexpr size_t kMaxNamespacesInMetrics = 1000;

std::string Dump(const json& j) {
  // replace: never throw on invalid UTF-8 (every string we echo was validated,
  // but an answer must not become an exception).
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

HttpResponse JsonResponse(int status, const json& j) {
  HttpResponse r;
  r.status = status;
  r.body = Dump(j);
  r.body += '\n';
  return r;
}

HttpResponse ErrorWithStatus(int http_status, std::string_view code, const std::string& message) {
  json j = {{"error", {{"code", code}, {"message", message}}}};
  return JsonResponse(http_status, j);
}


// ---- body parsing ------------------------------------------------------------

// Collects the first parse error of nlohmann's SAX parser (for a message that
// says where and why the body is not JSON).
struct ErrorCollector {
  std::string message;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return true; }
  bool key(json::string_t&) { return true; }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    message = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, ..." -> "parse error at line 1, ..."
    if (const auto p = message.find("] "); p != std::string::npos && message.starts_with("[json.")) {
      message.erase(0, p + 2);
    }
    return false;
  }
};

Result<json> ParseBody(std::string_view body) {
  if (body.empty()) return Status::InvalidArgument("request body is empty; expected a JSON object");
  if (!IsValidUtf8(body)) {
    return Status::InvalidArgument("request body is not valid UTF-8 (JSON text must be UTF-8)");
  }
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    ErrorCollector collector;
    (void)json::sax_parse(body.begin(), body.end(), &collector);
    if (collector.message.empty()) collector.message = "syntax error";
    return Status::InvalidArgument("request body is not valid JSON: " + collector.message);
  }
  if (!j.is_object()) return Status::InvalidArgument("request body must be a JSON object");
  return j;
}

std::string IntegerToString(const json& v) {
  return v.is_number_unsigned() ? std::to_string(v.get<uint64_t>()) : std::to_string(v.get<int64_t>());
}

// One document of a check/query/insert request or of a batch.
Result<DocumentInput> ParseDocument(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("a document must be a JSON object");
  DocumentInput doc;
  bool has_id = false, has_text = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "id") {
      if (value.is_string()) {
        doc.id = value.get<std::string>();
      } else if (value.is_number_integer()) {
        doc.id = IntegerToString(value);
      } else {
        return Status::InvalidArgument("field \"id\" must be a string or an integer");
      }
      NEARDUP_RETURN_IF_ERROR(ValidateDocumentId(doc.id));
      has_id = true;
    } else if (key == "text") {
      if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
        return Status::InvalidArgument("field \"text\" must be a non-empty string");
      }
      doc.text = value.get<std::string>();
      has_text = true;
    } else if (key == "timestamp") {
      if (value.is_null()) continue;
      const bool in_range = (value.is_number_unsigned() && value.get<uint64_t>() <= kMaxTimestampMs) ||
                            (value.is_number_integer() && !value.is_number_unsigned() &&
                             value.get<int64_t>() >= 0 && value.get<int64_t>() <= kMaxTimestampMs);
      if (!in_range) {
        return Status::InvalidArgument(
            "field \"timestamp\" must be an integer number of milliseconds since the Unix epoch in [0, " +
            std::to_string(kMaxTimestampMs) + "]");
      }
      doc.timestamp_ms = value.is_number_unsigned() ? static_cast<int64_t>(value.get<uint64_t>())
                                                    : value.get<int64_t>();
    } else {
      return Status::InvalidArgument("unknown field \"" + key +
                                     "\" (a document has \"id\", \"text\" and optionally \"timestamp\")");
    }
  }
  if (!has_id) return Status::InvalidArgument("missing field \"id\"");
  if (!has_text) return Status::InvalidArgument("field \"text\" must be a non-empty string");
  return doc;
}

// ---- answers -----------------------------------------------------------------

// The answers to check-type requests are written straight into the body
// (no JSON tree): they are the hot path, one per document checked. The output
// is the JSON that nlohmann would produce for the same object (keys in this
// order); http_api_test compares them.
void AppendJsonString(std::string* out, std::string_view v) {
  out->push_back('"');
  for (const char ch : v) {
    const auto u = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", u);
          out->append(buf);
        } else {
          out->push_back(ch);  // ids and texts were validated as UTF-8 on the way in
        }
    }
  }
  out->push_back('"');
}

template <typename T>
void AppendNumber(std::string* out, T v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
  if constexpr (std::is_floating_point_v<T>) {
    // JSON readers keep 1.0 a float only with its point (nlohmann writes it so).
    if (std::string_view(buf, r.ptr - buf).find_first_of(".eEn") == std::string_view::npos) out->append(".0");
  }
}

// Writes one JSON object's members in order. Typed names, not overloads: a
// string literal would otherwise bind to bool.
class ObjectWriter {
 public:
  explicit ObjectWriter(std::string* out) : out_(out) { out_->push_back('{'); }
  ObjectWriter& Str(std::string_view key, std::string_view v) {
    AppendJsonString(Key(key), v);
    return *this;
  }
  ObjectWriter& Bool(std::string_view key, bool v) {
    Key(key)->append(v ? "true" : "false");
    return *this;
  }
  template <typename T>
  ObjectWriter& Num(std::string_view key, T v) {
    AppendNumber(Key(key), v);
    return *this;
  }
  // The caller appends the member's value (an array or object) itself.
  std::string* Key(std::string_view key) {
    if (!first_) out_->push_back(',');
    first_ = false;
    AppendJsonString(out_, key);
    out_->push_back(':');
    return out_;
  }
  void Close() { out_->push_back('}'); }

 private:
  std::string* out_;
  bool first_ = true;
};

void AppendError(std::string* out, const Status& s) {
  ObjectWriter(out).Str("code", ErrorCodeFor(s.code())).Str("message", s.message()).Close();
}

void AppendOutcome(std::string* out, std::string_view id, const CheckOutcome& o) {
  ObjectWriter w(out);
  w.Str("id", id).Bool("duplicate", o.duplicate).Bool("stored", o.stored).Bool("replay", o.replay);
  w.Key("matches")->push_back('[');
  for (size_t i = 0; i < o.matches.size(); ++i) {
    const MatchedDocument& m = o.matches[i];
    if (i) out->push_back(',');
    ObjectWriter(out)
        .Str("id", m.id)
        .Num("distance", m.distance)
        .Num("similarity", m.similarity)
        .Bool("exact", m.exact)
        .Num("timestamp", m.timestamp_ms)
        .Close();
  }
  out->push_back(']');
  w.Str("fingerprint", FingerprintToHex(o.fingerprint)).Bool("has_features", o.has_features).Close();
}

// One serialization of the settings: the one the store keeps.
json SettingsJson(const NamespaceSettings& s) { return json::parse(s.ToJson()); }

json NamespaceJson(const NamespaceStats& st) {
  return {{"name", st.name},
          {"settings", SettingsJson(st.settings)},
          {"stats",
           {{"documents", st.documents},
            {"memory_bytes", st.memory_bytes},
            {"checks", st.checks},
            {"duplicates", st.duplicates},
            {"inserted", st.inserted},
            {"expired", st.expired},
            {"deleted", st.deleted}}}};
}

// ---- routing -----------------------------------------------------------------

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

// Methods a route answers (HEAD goes with GET; OPTIONS everywhere).
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

// Splits "path?query" and decodes the query ('+' is a space there).
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

// ---- handlers ----------------------------------------------------------------

struct Context {
  Engine& engine;
  const HttpApiOptions& options;
  const HttpRequest& request;
  std::string_view method;  // HEAD -> GET
  std::vector<std::pair<std::string, std::string>> query;
};

HttpResponse FromStatus(const Status& s) { return ErrorResponse(s); }

Status NoQuery(const Context& c) {
  if (!c.query.empty()) {
    return Status::InvalidArgument("unknown query parameter \"" + c.query.front().first + "\"");
  }
  return Status::OK();
}

HttpResponse HandleMetrics(const Context& c) {
  std::string out;
  out.reserve(4096);
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
  const EngineMetrics em = c.engine.Metrics();
  gauge("neardup_namespaces", "Namespaces.", "gauge", em.namespaces);
  gauge("neardup_documents", "Stored, unexpired documents over all namespaces.", "gauge", em.documents);
  gauge("neardup_engine_memory_bytes", "Memory of the in-memory indexes and per-document state.", "gauge",
        em.memory_bytes);
  gauge("neardup_process_resident_memory_bytes", "Resident set size of the process (VmRSS).", "gauge",
        ProcessRssBytes());
  gauge("neardup_store_disk_bytes", "Approximate bytes of the document store on disk.", "gauge", em.disk_bytes);
  gauge("neardup_store_commits_total", "Durable write batches (group commits) of the document store.", "counter",
        em.store_commits);
  gauge("neardup_store_commit_documents_total", "Documents written by the group commits.", "counter",
        em.store_commit_docs);

  // Per-namespace figures (names are [A-Za-z0-9_.-]: no label escaping needed).
  std::vector<std::string> names = c.engine.ListNamespaces();
  std::sort(names.begin(), names.end());
  if (names.size() > kMaxNamespacesInMetrics) names.resize(kMaxNamespacesInMetrics);
  std::vector<NamespaceStats> stats;
  stats.reserve(names.size());
  for (const std::string& name : names) {
    auto st = c.engine.GetNamespace(name);
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
  if (c.options.metrics != nullptr) out += c.options.metrics->Render();

  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = std::move(out);
  return r;
}

// The decoded, validated {ns} of a route.
Result<std::string> DecodeNamespace(std::string_view raw) {
  auto ns = PercentDecode(raw);
  if (!ns.ok()) return ns.status();
  NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(ns.value()));
  return ns;
}

HttpResponse HandleNamespace(const Context& c, const std::string& ns) {
  if (c.method == "GET") {
    auto st = c.engine.GetNamespace(ns);
    if (!st.ok()) return FromStatus(st.status());
    return JsonResponse(200, NamespaceJson(st.value()));
  }
  if (c.method == "DELETE") {
    const Status s = c.engine.DeleteNamespace(ns);
    if (!s.ok()) return FromStatus(s);
    return JsonResponse(200, {{"deleted", true}, {"name", ns}});
  }
  // PUT: the body's fields over the current settings (or the defaults).
  const std::string& body = c.request.body;
  const bool blank = body.find_first_not_of(" \t\r\n") == std::string::npos;
  if (!blank) {
    auto parsed = ParseBody(body);
    if (!parsed.ok()) return FromStatus(parsed.status());
  }
  NamespaceSettings base = c.options.default_settings;
  {
    auto current = c.engine.GetNamespace(ns);
    if (current.ok()) {
      base = current->settings;
    } else if (current.status().code() != Status::Code::kNotFound) {
      return FromStatus(current.status());
    }
  }
  auto settings = NamespaceSettings::FromJson(blank ? std::string_view("{}") : std::string_view(body), base);
  if (!settings.ok()) return FromStatus(settings.status());
  bool created = false;
  const Status s = c.engine.PutNamespace(ns, settings.value(), &created);
  if (!s.ok()) return FromStatus(s);
  json answer;
  auto st = c.engine.GetNamespace(ns);
  if (st.ok()) {
    answer = NamespaceJson(st.value());
  } else {
    answer = {{"name", ns}, {"settings", SettingsJson(settings.value())}};
  }
  HttpResponse r = JsonResponse(created ? 201 : 200, answer);
  if (created) r.headers.emplace_back("Location", "/v1/namespaces/" + ns);
  return r;
}

// A check-type request (check, query, insert, batch) parsed and waiting for
// the engine. Its answer is rendered by RenderChecks once the engine is done.
struct PendingChecks {
  std::string ns;
  CheckMode mode = CheckMode::kCheckAndInsert;
  bool single = false;              // /check, /query, /insert: one answer object
  size_t n = 0;                     // documents in the request
  std::vector<Status> errors;       // per request position; set for invalid ones
  std::vector<DocumentInput> valid; // in order
  std::vector<size_t> valid_index;  // request position of valid[v]
};

// Parses one document (single routes); an invalid one is answered at once.
std::optional<HttpResponse> PrepareCheck(const Context& c, const std::string& ns, CheckMode mode,
                                         PendingChecks* p) {
  auto parsed = ParseBody(c.request.body);
  if (!parsed.ok()) return FromStatus(parsed.status());
  auto doc = ParseDocument(parsed.value());
  if (!doc.ok()) return FromStatus(doc.status());
  p->ns = ns;
  p->mode = mode;
  p->single = true;
  p->n = 1;
  p->errors.assign(1, Status::OK());
  p->valid.push_back(std::move(doc).value());
  p->valid_index.push_back(0);
  return std::nullopt;
}

std::optional<HttpResponse> PrepareBatch(const Context& c, const std::string& ns, PendingChecks* p) {
  CheckMode mode = CheckMode::kCheckAndInsert;
  for (const auto& [key, value] : c.query) {
    if (key != "mode") return FromStatus(Status::InvalidArgument("unknown query parameter \"" + key + "\""));
    if (value == "check") mode = CheckMode::kCheckAndInsert;
    else if (value == "query") mode = CheckMode::kQueryOnly;
    else if (value == "insert") mode = CheckMode::kInsertAlways;
    else return FromStatus(Status::InvalidArgument("mode must be \"check\", \"query\" or \"insert\""));
  }
  auto parsed = ParseBody(c.request.body);
  if (!parsed.ok()) return FromStatus(parsed.status());
  const json& body = parsed.value();
  const json* documents = nullptr;
  for (const auto& [key, value] : body.items()) {
    if (key != "documents") {
      return FromStatus(Status::InvalidArgument("unknown field \"" + key + "\" (a batch has \"documents\")"));
    }
    documents = &value;
  }
  if (documents == nullptr || !documents->is_array()) {
    return FromStatus(Status::InvalidArgument("field \"documents\" must be an array of documents"));
  }
  if (documents->size() > c.options.max_batch_documents) {
    return FromStatus(Status::ResourceExhausted("batch has " + std::to_string(documents->size()) +
                                                " documents; at most " +
                                                std::to_string(c.options.max_batch_documents) +
                                                " are allowed per request"));
  }
  // Valid documents go to the engine in order; invalid ones answer an error
  // in their place.
  p->ns = ns;
  p->mode = mode;
  p->n = documents->size();
  p->errors.assign(p->n, Status::OK());
  p->valid.reserve(p->n);
  p->valid_index.reserve(p->n);
  for (size_t i = 0; i < p->n; ++i) {
    auto d = ParseDocument((*documents)[i]);
    if (d.ok()) {
      p->valid.push_back(std::move(d).value());
      p->valid_index.push_back(i);
    } else {
      p->errors[i] = d.status();
    }
  }
  return std::nullopt;
}

HttpResponse RenderChecks(const PendingChecks& p, const Status& s, const std::vector<Result<CheckOutcome>>& outcomes) {
  if (!s.ok()) return FromStatus(s);
  if (outcomes.size() != p.valid.size()) {
    return FromStatus(Status::Internal("the engine answered " + std::to_string(outcomes.size()) + " of " +
                                       std::to_string(p.valid.size()) + " documents"));
  }
  if (p.single) {
    if (!outcomes[0].ok()) return FromStatus(outcomes[0].status());
    HttpResponse r;
    r.body.reserve(256);
    AppendOutcome(&r.body, p.valid[0].id, outcomes[0].value());
    r.body.push_back('\n');
    return r;
  }
  HttpResponse r;
  r.body.reserve(64 + 256 * p.n);
  r.body.append("{\"results\":[");
  size_t v = 0;  // p.valid[v] is the next valid document
  for (size_t i = 0; i < p.n; ++i) {
    if (i) r.body.push_back(',');
    if (!p.errors[i].ok()) {
      ObjectWriter w(&r.body);
      AppendError(w.Key("error"), p.errors[i]);
      w.Close();
      continue;
    }
    if (v >= p.valid.size() || p.valid_index[v] != i) return FromStatus(Status::Internal("batch answers out of order"));
    if (outcomes[v].ok()) {
      AppendOutcome(&r.body, p.valid[v].id, outcomes[v].value());
    } else {
      ObjectWriter w(&r.body);
      w.Str("id", p.valid[v].id);
      AppendError(w.Key("error"), outcomes[v].status());
      w.Close();
    }
    ++v;
  }
  r.body.append("]}\n");
  return r;
}

HttpResponse HandleDocument(const Context& c, const std::string& ns, std::string_view raw_id) {
  auto id = PercentDecode(raw_id);
  if (!id.ok()) return FromStatus(id.status());
  if (const Status s = ValidateDocumentId(id.value()); !s.ok()) return FromStatus(s);
  if (c.method == "GET") {
    auto info = c.engine.GetDocument(ns, id.value());
    if (!info.ok()) return FromStatus(info.status());
    return JsonResponse(200, {{"id", info->id},
                              {"fingerprint", FingerprintToHex(info->fingerprint)},
                              {"has_features", info->has_features},
                              {"timestamp", info->timestamp_ms}});
  }
  const Status s = c.engine.DeleteDocument(ns, id.value());
  if (!s.ok()) return FromStatus(s);
  return JsonResponse(200, {{"deleted", true}, {"id", id.value()}});
}

// Answers the request, except a valid check-type request: that one fills
// *pending for the engine and the returned response is unused.
HttpResponse Dispatch(Engine& engine, const HttpRequest& request, const HttpApiOptions& options,
                      std::string* route_name, std::optional<PendingChecks>* pending) {
  std::string path;
  std::vector<std::pair<std::string, std::string>> query = request.query;
  SplitTarget(request.path, &path, &query);

  const RouteMatch m = MatchRoute(path);
  *route_name = RouteTemplate(m.route);
  if (m.route == Route::kNone) {
    std::string shown = path.substr(0, 200);
    return ErrorWithStatus(404, "not_found", "no route for " + request.method.substr(0, 16) + " " + shown);
  }
  const std::string_view method = request.method == "HEAD" ? std::string_view("GET") : request.method;
  if (method == "OPTIONS") {
    HttpResponse r;
    r.status = 204;
    r.content_type.clear();
    r.headers.emplace_back("Allow", AllowedMethods(m.route));
    return r;
  }
  if (!MethodAllowed(m.route, method)) {
    HttpResponse r = ErrorWithStatus(405, "method_not_allowed",
                                     "method " + request.method.substr(0, 16) + " is not allowed on " +
                                         RouteTemplate(m.route) + "; allowed: " + AllowedMethods(m.route));
    r.headers.emplace_back("Allow", AllowedMethods(m.route));
    return r;
  }
  if (options.max_body_bytes != 0 && request.body.size() > options.max_body_bytes) {
    return FromStatus(Status::ResourceExhausted("request body has " + std::to_string(request.body.size()) +
                                                " bytes; the limit is " + std::to_string(options.max_body_bytes)));
  }
  Context c{engine, options, request, method, std::move(query)};
  switch (m.route) {
    case Route::kHealthz: return JsonResponse(200, {{"status", "ok"}});
    case Route::kMetrics: return HandleMetrics(c);
    case Route::kNamespaces: {
      if (const Status s = NoQuery(c); !s.ok()) return FromStatus(s);
      std::vector<std::string> names = engine.ListNamespaces();
      std::sort(names.begin(), names.end());
      return JsonResponse(200, {{"namespaces", names}});
    }
    default: break;
  }
  auto ns = DecodeNamespace(m.ns);
  if (!ns.ok()) return FromStatus(ns.status());
  if (m.route != Route::kBatch) {
    if (const Status s = NoQuery(c); !s.ok()) return FromStatus(s);
  }
  switch (m.route) {
    case Route::kNamespace: return HandleNamespace(c, ns.value());
    case Route::kCheck:
    case Route::kQuery:
    case Route::kInsert:
    case Route::kBatch: {
      PendingChecks p;
      const CheckMode mode = m.route == Route::kQuery    ? CheckMode::kQueryOnly
                             : m.route == Route::kInsert ? CheckMode::kInsertAlways
                                                         : CheckMode::kCheckAndInsert;
      std::optional<HttpResponse> early =
          m.route == Route::kBatch ? PrepareBatch(c, ns.value(), &p) : PrepareCheck(c, ns.value(), mode, &p);
      if (early) return std::move(*early);
      pending->emplace(std::move(p));
      return HttpResponse{};
    }
    case Route::kDocument: return HandleDocument(c, ns.value(), m.id);
    default: break;
  }
  return FromStatus(Status::Internal("unhandled route"));
}

}  // namespace

// ---- public functions --------------------------------------------------------

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
    case Status::Code::kCorruption:
    case Status::Code::kIOError:
    case Status::Code::kInternal: return 500;
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
    case Status::Code::kInternal: return "internal";
  }
  return "internal";
}

HttpResponse ErrorResponse(const Status& status) {
  const Status s = status.ok() ? Status::Internal("error response for an OK status") : status;
  HttpResponse r = ErrorWithStatus(HttpStatusFor(s.code()), ErrorCodeFor(s.code()), s.message());
  if (s.code() == Status::Code::kUnavailable) r.headers.emplace_back("Retry-After", "1");
  return r;
}

HttpRequest HttpRequest::FromTarget(std::string method, std::string_view target, std::string body) {
  HttpRequest r;
  r.method = std::move(method);
  SplitTarget(target, &r.path, &r.query);
  r.body = std::move(body);
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
