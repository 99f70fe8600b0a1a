// MinHashLsh: the usual MinHash-LSH near-duplicate stream, as datasketch
// users run it, kept as the baseline `neardup eval` reports beside
// neardup's own policy (docs/ACCURACY.md).
//
//  * num_perm MinHash slots over a document's n-gram hashes
//    (text/shingles.h): slot i holds min over the set of
//    Murmur3Fmix64(h ^ seed_i), truncated to 32 bits as datasketch does.
//  * b bands of r rows, chosen as datasketch chooses them: the (b, r) with
//    b·r <= num_perm minimising the false-positive plus false-negative
//    integrals of 1 - (1 - s^r)^b around the threshold (equal weights).
//  * A stream: query before insert; a candidate is a duplicate when its
//    estimated Jaccard (equal slots / num_perm) reaches the threshold; the
//    best is the most similar (then the earliest). Kept documents are
//    inserted, duplicates are not.
//
// Thread-safety: none.
#ifndef NEARDUP_DEDUP_MINHASH_LSH_H_
#define NEARDUP_DEDUP_MINHASH_LSH_H_

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "neardup/dedup/exact_stream.h"

namespace neardup {

struct LshBands {
  int bands = 0;
  int rows = 0;
};
// datasketch's optimal parameters for a threshold in (0, 1).
LshBands OptimalLshBands(double threshold, int num_perm);

class MinHashLsh {
 public:
  MinHashLsh(double threshold, int num_perm = 128);
  StreamDecision Add(const std::vector<uint64_t>& set);
  const LshBands& bands() const { return bands_; }
  // Signature and band-table bytes per kept document (approximate).
  size_t MemoryBytes() const;

 private:
  double threshold_;
  int num_perm_;
  LshBands bands_;
  std::vector<uint64_t> seeds_;
  size_t next_ = 0;
  std::vector<std::pair<size_t, std::vector<uint32_t>>> kept_;  // arrival index, signature
  std::vector<std::unordered_map<uint64_t, std::vector<uint32_t>>> tables_;
};

}  // namespace neardup

#endif  // NEARDUP_DEDUP_MINHASH_LSH_H_
