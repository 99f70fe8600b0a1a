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
  if (!a.has_sketch() || !b.has_sketch()) {
    // No sketch on one side: the fingerprint distance decides.
    d.similarity = SimilarityFromDistance(distance);
    d.duplicate = distance <= options.k;
    return d;
  }
  const RecheckOptions& r = options.recheck;
  d.rechecked = true;
  const uint32_t smaller = std::min(a.num_shingles, b.num_shingles);
  const uint32_t larger = std::max(a.num_shingles, b.num_shingles);
  const double min_j =
      smaller < static_cast<uint32_t>(r.small_text_shingles) ? r.min_similarity_small : r.min_similarity;
  const bool decided_by_distance =
      !r.enabled || (!IsShortText(r, a.num_chars) && !IsShortText(r, b.num_chars) && distance <= options.k);
  if (!decided_by_distance && static_cast<double>(smaller) < min_j * static_cast<double>(larger)) {
    // |A∩B| <= |A| and |A∪B| >= |B|: the true similarity is at most
    // |A| / |B|, below the threshold, whatever the sketches would estimate.
    // The score is that bound (no intersection computed).
    d.similarity = static_cast<double>(smaller) / static_cast<double>(larger);
    return d;
  }
  SimilarityEstimate e;
  if (decided_by_distance) {
    e = EstimateSimilarity(a.mins, a.num_mins, a.num_shingles, b.mins, b.num_mins, b.num_shingles);
    d.duplicate = distance <= options.k;
  } else {
    // Stops early for a pair that cannot reach the threshold; the score of
    // a rejected pair is then a partial estimate (it is never reported).
    d.duplicate =
        EstimateSimilarityAtLeast(a.mins, a.num_mins, a.num_shingles, b.mins, b.num_mins, b.num_shingles, min_j, &e);
  }
  d.similarity = e.jaccard;
  return d;
}

}  // namespace neardup
