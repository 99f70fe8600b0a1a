// The raw ids of kept documents by sequence number (neardup dedup's
// --duplicates, --annotate and --clusters name the kept document by its id).
//
// Why packed: a batch job holds one per kept document for the whole run.
// As three growing vectors (sequence, offset, id bytes) it was 16 bytes plus
// the id per kept document, up to twice that between doublings, and each
// doubling copied the whole vector while the old one was still held: about
// 33 bytes per kept document at 50M short documents (issue 17), a fifth of
// the run's memory. Here an entry is its id's bytes plus a varint of the
// step from the previous kept sequence number and one of the id's length,
// and every 64th entry is indexed (first sequence, where it starts): about
// 2.3 bytes per entry besides the id. Bytes go to 1 MiB chunks that are
// never moved.
//
// Find walks at most 63 entries from an indexed one (a Walker started
// there); it runs once per duplicate, beside a JSON line's write.
#ifndef NEARDUP_TOOLS_KEPT_IDS_H_
#define NEARDUP_TOOLS_KEPT_IDS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace neardup::cli {

class KeptIds {
 public:
  // sequence must exceed every earlier one (kept sequence numbers only grow).
  void Add(uint64_t sequence, std::string_view id) {
    const uint64_t step = count_ == 0 ? 0 : sequence - last_;
    const size_t need = 2 * kMaxVarint + id.size();
    if (chunks_.empty() || chunks_.back().capacity() - chunks_.back().size() < need) {
      chunks_.emplace_back();
      chunks_.back().reserve(std::max(kChunkBytes, need));
    }
    std::string& c = chunks_.back();
    if (count_ % kEvery == 0) {
      blocks_.push_back(Block{sequence, static_cast<uint32_t>(chunks_.size() - 1), static_cast<uint32_t>(c.size())});
    }
    PutVarint(step, &c);
    PutVarint(id.size(), &c);
    c.append(id);
    last_ = sequence;
    ++count_;
  }

  // The id kept under `sequence`, or empty if none was: a walk from the
  // indexed entry at or before it.
  std::string_view Find(uint64_t sequence) const {
    auto b = std::upper_bound(blocks_.begin(), blocks_.end(), sequence,
                              [](uint64_t s, const Block& x) { return s < x.first; });
    if (b == blocks_.begin()) return {};
    return Walker(this, static_cast<size_t>(b - blocks_.begin()) - 1).Find(sequence);
  }

  // Find for sequence numbers asked in increasing order, in O(1) each
  // (amortized) where Find walks up to 63 entries: a second pass over every
  // document in input order (dedup's write pass, line_facts.h). Reads the
  // KeptIds, which must not change while it is used.
  class Walker {
   public:
    explicit Walker(const KeptIds* ids = nullptr) : ids_(ids) {}
    // As Find(sequence); sequence must not be below the one asked before.
    std::string_view Find(uint64_t sequence) {
      for (; next_ < ids_->count_; ++next_) {
        if (at_ == ids_->chunks_[chunk_].size()) ++chunk_, at_ = 0;  // the entry is the next chunk's first
        const std::string& c = ids_->chunks_[chunk_];
        size_t at = at_;
        const uint64_t step = GetVarint(c, &at);
        // An indexed entry's sequence is in the index (its step is from
        // the entry before, which a walk started here has not read).
        const uint64_t seq = next_ == start_ ? ids_->blocks_[start_ / kEvery].first : last_ + step;
        if (seq > sequence) return {};
        const uint64_t len = GetVarint(c, &at);
        at_ = at + len, last_ = seq;
        if (seq == sequence) return ++next_, std::string_view(c).substr(at, len);
      }
      return {};
    }

   private:
    friend class KeptIds;
    // At indexed entry `block` (which must exist).
    Walker(const KeptIds* ids, size_t block)
        : ids_(ids), next_(block * kEvery), start_(next_), chunk_(ids->blocks_[block].chunk),
          at_(ids->blocks_[block].offset) {}

    const KeptIds* ids_;
    uint64_t next_ = 0, start_ = 0, last_ = 0;  // the next entry to read, the first read; the sequence of the one before
    size_t chunk_ = 0, at_ = 0;                 // where the next entry starts
  };

  uint64_t size() const { return count_; }
  // Heap bytes held (chunks at their capacity, the index).
  size_t MemoryBytes() const {
    size_t bytes = blocks_.capacity() * sizeof(Block) + chunks_.capacity() * sizeof(std::string);
    for (const std::string& c : chunks_) bytes += c.capacity();
    return bytes;
  }

 private:
  static constexpr size_t kChunkBytes = size_t{1} << 20;
  static constexpr uint64_t kEvery = 64;
  static constexpr size_t kMaxVarint = 10;
  struct Block {
    uint64_t first;   // the sequence number of the block's first entry
    uint32_t chunk;   // where that entry starts
    uint32_t offset;
  };

  static void PutVarint(uint64_t v, std::string* out) {
    while (v >= 0x80) {
      out->push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out->push_back(static_cast<char>(v));
  }
  static uint64_t GetVarint(const std::string& c, size_t* at) {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const uint64_t byte = static_cast<unsigned char>(c[(*at)++]);
      v |= (byte & 0x7F) << shift;
      if (byte < 0x80) return v;
    }
  }

  std::vector<Block> blocks_;
  std::vector<std::string> chunks_;
  uint64_t last_ = 0;
  uint64_t count_ = 0;
};

}  // namespace neardup::cli

#endif  // NEARDUP_TOOLS_KEPT_IDS_H_
