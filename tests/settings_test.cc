// The namespace settings' descriptor table (neardup/engine/settings.h): every
// field is described, reachable by JSON and by a serve flag, round-trips and
// refuses out-of-range values.
#include "neardup/engine/settings.h"

#include "neardup/engine/namespace_record.h"
#include "neardup/text/similarity.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <variant>

namespace neardup {
namespace {

// A valid value of `d` that differs from `v` (the bounds, the other choice).
SettingValue OtherValue(const SettingSpec& d, const SettingValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return !*b;
  if (const auto* s = std::get_if<std::string>(&v)) return d.choices.front() == *s ? d.choices.back() : d.choices.front();
  if (const auto* i = std::get_if<int64_t>(&v)) {
    return static_cast<int64_t>(*i == static_cast<int64_t>(d.max) ? d.min : d.max);
  }
  const double x = std::get<double>(v);
  return x == d.max ? d.min : d.max;
}

// Out of range (or of the wrong type) for `d`, as JSON text.
std::string BadJsonValue(const SettingSpec& d) {
  switch (d.type) {
    case SettingType::kBool: return "1";
    case SettingType::kChoice: return "\"no-such-choice\"";
    case SettingType::kDouble: return std::to_string(d.max + 0.5);
    case SettingType::kInt:
    case SettingType::kDuration: return std::to_string(static_cast<int64_t>(d.max) + 1);
  }
  return "null";
}

// {"a": {"b": v}} for the path "a.b".
std::string JsonAt(const std::string& path, const std::string& value) {
  const size_t dot = path.find('.');
  if (dot == std::string::npos) return "{\"" + path + "\": " + value + "}";
  return "{\"" + path.substr(0, dot) + "\": " + JsonAt(path.substr(dot + 1), value) + "}";
}

TEST(SettingsTable, DescribesEveryField) {
  // Fails to compile when a field is added: then add its descriptor and
  // update the counts below.
  [[maybe_unused]] const auto& [k, tokenizer, cjk_ngram, retention, max_matches, recheck] = NamespaceSettings{};
  [[maybe_unused]] const auto& [e, threshold, shingle_size, smc, sk, a, amp, sketch] = RecheckOptions{};
  EXPECT_EQ(RecheckSettingTable().size(), 8u);
  EXPECT_EQ(NamespaceSettingTable().size(), 5u + 7u);  // all of RecheckOptions but sketch_max_chars
}

TEST(SettingsTable, EveryDescriptorHasAJsonKeyAServeFlagAndRoundTrips) {
  std::set<std::string> keys, flags;
  NamespaceSettings all;
  for (const Setting<NamespaceSettings>& d : NamespaceSettingTable()) {
    SCOPED_TRACE(d.json);
    EXPECT_FALSE(d.json.empty());
    EXPECT_FALSE(d.flag.empty());
    EXPECT_FALSE(d.doc.empty());
    EXPECT_TRUE(keys.insert(d.json).second) << "duplicate JSON key";
    EXPECT_TRUE(flags.insert(DefaultsFlagName(d)).second) << "duplicate serve flag";
    // The setter reaches a field of its own (== compares every field).
    NamespaceSettings one;
    d.set(one, OtherValue(d, d.get(one)));
    EXPECT_NE(one, NamespaceSettings{});
    auto back = NamespaceSettings::FromJson(one.ToJson(), NamespaceSettings{});
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back.value(), one);
    d.set(all, d.get(one));
  }
  auto back = NamespaceSettings::FromJson(all.ToJson(), NamespaceSettings{});
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back.value(), all);
  // Every field changed: each descriptor set a different field.
  for (const Setting<NamespaceSettings>& d : NamespaceSettingTable()) {
    EXPECT_NE(d.get(all), d.get(NamespaceSettings{})) << d.json;
  }
}

TEST(SettingsTable, RefusesOutOfRangeValuesNamingTheField) {
  for (const Setting<NamespaceSettings>& d : NamespaceSettingTable()) {
    const std::string body = JsonAt(d.json, BadJsonValue(d));
    auto r = NamespaceSettings::FromJson(body, NamespaceSettings{});
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(d.json), std::string::npos) << r.status().message();
    // The flag's parser refuses it too.
    std::string text = BadJsonValue(d);
    if (text.front() == '"') text = text.substr(1, text.size() - 2);
    EXPECT_FALSE(ParseSettingText(d, text).ok()) << d.flag << " " << text;
  }
}

TEST(SettingsTable, FlagTextsParse) {
  const SettingSpec* retention = nullptr;
  for (const auto& d : NamespaceSettingTable()) {
    if (d.json == "retention_seconds") retention = &d;
  }
  ASSERT_NE(retention, nullptr);
  EXPECT_EQ(std::get<int64_t>(ParseSettingText(*retention, "48h").value()), 48 * 3600);
  EXPECT_EQ(std::get<int64_t>(ParseSettingText(*retention, "7d").value()), 7 * 86400);
  EXPECT_FALSE(ParseSettingText(*retention, "2w").ok());
  EXPECT_EQ(DefaultsFlagName(*retention), "default-retention");
}

TEST(SettingsTable, UnknownNestedFieldIsNamed) {
  auto r = NamespaceSettings::FromJson(R"({"recheck": {"sketch_max_chars": 10}})", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("recheck.sketch_max_chars"), std::string::npos);
  EXPECT_FALSE(NamespaceSettings::FromJson(R"({"recheck": 3})", {}).ok());
}

}  // namespace
// Records written before "anchor_scheme" existed read as scheme 1, which the
// stores that persist anchor postings refuse (namespace_record.h).
TEST(NamespaceRecord, AnchorSchemeIsRecordedAndRequired) {
  const NamespaceSettings s;
  auto fp = MakeNamespaceFingerprinter(s);
  ASSERT_TRUE(fp.ok());
  const std::string now = EncodeNamespaceRecord(s, **fp);
  auto current = DecodeNamespaceRecord("n", now, "test");
  ASSERT_TRUE(current.ok()) << current.status().ToString();
  EXPECT_EQ(current->anchor_scheme, kAnchorScheme);
  EXPECT_TRUE(RequireAnchorScheme("n", *current).ok());

  nlohmann::json old = nlohmann::json::parse(now);
  old.erase("anchor_scheme");
  auto earlier = DecodeNamespaceRecord("n", old.dump(), "test");
  ASSERT_TRUE(earlier.ok()) << earlier.status().ToString();
  EXPECT_EQ(earlier->anchor_scheme, 1u);
  const Status refused = RequireAnchorScheme("n", *earlier);
  EXPECT_EQ(refused.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(refused.message().find("recreate"), std::string::npos) << refused.message();
}

}  // namespace neardup
