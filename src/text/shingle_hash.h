// ShingleHash (neardup/text/shingles.h) inline, for the loops that hash
// every n-gram of a text: a call per n-gram kept the multiplications of
// neighbouring n-grams from overlapping.
#ifndef NEARDUP_TEXT_SHINGLE_HASH_H_
#define NEARDUP_TEXT_SHINGLE_HASH_H_

#include <cstddef>
#include <cstdint>

#include "util/hash.h"

namespace neardup::internal {

inline uint64_t ShingleHashInline(const uint32_t* cps, size_t n) {
  // The length goes in first, so a short whole-text shingle never equals an
  // n-gram of another size.
  uint64_t h = 0x6A09E667F3BCC909ULL ^ n;
  for (size_t i = 0; i < n; ++i) h = (h ^ cps[i]) * 0x9E3779B97F4A7C15ULL;
  return Murmur3Fmix64(h);
}

// The top 32 bits of the hash of each n-gram cps[i .. i + n), i < count, in
// out[i]; n known at compile time for the usual sizes.
template <size_t N>
void TopShingleHashesFixed(const uint32_t* cps, size_t count, uint32_t* out) {
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<uint32_t>(ShingleHashInline(cps + i, N) >> 32);
}

inline void TopShingleHashes(const uint32_t* cps, size_t n, size_t count, uint32_t* out) {
  switch (n) {
    case 2: return TopShingleHashesFixed<2>(cps, count, out);
    case 3: return TopShingleHashesFixed<3>(cps, count, out);
    case 4: return TopShingleHashesFixed<4>(cps, count, out);
    case 5: return TopShingleHashesFixed<5>(cps, count, out);
    default:
      for (size_t i = 0; i < count; ++i) out[i] = static_cast<uint32_t>(ShingleHashInline(cps + i, n) >> 32);
  }
}

}  // namespace neardup::internal

#endif  // NEARDUP_TEXT_SHINGLE_HASH_H_
