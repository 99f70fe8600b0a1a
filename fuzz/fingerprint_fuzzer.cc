// Arbitrary bytes (invalid UTF-8 included) through both tokenizers: the
// analysis must finish, be deterministic, and keep its invariants.
#include <cstdlib>
#include <string_view>

#include "neardup/text/fingerprint.h"

namespace {
const neardup::Fingerprinter& Get(neardup::TokenizerKind kind) {
  static const neardup::Fingerprinter mixed = [] {
    neardup::FingerprintOptions o;
    return std::move(neardup::Fingerprinter::Create(o)).value();
  }();
  static const neardup::Fingerprinter icu = [] {
    neardup::FingerprintOptions o;
    o.tokenizer = neardup::TokenizerKind::kIcuWords;
    return std::move(neardup::Fingerprinter::Create(o)).value();
  }();
  return kind == neardup::TokenizerKind::kIcuWords ? icu : mixed;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto kind = data[0] & 1 ? neardup::TokenizerKind::kIcuWords : neardup::TokenizerKind::kMixedNgram;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto& fp = Get(kind);
  neardup::TextAnalysis a;
  fp.Analyze(text, &a);
  bool has = false;
  const uint64_t again = fp.Compute(text, &has);
  if (again != a.fingerprint || has != a.has_features()) std::abort();
  if (!a.has_features() && a.fingerprint != 0) std::abort();
  return 0;
}
