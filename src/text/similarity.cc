#include "neardup/text/similarity.h"

#include <algorithm>
#include <utility>
#include <bit>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "neardup/text/shingles.h"
#include "text/shingle_hash.h"
#include "util/hash.h"
#include "util/utf8.h"

namespace neardup {
namespace {


// |A ∩ B| for strictly ascending arrays. Four-by-four block compares
// (Lemire et al., "SIMD compression and the intersection of sorted
// integers", 2016) with SSE2, then a scalar tail. Gives up (returns
// kGaveUp) as soon as fewer than `need` common values remain possible:
// rejecting an unrelated candidate then reads half of the sketches or less.
constexpr size_t kGaveUp = SIZE_MAX;
size_t IntersectionSize(const uint32_t* a, size_t na, const uint32_t* b, size_t nb, size_t need = 0) {
  size_t i = 0, j = 0, count = 0;
#if defined(__SSE2__)
  while (i + 4 <= na && j + 4 <= nb) {
    if (count + std::min(na - i, nb - j) < need) return kGaveUp;
    const __m128i va = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i));
    const __m128i vb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + j));
    const __m128i c0 = _mm_cmpeq_epi32(va, vb);
    const __m128i c1 = _mm_cmpeq_epi32(va, _mm_shuffle_epi32(vb, _MM_SHUFFLE(0, 3, 2, 1)));
    const __m128i c2 = _mm_cmpeq_epi32(va, _mm_shuffle_epi32(vb, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m128i c3 = _mm_cmpeq_epi32(va, _mm_shuffle_epi32(vb, _MM_SHUFFLE(2, 1, 0, 3)));
    const __m128i any = _mm_or_si128(_mm_or_si128(c0, c1), _mm_or_si128(c2, c3));
    count += static_cast<size_t>(std::popcount(static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(any)))));
    const uint32_t amax = a[i + 3], bmax = b[j + 3];
    i += amax <= bmax ? 4 : 0;
    j += bmax <= amax ? 4 : 0;
  }
#endif
  if (count + std::min(na - i, nb - j) < need) return kGaveUp;
  while (i < na && j < nb) {
    const uint32_t x = a[i], y = b[j];
    count += x == y;
    i += x <= y;
    j += y <= x;
  }
  return count;
}



}  // namespace

bool IsCjkCodePoint(uint32_t cp) {
  if (cp < 0x1100) return false;
  return (cp <= 0x11FF) ||                      // Hangul Jamo
         (cp >= 0x2E80 && cp <= 0xA4CF) ||      // CJK radicals .. Kana, Bopomofo, ideographs, Yi
         (cp >= 0xA960 && cp <= 0xA97F) ||      // Hangul Jamo Extended-A
         (cp >= 0xAC00 && cp <= 0xD7FF) ||      // Hangul syllables, Jamo Extended-B
         (cp >= 0xF900 && cp <= 0xFAFF) ||      // CJK compatibility ideographs
         (cp >= 0xFF65 && cp <= 0xFFDC) ||      // half-width Kana and Hangul
         (cp >= 0x20000 && cp <= 0x3FFFF);      // supplementary ideographs
}

