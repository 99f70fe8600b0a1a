#include "neardup/dedup/pair_rule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace neardup {

double SimilarityFromDistance(int distance) {
  const double c = std::cos(std::numbers::pi * static_cast<double>(distance) / 64.0);
  return c <= 0 ? 0.0 : c / (2.0 - c);
}

PairDecision DecidePair(const NearDupOptions& options, const PairSide& a, const PairSide& b, int distance) {
  PairDecision d;
  const RecheckOptions& r = options.recheck;
  if (!r.enabled || !a.has_sketch() || !b.has_sketch()) {
    // The plain rule, or no sketch on one side: the fingerprint distance decides.
    d.similarity = SimilarityFromDistance(distance);
    d.duplicate = distance <= options.k;
    return d;
  }
  d.rechecked = true;
  d.exact = a.num_shingles <= kSketchSize && b.num_shingles <= kSketchSize;
  const uint32_t smaller = std::min(a.num_shingles, b.num_shingles);
  const uint32_t larger = std::max(a.num_shingles, b.num_shingles);
  if (ShingleCountsRuleOut(r.threshold, a.num_shingles, b.num_shingles)) {
    // |A∩B| <= |A| and |A∪B| >= |B|: the similarity is at most |A| / |B|,
    // below the threshold, whatever the sketches would estimate. The score
    // is that bound (no intersection computed).
    d.similarity = static_cast<double>(smaller) / static_cast<double>(larger);
    d.exact = false;
    return d;
  }
  // Stops early for a pair that cannot reach the threshold; the score of a
  // rejected pair is then a partial estimate (it is never reported).
  SimilarityEstimate e;
  d.duplicate =
      EstimateSimilarityAtLeast(a.mins, a.num_mins, a.num_shingles, b.mins, b.num_mins, b.num_shingles, r.threshold, &e);
  d.similarity = e.jaccard;
  return d;
}

}  // namespace neardup
