#include "neardup/text/shingles.h"

#include <algorithm>

#include "text/normalize.h"
#include "text/shingle_hash.h"
#include "util/hash.h"
#include "util/utf8.h"

namespace neardup {
namespace {

bool IsAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// ASCII White_Space: TAB, LF, VT, FF, CR, space (U+001C..U+001F are not).
bool IsAsciiSpace(uint32_t c) { return c == ' ' || (c >= 0x09 && c <= 0x0D); }

}  // namespace

// Unicode's White_Space outside ASCII: U+0085, U+00A0, U+1680, U+2000..U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000 (PropList.txt; the same set since
// Unicode 6.3, checked against ICU's u_isUWhiteSpace for every code point by
// a test). Most code points of a CJK text are above U+3000: one compare, not
// an ICU property lookup each (1 % of a short text's analysis).
bool internal::IsNonAsciiWhiteSpace(uint32_t c) {
  if (c >= 0x3000 || c < 0x85) return c == 0x3000;
  if (c < 0x2000) return c == 0x85 || c == 0xA0 || c == 0x1680;
  return c <= 0x200A || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F;
}

namespace {

bool IsSpace(uint32_t c) { return c < 0x80 ? IsAsciiSpace(c) : internal::IsNonAsciiWhiteSpace(c); }

// Step 2 over code points, in place.
void CollapseSpaces(std::vector<uint32_t>* cps) {
  size_t w = 0;
  bool pending = false;
  for (uint32_t c : *cps) {
    if (IsSpace(c)) {
      pending = w != 0;
      continue;
    }
    if (pending) (*cps)[w++] = ' ';
    pending = false;
    (*cps)[w++] = c;
  }
  cps->resize(w);
}

}  // namespace

void SimilarityCodePoints(std::string_view utf8, std::vector<uint32_t>* out, const std::string* folded) {
  out->clear();
  if (IsAscii(utf8)) {
    // nfkc_cf of ASCII is ASCII lower-casing.
    out->reserve(utf8.size());
    for (char ch : utf8) {
      const auto c = static_cast<uint32_t>(static_cast<unsigned char>(ch));
      out->push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
  } else if (folded != nullptr) {
    DecodeUtf8(*folded, out);
  } else {
    thread_local std::string nf;
    internal::NfkcCasefold(utf8, &nf);
    DecodeUtf8(nf, out);
    if (nf.capacity() > (size_t{4} << 20)) std::string().swap(nf);
  }
  CollapseSpaces(out);
}

std::string SimilarityText(std::string_view utf8) {
  std::vector<uint32_t> cps;
  SimilarityCodePoints(utf8, &cps);
  std::string out;
  for (uint32_t c : cps) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

uint64_t ShingleHash(const uint32_t* cps, size_t n) { return internal::ShingleHashInline(cps, n); }

void ShingleHashes(const std::vector<uint32_t>& cps, int n, std::vector<uint64_t>* out) {
  out->clear();
  if (cps.empty()) return;
  const size_t len = static_cast<size_t>(std::clamp(n, kMinShingleSize, kMaxShingleSize));
  if (cps.size() < len) {
    out->push_back(ShingleHash(cps.data(), cps.size()));
    return;
  }
  out->reserve(cps.size() - len + 1);
  for (size_t i = 0; i + len <= cps.size(); ++i) out->push_back(ShingleHash(cps.data() + i, len));
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
}

void ShingleHashes(std::string_view utf8, int n, std::vector<uint64_t>* out) {
  thread_local std::vector<uint32_t> cps;
  SimilarityCodePoints(utf8, &cps);
  ShingleHashes(cps, n, out);
}

size_t IntersectionCount(const uint64_t* a, size_t na, const uint64_t* b, size_t nb) {
  size_t i = 0, j = 0, count = 0;
  while (i < na && j < nb) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++count, ++i, ++j;
    }
  }
  return count;
}

double Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  const size_t inter = IntersectionCount(a.data(), a.size(), b.data(), b.size());
  return static_cast<double>(inter) / static_cast<double>(a.size() + b.size() - inter);
}

double Containment(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  if (a.empty() || b.empty()) return 0.0;
  const size_t inter = IntersectionCount(a.data(), a.size(), b.data(), b.size());
  return static_cast<double>(inter) / static_cast<double>(std::min(a.size(), b.size()));
}

}  // namespace neardup
