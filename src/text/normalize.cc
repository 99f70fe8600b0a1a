// Text normalization: UTF-8 repair, NFKC_Casefold, separator mapping.
// The rules are specified in docs/fingerprint.md ("Decoding",
// "Normalization"); changing any output is a new fingerprint scheme.
#include "text/normalize.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include <simdjson.h>

namespace neardup::internal {
namespace {

uint8_t ComputeCharClass(UChar32 c) {
  const uint32_t gc = U_GET_GC_MASK(c);
  if ((gc & (U_GC_L_MASK | U_GC_M_MASK | U_GC_N_MASK)) == 0) return kCharSeparator;
  uint8_t flags = kCharKeep;
  if (gc & U_GC_M_MASK) flags |= kCharMark;
  if (uscript_hasScript(c, USCRIPT_HAN) || uscript_hasScript(c, USCRIPT_HIRAGANA) ||
      uscript_hasScript(c, USCRIPT_KATAKANA) || uscript_hasScript(c, USCRIPT_HANGUL)) {
    flags |= kCharCjk;
  }
  return flags;
}

// Classes of all BMP code points; built once (a few ms) on first use.
const uint8_t* BmpTable() {
  static const std::unique_ptr<uint8_t[]> table = [] {
    auto t = std::make_unique<uint8_t[]>(0x10000);
    for (UChar32 c = 0; c < 0x10000; ++c) t[c] = ComputeCharClass(c);
    return t;
  }();
  return table.get();
}

// ASCII after NFKC_Casefold + separator mapping: lower-cased letter, digit,
// or 0 (separator). Matches the general path (checked by tests).
constexpr std::array<char, 128> MakeAsciiMap() {
  std::array<char, 128> m{};
  for (int c = 0; c < 128; ++c) {
    if (c >= 'a' && c <= 'z') m[c] = static_cast<char>(c);
    else if (c >= 'A' && c <= 'Z') m[c] = static_cast<char>(c - 'A' + 'a');
    else if (c >= '0' && c <= '9') m[c] = static_cast<char>(c);
  }
  return m;
}
constexpr std::array<char, 128> kAsciiMap = MakeAsciiMap();

bool IsAllAscii(std::string_view s) {
  const char* p = s.data();
  size_t n = s.size();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w & 0x8080808080808080ull) return false;
  }
  for (; i < n; ++i) {
    if (static_cast<unsigned char>(p[i]) & 0x80) return false;
  }
  return true;
}

const icu::Normalizer2* NfkcCf() {
  static const icu::Normalizer2* n = [] {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* p = icu::Normalizer2::getNFKCCasefoldInstance(status);
    return U_SUCCESS(status) ? p : nullptr;
  }();
  return n;
}

// Writes kept code points to a buffer, collapsing separators. The output is
// never longer than the input it is fed from (a separator code point is at
// least one byte and becomes at most one space), so the caller sizes the
// buffer to the input length and Finish() trims it.
class SeparatorWriter {
 public:
  SeparatorWriter(std::string* out, size_t max_len) : out_(out) {
    out_->resize(max_len);
    begin_ = out_->data();
    p_ = begin_;
  }
  // A kept code point of `len` bytes at `src`. `is_mark`: general category M*.
  inline void Keep(const char* src, size_t len, bool is_mark) {
    if (is_mark && !prev_kept_) {  // nothing to attach to: separator
      Separator();
      return;
    }
    FlushSpace();
    std::memcpy(p_, src, len);
    p_ += len;
    ++chars_;
    prev_kept_ = true;
  }
  inline void KeepAscii(char c) {
    FlushSpace();
    *p_++ = c;
    ++chars_;
    prev_kept_ = true;
  }
  inline void Separator() {
    pending_space_ = p_ != begin_;  // leading separators vanish
    prev_kept_ = false;
  }
  // Trailing separators are never written. Returns the code point count.
  size_t Finish() {
    out_->resize(static_cast<size_t>(p_ - begin_));
    return chars_;
  }

 private:
  inline void FlushSpace() {
    if (pending_space_) {
      *p_++ = ' ';
      ++chars_;
      pending_space_ = false;
    }
  }
  std::string* out_;
  char* begin_;
  char* p_;
  size_t chars_ = 0;
  bool prev_kept_ = false;
  bool pending_space_ = false;
};

// Maps already NFKC_Casefold-ed, well-formed UTF-8.
size_t MapSeparators(std::string_view nf, std::string* out) {
  const uint8_t* bmp = BmpTable();
  const auto* s = reinterpret_cast<const uint8_t*>(nf.data());
  const size_t n = nf.size();
  SeparatorWriter w(out, n);
  size_t i = 0;
  while (i < n) {
    const uint8_t b = s[i];
    if (b < 0x80) {
      const char m = kAsciiMap[b];
      if (m) w.KeepAscii(m);
      else w.Separator();
      ++i;
      continue;
    }
    const size_t start = i;
    UChar32 c;
    U8_NEXT_UNSAFE(s, i, c);
    const uint8_t cls = c < 0x10000 ? bmp[c] : CharClass(c);
    if (cls & kCharKeep) {
      w.Keep(nf.data() + start, i - start, (cls & kCharMark) != 0);
    } else {
      w.Separator();
    }
  }
  return w.Finish();
}

}  // namespace

