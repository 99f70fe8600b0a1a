// See include/neardup/engine/namespace_record.h.
#include "neardup/engine/namespace_record.h"

#include <string>

#include <nlohmann/json.hpp>

#include "neardup/text/similarity.h"

namespace neardup {

Result<std::shared_ptr<const Fingerprinter>> MakeNamespaceFingerprinter(const NamespaceSettings& s) {
  FingerprintOptions o;
  if (s.tokenizer == "mixed") {
    o.tokenizer = TokenizerKind::kMixedNgram;
  } else if (s.tokenizer == "icu-words") {
    o.tokenizer = TokenizerKind::kIcuWords;
  } else {
    return Status::InvalidArgument("unknown tokenizer \"" + s.tokenizer + "\"");
  }
  o.cjk_ngram = s.cjk_ngram;
  auto fp = Fingerprinter::Create(o);
  if (!fp.ok()) return fp.status();
  return std::make_shared<const Fingerprinter>(std::move(fp).value());
}

NearDupOptions PolicyOf(const NamespaceSettings& settings) {
  NearDupOptions o;
  o.k = settings.k;
  o.recheck = settings.recheck;
  return o;
}

std::string EncodeNamespaceRecord(const NamespaceSettings& s, const Fingerprinter& fp, std::string_view store_fields) {
  nlohmann::json j = nlohmann::json::parse(store_fields, nullptr, false);
  if (!j.is_object()) j = nlohmann::json::object();
  j["settings"] = nlohmann::json::parse(s.ToJson());
  j["scheme_id"] = FingerprintToHex(fp.scheme_id());
  j["scheme"] = fp.scheme_name();
  j["anchor_scheme"] = kAnchorScheme;
  return j.dump();
}

Result<NamespaceRecord> DecodeNamespaceRecord(const std::string& name, std::string_view raw, std::string_view where) {
  const nlohmann::json j = nlohmann::json::parse(raw, nullptr, false);
  auto bad = [&](const std::string& why) {
    return Status::Corruption("namespace \"" + name + "\": unreadable record in " + std::string(where) + why);
  };
  if (j.is_discarded() || !j.is_object() || !j.contains("settings") || !j.contains("scheme_id") ||
      !j["scheme_id"].is_string()) {
    return bad("");
  }
  auto settings = NamespaceSettings::FromJson(j["settings"].dump(), NamespaceSettings{});
  if (!settings.ok()) return bad(": " + settings.status().message());
  NamespaceRecord r;
  r.settings = settings.value();
  auto fp = MakeNamespaceFingerprinter(r.settings);
  if (!fp.ok()) return fp.status();
  r.fingerprinter = std::move(fp).value();
  r.anchor_scheme = j.value("anchor_scheme", 1u);
  const std::string id = j["scheme_id"].get<std::string>();
  if (FingerprintToHex(r.fingerprinter->scheme_id()) != id) {
    return Status::FailedPrecondition("namespace \"" + name + "\" was written with fingerprint scheme " +
                                      j.value("scheme", std::string("?")) + " (" + id + "); this build computes " +
                                      r.fingerprinter->scheme_name() + ": refusing to mix them");
  }
  return r;
}

Status RequireAnchorScheme(const std::string& name, const NamespaceRecord& record) {
  if (record.anchor_scheme == kAnchorScheme) return Status::OK();
  return Status::FailedPrecondition("namespace \"" + name + "\" holds anchor postings of anchor scheme " +
                                    std::to_string(record.anchor_scheme) + "; this build files and probes scheme " +
                                    std::to_string(kAnchorScheme) + " (docs/ACCURACY.md): recreate it");
}

}  // namespace neardup
