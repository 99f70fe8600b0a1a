// Text -> 64-bit simhash fingerprint.
//
// The exact rules (normalization, tokens, weights, token hash, vote, bit order,
// tie rule, empty texts) are specified in docs/fingerprint.md and pinned by
// golden vectors in tests/fingerprint_test.cc. Any change to what Compute()
// returns for some input is a new scheme: bump kSchemeVersion, never edit the
// rules of an existing version in place.
//
// Thread-safety: a Fingerprinter is immutable after Create(); Compute() and
// Analyze() may be called concurrently from any number of threads.
#ifndef NEARDUP_FINGERPRINT_H_
#define NEARDUP_FINGERPRINT_H_

#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/util/status.h"

namespace neardup {

class IdfTable;  // neardup/idf.h

// Version of the fingerprint rules. Part of every scheme id.
inline constexpr uint32_t kSchemeVersion = 1;

enum class TokenizerKind : uint8_t {
  // Words (runs of letters/digits) for space-separated scripts; overlapping
  // character n-grams (n = cjk_ngram) over runs of Han/Kana/Hangul.
  kMixedNgram = 1,
  // ICU word break iterator (dictionary segmentation for Chinese/Japanese);
  // every word-status segment is a feature.
  kIcuWords = 2,
};

enum class Weighting : uint8_t {
  kLogTf = 1,     // w = 1 + ln(tf)
  kLogTfIdf = 2,  // w = (1 + ln(tf)) * idf(token); requires an IdfTable
};

struct FingerprintOptions {
  TokenizerKind tokenizer = TokenizerKind::kMixedNgram;
  int cjk_ngram = 2;  // 1..4; used by kMixedNgram only
  // Optional IDF table. When set, weighting becomes kLogTfIdf and the table's
  // content hash becomes part of the scheme id.
  std::shared_ptr<const IdfTable> idf;
};

// One weighted feature (a token after normalization).
struct Feature {
  std::string token;   // normalized UTF-8 token text
  uint64_t hash = 0;   // XXH3-64 of token, seed 0
  uint32_t tf = 0;     // occurrences in the text
  double weight = 0;   // weight used in the vote (before quantization)
};

// Everything neardup derives from one text. Filled by Analyze().
struct TextAnalysis {
  std::string normalized;       // normalized text (see docs/fingerprint.md)
  uint64_t content_hash = 0;    // XXH3-64 of `normalized`; exact-duplicate key
  size_t invalid_utf8 = 0;      // invalid byte sequences replaced by U+FFFD
  size_t num_chars = 0;         // code points in `normalized`
  std::vector<Feature> features;  // distinct features, in first-seen order (none: Analyze without features)
  size_t num_features = 0;      // how many distinct features the text has
  uint64_t fingerprint = 0;     // simhash; 0 and meaningless without features
  // Step 1 of the similarity text (shingles.h), NFKC_Casefold, computed by
  // the normalization anyway: for a text not all ASCII, its folded form
  // (ComputeSketch takes it and does not fold again); unspecified otherwise.
  std::string folded;
  bool has_features() const { return num_features > 0; }
};

class Fingerprinter {
 public:
  // Fails with kInvalidArgument on out-of-range options.
  static Result<Fingerprinter> Create(const FingerprintOptions& options);

  // Identifies these rules and options: equal ids <=> identical fingerprints
  // for every input. Stored with every saved index and every stored document.
  uint64_t scheme_id() const { return scheme_id_; }
  // Human-readable form, e.g. "simhash64-v1/mixed-ngram2/logtf".
  const std::string& scheme_name() const { return scheme_name_; }
  const FingerprintOptions& options() const { return options_; }

  // Full analysis of one UTF-8 text (invalid bytes are replaced, never fatal).
  // Without `with_features`, out->features is left empty and everything
  // else is as with it: for callers that never read a feature's token (a
  // near-duplicate decision), which then is not copied.
  void Analyze(std::string_view utf8, TextAnalysis* out, bool with_features = true) const;

  // Convenience: just the fingerprint. `has_features` (optional) receives
  // whether the text yielded any feature; a text without features must never
  // be matched by fingerprint (callers fall back to content_hash equality).
  uint64_t Compute(std::string_view utf8, bool* has_features = nullptr) const;

 private:
  Fingerprinter() = default;  // only Create() makes one (a default one would have no Impl)
  FingerprintOptions options_;
  uint64_t scheme_id_ = 0;
  std::string scheme_name_;
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// Number of differing bits.
inline int HammingDistance(uint64_t a, uint64_t b) { return std::popcount(a ^ b); }

// 16 lower-case hex digits, most significant first.
std::string FingerprintToHex(uint64_t fp);
// Accepts 1..16 hex digits, optional "0x" prefix; kInvalidArgument otherwise.
Result<uint64_t> ParseFingerprintHex(std::string_view hex);

}  // namespace neardup

#endif  // NEARDUP_FINGERPRINT_H_
