// Engine-independent pieces of the service contract: settings, names, ids.
#include "neardup/engine/engine.h"

#include <nlohmann/json.hpp>

#include "util/utf8.h"

namespace neardup {

Status NamespaceSettings::Validate() const {
  if (k < 0 || k > 8) return Status::InvalidArgument("k must be an integer in [0, 8], got " + std::to_string(k));
  if (tokenizer != "mixed" && tokenizer != "icu-words") {
    return Status::InvalidArgument("tokenizer must be \"mixed\" or \"icu-words\", got \"" + tokenizer + "\"");
  }
  if (cjk_ngram < 1 || cjk_ngram > 4) return Status::InvalidArgument("cjk_ngram must be in [1, 4]");
  if (retention_seconds < 0) return Status::InvalidArgument("retention_seconds must be >= 0 (0 keeps forever)");
  if (max_matches < 1 || max_matches > 1000) return Status::InvalidArgument("max_matches must be in [1, 1000]");
  NearDupOptions o;
  o.k = k;
  o.recheck = recheck;
  return NearDupSet::ValidateOptions(o);
}

namespace {

// The "recheck" object of the settings: any subset of RecheckOptions' tunable
// fields, each range-checked by NearDupSet::ValidateOptions afterwards.
Status ParseRecheck(const nlohmann::json& j, RecheckOptions* r) {
  if (!j.is_object()) return Status::InvalidArgument("field \"recheck\" must be a JSON object");
  for (const auto& item : j.items()) {
    // Named references, not a structured binding: clang 14 (the fuzz build)
    // refuses lambdas that capture structured bindings.
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    const std::string field = "recheck." + key;
    auto get_int = [&](int* out) -> Status {
      if (!value.is_number_integer()) return Status::InvalidArgument("field \"" + field + "\" must be an integer");
      const auto v = value.get<int64_t>();
      if (v < 0 || v > (1 << 30)) return Status::InvalidArgument("field \"" + field + "\" is out of range");
      *out = static_cast<int>(v);
      return Status::OK();
    };
    auto get_double = [&](double* out) -> Status {
      if (!value.is_number()) return Status::InvalidArgument("field \"" + field + "\" must be a number");
      *out = value.get<double>();
      return Status::OK();
    };
    if (key == "enabled") {
      if (!value.is_boolean()) return Status::InvalidArgument("field \"recheck.enabled\" must be true or false");
      r->enabled = value.get<bool>();
    } else if (key == "short_max_chars") {
      NEARDUP_RETURN_IF_ERROR(get_int(&r->short_max_chars));
    } else if (key == "short_k") {
      NEARDUP_RETURN_IF_ERROR(get_int(&r->short_k));
    } else if (key == "anchors") {
      NEARDUP_RETURN_IF_ERROR(get_int(&r->anchors));
    } else if (key == "anchor_max_postings") {
      NEARDUP_RETURN_IF_ERROR(get_int(&r->anchor_max_postings));
    } else if (key == "min_similarity") {
      NEARDUP_RETURN_IF_ERROR(get_double(&r->min_similarity));
    } else if (key == "min_similarity_small") {
      NEARDUP_RETURN_IF_ERROR(get_double(&r->min_similarity_small));
    } else if (key == "small_text_shingles") {
      NEARDUP_RETURN_IF_ERROR(get_int(&r->small_text_shingles));
    } else {
      return Status::InvalidArgument("unknown settings field \"" + field + "\"");
    }
  }
  return Status::OK();
}

nlohmann::json RecheckToJson(const RecheckOptions& r) {
  return {{"enabled", r.enabled},
          {"short_max_chars", r.short_max_chars},
          {"short_k", r.short_k},
          {"anchors", r.anchors},
          {"anchor_max_postings", r.anchor_max_postings},
          {"min_similarity", r.min_similarity},
          {"min_similarity_small", r.min_similarity_small},
          {"small_text_shingles", r.small_text_shingles}};
}

}  // namespace

Result<NamespaceSettings> NamespaceSettings::FromJson(std::string_view text, const NamespaceSettings& base) {
  const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("settings are not valid JSON");
  if (!j.is_object()) return Status::InvalidArgument("settings must be a JSON object");
  NamespaceSettings s = base;
  for (const auto& item : j.items()) {
    const std::string& key = item.key();  // not a structured binding: see ParseRecheck
    const nlohmann::json& value = item.value();
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
    } else if (key == "recheck") {
      NEARDUP_RETURN_IF_ERROR(ParseRecheck(value, &s.recheck));
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
                      {"max_matches", max_matches},
                      {"recheck", RecheckToJson(recheck)}};
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
  if (!IsValidUtf8(id)) return Status::InvalidArgument("document id is not valid UTF-8");
  return Status::OK();
}

}  // namespace neardup

namespace neardup {

void Engine::CheckBatchAsync(const std::string& ns, std::span<const DocumentInput> docs, CheckMode mode,
                             CheckDone done) {
  std::vector<Result<CheckOutcome>> out;
  Status s = CheckBatch(ns, docs, mode, &out);
  done(std::move(s), std::move(out));
}

}  // namespace neardup
