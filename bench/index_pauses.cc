// The longest single adds while a Hamming index grows from empty, one
// document at a time (the service's path): every add slower than a limit is
// printed with the index size at which it happened. The index's growth steps
// run inside an add, under the namespace lock in the service, so these are
// pauses of every request of the namespace.
//
//   ./build/index_pauses [N=12000000] [LIMIT_MS=20]
//
// Uniform random fingerprints, ids 0..N-1, defaults (k = 3, no expected
// size). Wall time per add (steady_clock), so run it on a quiet machine.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "neardup/index/multi_index.h"

int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 12000000;
  const double limit_ms = argc > 2 ? std::atof(argv[2]) : 20.0;
  neardup::MultiIndexOptions o;
  o.expected_k = 3;
  auto index = neardup::NewMultiIndex(o);
  if (!index.ok()) {
    std::fprintf(stderr, "index_pauses: %s\n", index.status().ToString().c_str());
    return 1;
  }
  auto idx = std::move(index).value();
  std::mt19937_64 rng(1);
  double worst = 0, total = 0;
  uint64_t worst_at = 0, pauses = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t fp = rng();
    const auto t0 = std::chrono::steady_clock::now();
    if (!idx->Add(fp, i).ok()) {
      std::fprintf(stderr, "index_pauses: add %llu failed\n", static_cast<unsigned long long>(i));
      return 1;
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    total += ms;
    if (ms > limit_ms) {
      ++pauses;
      std::printf("pause %.1f ms at %llu entries\n", ms, static_cast<unsigned long long>(i));
    }
    if (ms > worst) {
      worst = ms;
      worst_at = i;
    }
  }
  std::printf("adds %llu, total %.1f s, pauses over %.0f ms: %llu, worst %.1f ms at %llu entries\n",
              static_cast<unsigned long long>(n), total / 1000, limit_ms, static_cast<unsigned long long>(pauses),
              worst, static_cast<unsigned long long>(worst_at));
  return 0;
}
