// The pair rule: whether two documents found as candidates are
// near-duplicates, and which of several accepted matches ranks first. The
// rule is stated in near_dup_set.h (steps 3 and 4); NearDupSet and the Redis
// Cluster store both decide and rank through these functions, so the policy
// is written once.
//
// Thread-safety: plain values and pure functions.
#ifndef NEARDUP_DEDUP_PAIR_RULE_H_
#define NEARDUP_DEDUP_PAIR_RULE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "neardup/dedup/signature.h"
#include "neardup/index/multi_index.h"

namespace neardup {

// The length-aware re-check policy (docs/ACCURACY.md). Tunable per
// namespace: every field but sketch_max_chars may be changed later with
// NearDupSet::SetPolicy().
// anchor_max_postings' largest value: in effect, no stop keys.
inline constexpr int kMaxAnchorPostings = 1 << 30;

struct RecheckOptions {
  // Off: the plain rule of the seed (every fingerprint candidate within k is
  // a duplicate; no anchors, no similarity).
  bool enabled = true;
  // The decision: a candidate is a near-duplicate iff the similarity of
  // text/shingles.h (the Jaccard index of the two texts' character n-gram
  // sets) is at least this. docs/ACCURACY.md says how the default was chosen.
  double threshold = 0.7;
  // n of the character n-grams, 1..16. Changes every sketch: fixed while a
  // namespace holds documents.
  int shingle_size = 3;
  // A text is short when its normalized text has at most this many code
  // points; short texts search the fingerprint index with short_k.
  int short_max_chars = 200;
  // Fingerprint search radius for short texts, 0..kMaxSupportedK (at least k
  // is used).
  int short_k = 3;
  // Anchor keys per document (0..kAnchorCount; 0 = fingerprint candidates
  // only): candidates are also the kept documents sharing one of the
  // document's first `anchors` anchors (similarity.h) that are not stop keys.
  int anchors = 16;
  // An anchor under which more than this many kept documents were added
  // becomes a stop key: too common to point at near-duplicates. Bounds the
  // candidates per query by anchors * anchor_max_postings.
  int anchor_max_postings = 64;
  // Kept documents whose normalized text has at most this many code points
  // keep their sketch (and anchors) in memory; the others are matched by
  // fingerprint distance <= k only. Fixed at NearDupSet::Create().
  int sketch_max_chars = 1 << 30;

