// MultiIndex: the fast exact Hamming index (pigeonhole / multi-index hashing
// after Manku et al. WWW'07 and Norouzi et al. CVPR'12).
//
// The 64 bits are cut into `blocks` contiguous blocks (widths differ by at
// most one). If two fingerprints are within distance k, then among any
// t = floor(k / (r+1)) + 1 blocks at least one differs in at most r bits. A
// query picks the smallest radius r with t <= blocks, probes t tables, and in
// each enumerates the buckets within r of its own block. Each table keeps, per
// entry, a 4-byte row and a 16-bit signature (the bits that follow its bucket
// key), so most candidates are rejected from one contiguous array without
// touching the fingerprint array. See docs/index.md for the layout and cost
// model.
//
// Memory per entry: blocks * 6 bytes (tables) + 8 (fingerprint) + 8 (id)
// + 4.6-6 (id lookup for Remove/Get) plus bucket slack: ~46 B at 50M with
// 4 blocks (docs/BENCHMARKS.md §1).
//
// Thread-safety: as HammingIndex.
#ifndef NEARDUP_MULTI_INDEX_H_
#define NEARDUP_MULTI_INDEX_H_

#include <memory>

#include "neardup/index/hamming_index.h"

namespace neardup {

struct MultiIndexOptions {
  // Number of blocks (= tables), 2..8. 0 picks DefaultBlocks(expected_k,
  // expected_size).
  int blocks = 0;
  // Used only to choose defaults; any k in [0, kMaxSupportedK] can be queried.
  int expected_k = 3;
  uint64_t expected_size = 0;
};

// The measured default (docs/BENCHMARKS.md): 4 blocks serve every k <= 8 with
// 16-bit keys; below k = 3 fewer, wider blocks are cheaper.
int DefaultBlocks(int k, uint64_t expected_size);

// kInvalidArgument for blocks outside 2..8 or expected_k outside 0..8.
Result<std::unique_ptr<HammingIndex>> NewMultiIndex(const MultiIndexOptions& options = {});

}  // namespace neardup

#endif  // NEARDUP_MULTI_INDEX_H_
