#include "neardup/dedup/minhash_lsh.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/hash.h"

namespace neardup {
namespace {

// ∫ f over [a, b] by the midpoint rule (datasketch integrates numerically too).
template <typename F>
double Integrate(F f, double a, double b) {
  constexpr int kSteps = 1000;
  const double h = (b - a) / kSteps;
  double sum = 0;
  for (int i = 0; i < kSteps; ++i) sum += f(a + (i + 0.5) * h);
  return sum * h;
}

uint64_t BandKey(const uint32_t* rows, int r, int band) {
  uint64_t h = 0x243F6A8885A308D3ULL + static_cast<uint64_t>(band);
  for (int i = 0; i < r; ++i) h = Murmur3Fmix64(h ^ rows[i]) + 0x9E3779B97F4A7C15ULL;
  return h;
}

}  // namespace

LshBands OptimalLshBands(double t, int num_perm) {
  LshBands best;
  double best_error = std::numeric_limits<double>::infinity();
  for (int b = 1; b <= num_perm; ++b) {
    for (int r = 1; b * r <= num_perm; ++r) {
      auto p = [&](double s) { return 1.0 - std::pow(1.0 - std::pow(s, r), b); };
      const double fp = Integrate(p, 0.0, t);
      const double fn = Integrate([&](double s) { return 1.0 - p(s); }, t, 1.0);
      if (0.5 * fp + 0.5 * fn < best_error) best_error = 0.5 * fp + 0.5 * fn, best = {b, r};
    }
  }
  return best;
}

MinHashLsh::MinHashLsh(double threshold, int num_perm)
    : threshold_(threshold), num_perm_(num_perm), bands_(OptimalLshBands(threshold, num_perm)) {
  for (int i = 0; i < num_perm_; ++i) seeds_.push_back(Murmur3Fmix64(0x5851F42D4C957F2DULL + static_cast<uint64_t>(i)));
  tables_.resize(static_cast<size_t>(bands_.bands));
}

StreamDecision MinHashLsh::Add(const std::vector<uint64_t>& set) {
  const size_t index = next_++;
  std::vector<uint32_t> sig(static_cast<size_t>(num_perm_), UINT32_MAX);
  for (uint64_t h : set) {
    for (int i = 0; i < num_perm_; ++i) {
      const auto v = static_cast<uint32_t>(Murmur3Fmix64(h ^ seeds_[static_cast<size_t>(i)]));
      if (v < sig[static_cast<size_t>(i)]) sig[static_cast<size_t>(i)] = v;
    }
  }
  StreamDecision best;
  std::vector<uint64_t> keys(static_cast<size_t>(bands_.bands));
  std::vector<uint32_t> seen;
  for (int b = 0; b < bands_.bands; ++b) {
    keys[static_cast<size_t>(b)] = BandKey(sig.data() + b * bands_.rows, bands_.rows, b);
    auto it = tables_[static_cast<size_t>(b)].find(keys[static_cast<size_t>(b)]);
    if (it == tables_[static_cast<size_t>(b)].end()) continue;
    for (uint32_t slot : it->second) seen.push_back(slot);
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (uint32_t slot : seen) {
    const auto& [kept_index, other] = kept_[slot];
    int equal = 0;
    for (size_t i = 0; i < sig.size(); ++i) equal += sig[i] == other[i];
    const double s = static_cast<double>(equal) / num_perm_;
    if (Reaches(s, threshold_) && (!best.duplicate || s > best.similarity)) best = {true, kept_index, s};
  }
  if (best.duplicate) return best;
  const auto slot = static_cast<uint32_t>(kept_.size());
  for (int b = 0; b < bands_.bands; ++b) tables_[static_cast<size_t>(b)][keys[static_cast<size_t>(b)]].push_back(slot);
  kept_.emplace_back(index, std::move(sig));
  return best;
}

size_t MinHashLsh::MemoryBytes() const {
  // 4 bytes a slot, and per band an entry of (8-byte key + 4-byte id) plus
  // the hash tables' own overhead, which is not counted.
  return kept_.size() * (static_cast<size_t>(num_perm_) * 4 + static_cast<size_t>(bands_.bands) * 12);
}

}  // namespace neardup
