#include "neardup/util/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace neardup {

void ParallelFor(size_t n, int threads, const std::function<void(size_t begin, size_t end)>& fn) {
  if (n == 0) return;
  const size_t workers = std::min<size_t>(threads <= 1 ? 1 : static_cast<size_t>(threads), n);
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  // Small chunks balance uneven texts; large enough to keep the atomic cold.
  const size_t chunk = std::clamp<size_t>(n / (workers * 32), 1, 256);
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto work = [&] {
    try {
      while (!failed.load(std::memory_order_relaxed)) {
        const size_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
        if (begin >= n) break;
        fn(begin, std::min(n, begin + chunk));
      }
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (size_t i = 1; i < workers; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace neardup
