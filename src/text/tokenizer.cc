// Tokenizers over normalized text (docs/fingerprint.md, "Tokenization").
#include "text/tokenizer.h"

#include <unicode/brkiter.h>
#include <unicode/locid.h>
#include <unicode/ubrk.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "text/normalize.h"

namespace neardup::internal {

// ---- FeatureCounter ----------------------------------------------------------

void FeatureCounter::Reset(std::string_view text) {
  text_ = text;
  entries_.clear();
  // Distinct tokens <= code points; start small and grow, so short texts
  // only clear a few hundred bytes.
  const size_t want = std::clamp<size_t>(std::bit_ceil(text.size() / 2 + 1), 64, 16384);
  slots_.assign(want, 0);
  mask_ = want - 1;
}

void FeatureCounter::Grow() {
  const size_t cap = slots_.size() * 2;
  slots_.assign(cap, 0);
  mask_ = cap - 1;
  for (size_t i = 0; i < entries_.size(); ++i) {
    size_t s = entries_[i].hash & mask_;
    while (slots_[s] != 0) s = (s + 1) & mask_;
    slots_[s] = static_cast<uint32_t>(i + 1);
  }
}

void FeatureCounter::Add(size_t offset, size_t length) {
  const char* p = text_.data() + offset;
  const uint64_t h = XXH3_64bits(p, length);
  size_t s = h & mask_;
  while (true) {
    const uint32_t idx = slots_[s];
    if (idx == 0) break;
    Entry& e = entries_[idx - 1];
    if (e.hash == h && e.length == length &&
        (e.offset == offset || std::memcmp(text_.data() + e.offset, p, length) == 0)) {
      if (e.tf != std::numeric_limits<uint32_t>::max()) ++e.tf;
      return;
    }
    s = (s + 1) & mask_;
  }
  // More than 2^32 - 2 distinct tokens cannot be indexed; count them into
  // the last entry's tf instead of overflowing (texts of > 4 G tokens only).
  if (entries_.size() >= std::numeric_limits<uint32_t>::max() - 1) return;
  entries_.push_back(Entry{h, offset, length, 1});
  slots_[s] = static_cast<uint32_t>(entries_.size());
  if (entries_.size() * 2 > slots_.size()) Grow();
}

// ---- kMixedNgram ------------------------------------------------------------

namespace {

// Emits n-grams over the "units" (a non-mark CJK code point plus the marks
// that follow it) of one CJK sub-run.
class CjkGrams {
 public:
  CjkGrams(int n, FeatureCounter* counter) : n_(static_cast<size_t>(n)), counter_(counter) {}
  void Begin(size_t pos) {
    sub_start_ = pos;
    k_ = 0;
  }
  // A unit starts at `pos` (the previous one, if any, ends there).
  inline void Unit(size_t pos) {
    if (k_ >= n_) Emit(pos);
    ring_[k_ % n_] = pos;
    ++k_;
  }
  // The sub-run ends at `pos`.
  void End(size_t pos) {
    if (k_ >= n_) Emit(pos);
    else if (k_ > 0) counter_->Add(sub_start_, pos - sub_start_);
    k_ = 0;
  }

 private:
  inline void Emit(size_t end) {
    const size_t start = ring_[(k_ - n_) % n_];
    counter_->Add(start, end - start);
  }
  size_t n_;
  FeatureCounter* counter_;
  size_t ring_[4] = {};
  size_t k_ = 0;
  size_t sub_start_ = 0;
};

}  // namespace

void TokenizeMixed(std::string_view text, int n, FeatureCounter* counter) {
  n = std::clamp(n, 1, 4);
  counter->Reset(text);
  const uint8_t* bmp = BmpCharClassTable();
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t len = text.size();
  CjkGrams grams(n, counter);

  enum State { kNone, kOther, kCjk };
  State state = kNone;
  size_t other_start = 0;
  size_t i = 0;
  auto close = [&](size_t pos) {
    if (state == kOther) counter->Add(other_start, pos - other_start);
    else if (state == kCjk) grams.End(pos);
    state = kNone;
  };
  while (i < len) {
    const uint8_t b = s[i];
    if (b < 0x80) {
      if (b == ' ') {
        close(i);
        ++i;
        continue;
      }
      // ASCII letter/digit (anything else cannot occur in normalized text
      // and is treated the same way): part of a non-CJK sub-run.
      if (state != kOther) {
        close(i);
        state = kOther;
        other_start = i;
      }
      ++i;
      while (i < len && s[i] < 0x80 && s[i] != ' ') ++i;  // fast path
      continue;
    }
    const size_t start = i;
    UChar32 c;
    U8_NEXT(s, i, len, c);
    const uint8_t cls = c < 0 ? uint8_t{kCharKeep} : CharClassWith(bmp, c);
    if ((cls & kCharMark) && state != kNone) continue;  // attaches to previous unit
    if (cls & kCharCjk) {
      if (state != kCjk) {
        close(start);
        state = kCjk;
        grams.Begin(start);
      }
      grams.Unit(start);
    } else if (state != kOther) {
      close(start);
      state = kOther;
      other_start = start;
    }
  }
  close(len);
}

// ---- kIcuWords --------------------------------------------------------------

namespace {

struct IcuWordState {
  std::unique_ptr<icu::BreakIterator> bi;
  UText* ut = nullptr;
  bool failed = false;
  IcuWordState() {
    UErrorCode status = U_ZERO_ERROR;
    bi.reset(icu::BreakIterator::createWordInstance(icu::Locale::getRoot(), status));
    if (U_FAILURE(status) || !bi) {
      bi.reset();
      failed = true;
    }
  }
  ~IcuWordState() {
    if (ut != nullptr) utext_close(ut);
  }
};

// BreakIterator is not thread-safe: one per thread, shared by all
// Fingerprinters (they all use the root-locale word iterator).
IcuWordState& WordState() {
  thread_local IcuWordState state;
  return state;
}

// Largest piece handed to ICU at once (its indexes are int32_t).
constexpr size_t kIcuChunk = size_t{1} << 30;

}  // namespace

bool IcuWordBreakAvailable() { return !WordState().failed; }

bool TokenizeIcuWords(std::string_view text, FeatureCounter* counter) {
  counter->Reset(text);
  IcuWordState& st = WordState();
  if (st.failed) return false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.size();
    if (end - pos > kIcuChunk) {
      // Cut at a space (word breaks always surround spaces), else at a code
      // point boundary. Only texts over 1 GiB get here.
      end = pos + kIcuChunk;
      size_t sp = text.rfind(' ', end);
      if (sp != std::string_view::npos && sp > pos) {
        end = sp;
      } else {
        while (end > pos && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
      }
    }
    UErrorCode status = U_ZERO_ERROR;
    st.ut = utext_openUTF8(st.ut, text.data() + pos, static_cast<int64_t>(end - pos), &status);
    if (U_FAILURE(status)) return false;
    st.bi->setText(st.ut, status);
    if (U_FAILURE(status)) return false;
    int32_t start = st.bi->first();
    for (int32_t stop = st.bi->next(); stop != icu::BreakIterator::DONE;
         start = stop, stop = st.bi->next()) {
      if (st.bi->getRuleStatus() >= UBRK_WORD_NONE_LIMIT) {
        counter->Add(pos + static_cast<size_t>(start), static_cast<size_t>(stop - start));
      }
    }
    pos = end;
  }
  // Drop the iterator's reference to the caller's text.
  UErrorCode status = U_ZERO_ERROR;
  st.ut = utext_openUTF8(st.ut, "", 0, &status);
  st.bi->setText(st.ut, status);
  return true;
}

}  // namespace neardup::internal
