// Text -> 64-bit simhash (docs/fingerprint.md). Every rule here is part of
// the compatibility contract pinned by tests/fingerprint_test.cc.
#include "neardup/text/fingerprint.h"

#include <cmath>
#include <cstring>

#include <unicode/normalizer2.h>

#include <xxhash.h>

#include "neardup/text/idf.h"
#include "text/normalize.h"
#include "text/tokenizer.h"

namespace neardup {

struct Fingerprinter::Impl {
  TokenizerKind tokenizer = TokenizerKind::kMixedNgram;
  int cjk_ngram = 2;
  std::shared_ptr<const IdfTable> idf;
};

namespace {

// Per-thread scratch so Compute() allocates nothing in the steady state.
struct Scratch {
  std::string normalized;
  internal::FeatureCounter counter;
};
Scratch& ThreadScratch() {
  thread_local Scratch s;
  return s;
}

// Rule 5: quantized weight of a feature. `weight` receives the unquantized w.
inline int64_t QuantizedWeight(uint32_t tf, uint64_t hash, const IdfTable* idf, double* weight) {
  if (tf <= 1 && idf == nullptr) {  // the common case: w = 1 exactly
    *weight = 1.0;
    return 1024;
  }
  double w = tf <= 1 ? 1.0 : 1.0 + std::log(static_cast<double>(tf));
  if (idf != nullptr) w = w * idf->Idf(hash);
  *weight = w;
  const long long q = std::llround(w * 1024.0);
  return q < 1 ? 1 : static_cast<int64_t>(q);
}

// kMasks.m[b][k] = -1 if bit k of byte b is set, else 0.
struct ByteMasks {
  alignas(32) int32_t m[256][8];
  constexpr ByteMasks() : m() {
    for (int b = 0; b < 256; ++b) {
      for (int k = 0; k < 8; ++k) m[b][k] = ((b >> k) & 1) ? -1 : 0;
    }
  }
};
constexpr ByteMasks kMasks{};

// Rule 6: v[i] = sum over features of (bit i ? +q : -q), computed as
// 2 * (sum of q with bit i set) - (sum of all q). Exact integer arithmetic:
// the per-bit sums are gathered in int32 lanes (vectorizes without variable
// shifts) and flushed into int64 before they could overflow.
class Vote {
 public:
  inline void Add(uint64_t hash, int64_t q) {
    total_ += q;
    if (q > kMaxFastQ) {  // cannot happen with sane idf values; stay exact anyway
      for (int i = 0; i < 64; ++i) pos_[i] += ((hash >> i) & 1) ? q : 0;
      return;
    }
    const int32_t q32 = static_cast<int32_t>(q);
    const V4 qv = {q32, q32, q32, q32};
    for (int j = 0; j < 8; ++j) {
      const int32_t* m = kMasks.m[(hash >> (8 * j)) & 0xFF];
      V4 lo, hi;
      std::memcpy(&lo, m, sizeof(lo));
      std::memcpy(&hi, m + 4, sizeof(hi));
      part_[2 * j] += lo & qv;
      part_[2 * j + 1] += hi & qv;
    }
    if (++pending_ == kFlushEvery) Flush();
  }
  uint64_t Fingerprint() {
    Flush();
    uint64_t fp = 0;
    for (int i = 0; i < 64; ++i) {
      if (2 * pos_[i] - total_ > 0) fp |= uint64_t{1} << i;  // tie (0) -> 0
    }
    return fp;
  }

 private:
  static constexpr int64_t kMaxFastQ = int64_t{1} << 20;
  static constexpr int kFlushEvery = 1024;  // 1024 * 2^20 < 2^31

  void Flush() {
    for (int v = 0; v < 16; ++v) {
      for (int k = 0; k < 4; ++k) pos_[4 * v + k] += part_[v][k];
      part_[v] = V4{0, 0, 0, 0};
    }
    pending_ = 0;
  }

