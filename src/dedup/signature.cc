#include "neardup/dedup/signature.h"

#include <algorithm>

#include "util/coding.h"

namespace neardup {

DocSignature MakeSignature(const TextAnalysis& analysis) {
  DocSignature sig{analysis.content_hash, analysis.fingerprint, analysis.has_features()};
  sig.num_chars = static_cast<uint32_t>(std::min<size_t>(analysis.num_chars, UINT32_MAX));
  if (sig.has_features) ComputeSketch(analysis.normalized, &sig.sketch);
  return sig;
}

std::string EncodeSignatureExtra(const DocSignature& sig) {
  std::string out;
  if (sig.sketch.empty()) return out;
  const size_t n = std::min(sig.sketch.mins.size(), kSketchSize);
  const size_t a = std::min(sig.sketch.anchors.size(), kAnchorCount);
  out.reserve(11 + 4 * (n + a));
  out.push_back(static_cast<char>(kSketchVersion));
  PutFixed32(&out, sig.num_chars);
  PutFixed32(&out, sig.sketch.num_shingles);
  out.push_back(static_cast<char>(n));
  for (size_t i = 0; i < n; ++i) PutFixed32(&out, sig.sketch.mins[i]);
  out.push_back(static_cast<char>(a));
  for (size_t i = 0; i < a; ++i) PutFixed32(&out, sig.sketch.anchors[i]);
  return out;
}

Status DecodeSignatureExtra(std::string_view bytes, DocSignature* sig) {
  if (bytes.empty()) {
    sig->num_chars = 0;
    sig->sketch = ShingleSketch{};
    return Status::OK();
  }
  const auto version = static_cast<unsigned char>(bytes[0]);
  if (version != kSketchVersion) {
    return Status::NotSupported("signature extra: unknown sketch version " + std::to_string(version));
  }
  if (bytes.size() < 10) return Status::Corruption("signature extra: truncated header");
  const uint32_t num_chars = DecodeFixed32(bytes.data() + 1);
  const uint32_t num_shingles = DecodeFixed32(bytes.data() + 5);
  const size_t n = static_cast<unsigned char>(bytes[9]);
  if (num_shingles == 0 || n != std::min<size_t>(num_shingles, kSketchSize)) {
    return Status::Corruption("signature extra: bad sketch size");
  }
  if (bytes.size() < 11 + 4 * n) return Status::Corruption("signature extra: truncated sketch");
  const size_t a = static_cast<unsigned char>(bytes[10 + 4 * n]);
  if (a == 0 || a > kAnchorCount) return Status::Corruption("signature extra: bad anchor count");
  if (bytes.size() != 11 + 4 * (n + a)) return Status::Corruption("signature extra: bad length");
  auto read_ascending = [&](size_t offset, size_t count, std::vector<uint32_t>* out) {
    out->resize(count);
    for (size_t i = 0; i < count; ++i) {
      (*out)[i] = DecodeFixed32(bytes.data() + offset + 4 * i);
      if (i > 0 && (*out)[i] <= (*out)[i - 1]) return false;
    }
    return true;
  };
  ShingleSketch sketch;
  sketch.num_shingles = num_shingles;
  if (!read_ascending(10, n, &sketch.mins) || !read_ascending(11 + 4 * n, a, &sketch.anchors)) {
    return Status::Corruption("signature extra: values not strictly ascending");
  }
  sig->num_chars = num_chars;
  sig->sketch = std::move(sketch);
  return Status::OK();
}

}  // namespace neardup
