// JSON parsing that refuses duplicate object keys. nlohmann (like simdjson)
// silently keeps the last of two equal keys, so {"id":"a","id":"b"} would be
// read as id "b" although a reader of the body may take it for "a"; every
// request body and settings patch goes through here so that such a body is
// refused (400) instead of half-read.
//
// Thread-safety: stateless functions.
#ifndef NEARDUP_ENGINE_STRICT_JSON_H_
#define NEARDUP_ENGINE_STRICT_JSON_H_

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace neardup {

// Parses `text` without exceptions (a syntax error gives a discarded value,
// as nlohmann's own parse does). If some object repeats a key, the first
// repeated key is written to *duplicate (left empty otherwise).
inline nlohmann::json ParseJsonRejectingDuplicates(std::string_view text, std::string* duplicate) {
  using json = nlohmann::json;
  duplicate->clear();
  // The keys seen so far in each object being parsed, innermost last.
  std::vector<std::set<std::string>> open;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: open.emplace_back(); break;
      case json::parse_event_t::object_end: if (!open.empty()) open.pop_back(); break;
      case json::parse_event_t::key:
        if (!open.empty() && !open.back().insert(parsed.get<std::string>()).second && duplicate->empty()) {
          *duplicate = parsed.get<std::string>();
        }
        break;
      default: break;
    }
    return true;  // keep everything: the caller refuses the whole text
  };
  return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
}

}  // namespace neardup

#endif  // NEARDUP_ENGINE_STRICT_JSON_H_
