// A namespace's settings and THE table describing them (setting.h): the JSON
// codec of PUT /v1/namespaces/{ns} and of the stored namespace records, the
// validation, and the serve flags and config keys of the defaults
// ("--default-" + flag) are all generated from NamespaceSettingTable().
//
// The table is the namespace-level fields below plus the dedup layer's
// RecheckSettingTable() under "recheck." (less sketch_max_chars, which the
// service leaves at its default); the re-check part lives in the dedup layer
// because the batch program shares it and links no engine code.
//
// Adding a field: add its descriptor to the table in settings.cc; the
// structured bindings there and in tests/settings_test.cc stop compiling
// until the field count is updated, and the test checks every descriptor.
//
// Thread-safety: plain values; the table is immutable.
#ifndef NEARDUP_ENGINE_SETTINGS_H_
#define NEARDUP_ENGINE_SETTINGS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "neardup/dedup/pair_rule.h"
#include "neardup/dedup/setting.h"
#include "neardup/util/status.h"

namespace neardup {

struct NamespaceSettings {
  int k = 3;                              // 0..8
  std::string tokenizer = "mixed";        // "mixed" | "icu-words"
  int cjk_ngram = 2;                      // 1..4
  int64_t retention_seconds = 48 * 3600;  // 0 keeps documents forever
  int max_matches = 10;                   // matches listed per answer, 1..1000
  // The length-aware re-check policy (pair_rule.h, docs/ACCURACY.md); in
  // JSON an object "recheck".
  RecheckOptions recheck;

  // Parses a JSON object with any subset of the fields (nested "recheck"
  // likewise); unknown fields, wrong types and out-of-range values are
  // kInvalidArgument naming the field. Missing fields keep `base`'s values.
  static Result<NamespaceSettings> FromJson(std::string_view json, const NamespaceSettings& base);
  std::string ToJson() const;
  Status Validate() const;
  friend bool operator==(const NamespaceSettings&, const NamespaceSettings&) = default;
};

std::span<const Setting<NamespaceSettings>> NamespaceSettingTable();

// The change from `from` to `to` of a namespace that holds documents:
// kFailedPrecondition naming the fields if it changes a decision setting,
// i.e. any field but retention_seconds and max_matches. Those others change
// fingerprints or sketches (tokenizer, cjk_ngram, shingle_size) or which
// stored documents count as duplicates (k, threshold, recheck.*), so stored
// documents kept under one rule would be compared under another; both
// engines call this.
Status CheckDecisionSettingsUnchanged(const std::string& ns, const NamespaceSettings& from,
                                      const NamespaceSettings& to);

// The serve flag (and config-file key) of a setting's default for new
// namespaces: "default-" + its flag ("default-k", "default-short-k").
std::string DefaultsFlagName(const SettingSpec& spec);

// One JSON value (its text, e.g. "5" or "\"mixed\"") as a value of the
// setting, type- and range-checked.
Result<SettingValue> SettingValueFromJson(const SettingSpec& spec, std::string_view json_value);

}  // namespace neardup

#endif  // NEARDUP_ENGINE_SETTINGS_H_
