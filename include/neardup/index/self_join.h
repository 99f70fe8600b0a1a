// SelfJoin: every pair of fingerprints within Hamming distance k in one set.
//
// The batch form of HammingIndex::Search: instead of one index query per
// fingerprint, a one-shot sort-based join (pigeonhole on k + 1 blocks). Two
// fingerprints within k bits agree exactly on at least one of k + 1 disjoint
// blocks, so for each block the set is sorted by that block's bits (radix
// sort, positions carried along) and the pairs inside each group of equal
// keys are compared. Inside a group of 32 or more, the remaining bits are
// split again into k + 1 sub-blocks and only entries that share a sub-block's
// bucket are compared (the same pigeonhole, one level down). A pair is
// reported only at the first block (and sub-block) on which the two agree,
// so each pair comes out exactly once without a dedup set.
//
// Contract:
//  * Input: fps[0..n), n < 2^32. Output: every (i, j) with i < j and
//    popcount(fps[i] ^ fps[j]) <= k, exactly once, with its distance, sorted
//    by (i, j) ascending. The output is identical for every thread count.
//  * k must be within [0, kMaxSelfJoinK]; otherwise kInvalidArgument and
//    *out is left empty. Block widths: 64 bits split into k + 1 near-equal
//    blocks (k = 3: four 16-bit blocks).
//  * Identical fingerprints: m copies of one value are m(m-1)/2 pairs at
//    distance 0 and all are reported (the output is quadratic, by definition).
//    The work is not: inside a large group equal fingerprints are collapsed
//    into runs, compared once per run, and skipped outright on every block
//    after the first. Callers that want one representative per value should
//    collapse exact duplicates before joining.
//  * options.max_pairs bounds the output: when more pairs exist the call
//    returns kResourceExhausted and *out is left empty, so a set dominated by
//    one huge cluster cannot exhaust memory by surprise.
//
// Memory: two sort buffers of n * 12 bytes (fingerprint + position) per
// thread that runs a block, min(threads, k + 1) of them, reused from block to
// block; plus 12 bytes per output pair, up to 24 while the per-block results
// are merged into *out. At 10M fingerprints, k = 3, 2 threads: ~480 MB of
// buffers besides the input and 2M pairs.
//
// Threads: blocks run in parallel on up to `threads` threads (ParallelFor);
// with more threads than k + 1 blocks the extra ones idle. The function is
// reentrant; fps must not change during the call.
#ifndef NEARDUP_INDEX_SELF_JOIN_H_
#define NEARDUP_INDEX_SELF_JOIN_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "neardup/util/status.h"

namespace neardup {

// k = 7 splits 64 bits into 8-bit blocks: at millions of fingerprints every
// group holds n / 256 entries and the join is quadratic in practice.
inline constexpr int kMaxSelfJoinK = 7;

struct JoinPair {
  uint32_t i = 0;  // i < j, positions in the input span
  uint32_t j = 0;
  uint32_t distance = 0;
  friend bool operator==(const JoinPair&, const JoinPair&) = default;
};

struct SelfJoinOptions {
  int threads = 1;
  // 0 = no bound. See the contract above.
  uint64_t max_pairs = 0;
};

// Optional measurements. Sort and scan: CPU seconds of the threads that ran
// them, summed (on shared cores, the work itself, not the wait for a core).
struct SelfJoinStats {
  double sort_seconds = 0;   // radix sorts of (fingerprint, position) by block key
  double scan_seconds = 0;   // comparing pairs inside equal-key groups
  double merge_seconds = 0;  // concatenating and sorting the per-block pairs (wall)
  uint64_t comparisons = 0;  // fingerprint pairs compared (xor + popcount)
  uint64_t largest_group = 0;
};

Status SelfJoin(std::span<const uint64_t> fps, int k, const SelfJoinOptions& options,
                std::vector<JoinPair>* out, SelfJoinStats* stats = nullptr);

// The (offset, width) in bits of block b of k + 1 (low bits first); exposed
// for tests and for tools that partition by block key.
struct JoinBlock {
  int offset = 0;
  int width = 0;
};
std::vector<JoinBlock> SelfJoinBlocks(int k);

}  // namespace neardup

#endif  // NEARDUP_INDEX_SELF_JOIN_H_