uint8_t CharClass(int32_t c) {
  if (c < 0 || c > 0x10FFFF) return kCharSeparator;
  if (c < 0x10000) return BmpTable()[c];
  return ComputeCharClass(c);
}

const uint8_t* BmpCharClassTable() { return BmpTable(); }

size_t SanitizeUtf8(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size() + 16);
  const auto* s = reinterpret_cast<const uint8_t*>(in.data());
  const size_t n = in.size();
  size_t invalid = 0;
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      out->push_back(static_cast<char>(s[i]));
      ++i;
      continue;
    }
    const size_t start = i;
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (c < 0) {
      out->append("\xEF\xBF\xBD", 3);
      ++invalid;
    } else {
      out->append(in.data() + start, i - start);
    }
  }
  return invalid;
}

// NFKC_Casefold into *nf (cleared first); returns the ill-formed sequences
// replaced. `check_utf8` = false sanitizes unconditionally.
size_t NfkcCasefoldImpl(std::string_view utf8, bool check_utf8, std::string* nf) {
  size_t invalid = 0;
  thread_local std::string sanitized;
  std::string_view valid = utf8;
  if (!check_utf8 || !simdjson::validate_utf8(utf8.data(), utf8.size())) {
    invalid = SanitizeUtf8(utf8, &sanitized);
    valid = sanitized;
  }

  nf->clear();
  const icu::Normalizer2* norm = NfkcCf();
  bool normalized = false;
  if (norm != nullptr && valid.size() <= static_cast<size_t>(INT32_MAX)) {
    UErrorCode status = U_ZERO_ERROR;
    icu::StringByteSink<std::string> sink(nf, static_cast<int32_t>(valid.size()));
    norm->normalizeUTF8(0, icu::StringPiece(valid.data(), static_cast<int32_t>(valid.size())),
                        sink, nullptr, status);
    normalized = U_SUCCESS(status);
  } else if (norm != nullptr) {
    // StringPiece lengths are int32_t: normalize huge texts in pieces that
    // end before a code point with the NFC/NFKC boundary-before property.
    normalized = true;
    size_t pos = 0;
    while (pos < valid.size() && normalized) {
      size_t end = std::min(valid.size(), pos + (size_t{1} << 30));
      if (end < valid.size()) {
        // Back up to a lead byte that starts a normalization boundary.
        size_t e = end;
        while (e > pos) {
          while (e > pos && (static_cast<unsigned char>(valid[e]) & 0xC0) == 0x80) --e;
          UChar32 c;
          size_t j = e;
          U8_NEXT_UNSAFE(reinterpret_cast<const uint8_t*>(valid.data()), j, c);
          if (norm->hasBoundaryBefore(c)) break;
          --e;
        }
        if (e > pos) end = e;
      }
      UErrorCode status = U_ZERO_ERROR;
      icu::StringByteSink<std::string> sink(nf);
      norm->normalizeUTF8(U_EDITS_NO_RESET,
                          icu::StringPiece(valid.data() + pos, static_cast<int32_t>(end - pos)),
                          sink, nullptr, status);
      normalized = U_SUCCESS(status);
      pos = end;
    }
  }
  if (!normalized) {
    // ICU data missing or allocation failure: fall back to the raw text so
    // we never crash. Create() checks the normalizer, so this is unexpected.
    nf->assign(valid.data(), valid.size());
  }
  if (sanitized.capacity() > (size_t{4} << 20)) std::string().swap(sanitized);
  return invalid;
}

NormalizeStats NormalizeText(std::string_view utf8, std::string* out, bool allow_fast_paths, std::string* folded) {
  NormalizeStats stats;
  out->clear();
  if (allow_fast_paths && IsAllAscii(utf8)) {
    SeparatorWriter w(out, utf8.size());
    for (char ch : utf8) {
      const char m = kAsciiMap[static_cast<unsigned char>(ch)];
      if (m) w.KeepAscii(m);
      else w.Separator();
    }
    stats.num_chars = w.Finish();
    return stats;
  }

  thread_local std::string scratch;
  std::string& nf = folded ? *folded : scratch;
  stats.invalid_utf8 = NfkcCasefoldImpl(utf8, allow_fast_paths, &nf);
  stats.num_chars = MapSeparators(nf, out);
  if (scratch.capacity() > (size_t{4} << 20)) std::string().swap(scratch);  // don't pin huge buffers
  return stats;
}

size_t NfkcCasefold(std::string_view utf8, std::string* out) { return NfkcCasefoldImpl(utf8, true, out); }

}  // namespace neardup::internal
