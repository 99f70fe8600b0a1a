// Hash-partitioned n-gram counts (internal to the library): 16 buckets of a
// text's n-gram hashes (hash & 15), 4 bits each, 15 meaning "15 or more".
// Two texts' counts bound their shared n-grams from above without their
// hashes: |A ∩ B| <= sum over buckets of min(|A_b|, |B_b|). NearDupSet keeps
// the counts beside each kept text's record and rules most candidates out
// with them before reading the record (near_dup_set.cc, RecordFilter).
//
// Pure functions; checked against the plain per-bucket loop in
// tests/bucket_counts_test.cc.
#ifndef NEARDUP_SRC_DEDUP_BUCKET_COUNTS_H_
#define NEARDUP_SRC_DEDUP_BUCKET_COUNTS_H_

#include <cstddef>
#include <cstdint>

namespace neardup::internal {

// The counts of n hashes (saturating at 15 per bucket).
inline uint64_t BucketCounts(const uint32_t* hashes, size_t n) {
  uint64_t c = 0;
  for (size_t i = 0; i < n; ++i) {
    const int shift = 4 * static_cast<int>(hashes[i] & 15);
    if (((c >> shift) & 15) != 15) c += uint64_t{1} << shift;
  }
  return c;
}

// *bound = the sum over buckets of min(x_b, y_b): a 15 stands for "15 or
// more", so min(15, y) = y is still a bound. False (no bound) when a bucket
// is 15 in both. It runs for every candidate a check rules out (~110 per
// short document), so eight buckets at a time, one per byte of a word.
inline bool SharedBucketBound(uint64_t x, uint64_t y, uint32_t* bound) {
  constexpr uint64_t kLow = 0x0F0F0F0F0F0F0F0FULL, kOne = 0x0101010101010101ULL;
  uint32_t sum = 0;
  for (int half = 0; half < 2; ++half) {
    const uint64_t a = (x >> (4 * half)) & kLow, b = (y >> (4 * half)) & kLow;
    // A byte of a & b is 15 iff both are; adding 1 then carries into bit 4.
    if (((a & b) + kOne) & (kOne << 4)) return false;
    // Per byte, 0x80 + b - a stays in 0x71..0x8F (no borrow crosses a
    // byte), and its bit 7 says b >= a.
    const uint64_t b_ge_a = (((b | (kOne << 7)) - a) >> 7) & kOne;
    const uint64_t pick_a = b_ge_a * 0xFF;
    const uint64_t m = (a & pick_a) | (b & ~pick_a);
    sum += static_cast<uint32_t>((m * kOne) >> 56);  // the top byte: all bytes' sum, at most 8 * 15
  }
  *bound = sum;
  return true;
}

}  // namespace neardup::internal

#endif  // NEARDUP_SRC_DEDUP_BUCKET_COUNTS_H_
