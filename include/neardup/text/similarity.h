// The re-check signature: a bottom-k sketch of a text's character n-gram
// set, from which the similarity of text/shingles.h is computed (exactly
// when both sets fit the sketch, estimated otherwise).
//
// Simhash (fingerprint.h) and the anchors below find candidates; the
// decision (NearDupSet, pair_rule.h) is "similarity >= threshold" on these
// sketches.
//
// Sketch scheme v2 (a compatibility contract like the fingerprint scheme:
// sketches are persisted, see EncodeSignatureExtra in dedup/signature.h; any
// change to steps 1-3 is a new kSketchVersion, to step 4 a new kAnchorScheme):
//  1. The n-grams of the text's similarity text, exactly as text/shingles.h
//     defines them (NFKC_Casefold, white space collapsed, punctuation kept,
//     n code points; a shorter text is one n-gram, the whole text, and an
//     empty text one n-gram of no code points: since 2026-11-28, before which
//     it had no sketch).
//  2. A value per n-gram: the upper 32 bits of ShingleHash (shingles.h).
//  3. num_shingles = the number of distinct values (|A|); mins = the
//     kSketchSize smallest distinct values, ascending ("bottom-k"). A text
//     with at most kSketchSize distinct n-grams (about kSketchSize
//     characters) is represented exactly.
//  4. Anchors (anchor scheme 2, kAnchorScheme): the keys under which
//     NearDupSet finds candidates that the fingerprint misses (a prefix
//     filter over the hash order, Xiao et al. 2008). In turn for
//     i = 0, 1, ...: the value mins[i], then AnchorPairKey(mins[i],
//     mins[i + 1]) when there is a next value; each unless equal to an
//     earlier one, until kAnchorCount are taken.
//     Two sets with Jaccard similarity J share their smallest value with
//     probability J. But a single n-gram is shared by too many texts: over
//     a corpus of millions nearly every character trigram is held by more
//     than anchor_max_postings kept texts and becomes a stop key, and with
//     values alone (scheme 1) reposts were then found by fingerprint
//     distance only (on the short corpus the share found fell from 18.7 %
//     to 8.0 % within 2M documents; docs/BENCHMARKS.md). A pair of
//     neighbours in a text's hash order is held only by texts with both
//     n-grams and none between them: a universe of U n-grams in texts of
//     m gives about U * U / m such keys against U values, so they stay
//     selective about U / m times longer (they too saturate in the end: a
//     universe of U fixed n-grams admits no key that never does), and
//     near-duplicates still share many: a pair of one text is a pair of
//     the other with probability about J * 2J / (1 + J) (0.58 at J = 0.7).
//     The values keep small corpora and low thresholds as well served as
//     before; once they are stop keys, the pairs are probed instead.
//
// Similarity of texts A and B (EstimateSimilarity): let tau be the smaller of
// the last values of the incomplete sketches (no limit if both are
// complete). Below tau both sketches hold every value of their sets, so the
// values below tau are a uniform sample of A ∪ B (256 to 512 values) whose
// membership in A and in B is known: the fraction in both estimates the
// Jaccard similarity |A∩B| / |A∪B|, and the fraction of the smaller set's
// sampled values found in the larger estimates its containment. Both are
// exact when both sketches are complete; the standard error of the Jaccard
// estimate is at most sqrt(J(1-J)/256) <= 0.031 otherwise.
//
// Size: 4 bytes per value, at most kSketchSize values per text plus counts.
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

inline constexpr uint32_t kSketchVersion = 2;
// What the anchors of a sketch are (step 4). Stores that persist anchor
// postings (Redis Cluster, PostgreSQL) record it per namespace and refuse a
// namespace of another scheme; the embedded store rebuilds its postings from
// the sketches' values, so it reads any. Decoded sketches (signature.h)
// carry this scheme's anchors.
inline constexpr uint32_t kAnchorScheme = 2;
// Values kept per sketch (the k of bottom-k).
inline constexpr size_t kSketchSize = 256;
// Anchor values kept per sketch.
inline constexpr size_t kAnchorCount = 32;

struct ShingleSketch {
  uint32_t num_shingles = 0;   // distinct shingle hashes of the text, exact
  std::vector<uint32_t> mins;  // the min(kSketchSize, num_shingles) smallest, strictly ascending
  std::vector<uint32_t> anchors;  // SketchAnchors(mins): at most kAnchorCount, distinct
  // An unknown sketch (a legacy document): every computed one has a shingle.
  bool empty() const { return num_shingles == 0; }
  // mins holds every shingle of the text.
  bool complete() const { return num_shingles <= kSketchSize; }
  friend bool operator==(const ShingleSketch&, const ShingleSketch&) = default;
};

// The anchor of two neighbouring sketch values (step 4): a fixed 32-bit mix
// of both, persisted like the values themselves.
uint32_t AnchorPairKey(uint32_t lo, uint32_t hi);
// Replaces *out with the anchors (step 4) of the n ascending sketch values
// at `mins`.
void SketchAnchors(const uint32_t* mins, size_t n, std::vector<uint32_t>* out);

// Replaces *out with the sketch of the n-grams of `text` (raw UTF-8; scheme
// v2 above); n in [kMinShingleSize, kMaxShingleSize] (shingles.h).
// `folded`: as for SimilarityCodePoints (shingles.h), step 1 done already.
void ComputeSketch(std::string_view text, int n, ShingleSketch* out, const std::string* folded = nullptr);
ShingleSketch ComputeSketch(std::string_view text, int n);

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
// Whether a code point counts as CJK (the evaluation's zh/en buckets): Hangul Jamo, CJK Radicals
// through Yi (U+2E80-U+A4CF, which includes Kana, Bopomofo and the CJK
// ideographs), Hangul syllables, CJK compatibility ideographs, half-width
// Kana, and the supplementary ideograph planes (U+20000-U+3FFFF).
bool IsCjkCodePoint(uint32_t cp);

}  // namespace neardup

#endif  // NEARDUP_SIMILARITY_H_
