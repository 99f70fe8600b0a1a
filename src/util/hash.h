// Integer hash finalizers, named for what they are. Two different mixers are
// in use and must not be swapped: Murmur3Fmix64 is part of the persisted
// sketch scheme (text/similarity.h, step 4), so changing it changes stored
// data; SplitMix64 only spreads in-memory table keys.
#ifndef NEARDUP_UTIL_HASH_H_
#define NEARDUP_UTIL_HASH_H_

#include <cstdint>

namespace neardup {

// MurmurHash3's 64-bit finalizer (fmix64). Persisted: see above.
inline uint64_t Murmur3Fmix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// splitmix64's finalizer: the in-memory tables' key spreader.
inline uint64_t SplitMix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace neardup

#endif  // NEARDUP_UTIL_HASH_H_