namespace {

// Sorts values that are uniform hashes below `limit` in expected linear
// time: a counting sort by their leading bits into about one bucket per
// value, then an insertion sort that only fixes order inside buckets.
// std::sort's mispredicted branches were a third of a short text's sketch.
void SortUniform(std::vector<uint32_t>* v, uint64_t limit) {
  const size_t n = v->size();
  if (n < 16 || n > 4096) {
    std::sort(v->begin(), v->end());
    return;
  }
  const size_t buckets = std::bit_ceil(n);
  // bucket(x) = floor(x * buckets / limit) < buckets for x < limit (the
  // scale is rounded down).
  const uint64_t scale = (uint64_t{buckets} << 32) / limit;
  thread_local std::vector<uint32_t> count, sorted;
  count.assign(buckets + 1, 0);
  sorted.resize(n);
  const uint32_t* in = v->data();
  for (size_t i = 0; i < n; ++i) ++count[((in[i] * scale) >> 32) + 1];
  for (size_t b = 1; b <= buckets; ++b) count[b] += count[b - 1];
  uint32_t* out = sorted.data();
  for (size_t i = 0; i < n; ++i) out[count[(in[i] * scale) >> 32]++] = in[i];
  for (size_t i = 1; i < n; ++i) {
    const uint32_t x = out[i];
    size_t j = i;
    for (; j > 0 && out[j - 1] > x; --j) out[j] = out[j - 1];
    out[j] = x;
  }
  v->swap(sorted);
}

// Sorts values below `limit`, removes repeats; returns the number of
// distinct values.
size_t SortDistinct(std::vector<uint32_t>* v, uint64_t limit) {
  SortUniform(v, limit);
  const size_t distinct = static_cast<size_t>(std::unique(v->begin(), v->end()) - v->begin());
  v->resize(distinct);
  return distinct;
}

// Number of distinct values (a small open-addressing set; cheaper than
// sorting a long text's hashes). The values are uniform hashes, so their top
// bits are the slot: no further mixing. 0 marks an empty slot; the value 0
// is counted apart. Load at most 1/4, and one branch for "empty or equal"
// (bitwise, not &&): repeated shingles, a third of an English text's, no
// longer mispredict, and a slot taken by another value is rare.
size_t CountDistinct(const std::vector<uint32_t>& v) {
  thread_local std::vector<uint32_t> table;
  int bits = 6;
  while ((size_t{1} << bits) < 4 * v.size()) ++bits;
  const size_t cap = size_t{1} << bits;
  table.assign(cap, 0);
  const size_t mask = cap - 1;
  uint32_t* t = table.data();
  size_t distinct = 0;
  bool zero = false;
  for (uint32_t x : v) {
    if (x == 0) {  // about never: a predictable branch
      zero = true;
      continue;
    }
    size_t i = x >> (32 - bits);
    uint32_t s = t[i];
    while (static_cast<int>(s != 0) & static_cast<int>(s != x)) {
      i = (i + 1) & mask;
      s = t[i];
    }
    distinct += s == 0;
    t[i] = x;
  }
  return distinct + zero;
}

// *out = the `keep` smallest distinct values of v, ascending (all of them if
// fewer). Values are uniform hashes, so the smallest lie below about
// 2^32 * keep / n: filter below twice that, sort the few survivors, and
// widen the filter in the rare case that leaves too few.
void SmallestDistinct(const std::vector<uint32_t>& v, size_t keep, std::vector<uint32_t>* out) {
  const size_t n = v.size();
  // Expected survivors: keep + keep / 4 + 8 (too few distinct ones in about
  // 1% of texts: then the filter widens).
  const uint64_t expect = keep + keep / 4 + 8;
  if (n <= expect) {
    out->assign(v.begin(), v.end());
    SortDistinct(out, uint64_t{1} << 32);
  } else {
    uint64_t limit = (expect << 32) / n;
    for (;;) {
      out->resize(n);
      uint32_t* o = out->data();
      size_t m = 0;
      for (uint32_t x : v) {
        o[m] = x;
        m += x < limit;
      }
      out->resize(m);
      if (SortDistinct(out, limit) >= keep || limit > UINT32_MAX) break;
      limit *= 4;
    }
  }
  if (out->size() > keep) out->resize(keep);
}

}  // namespace

uint32_t AnchorPairKey(uint32_t lo, uint32_t hi) {
  return static_cast<uint32_t>(Murmur3Fmix64((uint64_t{lo} << 32) | hi) >> 32);
}

void SketchAnchors(const uint32_t* mins, size_t n, std::vector<uint32_t>* out) {
  out->clear();
  out->reserve(std::min(kAnchorCount, 2 * n));  // one allocation, not one per doubling
  // The keys taken, in a small open-addressing set by their top bits (they
  // are uniform hashes; 0 apart): a search of the list per key was 5% of
  // the batch join's instructions.
  constexpr int kBits = 6;
  static_assert(kAnchorCount <= (size_t{1} << kBits) / 2, "load at most 1/2");
  uint32_t taken[size_t{1} << kBits] = {};
  bool zero = false;
  auto add = [&](uint32_t key) {
    if (out->size() == kAnchorCount) return;
    if (key == 0) {
      if (!std::exchange(zero, true)) out->push_back(key);
      return;
    }
    size_t slot = key >> (32 - kBits);
    for (; taken[slot] != 0; slot = (slot + 1) & ((size_t{1} << kBits) - 1)) {
      if (taken[slot] == key) return;
    }
    taken[slot] = key;
    out->push_back(key);
  };
  for (size_t i = 0; i < n && out->size() < kAnchorCount; ++i) {
    add(mins[i]);
    if (i + 1 < n) add(AnchorPairKey(mins[i], mins[i + 1]));
  }
}

