// Internal: tokenization of normalized text and tf counting (rules 3-4 of
// docs/fingerprint.md). Not part of the public API.
#ifndef NEARDUP_SRC_TOKENIZER_H_
#define NEARDUP_SRC_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace neardup::internal {

// Counts distinct tokens of one text, keeping first-seen order. A token is
// a byte range of the text passed to Reset(). Reusable across texts (keeps
// its memory); not thread-safe (use one per thread).
class FeatureCounter {
 public:
  struct Entry {
    uint64_t hash;  // XXH3_64bits(token bytes, seed 0)
    size_t offset;  // byte offset of the first occurrence
    size_t length;  // bytes
    uint32_t tf;    // occurrences (saturates at UINT32_MAX)
  };

  // Starts counting tokens of `text` (which must outlive the counting).
  void Reset(std::string_view text);
  // Counts the token text[offset, offset + length).
  void Add(size_t offset, size_t length);

  const std::vector<Entry>& entries() const { return entries_; }
  std::string_view token(const Entry& e) const { return text_.substr(e.offset, e.length); }
  std::string_view text() const { return text_; }

 private:
  void Grow();

  std::string_view text_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> slots_;  // index + 1 into entries_, 0 = empty
  size_t mask_ = 0;
};

// kMixedNgram: words of non-CJK scripts, character n-grams over CJK runs.
// `text` must be normalized (NormalizeText output). 1 <= n <= 4.
void TokenizeMixed(std::string_view text, int n, FeatureCounter* counter);

// kIcuWords: ICU word break iterator (root locale); segments whose rule
// status is >= UBRK_WORD_NONE_LIMIT. Returns false if ICU could not create
// the iterator (missing data); the counter then holds no tokens.
bool TokenizeIcuWords(std::string_view text, FeatureCounter* counter);

// True if this build's ICU can create the word break iterator.
bool IcuWordBreakAvailable();

}  // namespace neardup::internal

#endif  // NEARDUP_SRC_TOKENIZER_H_