  // Four int32 lanes (GCC/Clang vector extension; SSE2 on x86-64, plain
  // scalar code elsewhere). part_[v][k] accumulates bit 4 * v + k.
  typedef int32_t V4 __attribute__((vector_size(16)));
  V4 part_[16] = {};
  int64_t pos_[64] = {};
  int64_t total_ = 0;
  int pending_ = 0;
};

void Tokenize(TokenizerKind kind, int cjk_ngram, std::string_view normalized,
              internal::FeatureCounter* counter) {
  if (kind == TokenizerKind::kIcuWords) {
    internal::TokenizeIcuWords(normalized, counter);
  } else {
    internal::TokenizeMixed(normalized, cjk_ngram, counter);
  }
}

}  // namespace

Result<Fingerprinter> Fingerprinter::Create(const FingerprintOptions& options) {
  if (options.cjk_ngram < 1 || options.cjk_ngram > 4) {
    return Status::InvalidArgument("cjk_ngram must be in 1..4, got " +
                                   std::to_string(options.cjk_ngram));
  }
  std::string tok;
  switch (options.tokenizer) {
    case TokenizerKind::kMixedNgram:
      tok = "mixed-ngram" + std::to_string(options.cjk_ngram);
      break;
    case TokenizerKind::kIcuWords:
      tok = "icu-words";
      break;
    default:
      return Status::InvalidArgument("unknown tokenizer kind " +
                                     std::to_string(static_cast<int>(options.tokenizer)));
  }
  {
    UErrorCode status = U_ZERO_ERROR;
    icu::Normalizer2::getNFKCCasefoldInstance(status);
    if (U_FAILURE(status)) {
      return Status::Internal(std::string("ICU NFKC_Casefold data unavailable: ") +
                              u_errorName(status));
    }
  }
  if (options.tokenizer == TokenizerKind::kIcuWords && !internal::IcuWordBreakAvailable()) {
    return Status::Internal("ICU word break iterator unavailable");
  }

  Fingerprinter fp;
  fp.options_ = options;
  fp.scheme_name_ = "simhash64-v" + std::to_string(kSchemeVersion) + "/" + tok + "/";
  if (options.idf) {
    fp.scheme_name_ += "logtfidf:" + FingerprintToHex(options.idf->content_hash());
  } else {
    fp.scheme_name_ += "logtf";
  }
  fp.scheme_id_ = XXH3_64bits(fp.scheme_name_.data(), fp.scheme_name_.size());
  auto impl = std::make_shared<Impl>();
  impl->tokenizer = options.tokenizer;
  impl->cjk_ngram = options.cjk_ngram;
  impl->idf = options.idf;
  fp.impl_ = std::move(impl);
  return fp;
}

void Fingerprinter::Analyze(std::string_view utf8, TextAnalysis* out, bool with_features) const {
  const internal::NormalizeStats stats = internal::NormalizeText(utf8, &out->normalized, true, &out->folded);
  out->invalid_utf8 = stats.invalid_utf8;
  out->num_chars = stats.num_chars;
  out->content_hash = XXH3_64bits(out->normalized.data(), out->normalized.size());
  out->features.clear();
  out->fingerprint = 0;

  internal::FeatureCounter& counter = ThreadScratch().counter;
  Tokenize(impl_->tokenizer, impl_->cjk_ngram, out->normalized, &counter);
  const IdfTable* idf = impl_->idf.get();
  Vote vote;
  out->num_features = counter.entries().size();
  if (with_features) out->features.reserve(counter.entries().size());
  for (const auto& e : counter.entries()) {
    double weight;
    vote.Add(e.hash, QuantizedWeight(e.tf, e.hash, idf, &weight));
    if (with_features) out->features.push_back(Feature{std::string(counter.token(e)), e.hash, e.tf, weight});
  }
  counter.Reset({});  // drop the reference to out->normalized
  if (out->num_features > 0) out->fingerprint = vote.Fingerprint();
}

uint64_t Fingerprinter::Compute(std::string_view utf8, bool* has_features) const {
  Scratch& scratch = ThreadScratch();
  internal::NormalizeText(utf8, &scratch.normalized);
  Tokenize(impl_->tokenizer, impl_->cjk_ngram, scratch.normalized, &scratch.counter);
  const IdfTable* idf = impl_->idf.get();
  Vote vote;
  double w;
  for (const auto& e : scratch.counter.entries()) vote.Add(e.hash, QuantizedWeight(e.tf, e.hash, idf, &w));
  const bool any = !scratch.counter.entries().empty();
  if (has_features != nullptr) *has_features = any;
  if (scratch.normalized.capacity() > (size_t{4} << 20)) {
    scratch.counter.Reset({});
    std::string().swap(scratch.normalized);  // don't pin huge buffers per thread
  }
  return any ? vote.Fingerprint() : 0;
}

std::string FingerprintToHex(uint64_t fp) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i) {
    s[i] = kDigits[fp & 0xF];
    fp >>= 4;
  }
  return s;
}

Result<uint64_t> ParseFingerprintHex(std::string_view hex) {
  std::string_view digits = hex;
  if (digits.size() >= 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
  }
  if (digits.empty() || digits.size() > 16) {
    return Status::InvalidArgument("fingerprint must be 1..16 hex digits: '" + std::string(hex) + "'");
  }
  uint64_t v = 0;
  for (char c : digits) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return Status::InvalidArgument("not a hex fingerprint: '" + std::string(hex) + "'");
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace neardup
