// The re-check signature: a compact sketch of a text's character shingles,
// and the similarity estimated from two sketches.
//
// Simhash (fingerprint.h) is the candidate filter; for short texts it is too
// coarse to decide alone (a 140-character post with two characters changed
// can be 8+ bits away, and unrelated short texts can be as close). NearDupSet
// therefore re-checks each candidate of a short text with this sketch.
//
// Sketch scheme v1 (a compatibility contract like the fingerprint scheme:
// sketches are persisted, see EncodeSignatureExtra in dedup/signature.h; any change to what
// ComputeSketch returns is a new kSketchVersion):
//  1. Input: the normalized text (TextAnalysis::normalized: NFKC_Casefold,
//     only letters/marks/numbers and single spaces), read as code points.
//  2. A space is dropped when a code point on either side of it is CJK
//     (IsCjkCodePoint), so punctuation inserted or removed inside Chinese or
//     Japanese text changes nothing. Other spaces (word boundaries of spaced
//     scripts) are kept. Call the result s.
//  3. Similarity shingles: at every position i, the code points s[i..i+n)
//     with n = 2 when s[i] is CJK and n = 4 otherwise (character bigrams
//     carry Chinese words; 4-grams with their spaces carry English
//     sub-words and are rarely shared by unrelated texts). Positions with
//     fewer than n code points left yield nothing; a text that yields no
//     shingle at all but is not empty yields the whole of s as one shingle.
//  4. A shingle's hash: h = seed + n, then h = h * 0x9E3779B97F4A7C15 + cp
//     (mod 2^64) for each of its code points; the upper 32 bits of Murmur3Fmix64(h) (util/hash.h).
//     seed = 0 for similarity shingles.
//  5. num_shingles = the number of distinct hashes (|A|); mins = the
//     kSketchSize smallest distinct hashes, ascending ("bottom-k"). A text
//     with at most kSketchSize distinct shingles is represented exactly.
//  6. Anchors: the same over coarser shingles (n = 3 at CJK, 6 elsewhere,
//     seed = 0x100): the kAnchorCount smallest distinct hashes, ascending.
//     They are the keys under which NearDupSet finds candidates that the
//     fingerprint misses: two texts with Jaccard similarity J share one of
//     their few smallest anchors with probability about 1 - (1 - J)^(1.5m).
//
// Similarity of texts A and B (EstimateSimilarity): let tau be the smaller of
// the last values of the incomplete sketches (no limit if both are
// complete). Below tau both sketches hold every value of their sets, so the
// values below tau are a uniform sample of A ∪ B (64 to 128 values) whose
// membership in A and in B is known: the fraction in both estimates the
// Jaccard similarity |A∩B| / |A∪B|, and the fraction of the smaller set's
// sampled values found in the larger estimates its containment. Both are
// exact when both sketches are complete (texts up to ~64 characters); the
// standard error of the Jaccard estimate is at most sqrt(J(1-J)/64) ≈ 0.06
// otherwise. Cost: an intersection of two sorted arrays of <= 64 values
// (SSE2 block compares), about 50 ns.
//
// Size: 4 bytes per value, at most 64 + 16 values (320 bytes) per text plus
// 8 bytes of counts. Cost: two hashes per code point plus sorting them.
//
// Thread-safety: all functions are pure (thread-local scratch only).
#ifndef NEARDUP_SIMILARITY_H_
#define NEARDUP_SIMILARITY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/util/status.h"

namespace neardup {

inline constexpr uint32_t kSketchVersion = 1;
// Values kept per sketch (the k of bottom-k).
inline constexpr size_t kSketchSize = 64;
// Anchor values kept per sketch.
inline constexpr size_t kAnchorCount = 16;

struct ShingleSketch {
  uint32_t num_shingles = 0;   // distinct shingle hashes of the text, exact
  std::vector<uint32_t> mins;  // the min(kSketchSize, num_shingles) smallest, strictly ascending
  std::vector<uint32_t> anchors;  // the smallest anchor hashes (<= kAnchorCount), strictly ascending
  // A text that yields no shingle (empty) or an unknown sketch.
  bool empty() const { return num_shingles == 0; }
  // mins holds every shingle of the text.
  bool complete() const { return num_shingles <= kSketchSize; }
  friend bool operator==(const ShingleSketch&, const ShingleSketch&) = default;
};

// Replaces *out with the sketch of `normalized` (scheme v1 above).
void ComputeSketch(std::string_view normalized, ShingleSketch* out);
ShingleSketch ComputeSketch(std::string_view normalized);

struct SimilarityEstimate {
  double jaccard = 0;      // |A∩B| / |A∪B|
  // |S∩L| / |S| for the smaller set S and the larger L, estimated from the
  // values of S below both sketches' last values (containment_sample of
  // them; all of S when both sketches are complete).
  double containment = 0;
  uint32_t containment_sample = 0;
  bool exact = false;      // both sketches complete: the values are exact
};

// Both sketches non-empty; otherwise every value is 0.
SimilarityEstimate EstimateSimilarity(const ShingleSketch& a, const ShingleSketch& b);
// The same on raw sketches: na values of a set of sa shingles, nb of sb.
SimilarityEstimate EstimateSimilarity(const uint32_t* a, size_t na, uint32_t sa, const uint32_t* b, size_t nb,
                                      uint32_t sb);

// Whether the estimate above reaches min_jaccard. May stop as soon as it
// cannot (most candidates of a query are unrelated texts): *out is then
// incomplete and false is returned. When true, *out equals
// EstimateSimilarity's answer.
bool EstimateSimilarityAtLeast(const uint32_t* a, size_t na, uint32_t sa, const uint32_t* b, size_t nb, uint32_t sb,
                               double min_jaccard, SimilarityEstimate* out);
// Whether a code point counts as CJK for steps 2, 3 and 6: Hangul Jamo, CJK Radicals
// through Yi (U+2E80-U+A4CF, which includes Kana, Bopomofo and the CJK
// ideographs), Hangul syllables, CJK compatibility ideographs, half-width
// Kana, and the supplementary ideograph planes (U+20000-U+3FFFF).
bool IsCjkCodePoint(uint32_t cp);

}  // namespace neardup

#endif  // NEARDUP_SIMILARITY_H_
