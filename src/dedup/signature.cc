#include "neardup/dedup/signature.h"

#include <algorithm>

#include "util/coding.h"

namespace neardup {

DocSignature MakeSignature(const TextAnalysis& analysis, std::string_view text, int shingle_size, SketchMode mode) {
  DocSignature sig{analysis.content_hash, analysis.fingerprint, analysis.has_features()};
  sig.num_chars = static_cast<uint32_t>(std::min<size_t>(analysis.num_chars, UINT32_MAX));
  if (mode == SketchMode::kNone) return sig;
  // Texts without features (punctuation only) get a sketch too: the
  // similarity counts their punctuation.
  ComputeSketch(text, shingle_size, &sig.sketch, &analysis.folded);
  return sig;
}

namespace {
// Scheme v1 sketches (other shingles) are not comparable with v2 ones.
constexpr uint8_t kLegacySketchVersion = 1;
constexpr size_t kExtraHeader = 1 + 4 + 4 + 2;
}  // namespace

std::string EncodeSignatureExtra(const DocSignature& sig) {
  std::string out;
  if (sig.sketch.empty()) return out;
  const size_t n = std::min(sig.sketch.mins.size(), kSketchSize);
  out.reserve(kExtraHeader + 4 * n);
  out.push_back(static_cast<char>(kSketchVersion));
  PutFixed32(&out, sig.num_chars);
  PutFixed32(&out, sig.sketch.num_shingles);
  char count[2];
  EncodeFixed(count, n, 2);
  out.append(count, 2);
  for (size_t i = 0; i < n; ++i) PutFixed32(&out, sig.sketch.mins[i]);
  return out;
}

Status DecodeSignatureExtra(std::string_view bytes, DocSignature* sig) {
  const auto version = bytes.empty() ? 0 : static_cast<unsigned char>(bytes[0]);
  if (bytes.empty() || version == kLegacySketchVersion) {
    sig->num_chars = 0;
    sig->sketch = ShingleSketch{};
    return Status::OK();
  }
  if (version != kSketchVersion) {
    return Status::NotSupported("signature extra: unknown sketch version " + std::to_string(version));
  }
  if (bytes.size() < kExtraHeader) return Status::Corruption("signature extra: truncated header");
  const uint32_t num_chars = DecodeFixed32(bytes.data() + 1);
  const uint32_t num_shingles = DecodeFixed32(bytes.data() + 5);
  const auto n = static_cast<size_t>(DecodeFixed(bytes.data() + 9, 2));
  if (num_shingles == 0 || n != std::min<size_t>(num_shingles, kSketchSize)) {
    return Status::Corruption("signature extra: bad sketch size");
  }
  if (bytes.size() != kExtraHeader + 4 * n) return Status::Corruption("signature extra: bad length");
  ShingleSketch sketch;
  sketch.num_shingles = num_shingles;
  sketch.mins.resize(n);
  for (size_t i = 0; i < n; ++i) {
    sketch.mins[i] = DecodeFixed32(bytes.data() + kExtraHeader + 4 * i);
    if (i > 0 && sketch.mins[i] <= sketch.mins[i - 1]) {
      return Status::Corruption("signature extra: values not strictly ascending");
    }
  }
  SketchAnchors(sketch.mins.data(), sketch.mins.size(), &sketch.anchors);
  sig->num_chars = num_chars;
  sig->sketch = std::move(sketch);
  return Status::OK();
}

}  // namespace neardup
