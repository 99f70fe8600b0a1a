// Engine-independent pieces of the service contract: settings, names, ids.
#include "neardup/engine.h"

#include <nlohmann/json.hpp>

namespace neardup {

Status NamespaceSettings::Validate() const {
  if (k < 0 || k > 8) return Status::InvalidArgument("k must be an integer in [0, 8], got " + std::to_string(k));
  if (tokenizer != "mixed" && tokenizer != "icu-words") {
    return Status::InvalidArgument("tokenizer must be \"mixed\" or \"icu-words\", got \"" + tokenizer + "\"");
  }
  if (cjk_ngram < 1 || cjk_ngram > 4) return Status::InvalidArgument("cjk_ngram must be in [1, 4]");
  if (retention_seconds < 0) return Status::InvalidArgument("retention_seconds must be >= 0 (0 keeps forever)");
  if (max_matches < 1 || max_matches > 1000) return Status::InvalidArgument("max_matches must be in [1, 1000]");
  return Status::OK();
}

Result<NamespaceSettings> NamespaceSettings::FromJson(std::string_view text, const NamespaceSettings& base) {
  const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("settings are not valid JSON");
  if (!j.is_object()) return Status::InvalidArgument("settings must be a JSON object");
  NamespaceSettings s = base;
  for (const auto& [key, value] : j.items()) {
    auto need_int = [&](const char* name) -> Status {
      if (!value.is_number_integer()) return Status::InvalidArgument(std::string("field \"") + name + "\" must be an integer");
      return Status::OK();
    };
    if (key == "k") {
      NEARDUP_RETURN_IF_ERROR(need_int("k"));
      const auto v = value.get<int64_t>();
      if (v < 0 || v > 8) return Status::InvalidArgument("k must be an integer in [0, 8], got " + std::to_string(v));
      s.k = static_cast<int>(v);
    } else if (key == "tokenizer") {
      if (!value.is_string()) return Status::InvalidArgument("field \"tokenizer\" must be a string");
      s.tokenizer = value.get<std::string>();
    } else if (key == "cjk_ngram") {
      NEARDUP_RETURN_IF_ERROR(need_int("cjk_ngram"));
      const auto v = value.get<int64_t>();
      if (v < 1 || v > 4) return Status::InvalidArgument("cjk_ngram must be in [1, 4]");
      s.cjk_ngram = static_cast<int>(v);
    } else if (key == "retention_seconds") {
      NEARDUP_RETURN_IF_ERROR(need_int("retention_seconds"));
      s.retention_seconds = value.get<int64_t>();
    } else if (key == "max_matches") {
      NEARDUP_RETURN_IF_ERROR(need_int("max_matches"));
      const auto v = value.get<int64_t>();
      if (v < 1 || v > 1000) return Status::InvalidArgument("max_matches must be in [1, 1000]");
      s.max_matches = static_cast<int>(v);
    } else {
      return Status::InvalidArgument("unknown settings field \"" + key + "\"");
    }
  }
  NEARDUP_RETURN_IF_ERROR(s.Validate());
  return s;
}

std::string NamespaceSettings::ToJson() const {
  nlohmann::json j = {{"k", k},
                      {"tokenizer", tokenizer},
                      {"cjk_ngram", cjk_ngram},
                      {"retention_seconds", retention_seconds},
                      {"max_matches", max_matches}};
  return j.dump();
}

Status ValidateNamespaceName(std::string_view name) {
  if (name.empty() || name.size() > 64) return Status::InvalidArgument("namespace name must be 1..64 characters");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return Status::InvalidArgument("namespace name may contain only [A-Za-z0-9_.-]");
  }
  return Status::OK();
}

Status ValidateDocumentId(std::string_view id) {
  if (id.empty() || id.size() > 512) return Status::InvalidArgument("document id must be 1..512 bytes");
  // Valid UTF-8: ids are echoed in JSON answers.
  for (size_t i = 0; i < id.size();) {
    const auto c = static_cast<unsigned char>(id[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > id.size()) return Status::InvalidArgument("document id is not valid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t j = 1; j < n; ++j) {
      const auto cc = static_cast<unsigned char>(id[i + j]);
      if ((cc >> 6) != 2) return Status::InvalidArgument("document id is not valid UTF-8");
      cp = (cp << 6) | (cc & 0x3f);
    }
    const bool overlong = (n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return Status::InvalidArgument("document id is not valid UTF-8");
    }
    i += n;
  }
  return Status::OK();
}

}  // namespace neardup
