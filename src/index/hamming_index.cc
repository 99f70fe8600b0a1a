#include "neardup/index/hamming_index.h"

#include <algorithm>

#include "neardup/util/parallel.h"

namespace neardup {

Status HammingIndex::SearchBatch(std::span<const uint64_t> queries, int k,
                                 std::vector<std::vector<Match>>* out, int threads) const {
  if (k < 0 || k > max_k()) {
    return Status::InvalidArgument("k must be in [0, " + std::to_string(max_k()) + "]");
  }
  out->resize(queries.size());
  const size_t n = queries.size();
  const size_t t = static_cast<size_t>(std::clamp(threads, 1, 64));
  if (t == 1 || n < 2 * t) {
    for (size_t i = 0; i < n; ++i) {
      Status s = Search(queries[i], k, &(*out)[i]);
      if (!s.ok()) return s;
    }
    return Status::OK();
  }
  ParallelFor(n, static_cast<int>(t), [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) (void)Search(queries[i], k, &(*out)[i]);
  });
  return Status::OK();
}

}  // namespace neardup
