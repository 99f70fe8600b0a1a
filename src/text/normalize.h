// Internal: text normalization for the fingerprint pipeline (rules 1-2 of
// docs/fingerprint.md). Not part of the public API.
//
// Thread-safety: all functions are safe to call concurrently.
#ifndef NEARDUP_SRC_NORMALIZE_H_
#define NEARDUP_SRC_NORMALIZE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace neardup::internal {

// Per-code-point classification used by normalization and tokenization.
enum CharFlags : uint8_t {
  kCharSeparator = 0,   // not L*, M*, N*: punctuation, symbols, spaces, controls, unassigned...
  kCharKeep = 1 << 0,   // general category L*, M* or N*
  kCharMark = 1 << 1,   // general category M* (also has kCharKeep)
  kCharCjk = 1 << 2,    // Script_Extensions contains Han, Hiragana, Katakana or Hangul
};

// Flags of one code point (any value; out-of-range -> kCharSeparator).
uint8_t CharClass(int32_t c);

// Table of CharClass() for U+0000..U+FFFF (65536 entries), for hot loops.
const uint8_t* BmpCharClassTable();
inline uint8_t CharClassWith(const uint8_t* bmp, int32_t c) {
  return (c >= 0 && c < 0x10000) ? bmp[c] : CharClass(c);
}

// Whether a code point of U+0080 and above has Unicode's White_Space
// property (what ICU's u_isUWhiteSpace says; the similarity text's step 2).
bool IsNonAsciiWhiteSpace(uint32_t c);

struct NormalizeStats {
  size_t invalid_utf8 = 0;  // ill-formed sequences replaced by U+FFFD
  size_t num_chars = 0;     // code points in the output
};

// Overwrites *out with the normalized form of `utf8` (docs/fingerprint.md,
// "Normalization"). `allow_fast_paths` = false forces the general ICU path
// for every input; output is identical either way (tests check this).
// `folded`, if given, receives the NFKC_Casefold form the general path
// computes on the way (what NfkcCasefold gives) and is left alone by the
// all-ASCII fast path.
NormalizeStats NormalizeText(std::string_view utf8, std::string* out,
                             bool allow_fast_paths = true, std::string* folded = nullptr);

// Overwrites *out with the NFKC_Casefold form (ICU's nfkc_cf: NFKC, full
// case folding, default ignorables removed) of `utf8`; ill-formed
// sequences become U+FFFD first. Returns the number replaced.
size_t NfkcCasefold(std::string_view utf8, std::string* out);

// Replaces every ill-formed UTF-8 sequence of `in` by U+FFFD (EF BF BD),
// one U+FFFD per maximal subpart (Unicode 15, section 3.9, "U+FFFD
// Substitution of Maximal Subparts"; what ICU's U8_NEXT does). Returns the
// number of replacements. *out is overwritten.
size_t SanitizeUtf8(std::string_view in, std::string* out);

}  // namespace neardup::internal

#endif  // NEARDUP_SRC_NORMALIZE_H_
