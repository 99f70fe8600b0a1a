// The JSON of the API's answers: nlohmann trees for the rare routes, and a
// tree-free writer for the check answers, the hot path (one per document).
// Internal to the HTTP layer.
#ifndef NEARDUP_HTTP_JSON_WRITER_H_
#define NEARDUP_HTTP_JSON_WRITER_H_

#include <charconv>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>

#include "http/http_api.h"

namespace neardup::http_internal {

// Keys in insertion order: the documented order of every answer.
using json = nlohmann::ordered_json;

std::string Dump(const json& j);
HttpResponse JsonResponse(int status, const json& j);
HttpResponse ErrorWithStatus(int http_status, std::string_view code, const std::string& message);

// The answers to check-type requests are written straight into the body
// (no JSON tree): they are the hot path, one per document checked. The output
// is the JSON that nlohmann would produce for the same object (keys in this
// order); http_api_test compares them.
void AppendJsonString(std::string* out, std::string_view v);

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

void AppendError(std::string* out, const Status& s);
void AppendOutcome(std::string* out, std::string_view id, const CheckOutcome& o);
json SettingsJson(const NamespaceSettings& s);
json NamespaceJson(const NamespaceStats& st);

}  // namespace neardup::http_internal

#endif  // NEARDUP_HTTP_JSON_WRITER_H_
