#include "neardup/engine/settings.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "engine/strict_json.h"
#include "neardup/index/hamming_index.h"

namespace neardup {
namespace {

using json = nlohmann::json;
using NS = NamespaceSettings;

// Compile-time guard: a field added to the structs stops this from compiling
// until the tables (and this count) are updated.
[[maybe_unused]] void FieldCountGuard(const NS& s, const RecheckOptions& r) {
  [[maybe_unused]] const auto& [k, tokenizer, cjk_ngram, retention, max_matches, recheck] = s;
  [[maybe_unused]] const auto& [enabled, threshold, shingle_size, short_max, short_k, anchors, postings, sketch] = r;
}

std::vector<Setting<NS>> BuildTable() {
  using T = SettingType;
  std::vector<Setting<NS>> t = {
      FieldSetting<NS>({"k", "k", T::kInt, 0, kMaxSupportedK, {},
                        "k (largest Hamming distance of a near-duplicate) of namespaces created without it"},
                       &NS::k),
      FieldSetting<NS>({"tokenizer", "tokenizer", T::kChoice, 0, 0, {"mixed", "icu-words"},
                        "Tokenizer of new namespaces: 'mixed' or 'icu-words'"},
                       &NS::tokenizer),
      FieldSetting<NS>({"cjk_ngram", "cjk-ngram", T::kInt, 1, 4, {}, "CJK n-gram length of new namespaces"},
                       &NS::cjk_ngram),
      // 2^40 s (~35,000 years) keeps retention in milliseconds far from overflow.
      FieldSetting<NS>({"retention_seconds", "retention", T::kDuration, 0, static_cast<double>(int64_t{1} << 40), {},
                        "Retention of new namespaces: seconds, or with suffix s/m/h/d (48h, 7d); 0 keeps forever"},
                       &NS::retention_seconds),
      FieldSetting<NS>({"max_matches", "max-matches", T::kInt, 1, 1000, {},
                        "Matches listed per answer in new namespaces"},
                       &NS::max_matches),
  };
  for (const Setting<RecheckOptions>& r : RecheckSettingTable()) {
    if (!r.json.empty()) t.push_back(NestedSetting(r, &NS::recheck, r.top_level ? "" : "recheck."));
  }
  return t;
}

const Setting<NS>* FindByPath(const std::string& path) {
  for (const Setting<NS>& d : NamespaceSettingTable()) {
    if (d.json == path) return &d;
  }
  return nullptr;
}

bool IsObjectPath(const std::string& path) {
  for (const Setting<NS>& d : NamespaceSettingTable()) {
    if (d.json.starts_with(path + ".")) return true;
  }
  return false;
}

Result<SettingValue> ValueFromJson(const SettingSpec& spec, const json& v) {
  auto wrong = [&](const char* what) {
    return Status::InvalidArgument("field \"" + spec.name() + "\" must be " + what);
  };
  SettingValue out;
  switch (spec.type) {
    case SettingType::kBool:
      if (!v.is_boolean()) return wrong("true or false");
      out = v.get<bool>();
      break;
    case SettingType::kInt:
    case SettingType::kDuration:
      if (!v.is_number_integer()) return wrong("an integer");
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return Status::InvalidArgument("field \"" + spec.name() + "\" is out of range");
      }
      out = v.get<int64_t>();
      break;
    case SettingType::kDouble:
      if (!v.is_number()) return wrong("a number");
      out = v.get<double>();
      break;
    case SettingType::kChoice:
      if (!v.is_string()) return wrong("a string");
      out = v.get<std::string>();
      break;
  }
  NEARDUP_RETURN_IF_ERROR(CheckSettingValue(spec, out));
  return out;
}

// The members of `j` (the object at `prefix`) over *s.
Status ParseObject(const json& j, const std::string& prefix, NS* s) {
  for (const auto& item : j.items()) {
    const std::string path = prefix + item.key();
    if (const Setting<NS>* d = FindByPath(path)) {
      auto v = ValueFromJson(*d, item.value());
      if (!v.ok()) return v.status();
      d->set(*s, v.value());
    } else if (IsObjectPath(path)) {
      if (!item.value().is_object()) return Status::InvalidArgument("field \"" + path + "\" must be a JSON object");
      NEARDUP_RETURN_IF_ERROR(ParseObject(item.value(), path + ".", s));
    } else {
      return Status::InvalidArgument("unknown settings field \"" + path + "\"");
    }
  }
  return Status::OK();
}

json ToJsonValue(const SettingValue& v) {
  return std::visit([](const auto& x) { return json(x); }, v);
}

}  // namespace

std::span<const Setting<NS>> NamespaceSettingTable() {
  static const std::vector<Setting<NS>> table = BuildTable();
  return table;
}

Status CheckDecisionSettingsUnchanged(const std::string& ns, const NS& from, const NS& to) {
  std::string changed;
  for (const Setting<NS>& d : NamespaceSettingTable()) {
    // Retention only moves the expiry horizon and max_matches only the
    // length of answers: neither changes a decision on a stored document.
    if (d.json == "retention_seconds" || d.json == "max_matches") continue;
    if (d.get(from) != d.get(to)) changed += (changed.empty() ? "" : ", ") + d.json;
  }
  if (changed.empty()) return Status::OK();
  return Status::FailedPrecondition("namespace \"" + ns + "\" holds documents: changing " + changed +
                                    " would decide new documents against stored ones under another rule "
                                    "(only retention_seconds and max_matches may change; delete the namespace "
                                    "to start over)");
}

std::string DefaultsFlagName(const SettingSpec& spec) { return "default-" + spec.flag; }

Result<SettingValue> SettingValueFromJson(const SettingSpec& spec, std::string_view json_value) {
  const json j = json::parse(json_value.begin(), json_value.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(spec.name() + ": not a JSON value");
  return ValueFromJson(spec, j);
}

Result<NS> NS::FromJson(std::string_view text, const NS& base) {
  std::string duplicate;
  const json j = ParseJsonRejectingDuplicates(text, &duplicate);
  if (j.is_discarded()) {
    const std::string problem = JsonTextProblem(text);
    return Status::InvalidArgument("settings are not valid JSON" + (problem.empty() ? "" : ": " + problem));
  }
  if (!duplicate.empty()) return Status::InvalidArgument("settings repeat the key \"" + duplicate + "\" in one object");
  if (!j.is_object()) return Status::InvalidArgument("settings must be a JSON object");
  NS s = base;
  NEARDUP_RETURN_IF_ERROR(ParseObject(j, "", &s));
  NEARDUP_RETURN_IF_ERROR(s.Validate());
  return s;
}

std::string NS::ToJson() const {
  json j = json::object();
  for (const Setting<NS>& d : NamespaceSettingTable()) {
    std::string pointer = "/" + d.json;
    for (char& c : pointer) c = c == '.' ? '/' : c;
    j[json::json_pointer(pointer)] = ToJsonValue(d.get(*this));
  }
  return j.dump();
}

Status NS::Validate() const {
  NEARDUP_RETURN_IF_ERROR(ValidateSettings(NamespaceSettingTable(), *this));
  // The fields the table leaves out (sketch_max_chars).
  return ValidateSettings(RecheckSettingTable(), recheck);
}

}  // namespace neardup
