// Setting descriptors: each tunable setting is described once (its JSON path,
// its flag, type, range, doc and where it lives in its struct), and the JSON
// codec, the validation, the command-line flags, the serve config file and
// --help are generated from the tables of descriptors.
//
// Where the tables live, and why:
//  * This header (dedup layer) holds the descriptor type and the table of
//    RecheckOptions, because the batch program `neardup` has the re-check
//    flags and links no engine code. It has no JSON or CLI11 dependency:
//    the JSON codec is in the engine layer, the CLI11 glue in tools/.
//  * neardup/engine/settings.h holds NamespaceSettings and its table: the
//    namespace-level fields (k, tokenizer, cjk_ngram, retention, max_matches)
//    plus this re-check table embedded under "recheck.".
//
// Thread-safety: the tables are immutable after their first use.
#ifndef NEARDUP_DEDUP_SETTING_H_
#define NEARDUP_DEDUP_SETTING_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "neardup/dedup/pair_rule.h"
#include "neardup/util/status.h"

namespace neardup {

enum class SettingType {
  kBool,
  kInt,
  kDouble,
  kChoice,    // a string out of `choices`
  kDuration,  // integer seconds; as a flag also "90m", "48h", "7d"
};

// kBool: bool; kInt, kDuration: int64_t; kDouble: double; kChoice: string.
using SettingValue = std::variant<bool, int64_t, double, std::string>;

// What a setting is, apart from where it is stored.
struct SettingSpec {
  std::string json;  // path in the JSON object ("k", "recheck.min_similarity"); "" = not in JSON
  std::string flag;  // command-line flag without "--" ("short-threshold")
  SettingType type = SettingType::kInt;
  double min = 0;  // kInt, kDouble, kDuration: the inclusive range
  double max = 0;
  std::vector<std::string> choices;  // kChoice
  std::string doc;                   // --help text
  // A re-check field whose JSON key sits at the top of the namespace object
  // ("threshold") rather than under "recheck.".
  bool top_level = false;

  // The name errors use: the JSON path, else the flag.
  const std::string& name() const { return json.empty() ? flag : json; }
};

template <typename S>
struct Setting : SettingSpec {
  std::function<SettingValue(const S&)> get;
  std::function<void(S&, const SettingValue&)> set;  // the value has the type's alternative
};

// kInvalidArgument naming the setting unless `v` has the setting's type and
// lies in its range.
Status CheckSettingValue(const SettingSpec& spec, const SettingValue& v);

// A flag's text as a value of the setting's type ("true"/"false" for kBool;
// seconds or a number with suffix s/m/h/d for kDuration), range-checked.
Result<SettingValue> ParseSettingText(const SettingSpec& spec, std::string_view text);

// The value as a flag would spell it (the --help default).
std::string SettingValueText(const SettingValue& v);

// "172800", "172800s", "2880m", "48h", "2d" -> seconds (>= 0).
Result<int64_t> ParseDuration(std::string_view s);

// Every setting of `table` checked against its range.
template <typename S>
Status ValidateSettings(std::span<const Setting<S>> table, const S& s) {
  for (const Setting<S>& d : table) NEARDUP_RETURN_IF_ERROR(CheckSettingValue(d, d.get(s)));
  return Status::OK();
}

// A descriptor of the member `member` of S (bool, int, int64_t, double or
// std::string, matching spec.type).
template <typename S, typename T>
Setting<S> FieldSetting(SettingSpec spec, T S::*member) {
  Setting<S> d;
  static_cast<SettingSpec&>(d) = std::move(spec);
  d.get = [member](const S& s) -> SettingValue {
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, double> || std::is_same_v<T, std::string>) {
      return s.*member;
    } else {
      return static_cast<int64_t>(s.*member);
    }
  };
  d.set = [member](S& s, const SettingValue& v) {
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, double> || std::is_same_v<T, std::string>) {
      s.*member = std::get<T>(v);
    } else {
      s.*member = static_cast<T>(std::get<int64_t>(v));  // in range: checked before
    }
  };
  return d;
}

// `inner`, moved into the struct Outer's member `member`, its JSON path
// prefixed with `json_prefix` ("recheck.").
template <typename Outer, typename Inner>
Setting<Outer> NestedSetting(const Setting<Inner>& inner, Inner Outer::*member, const std::string& json_prefix) {
  Setting<Outer> d;
  static_cast<SettingSpec&>(d) = inner;
  d.json = json_prefix + inner.json;
  d.get = [get = inner.get, member](const Outer& o) { return get(o.*member); };
  d.set = [set = inner.set, member](Outer& o, const SettingValue& v) { set(o.*member, v); };
  return d;
}

// The re-check policy: every field of RecheckOptions. Each has a flag of the
// batch program; all but sketch_max_chars (fixed at NearDupSet::Create, so
// not a per-namespace setting) have a JSON key.
std::span<const Setting<RecheckOptions>> RecheckSettingTable();

}  // namespace neardup

#endif  // NEARDUP_DEDUP_SETTING_H_
