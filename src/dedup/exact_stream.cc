#include "neardup/dedup/exact_stream.h"

#include <cmath>

#include "neardup/text/shingles.h"

namespace neardup {
namespace {

// Keeps the best candidate: most similar, then earliest kept.
void Consider(size_t index, double s, double threshold, StreamDecision* best) {
  if (!Reaches(s, threshold)) return;
  if (!best->duplicate || s > best->similarity || (s == best->similarity && index < best->duplicate_of)) {
    *best = StreamDecision{true, index, s};
  }
}

}  // namespace

size_t ExactStream::ProbePrefix(size_t size) const {
  // Two sets with J >= t share a hash within both sets' first
  // |x| - ceil(t|x|) + 1 (in any fixed order). The epsilon only lengthens
  // the prefix, so rounding can never lose a pair.
  const auto need = static_cast<size_t>(std::ceil(threshold_ * static_cast<double>(size) - 1e-9));
  return size - std::min(size, need) + 1;
}

StreamDecision ExactStream::Add(std::vector<uint64_t> set) {
  const size_t index = next_++;
  const auto query = static_cast<uint32_t>(index + 1);
  StreamDecision best;
  const size_t prefix = std::min(set.size(), ProbePrefix(set.size()));
  // The length filter: J(x, y) <= min/max of the sizes.
  const double lo = threshold_ * static_cast<double>(set.size()) - 1e-9;
  const double hi = static_cast<double>(set.size()) / threshold_ + 1e-9;
  auto probe = [&](uint64_t h) {
    auto it = postings_.find(h);
    if (it == postings_.end()) return;
    for (uint32_t slot : it->second) {
      if (seen_[slot] == query) continue;
      seen_[slot] = query;
      const auto size = static_cast<double>(kept_[slot].set.size());
      if (size < lo || size > hi) continue;
      ++verified_;
      Consider(kept_[slot].index, Jaccard(set, kept_[slot].set), threshold_, &best);
    }
  };
  if (set.empty()) {
    probe(0);  // empty documents are posted under a reserved key
  } else {
    for (size_t i = 0; i < prefix; ++i) probe(set[i]);
  }
  if (best.duplicate) return best;
  const auto slot = static_cast<uint32_t>(kept_.size());
  seen_.push_back(query);
  if (set.empty()) {
    postings_[0].push_back(slot);
  } else {
    for (size_t i = 0; i < prefix; ++i) postings_[set[i]].push_back(slot);
  }
  kept_.push_back(Kept{index, std::move(set)});
  return best;
}

StreamDecision BruteForceStream::Add(std::vector<uint64_t> set) {
  const size_t index = next_++;
  StreamDecision best;
  for (const auto& [i, kept] : kept_) Consider(i, Jaccard(set, kept), threshold_, &best);
  if (!best.duplicate) kept_.emplace_back(index, std::move(set));
  return best;
}

}  // namespace neardup
