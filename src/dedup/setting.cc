#include "neardup/dedup/setting.h"

#include "neardup/text/shingles.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "neardup/index/hamming_index.h"
#include "neardup/text/similarity.h"

namespace neardup {
namespace {

std::string Number(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

const char* TypeWord(SettingType t) {
  switch (t) {
    case SettingType::kBool: return "true or false";
    case SettingType::kInt: return "an integer";
    case SettingType::kDouble: return "a number";
    case SettingType::kChoice: return "a string";
    case SettingType::kDuration: return "an integer (seconds)";
  }
  return "?";
}

bool HasType(const SettingSpec& spec, const SettingValue& v) {
  switch (spec.type) {
    case SettingType::kBool: return std::holds_alternative<bool>(v);
    case SettingType::kInt:
    case SettingType::kDuration: return std::holds_alternative<int64_t>(v);
    case SettingType::kDouble: return std::holds_alternative<double>(v);
    case SettingType::kChoice: return std::holds_alternative<std::string>(v);
  }
  return false;
}

Status CheckChoice(const SettingSpec& spec, const std::string& v) {
  std::string list;
  for (const std::string& c : spec.choices) {
    if (c == v) return Status::OK();
    list += (list.empty() ? "\"" : ", \"") + c + "\"";
  }
  return Status::InvalidArgument(spec.name() + " must be one of " + list + ", got \"" + v + "\"");
}

Status CheckRange(const SettingSpec& spec, double v, const std::string& shown) {
  if (v >= spec.min && v <= spec.max) return Status::OK();  // false for NaN
  return Status::InvalidArgument(spec.name() + " must be in [" + Number(spec.min) + ", " + Number(spec.max) +
                                 "], got " + shown);
}

}  // namespace

Status CheckSettingValue(const SettingSpec& spec, const SettingValue& v) {
  if (!HasType(spec, v)) return Status::InvalidArgument(spec.name() + " must be " + TypeWord(spec.type));
  if (const auto* s = std::get_if<std::string>(&v)) return CheckChoice(spec, *s);
  if (const auto* i = std::get_if<int64_t>(&v)) return CheckRange(spec, static_cast<double>(*i), std::to_string(*i));
  if (const auto* d = std::get_if<double>(&v)) return CheckRange(spec, *d, Number(*d));
  return Status::OK();
}

Result<int64_t> ParseDuration(std::string_view s) {
  int64_t mult = 1;
  std::string_view digits = s;
  switch (s.empty() ? '\0' : s.back()) {
    case 's': mult = 1; digits.remove_suffix(1); break;
    case 'm': mult = 60; digits.remove_suffix(1); break;
    case 'h': mult = 3600; digits.remove_suffix(1); break;
    case 'd': mult = 86400; digits.remove_suffix(1); break;
    default: break;
  }
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || v < 0 ||
      v > INT64_MAX / 86400 / mult) {
    return Status::InvalidArgument("invalid duration \"" + std::string(s) +
                                   "\": expected seconds, or a number with suffix s, m, h or d (e.g. 48h)");
  }
  return v * mult;
}

Result<SettingValue> ParseSettingText(const SettingSpec& spec, std::string_view text) {
  SettingValue v;
  const char* end = text.data() + text.size();
  bool ok = false;
  switch (spec.type) {
    case SettingType::kBool:
      ok = text == "true" || text == "false";
      v = text == "true";
      break;
    case SettingType::kChoice:
      ok = true;
      v = std::string(text);
      break;
    case SettingType::kDuration: {
      auto d = ParseDuration(text);
      if (!d.ok()) return Status::InvalidArgument(spec.name() + ": " + d.status().message());
      ok = true;
      v = d.value();
      break;
    }
    case SettingType::kInt: {
      int64_t i = 0;
      const auto r = std::from_chars(text.data(), end, i);
      ok = !text.empty() && r.ec == std::errc() && r.ptr == end;
      v = i;
      break;
    }
    case SettingType::kDouble: {
      double d = 0;
      const auto r = std::from_chars(text.data(), end, d);
      ok = !text.empty() && r.ec == std::errc() && r.ptr == end;
      v = d;
      break;
    }
  }
  if (!ok) return Status::InvalidArgument(spec.name() + " must be " + TypeWord(spec.type) + ", got \"" +
                                          std::string(text) + "\"");
  NEARDUP_RETURN_IF_ERROR(CheckSettingValue(spec, v));
  return v;
}

std::string SettingValueText(const SettingValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return Number(*d);
  return std::get<std::string>(v);
}

std::span<const Setting<RecheckOptions>> RecheckSettingTable() {
  using R = RecheckOptions;
  using T = SettingType;
  constexpr double kBig = 1 << 30;
  static const std::vector<Setting<R>> table = {
      FieldSetting<R>({"enabled", "recheck", T::kBool, 0, 0, {},
                       "Decide by similarity (docs/ACCURACY.md): candidates from the fingerprint and anchor "
                       "n-grams, a duplicate when the similarity reaches --threshold; off: the plain rule, every "
                       "candidate within k is a duplicate"},
                      &R::enabled),
      FieldSetting<R>({"threshold", "threshold", T::kDouble, 0.01, 1, {},
                       "A duplicate when the similarity (Jaccard of character n-gram sets, docs/ACCURACY.md) is "
                       "at least this",
                       /*top_level=*/true},
                      &R::threshold),
      FieldSetting<R>({"shingle_size", "shingle-size", T::kInt, kMinShingleSize, kMaxShingleSize, {},
                       "n of the character n-grams the similarity is computed on",
                       /*top_level=*/true},
                      &R::shingle_size),
      FieldSetting<R>({"short_max_chars", "short-threshold", T::kInt, 0, kBig, {},
                       "A text is short when its normalized text has at most this many characters"},
                      &R::short_max_chars),
      FieldSetting<R>({"short_k", "short-k", T::kInt, 0, kMaxSupportedK, {},
                       "Hamming radius searched for short texts (at least k is used)"},
                      &R::short_k),
      FieldSetting<R>({"anchors", "anchors", T::kInt, 0, static_cast<double>(kAnchorCount), {},
                       "Anchor keys probed per document for candidates the fingerprint misses (0 = none)"},
                      &R::anchors),
      FieldSetting<R>({"anchor_max_postings", "anchor-max-postings", T::kInt, 0, kMaxAnchorPostings, {},
                       "An anchor shared by more kept documents than this becomes a stop key"},
                      &R::anchor_max_postings),
      FieldSetting<R>({"", "sketch-max-chars", T::kInt, 0, kBig, {},
                       "Kept texts up to this many characters keep their re-check sketch in memory"},
                      &R::sketch_max_chars),
  };
  return table;
}

}  // namespace neardup
