// The similarity neardup decides on, defined once (docs/ACCURACY.md,
// "The similarity"):
//
//   sim(A, B) = |S(A) ∩ S(B)| / |S(A) ∪ S(B)|     (Jaccard; 1 if both empty)
//
// where S(x) is the set of character n-grams of the similarity text of x:
//  1. NFKC_Casefold (ICU nfkc_cf: NFKC, full case folding, default-ignorable
//     code points removed); ill-formed UTF-8 becomes U+FFFD first.
//  2. Every run of White_Space code points becomes one U+0020; leading and
//     trailing white space is removed. Punctuation and symbols are kept.
//  3. The n-grams are the runs of n consecutive code points. A non-empty
//     text shorter than n code points has one n-gram: the whole text. An
//     empty text has none.
// Containment, for excerpt reposts, is |S(A) ∩ S(B)| / min(|S(A)|, |S(B)|).
//
// Sets are held as sorted distinct 64-bit hashes of the n-grams
// (ShingleHash below): two different n-grams of a pair of documents collide
// with probability about |A|·|B| / 2^64, so "exact" below means exact up to
// that.
//
// Thread-safety: pure functions (thread-local scratch only).
#ifndef NEARDUP_TEXT_SHINGLES_H_
#define NEARDUP_TEXT_SHINGLES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace neardup {

inline constexpr int kMinShingleSize = 1;
inline constexpr int kMaxShingleSize = 16;

// Steps 1-2: the similarity text as code points (*out is replaced).
// `folded`, if given, is step 1 done already for a text not all ASCII (the
// analysis's, TextAnalysis::folded): it is then not done again.
void SimilarityCodePoints(std::string_view utf8, std::vector<uint32_t>* out, const std::string* folded = nullptr);
// The same as UTF-8 (for documentation and tests).
std::string SimilarityText(std::string_view utf8);

// The hash of one n-gram of code points (persisted in sketches: changing it
// is a new sketch version).
uint64_t ShingleHash(const uint32_t* cps, size_t n);

// S(x) of step 3 from the similarity text's code points: sorted, distinct.
void ShingleHashes(const std::vector<uint32_t>& cps, int n, std::vector<uint64_t>* out);
// The same from raw UTF-8 (steps 1-3).
void ShingleHashes(std::string_view utf8, int n, std::vector<uint64_t>* out);

// |A ∩ B| of two sorted distinct sequences.
size_t IntersectionCount(const uint64_t* a, size_t na, const uint64_t* b, size_t nb);
// Jaccard and containment of two sorted distinct hash sets (1 for two empty
// sets; 0 when exactly one is empty).
double Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);
double Containment(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);

}  // namespace neardup

#endif  // NEARDUP_TEXT_SHINGLES_H_
