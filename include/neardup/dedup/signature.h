// DocSignature: what the near-duplicate decision keeps of one analyzed text
// (its hashes, fingerprint and re-check sketch), and the bytes a document
// store persists of it.
//
// Thread-safety: plain values and pure functions.
#ifndef NEARDUP_DEDUP_SIGNATURE_H_
#define NEARDUP_DEDUP_SIGNATURE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "neardup/text/fingerprint.h"
#include "neardup/text/similarity.h"
#include "neardup/util/status.h"

namespace neardup {

// What the decision needs from one analyzed text.
struct DocSignature {
  uint64_t content_hash = 0;
  uint64_t fingerprint = 0;  // ignored when !has_features
  bool has_features = false;
  // The re-check signature (similarity.h): the length of the normalized
  // text in code points and the sketch of its shingles. Empty sketch =
  // unknown (a signature made by hand or stored before sketches existed):
  // such a document is decided by fingerprint distance alone. Persist both
  // with EncodeSignatureExtra / DecodeSignatureExtra.
  uint32_t num_chars = 0;
  ShingleSketch sketch;
  bool has_sketch() const { return !sketch.empty(); }
  friend bool operator==(const DocSignature&, const DocSignature&) = default;
};

// The signature of an analyzed text: the one place that decides what the
// matching rule keeps of a text. `text` is the raw text `analysis` was made
// from (the sketch is of its similarity text, shingles.h); shingle_size is
// the namespace's n.
// SketchMode::kNone leaves the sketch empty: for a decision that never
// reads it (the plain rule, DedupOptions::sketch_without_recheck).
enum class SketchMode { kMake, kNone };
DocSignature MakeSignature(const TextAnalysis& analysis, std::string_view text, int shingle_size,
                           SketchMode mode = SketchMode::kMake);

// The re-check part of a signature (num_chars and the sketch) as bytes, for a
// document store's opaque `extra` field. Layout (little-endian):
//   u8 version (= kSketchVersion), u32 num_chars, u32 num_shingles,
//   u16 n = min(kSketchSize, num_shingles), n × u32 mins
// (the anchors are the first mins). A signature without a sketch encodes to
// the empty string.
std::string EncodeSignatureExtra(const DocSignature& sig);

// Fills sig->num_chars and sig->sketch from EncodeSignatureExtra's bytes
// (content_hash, fingerprint and has_features are left alone). Empty bytes
// (a document stored before sketches existed) and scheme v1 bytes (other
// shingles, not comparable) give no sketch: NearDupSet then decides that
// document by fingerprint distance alone. kCorruption for malformed bytes,
// kNotSupported for an unknown version; *sig is unchanged on error.
Status DecodeSignatureExtra(std::string_view bytes, DocSignature* sig);

}  // namespace neardup

#endif  // NEARDUP_DEDUP_SIGNATURE_H_
