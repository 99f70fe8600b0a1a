#ifndef NEARDUP_DEDUP_SKETCH_RECORD_H_
#define NEARDUP_DEDUP_SKETCH_RECORD_H_

// A kept document's sketch record and the test that rules a pair out from a
// record's summary alone: shared by NearDupSet's searches of its own tables
// and of a slice of documents not yet kept (NearDupSet::SliceCandidates).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "dedup/bucket_counts.h"
#include "neardup/dedup/near_dup_set.h"
#include "neardup/dedup/pair_rule.h"
#include "neardup/dedup/signature.h"

namespace neardup::sketch_record {

// Record layout in the sketch arena.
// [id low, id high, num_chars, num_shingles, fp low, fp high, n, a, mins[n],
// anchors[a]]: a is the number of anchors the document was added under (for
// Remove); the id lets a chunk's evacuation find the record's slot.
constexpr size_t kRecIdLo = 0, kRecIdHi = 1, kRecChars = 2, kRecShingles = 3, kRecFpLo = 4, kRecFpHi = 5,
                 kRecCount = 6, kRecAnchors = 7, kRecHeader = 8;
constexpr size_t kMaxRecordWords = kRecHeader + kSketchSize + kAnchorCount;

inline size_t RecordSize(const uint32_t* rec) { return kRecHeader + rec[kRecCount] + rec[kRecAnchors]; }

// The exact match is listed apart (first); the others rank by the pair rule.
inline MatchRank RankOf(const DuplicateMatch& m) { return MatchRank{false, m.similarity, m.distance, m.id}; }

// An exact test that rules a pair out before its record is read: the pair
// rule's own size test (|A| < t·|B|), and, when both texts' whole n-gram
// hash sets are in their sketches (the exact similarity), a bound I on
// |A ∩ B| from hash-partitioned counts (bucket_counts.h), so
// J <= I / (|A| + |B| - I). A pair it rejects has similarity below the threshold, so the
// decision is the one the records would give (oracle tests: near_dup_oracle_test.cc).
struct RecordFilter {
  bool on = false;          // the re-check decides and the document has a sketch
  uint32_t shingles = 0;    // |A|
  bool complete = false;    // A is whole in its sketch
  internal::BucketCounts counts;  // A's bucket counts (complete only)
  double threshold = 0;

  // True if a kept text with `kept` shingles and these counts cannot reach
  // the threshold.
  bool Rejects(uint32_t kept, bool kept_complete, const internal::BucketCounts& kept_counts) const {
    if (!on || kept == 0) return false;
    if (ShingleCountsRuleOut(threshold, shingles, kept)) return true;  // DecidePair's first test, exactly
    if (!complete || !kept_complete) return false;
    uint32_t bound = 0;
    if (!internal::SharedBucketBound(counts, kept_counts, &bound)) return false;
    const double union_low = static_cast<double>(shingles) + kept - bound;
    // A margin keeps a rounding difference from ever rejecting a pair at
    // exactly the threshold.
    return static_cast<double>(bound) < (threshold - 1e-9) * union_low;
  }
};

// The bucket counts a sketch slot keeps for a document (none: its sketch is
// not its whole n-gram set, so the bound does not apply).
inline internal::BucketCounts SlotCounts(const DocSignature& doc) {
  return doc.sketch.complete() ? internal::CountBuckets(doc.sketch.mins.data(), doc.sketch.mins.size())
                               : internal::BucketCounts{};
}

// The filter for a search on behalf of `doc` under the re-check `r`.
inline RecordFilter FilterFor(const RecheckOptions& r, const DocSignature& doc) {
  RecordFilter f;
  if (!r.enabled || !doc.has_sketch()) return f;
  f.on = true;
  f.shingles = doc.sketch.num_shingles;
  f.complete = doc.sketch.complete();
  f.counts = SlotCounts(doc);
  f.threshold = r.threshold;
  return f;
}

// A record's n-gram count as a sketch slot keeps it (15 bits, saturated).
constexpr uint32_t kShinglesUnknown = (1u << 15) - 1;
inline uint32_t SlotShingles(uint32_t shingles) { return std::min(shingles, kShinglesUnknown); }

// Whether `filter` rules out a kept record known by its slot's summary:
// `shingles` (SlotShingles) and bucket `counts`.
inline bool SlotRejected(const RecordFilter& filter, uint32_t shingles, const internal::BucketCounts& counts) {
  return shingles != kShinglesUnknown && filter.shingles < kShinglesUnknown &&
         filter.Rejects(shingles, shingles <= kSketchSize, counts);
}

}  // namespace neardup::sketch_record

#endif  // NEARDUP_DEDUP_SKETCH_RECORD_H_
