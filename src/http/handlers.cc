#include "http/handlers.h"

#include <algorithm>
#include <cinttypes>
#include <span>

#include "engine/strict_json.h"
#include "http/auth.h"
#include "http/json_writer.h"
#include "http/metrics.h"
#include "http/routes.h"
#include "neardup/text/fingerprint.h"
#include "util/utf8.h"

namespace neardup::http_internal {
namespace {

// Largest accepted timestamp: 9999-12-31T23:59:59.999Z in ms.
constexpr int64_t kMaxTimestampMs = 253402300799999;

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
  if (const std::string problem = JsonTextProblem(body); !problem.empty()) {
    return Status::InvalidArgument("request body is not valid JSON: " + problem);
  }
  std::string duplicate;
  json j = ParseJsonRejectingDuplicates(body, &duplicate);
  if (j.is_discarded()) {
    ErrorCollector collector;
    (void)json::sax_parse(body.begin(), body.end(), &collector);
    if (collector.message.empty()) collector.message = "syntax error";
    return Status::InvalidArgument("request body is not valid JSON: " + collector.message);
  }
  if (!duplicate.empty()) {
    return Status::InvalidArgument("request body repeats the key \"" + duplicate + "\" in one object");
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
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = RenderServiceMetrics(c.engine, c.options.metrics);
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
  // PUT: the body's fields over the current settings (or the defaults), in
  // one engine call so that concurrent PUTs of different fields both land.
  const std::string& body = c.request.body;
  const bool blank = body.find_first_not_of(" \t\r\n") == std::string::npos;
  if (!blank) {
    auto parsed = ParseBody(body);
    if (!parsed.ok()) return FromStatus(parsed.status());
  }
  bool created = false;
  const Status s = c.engine.UpdateNamespace(ns, blank ? "{}" : body, c.options.default_settings, &created);
  if (!s.ok()) return FromStatus(s);
  json answer;
  auto st = c.engine.GetNamespace(ns);
  if (st.ok()) {
    answer = NamespaceJson(st.value());
  } else {
    answer = {{"name", ns}};
  }
  HttpResponse r = JsonResponse(created ? 201 : 200, answer);
  if (created) r.headers.emplace_back("Location", "/v1/namespaces/" + ns);
  return r;
}

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

}  // namespace

Result<DocumentInput> ParseDocumentLine(std::string_view line) {
  auto j = ParseBody(line);
  if (!j.ok()) {
    // ParseBody speaks of a request body; here it is a line.
    std::string msg = j.status().message();
    if (msg.starts_with("request body")) msg.replace(0, 12, "the line");
    return Status::InvalidArgument(msg);
  }
  return ParseDocument(j.value());
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

namespace {

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

// What a request needs from its API key (docs/service.md "Access control").
// Unknown methods need read: they end as 405 for anyone holding a key.
Access AccessFor(const RouteMatch& m, std::string_view method,
                 const std::vector<std::pair<std::string, std::string>>& query) {
  Access a;
  switch (m.route) {
    case Route::kHealthz: a.open = true; return a;
    case Route::kMetrics:
    case Route::kNamespaces: return a;  // admin of the whole service
    default: break;
  }
  a.global = false;
  auto ns = PercentDecode(m.ns);
  a.ns = ns.ok() ? std::move(ns).value() : std::string(m.ns);
  bool has_mode = false, every_mode_query = true;  // a batch with mode=query only reads
  for (const auto& [key, value] : query) {
    if (key != "mode") continue;
    has_mode = true;
    every_mode_query = every_mode_query && value == "query";
  }
  const bool query_only = has_mode && every_mode_query;
  const bool writes_docs = method == "POST" || method == "DELETE";
  switch (m.route) {
    case Route::kNamespace: a.role = method == "PUT" || method == "DELETE" ? ApiRole::kAdmin : ApiRole::kRead; break;
    case Route::kQuery: a.role = ApiRole::kRead; break;
    case Route::kBatch: a.role = query_only ? ApiRole::kRead : ApiRole::kWrite; break;
    case Route::kCheck:
    case Route::kInsert:
    case Route::kDocument: a.role = writes_docs ? ApiRole::kWrite : ApiRole::kRead; break;
    default: a.role = ApiRole::kAdmin; break;
  }
  return a;
}

}  // namespace

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
  if (options.api_keys != nullptr) {
    // Before anything else about the request is looked at or answered.
    const Status allowed = options.api_keys->Authorize(request.authorization, AccessFor(m, method, query));
    if (!allowed.ok()) return FromStatus(allowed);
  }
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

}  // namespace neardup::http_internal
