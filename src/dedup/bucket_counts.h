// Hash-partitioned n-gram counts (internal to the library): 32 buckets of a
// text's n-gram hashes (hash & 31), 4 bits each, 15 meaning "15 or more".
// Two texts' counts bound their shared n-grams from above without their
// hashes: |A ∩ B| <= sum over buckets of min(|A_b|, |B_b|). NearDupSet keeps
// the counts beside each kept text's record and rules most candidates out
// with them before reading the record (near_dup_set.cc, RecordFilter).
//
// Why 32 buckets (16 bytes), not 16 (8 bytes): on 200k short documents the
// 16-bucket bound let 1.61M candidate records be read, of which 1.57M then
// failed the pair rule (most with a similarity below 0.1); 32 buckets rule
// out 1.50M of those 1.57M before the read, 64 buckets 1.57M (issue 17,
// docs/BENCHMARKS.md). A read is a cache miss, or a pread with --sketch-dir.
//
// Pure functions; checked against the plain per-bucket loop in
// tests/bucket_counts_test.cc.
#ifndef NEARDUP_SRC_DEDUP_BUCKET_COUNTS_H_
#define NEARDUP_SRC_DEDUP_BUCKET_COUNTS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace neardup::internal {

// A text's counts: buckets 0-15 in words[0], 16-31 in words[1], bucket b
// at bits 4 (b % 16) and up.
struct BucketCounts {
  std::array<uint64_t, 2> words{};
  bool operator==(const BucketCounts&) const = default;
};

// The counts of n hashes (saturating at 15 per bucket).
inline BucketCounts CountBuckets(const uint32_t* hashes, size_t n) {
  BucketCounts c;
  for (size_t i = 0; i < n; ++i) {
    uint64_t& w = c.words[(hashes[i] >> 4) & 1];
    const int shift = 4 * static_cast<int>(hashes[i] & 15);
    if (((w >> shift) & 15) != 15) w += uint64_t{1} << shift;
  }
  return c;
}

// One word's part of the bound below: its 16 buckets.
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

// The bound over all 32 buckets; false when a bucket is 15 in both.
inline bool SharedBucketBound(const BucketCounts& x, const BucketCounts& y, uint32_t* bound) {
  uint32_t low = 0, high = 0;
  if (!SharedBucketBound(x.words[0], y.words[0], &low) || !SharedBucketBound(x.words[1], y.words[1], &high)) {
    return false;
  }
  *bound = low + high;
  return true;
}

// The same counts one per byte, in an order of buckets of its own (the
// bound does not depend on it), for many bounds against the same texts: the
// batch join's pairing (batch_join.cc) takes ~90 per document, where the
// word-at-a-time bound above cost a third of the step.
struct ExpandedCounts {
  alignas(16) uint8_t bytes[32];
};

inline ExpandedCounts Expand(const BucketCounts& c) {
  constexpr uint64_t kLow = 0x0F0F0F0F0F0F0F0FULL;
  const uint64_t parts[4] = {c.words[0] & kLow, (c.words[0] >> 4) & kLow, c.words[1] & kLow, (c.words[1] >> 4) & kLow};
  ExpandedCounts e;
  std::memcpy(e.bytes, parts, sizeof parts);
  return e;
}

// SharedBucketBound(x, y) of the counts x and y were expanded from.
inline bool SharedBucketBound(const ExpandedCounts& x, const ExpandedCounts& y, uint32_t* bound) {
#if defined(__SSE2__)
  const __m128i lo = _mm_min_epu8(_mm_load_si128(reinterpret_cast<const __m128i*>(x.bytes)),
                                  _mm_load_si128(reinterpret_cast<const __m128i*>(y.bytes)));
  const __m128i hi = _mm_min_epu8(_mm_load_si128(reinterpret_cast<const __m128i*>(x.bytes + 16)),
                                  _mm_load_si128(reinterpret_cast<const __m128i*>(y.bytes + 16)));
  // min(u, v) = 15 iff both are 15: no bound.
  const __m128i fifteen = _mm_set1_epi8(15);
  if (_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(lo, fifteen), _mm_cmpeq_epi8(hi, fifteen))) != 0) return false;
  const __m128i sums = _mm_add_epi64(_mm_sad_epu8(lo, _mm_setzero_si128()), _mm_sad_epu8(hi, _mm_setzero_si128()));
  *bound = static_cast<uint32_t>(_mm_cvtsi128_si32(sums) + _mm_extract_epi16(sums, 4));
  return true;
#else
  uint32_t sum = 0;
  for (int i = 0; i < 32; ++i) {
    const uint8_t m = x.bytes[i] < y.bytes[i] ? x.bytes[i] : y.bytes[i];
    if (m == 15) return false;
    sum += m;
  }
  *bound = sum;
  return true;
#endif
}

}  // namespace neardup::internal

#endif  // NEARDUP_SRC_DEDUP_BUCKET_COUNTS_H_
