// The one parallel-for of neardup.
#ifndef NEARDUP_UTIL_PARALLEL_H_
#define NEARDUP_UTIL_PARALLEL_H_

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace neardup {

// Calls fn(begin, end) over disjoint ranges covering [0, n), on up to
// `threads` threads (the caller's among them), in small chunks handed out in
// order so uneven work balances. Returns when all calls have returned. An
// exception thrown by fn stops the handing out of chunks and is rethrown
// here (the first one). threads <= 1 runs fn(0, n) on the caller's thread.
void ParallelFor(size_t n, int threads, const std::function<void(size_t begin, size_t end)>& fn);

// Sorts v by the strict weak order `less` on up to `threads` threads: one
// part per thread sorted at once, then the parts merged pairwise. Elements
// that compare equal may end in any order, as with std::sort; under a total
// order the result is the same for any thread count.
template <typename T, typename Less>
void ParallelSort(std::vector<T>& v, int threads, Less less) {
  const size_t n = v.size();
  // Below this, threads cost more than they save.
  constexpr size_t kSerialBelow = size_t{1} << 15;
  const size_t parts = threads <= 1 || n < kSerialBelow ? 1 : static_cast<size_t>(threads);
  if (parts == 1) {
    std::sort(v.begin(), v.end(), less);
    return;
  }
  auto at = [&](size_t part) { return v.begin() + static_cast<std::ptrdiff_t>(std::min(part, parts) * n / parts); };
  ParallelFor(parts, threads, [&](size_t b, size_t e) {
    for (size_t p = b; p < e; ++p) std::sort(at(p), at(p + 1), less);
  });
  for (size_t width = 1; width < parts; width *= 2) {
    ParallelFor((parts + 2 * width - 1) / (2 * width), threads, [&](size_t b, size_t e) {
      for (size_t k = b; k < e; ++k) std::inplace_merge(at(2 * k * width), at(2 * k * width + width), at(2 * k * width + 2 * width), less);
    });
  }
}

}  // namespace neardup

#endif  // NEARDUP_UTIL_PARALLEL_H_
