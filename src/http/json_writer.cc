#include "http/json_writer.h"

#include <cstdio>

#include "neardup/text/fingerprint.h"

namespace neardup::http_internal {

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
        .Bool("similarity_exact", m.similarity_exact)
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

}  // namespace neardup::http_internal
