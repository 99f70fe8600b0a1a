// NearDupSet: the kept documents of one stream (the batch job) or one
// namespace (the service), and the rule that decides whether a new document
// duplicates one of them. The batch Deduplicator and the service's namespaces
// both decide through this class, so the policy is written once.
//
// The rule, for a document with signature `doc` (docs/ACCURACY.md):
//  1. Exact: a kept document with the same content_hash (hash of the
//     normalized text) is a duplicate at distance 0 (exact = true,
//     similarity = 1). Texts without features are matched this way only,
//     never by fingerprint.
//  2. Candidates: the kept documents within Hamming distance r of its
//     fingerprint, where r = max(k, short_k) for a short query (normalized
//     text of at most short_max_chars code points) and r = k otherwise; and
//     the kept documents that share one of its anchors (similarity.h).
//  3. Re-check (DecidePair(), below): a candidate pair of two long texts
//     within k is a duplicate. Any other pair is a duplicate iff the
//     estimated Jaccard similarity of their character shingles is at least
//     min_similarity (min_similarity_small when the smaller text has fewer
//     than small_text_shingles shingles); a pair whose distinct shingle
//     counts alone rule that out (|A| < threshold * |B|: the true Jaccard
//     is at most |A| / |B|) is rejected without an estimate, so sampling
//     noise cannot accept it. A pair with a sketch missing on
//     either side (a signature made without text, a document stored before
//     sketches existed, or a kept text longer than sketch_max_chars) is a
//     duplicate iff its distance is at most k.
//  4. The best of the accepted candidates is the most similar one (then the
//     nearest, then the smallest id).
// With recheck.enabled = false the rule is the plain one: every fingerprint
// candidate within k is a duplicate, nearest first, then smallest id.
//
// Ids are chosen by the caller (the batch job uses input sequence numbers;
// the service its internal document numbers), must be unique and below
// UINT64_MAX (the tables' empty mark).
//
// Thread-safety: const methods may run concurrently; Insert/Remove/set_k/
// SetPolicy need exclusive access (the service holds its namespace lock).
#ifndef NEARDUP_NEAR_DUP_SET_H_
#define NEARDUP_NEAR_DUP_SET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "neardup/fingerprint.h"
#include "neardup/hamming_index.h"
#include "neardup/multi_index.h"
#include "neardup/similarity.h"
#include "neardup/status.h"

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
// matching rule keeps of a text.
DocSignature MakeSignature(const TextAnalysis& analysis);

// The length-aware re-check policy (docs/ACCURACY.md). Tunable per
// namespace: every field but sketch_max_chars may be changed later with
// NearDupSet::SetPolicy().
struct RecheckOptions {
  // Off: the plain rule (every fingerprint candidate within k is a
  // duplicate; no anchors, no re-check).
  bool enabled = true;
  // A text is short when its normalized text has at most this many code
  // points. A pair involving a short text is always re-checked.
  int short_max_chars = 200;
  // Fingerprint search radius for short texts, 0..kMaxSupportedK (at least k
  // is used). 3 (= k): on the dev set the anchors find every near-duplicate
  // that a radius of 8 adds (F1 equal to 4 decimals in every bucket), and the
  // radius-8 search was most of a short text's decision cost in a large
  // index (docs/ACCURACY.md). Wider radii remain available per namespace.
  int short_k = 3;
  // Anchor keys per document (0..kAnchorCount; 0 = fingerprint candidates
  // only): candidates are also the kept documents sharing one of the
  // document's first `anchors` anchors (similarity.h) that are not stop keys.
  int anchors = 8;
  // An anchor under which more than this many kept documents were added
  // becomes a stop key: too common to point at near-duplicates. Bounds the
  // candidates per query by anchors * anchor_max_postings.
  int anchor_max_postings = 16;
  // A re-checked pair is a duplicate when the estimated Jaccard similarity of
  // its shingle sets is at least min_similarity, or min_similarity_small
  // when the smaller text has fewer than small_text_shingles shingles (an
  // edit changes 2-4 shingles, a large share of a tiny text's).
  double min_similarity = 0.5;
  double min_similarity_small = 0.35;
  int small_text_shingles = 40;
  // Kept documents whose normalized text has at most this many code points
  // keep their sketch (and anchors) in memory; the others are matched by
  // fingerprint distance <= k only. Fixed at NearDupSet::Create().
  int sketch_max_chars = 1 << 30;
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
  // Equality compares the decision (which document, how far, exact); the
  // similarity is a derived score.
  friend bool operator==(const DuplicateMatch& a, const DuplicateMatch& b) {
    return a.id == b.id && a.distance == b.distance && a.exact == b.exact;
  }
};

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
};

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

class NearDupSet {
 public:
  // kInvalidArgument for k out of range or bad index options.
  static Result<std::unique_ptr<NearDupSet>> Create(const NearDupOptions& options);

  NearDupSet(const NearDupSet&) = delete;
  NearDupSet& operator=(const NearDupSet&) = delete;
  ~NearDupSet();

  // The kept document `doc` duplicates, or nullopt. When `all` is given it
  // receives every accepted match, best first (best == (*all)[0]).
  Status FindDuplicate(const DocSignature& doc, std::optional<DuplicateMatch>* best,
                       std::vector<DuplicateMatch>* all = nullptr) const;

  // Adds a kept document. kAlreadyExists if `id` is present.
  Status Insert(DocId id, const DocSignature& doc);
  // Removes a kept document (its content_hash, fingerprint and has_features
  // as inserted; the sketch is not needed). False if absent.
  bool Remove(DocId id, const DocSignature& doc);

  // Changes the radius of later searches (0..kMaxSupportedK); the index
  // serves any k, so nothing is rebuilt. Needs exclusive access.
  Status set_k(int k);
  // Changes the re-check policy of later searches (sketch_max_chars must be
  // unchanged: kFailedPrecondition). kInvalidArgument for out-of-range
  // values. Needs exclusive access.
  Status SetPolicy(const RecheckOptions& recheck);
  // kInvalidArgument unless k and every policy field are in range.
  static Status ValidateOptions(const NearDupOptions& options);

  size_t size() const { return size_; }
  // Kept documents whose sketch is held for re-checks.
  size_t sketches() const;
  // Index, exact-match table, kept sketches and anchor table.
  size_t MemoryBytes() const;
  const NearDupOptions& options() const { return options_; }
  const HammingIndex& index() const { return *index_; }

 private:
  NearDupSet(const NearDupOptions& options, std::unique_ptr<HammingIndex> index);
  // Whether a fingerprint candidate is a real duplicate (re-check stage);
  // fills the match's similarity.
  // `rec` is the candidate's sketch record (null: none kept).
  bool Accept(const DocSignature& doc, const Match& candidate, const uint32_t* rec, DuplicateMatch* match) const;
  // Every kept id whose content_hash is this (usually none or one).
  void ExactMatches(uint64_t content_hash, std::vector<DocId>* ids) const;
  bool IsShort(uint32_t num_chars) const { return IsShortText(options_.recheck, num_chars); }
  int SearchRadius(const DocSignature& doc) const;
  bool KeepsSketch(const DocSignature& doc) const;

  NearDupOptions options_;
  std::unique_ptr<HammingIndex> index_;
  // The exact-match table (content_hash -> ids), the kept sketch records and
  // the anchor table (near_dup_set.cc): flat tables that grow in small
  // pieces, so no insert stalls the namespace for a whole-table rehash.
  class Tables;
  std::unique_ptr<Tables> t_;
  size_t size_ = 0;
};

}  // namespace neardup

#endif  // NEARDUP_NEAR_DUP_SET_H_
