// The one parallel-for of neardup.
#ifndef NEARDUP_UTIL_PARALLEL_H_
#define NEARDUP_UTIL_PARALLEL_H_

#include <cstddef>
#include <functional>

namespace neardup {

// Calls fn(begin, end) over disjoint ranges covering [0, n), on up to
// `threads` threads (the caller's among them), in small chunks handed out in
// order so uneven work balances. Returns when all calls have returned. An
// exception thrown by fn stops the handing out of chunks and is rethrown
// here (the first one). threads <= 1 runs fn(0, n) on the caller's thread.
void ParallelFor(size_t n, int threads, const std::function<void(size_t begin, size_t end)>& fn);

}  // namespace neardup

#endif  // NEARDUP_UTIL_PARALLEL_H_
