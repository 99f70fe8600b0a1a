// BruteForceIndex: a linear popcount scan behind the HammingIndex interface.
// It is the oracle the fast index is tested against and the baseline every
// benchmark reports beside it. Search cost is O(size()) per query.
//
// Thread-safety: as HammingIndex.
#ifndef NEARDUP_BRUTE_FORCE_INDEX_H_
#define NEARDUP_BRUTE_FORCE_INDEX_H_

#include <memory>

#include "neardup/index/hamming_index.h"

namespace neardup {

std::unique_ptr<HammingIndex> NewBruteForceIndex();

}  // namespace neardup

#endif  // NEARDUP_BRUTE_FORCE_INDEX_H_
