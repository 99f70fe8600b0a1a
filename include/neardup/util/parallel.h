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
// The other threads are the workers of a process-wide pool that grows to the
// largest `threads` asked for and is never shut down; any thread may call
// this, also from inside fn (a call that finds no free worker runs on its
// caller alone). In the child of a fork every call runs on its caller alone
// (a fork from inside fn: the child must exec or _exit).
void ParallelFor(size_t n, int threads, const std::function<void(size_t begin, size_t end)>& fn);

// Starts the pool's workers for calls of up to `threads` threads now, on the
// calling thread: a worker keeps the scheduling priority of the thread that
// started it, so a caller that lowers a thread's priority (below) starts the
// workers first from a thread that has not.
void StartWorkers(int threads);

// Lowers the calling thread's scheduling priority by `levels` nice levels
// (at most to 19), for work that should only fill cores others leave idle.
// Linux: nice is a thread's own; threads it starts inherit it. Best effort:
// a failure changes nothing.
void LowerThisThreadPriority(int levels);

// The first p elements of the stable merge of sorted a[0..na) and b[0..nb)
// (a's first on ties): how many of them come from a ("merge path").
template <typename It, typename Less>
size_t MergePathSplit(It a, size_t na, It b, size_t nb, size_t p, Less& less) {
  size_t lo = p > nb ? p - nb : 0, hi = std::min(p, na);
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (less(b[p - mid - 1], a[mid])) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// Sorts v by the strict weak order `less` on up to `threads` threads: one
// part per thread sorted at once, then the parts merged pairwise, each merge
// split into `threads` pieces of its output, so the last merge is not left
// to one thread. Elements that compare equal may end in any order, as with
// std::sort; under a total order the result is the same for any thread
// count. Uses a second buffer of v's size while merging.
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
  auto at = [&](size_t part) { return std::min(part, parts) * n / parts; };
  ParallelFor(parts, threads, [&](size_t b, size_t e) {
    for (size_t p = b; p < e; ++p) std::sort(v.begin() + at(p), v.begin() + at(p + 1), less);
  });
  std::vector<T> out(n);
  const size_t pieces = static_cast<size_t>(threads);
  for (size_t width = 1; width < parts; width *= 2) {
    const size_t merges = (parts + 2 * width - 1) / (2 * width);
    ParallelFor(merges * pieces, threads, [&](size_t b, size_t e) {
      for (size_t task = b; task < e; ++task) {
        const size_t k = task / pieces, piece = task % pieces;
        const size_t lo = at(2 * k * width), mid = at(2 * k * width + width), hi = at(2 * k * width + 2 * width);
        const size_t p0 = piece * (hi - lo) / pieces, p1 = (piece + 1) * (hi - lo) / pieces;
        auto a = v.begin() + lo, bb = v.begin() + mid;
        const size_t i0 = MergePathSplit(a, mid - lo, bb, hi - mid, p0, less);
        const size_t i1 = MergePathSplit(a, mid - lo, bb, hi - mid, p1, less);
        std::merge(std::make_move_iterator(a + i0), std::make_move_iterator(a + i1),
                   std::make_move_iterator(bb + (p0 - i0)), std::make_move_iterator(bb + (p1 - i1)),
                   out.begin() + lo + p0, less);
      }
    });
    v.swap(out);
  }
}

}  // namespace neardup

#endif  // NEARDUP_UTIL_PARALLEL_H_