void ComputeSketch(std::string_view text, int n, ShingleSketch* out, const std::string* folded) {
  thread_local std::vector<uint32_t> cps;
  thread_local std::vector<uint32_t> values;
  SimilarityCodePoints(text, &cps, folded);
  values.clear();
  const size_t len = static_cast<size_t>(std::clamp(n, kMinShingleSize, kMaxShingleSize));
  if (cps.size() < len) {
    // A text shorter than n is one whole-text shingle. An empty one too (the
    // hash of no code points, which no n-gram has): without a sketch it would
    // be matched by fingerprint distance alone, and every text whose
    // normalized form is empty ("!!!", "???") would then be its duplicate
    // with similarity 1 through the equal content hash.
    values.push_back(static_cast<uint32_t>(ShingleHash(cps.data(), cps.size()) >> 32));
  } else {
    values.resize(cps.size() - len + 1);
    internal::TopShingleHashes(cps.data(), len, values.size(), values.data());
  }
  SmallestDistinct(values, kSketchSize, &out->mins);
  const size_t distinct = out->mins.size() < kSketchSize ? out->mins.size() : CountDistinct(values);
  out->num_shingles = static_cast<uint32_t>(std::min<size_t>(distinct, UINT32_MAX));
  SketchAnchors(out->mins.data(), out->mins.size(), &out->anchors);
  if (values.capacity() > (size_t{1} << 20)) std::vector<uint32_t>().swap(values);
}

ShingleSketch ComputeSketch(std::string_view text, int n) {
  ShingleSketch s;
  ComputeSketch(text, n, &s);
  return s;
}

bool EstimateSimilarityAtLeast(const uint32_t* pa, size_t na, uint32_t sa, const uint32_t* pb, size_t nb, uint32_t sb,
                               double min_jaccard, SimilarityEstimate* out) {
  SimilarityEstimate& e = *out;
  e = SimilarityEstimate{};
  if (sa == 0 || sb == 0 || na == 0 || nb == 0) return min_jaccard <= 0;
  const bool a_complete = sa <= kSketchSize, b_complete = sb <= kSketchSize;
  e.exact = a_complete && b_complete;
  // Below tau = the smaller of the incomplete sketches' last values, both
  // sketches hold every value of their sets: those values are a uniform
  // sample of A ∪ B in which membership in A and in B is known exactly.
  uint32_t tau = UINT32_MAX;
  if (!a_complete) tau = std::min(tau, pa[na - 1]);
  if (!b_complete) tau = std::min(tau, pb[nb - 1]);
  const size_t ma = static_cast<size_t>(std::upper_bound(pa, pa + na, tau) - pa);
  const size_t mb = static_cast<size_t>(std::upper_bound(pb, pb + nb, tau) - pb);
  // both / (ma + mb - both) >= j  <=>  both >= j (ma + mb) / (1 + j). One
  // value of slack, so rounding can never give up on a pair that reaches j.
  const double bound = min_jaccard * static_cast<double>(ma + mb) / (1.0 + min_jaccard) - 1.0;
  const size_t need = bound > 0 ? static_cast<size_t>(bound) : 0;
  const size_t both = IntersectionSize(pa, ma, pb, mb, need);
  if (both == kGaveUp) return false;
  const size_t sample = ma + mb - both;
  e.jaccard = sample ? static_cast<double>(both) / static_cast<double>(sample) : 0.0;
  // Containment of the smaller set in the larger, from the same sample.
  const size_t small_sample = sa <= sb ? ma : mb;
  e.containment = small_sample ? static_cast<double>(both) / static_cast<double>(small_sample) : 0.0;
  e.containment_sample = static_cast<uint32_t>(small_sample);
  return e.jaccard >= min_jaccard;
}

SimilarityEstimate EstimateSimilarity(const uint32_t* pa, size_t na, uint32_t sa, const uint32_t* pb, size_t nb,
                                      uint32_t sb) {
  SimilarityEstimate e;
  EstimateSimilarityAtLeast(pa, na, sa, pb, nb, sb, 0.0, &e);
  return e;
}

SimilarityEstimate EstimateSimilarity(const ShingleSketch& a, const ShingleSketch& b) {
  return EstimateSimilarity(a.mins.data(), a.mins.size(), a.num_shingles, b.mins.data(), b.mins.size(),
                            b.num_shingles);
}

}  // namespace neardup
