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

// Arrays and objects nested deeper than this are refused: parsing and
// destroying a value recurse once per level, and 75,000 levels of "[" (a
// 150 KB request) overflowed the server's stack (a tester, 2026-12-02).
inline constexpr int kMaxJsonDepth = 512;

// Why `text` is refused before parsing, or "" when it is not: nesting past
// kMaxJsonDepth, or a NUL byte, which JSON text never holds raw and at which
// nlohmann's lexer ends the text, so that what followed it was ignored
// (`{"id":"a"}\0junk` was read as the object).
inline std::string JsonTextProblem(std::string_view text) {
  if (const size_t nul = text.find('\0'); nul != text.npos) return "a NUL byte at offset " + std::to_string(nul);
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      i += c == '\\';  // the escaped character cannot end the string
      in_string = c != '"';
    } else if (c == '"') {
      in_string = true;
    } else if ((c == '[' || c == '{') && ++depth > kMaxJsonDepth) {
      return "arrays or objects nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return "";
}

// Parses `text` without exceptions (a syntax error, or a JsonTextProblem,
// gives a discarded value, as nlohmann's own parse does). If some object
// repeats a key, the first repeated key is written to *duplicate (left
// empty otherwise).
inline nlohmann::json ParseJsonRejectingDuplicates(std::string_view text, std::string* duplicate) {
  using json = nlohmann::json;
  duplicate->clear();
  if (!JsonTextProblem(text).empty()) return json(json::value_t::discarded);
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