  // Field by field, so that a field without a descriptor (setting.h) still
  // counts.
  friend bool operator==(const RecheckOptions&, const RecheckOptions&) = default;
};

struct NearDupOptions {
  // Largest Hamming distance (inclusive) of a near-duplicate between long
  // texts (and of any pair when the re-check is off); 0..kMaxSupportedK.
  int k = 3;
  MultiIndexOptions index;  // expected_k is overridden with the largest radius
  // Check content_hash equality before searching the index. Off only costs an
  // index search per exact repeat (and loses nothing for texts with features).
  bool exact_fast_path = true;
  RecheckOptions recheck;
  // Where the kept documents' sketch records live: empty, in memory; else an
  // unnamed temporary file in this directory, read back per candidate (the
  // records are most of a short text's memory; near_dup_set.h). Decisions
  // are the same either way.
  std::string sketch_dir;
  // The re-check policy never changes (the batch job): SetPolicy is refused,
  // and with the re-check off no document is indexed under its anchors,
  // which only the re-check probes. Otherwise (the service) every kept
  // document is indexed under them, so that SetPolicy can turn the re-check
  // on: that indexing was a quarter of `dedup --no-recheck`'s time.
  bool policy_fixed = false;
};

struct DuplicateMatch {
  DocId id = 0;        // the kept document
  int distance = 0;    // Hamming distance of the fingerprints
  bool exact = false;  // equal content_hash
  // Estimated Jaccard similarity (0..1) of the two texts' character-shingle
  // sets (similarity.h): 1 for an exact match. When a sketch is missing on
  // either side (a long kept text, whose sketch is not kept, or a legacy
  // document) it is estimated from the fingerprint distance instead:
  // c / (2 - c) with c = cos(pi * distance / 64), and rechecked is false.
  double similarity = 0;
  bool rechecked = false;  // similarity came from the sketches
  // The similarity is exact: both texts have at most kSketchSize distinct
  // n-grams, so both sketches hold their whole sets (else it is estimated,
  // standard error <= 0.031).
  bool similarity_exact = false;
  // Equality compares the decision (which document, how far, exact); the
  // similarity is a derived score.
  friend bool operator==(const DuplicateMatch& a, const DuplicateMatch& b) {
    return a.id == b.id && a.distance == b.distance && a.exact == b.exact;
  }
};

// What an answer reports as "similarity_exact". Equal normalized text without
// sketches is reported as exact (nothing better is known); with sketches the
// similarity was measured like any pair's and is exact only when the sets
// were whole (equal normalized text drops punctuation, which the similarity
// counts, so it is not similarity 1).
inline bool SimilarityIsExact(const DuplicateMatch& m) {
  return m.rechecked ? m.similarity_exact : m.similarity_exact || m.exact;
}

// The similarity estimate that DuplicateMatch falls back to without sketches.
double SimilarityFromDistance(int distance);

// One document of a candidate pair, as the pair rule sees it: its length and
// its sketch values (borrowed, ascending). num_shingles == 0 or no values
// means "no sketch" (a legacy document, or a text kept without its sketch).
struct PairSide {
  uint32_t num_chars = 0;
  const uint32_t* mins = nullptr;
  size_t num_mins = 0;
  uint32_t num_shingles = 0;
  bool has_sketch() const { return num_shingles != 0; }
  static PairSide Of(const DocSignature& sig) {
    return PairSide{sig.num_chars, sig.sketch.mins.data(), sig.sketch.mins.size(), sig.sketch.num_shingles};
  }
};

struct PairDecision {
  bool duplicate = false;
  double similarity = 0;   // as DuplicateMatch::similarity
  bool rechecked = false;  // similarity came from the sketches
  bool exact = false;      // ... and both sketches held their whole sets
};

// The pair rule's first test: two sketched texts with `a` and `b` distinct
// n-grams cannot reach `threshold`, since |A∩B| <= min and |A∪B| >= max
// make the similarity at most min / max. DecidePair rejects such a pair
// without reading the sketches; a store that keeps the counts beside its
// candidates rejects them with this before reading their sketches, and so
// decides exactly as DecidePair would.
inline bool ShingleCountsRuleOut(double threshold, uint32_t a, uint32_t b) {
  const uint32_t smaller = a < b ? a : b, larger = a < b ? b : a;
  return static_cast<double>(smaller) < threshold * static_cast<double>(larger);
}

// The pair rule (step 3 above) for two candidates `distance` bits apart,
// whatever found them (fingerprint radius, anchor, or a store's bucket).
// NearDupSet and the Redis Cluster store both decide through it, so the rule
// is written once. Symmetric: DecidePair(o, a, b, d) == DecidePair(o, b, a, d).
// Pure (no state).
PairDecision DecidePair(const NearDupOptions& options, const PairSide& a, const PairSide& b, int distance);

// Whether a text of this many code points is short under `recheck`.
inline bool IsShortText(const RecheckOptions& recheck, uint32_t num_chars) {
  return num_chars <= static_cast<uint32_t>(recheck.short_max_chars);
}

// The fingerprint radius a query searches (near_dup_set.h step 2):
// max(k, short_k) for a short text with a sketch under the re-check, else k.
inline int QueryRadius(const NearDupOptions& o, const DocSignature& doc) {
  return o.recheck.enabled && doc.has_sketch() && IsShortText(o.recheck, doc.num_chars) ? std::max(o.k, o.recheck.short_k)
                                                                                        : o.k;
}

// Whether a kept text keeps its sketch (and anchors): sketch_max_chars.
inline bool KeepsSketch(const RecheckOptions& r, const DocSignature& doc) {
  return doc.has_sketch() && doc.num_chars <= static_cast<uint32_t>(r.sketch_max_chars);
}

// What orders two accepted matches of one query (step 4): the first
// exact-text match, then (re-check on) the most similar, then the nearest,
// then the smallest id (the oldest document).
struct MatchRank {
  bool first_exact = false;
  double similarity = 0;
  int distance = 0;
  uint64_t id = 0;
};
// Whether a ranks before b; `by_similarity` = the re-check is on.
inline bool RanksBefore(const MatchRank& a, const MatchRank& b, bool by_similarity) {
  if (a.first_exact != b.first_exact) return a.first_exact;
  if (by_similarity && a.similarity != b.similarity) return a.similarity > b.similarity;
  return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
}

}  // namespace neardup

#endif  // NEARDUP_DEDUP_PAIR_RULE_H_
