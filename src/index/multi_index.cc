// MultiIndex: pigeonhole tables over contiguous blocks of the fingerprint.
//
// Layout (docs/index.md has the full story and the cost model):
//  * Rows. Every entry gets a dense 32-bit row; fps_[row] and ids_[row] hold
//    its fingerprint and id. Removed rows go to a free list and are reused, so
//    a steady add/expire workload does not grow memory.
//  * Tables. Table t covers block t (bits [start_t, start_t + w_t) counted
//    from the most significant bit). Rotating the fingerprint left by start_t
//    puts block t on top; the top `bucket_bits_` of that word pick the bucket
//    and the next 16 bits are the entry's signature. A bucket stores its rows
//    and 16-bit signatures as two parallel arrays, so a probe scans 2-byte
//    signatures contiguously and reads fps_ only for the rare candidate whose
//    signature is within k.
//  * Ids. id -> row lookup is an open-addressing table of 4-byte slots, each a
//    row plus a few bits of the id's hash in the bits the row does not need
//    (the id itself is read from ids_[row], and only on a tag match).
//
// Why the signature holds only the bits after the bucket key: the key bits are
// the same for every entry of a bucket, so storing them (as the earlier 32-bit
// signature did) spent 2 of every 8 table bytes on nothing. With 4 blocks of
// 16 bits from 1-2M entries on the key is the whole block, and the 16-bit
// signature is the next block: the same filter as before in 6 bytes per table
// instead of 8 (docs/BENCHMARKS.md §1, issue 2's 40 B target).
//
// Why contiguous blocks rather than Manku's permuted sorted copies: a permuted
// copy costs 8 bytes per table per entry plus a row; the signature carries a
// 16-bit filter in 2 bytes, which rejects ~99% of same-bucket candidates
// without a random access.
#include "neardup/index/multi_index.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

#include "util/hash.h"
#include "util/realloc_array.h"

namespace neardup {
namespace {

// Row -> id.
using RowIds = internal::ReallocArray<DocId>;

constexpr uint32_t kNoRow = 0xFFFFFFFFu;
constexpr uint32_t kMaxRows = 0xFFFFFFFEu;
constexpr int kMaxBucketBits = 20;
constexpr int kMinBucketBits = 4;
constexpr int kSigBits = 16;
// A rehash to more bucket bits happens when the mean bucket exceeds this.
constexpr uint64_t kMaxMeanBucket = 64;
// Radius per probed block never exceeds this for blocks >= 2 and k <= 8.
constexpr int kMaxRadius = 4;

// Bucket: [cap rows (u32)][cap signatures (u16)] in one allocation; rows
// first so both arrays are naturally aligned for any cap.
struct Bucket {
  unsigned char* data = nullptr;
  uint32_t size = 0;
  uint32_t cap = 0;

  static constexpr size_t kEntryBytes = sizeof(uint32_t) + sizeof(uint16_t);

  const uint32_t* rows() const { return reinterpret_cast<const uint32_t*>(data); }
  const uint16_t* sigs() const { return reinterpret_cast<const uint16_t*>(data + sizeof(uint32_t) * cap); }
  uint32_t* rows() { return reinterpret_cast<uint32_t*>(data); }
  uint16_t* sigs() { return reinterpret_cast<uint16_t*>(data + sizeof(uint32_t) * cap); }

  void Reallocate(uint32_t new_cap) {
    unsigned char* fresh = nullptr;
    if (new_cap > 0) {
      fresh = static_cast<unsigned char*>(std::malloc(kEntryBytes * static_cast<size_t>(new_cap)));
      if (fresh == nullptr) throw std::bad_alloc();
      if (size > 0) {
        std::memcpy(fresh, rows(), sizeof(uint32_t) * size);
        std::memcpy(fresh + sizeof(uint32_t) * new_cap, sigs(), sizeof(uint16_t) * size);
      }
    }
    std::free(data);
    data = fresh;
    cap = new_cap;
  }

  void Push(uint16_t sig, uint32_t row) {
    // Grow by 1/64. Slack: a bulk-built bucket of ~760 entries (50M, 16
    // bucket bits) gains at most 11 empty slots, not 95 as with 1/8.
    // Fragmentation: the chunk a bucket frees is then only slightly smaller
    // than the next bucket's request, and glibc reuses it; with 1/8 or 1/16
    // the freed chunks piled up as heap holes (measured after 10M single adds
    // into 10M: 1/16 left 2.6 B/entry free in the heap, 1/32 1.5 B, 1/64
    // 0.9 B). The copy (~4.5 KB per ~12 adds per table) costs less than the
    // add's own cache misses.
    if (size == cap) Reallocate(cap + std::max<uint32_t>(4, cap / 64));
    sigs()[size] = sig;
    rows()[size] = row;
    ++size;
  }

  // Order inside a bucket carries no meaning, so removal swaps in the last.
  void EraseAt(uint32_t pos) {
    --size;
    sigs()[pos] = sigs()[size];
    rows()[pos] = rows()[size];
    if (size == 0) {
      Reallocate(0);
    } else if (size < cap / 4 && cap > 16) {
      Reallocate(size + size / 8 + 1);
    }
  }

  // glibc malloc: 8 bytes of header, 16-byte granularity, 32-byte minimum.
  size_t HeapBytes() const {
    if (data == nullptr) return 0;
    return std::max<size_t>(32, (kEntryBytes * cap + 8 + 15) / 16 * 16);
  }
};

struct Table {
  int start = 0;  // block start, counted from the most significant bit
  int width = 0;  // block width in bits (<= 32)
  // Block bits that are not part of the bucket key: the top ones of the
  // signature (0 when the key is the whole block).
  int sig_block_bits = 0;
  std::vector<Bucket> buckets;

  Table() = default;
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;
  Table(Table&& o) noexcept
      : start(o.start), width(o.width), sig_block_bits(o.sig_block_bits), buckets(std::move(o.buckets)) {}
  ~Table() { FreeAll(); }

  void FreeAll() {
    for (Bucket& b : buckets) std::free(b.data);
    buckets.clear();
  }

  uint64_t Rotated(uint64_t fp) const { return std::rotl(fp, start); }
  // Distance restricted to this table's block, from a fingerprint XOR.
  int BlockDistance(uint64_t x) const { return std::popcount(std::rotl(x, start) >> (64 - width)); }
};

// id -> row. A slot is (tag << row_bits_) | row, or kNoRow when empty. The tag
// is hash bits of the id, so a probe reads ids_[row] (a cache miss at scale)
// only when the tag matches: 1 in 2^tag_bits for a different id. row_bits_ is
// chosen so that no row equals the all-ones row field, which keeps kNoRow
// distinct from every occupied slot.
//
// Slots are not a power of two (the home is a multiply-shift of the hash), so
// the table can be sized to the data: load <= 7/8, 4/5 after a bulk reserve,
// 2/3 after a growth step (x1.31). That is 4.6-6 B per entry where the
// power-of-two table took 4.6-9 B; single adds (the service's only path) keep
// the whole index under 48 B per entry at 50M. The price is more frequent
// rehashes (amortized ~4 moves per add instead of 2), each a prefetched pass.
class IdMapSegment {
 public:
  // ids: the row -> id array the slots point into.
  uint32_t Find(DocId id, const RowIds& ids) const {
    if (slots_.empty()) return kNoRow;
    const uint64_t h = Hash(id);
    const uint32_t tag = Tag(h);
    for (size_t i = Home(h);; i = Next(i)) {
      const uint32_t s = slots_[i];
      if (s == kNoRow) return kNoRow;
      if (TagOf(s) == tag && ids[s & row_mask_] == id) return s & row_mask_;
    }
  }

  // Inserts id -> row unless id is present; returns the existing row or
  // kNoRow. One probe sequence serves both the duplicate check and the
  // insert. `row` is not read through `ids`, so the caller may store it there
  // afterwards.
  uint32_t InsertIfAbsent(DocId id, uint32_t row, const RowIds& ids) {
    if ((count_ + 1) * 8 > slots_.size() * 7) Rehash(std::max<size_t>(16, (count_ + 1) * 3 / 2), row, ids);
    if (row >= row_mask_) Rehash(slots_.size(), row, ids);
    const uint64_t h = Hash(id);
    const uint32_t tag = Tag(h);
    size_t i = Home(h);
    for (; slots_[i] != kNoRow; i = Next(i)) {
      const uint32_t s = slots_[i];
      if (TagOf(s) == tag && ids[s & row_mask_] == id) return s & row_mask_;
    }
    slots_[i] = static_cast<uint32_t>((uint64_t{tag} << row_bits_) | row);
    ++count_;
    return kNoRow;
  }

  // Backward-shift deletion keeps probe sequences intact without tombstones.
  void Erase(DocId id, const RowIds& ids) {
    if (slots_.empty()) return;
    const uint64_t h = Hash(id);
    const uint32_t tag = Tag(h);
    size_t i = Home(h);
    while (true) {
      const uint32_t s = slots_[i];
      if (s == kNoRow) return;
      if (TagOf(s) == tag && ids[s & row_mask_] == id) break;
      i = Next(i);
    }
    const size_t n = slots_.size();
    auto dist = [n](size_t from, size_t to) { return to >= from ? to - from : to + n - from; };
    size_t hole = i;
    for (size_t j = Next(hole); slots_[j] != kNoRow; j = Next(j)) {
      const size_t home = Home(Hash(ids[slots_[j] & row_mask_]));
      // Move slots_[j] into the hole unless its home lies cyclically in (hole, j].
      if (dist(home, j) >= dist(hole, j)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = kNoRow;
    --count_;
  }

  void Clear() {
    slots_.clear();
    slots_.shrink_to_fit();
    count_ = 0;
    row_bits_ = 1;
    row_mask_ = 1;
    tag_mask_ = 0;
  }

  // Room for n ids at load 4/5, so a bulk load is followed by ~9% of
  // single adds before the next growth step. max_row: the largest row the
  // caller is about to insert.
  void Reserve(size_t n, uint32_t max_row, const RowIds& ids) {
    const size_t want = std::max<size_t>(16, n + n / 4);
    if (want > slots_.size() || max_row >= row_mask_) Rehash(std::max(want, slots_.size()), max_row, ids);
  }

  size_t MemoryBytes() const { return slots_.capacity() * sizeof(uint32_t); }

 private:
  // Independent of the hash that picks the segment (IdMap), whose top bits
  // are the same for every id here.
  static uint64_t Hash(DocId id) { return SplitMix64(id ^ 0x5851F42D4C957F2DULL); }
  size_t Home(uint64_t h) const {
    return static_cast<size_t>((static_cast<unsigned __int128>(h) * slots_.size()) >> 64);
  }
  size_t Next(size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }
  // The home uses the hash's high bits; the tag its low ones.
  uint32_t Tag(uint64_t h) const { return static_cast<uint32_t>(h & tag_mask_); }
  uint32_t TagOf(uint32_t slot) const { return static_cast<uint32_t>(uint64_t{slot} >> row_bits_); }

  void Rehash(size_t new_size, uint32_t max_row, const RowIds& ids) {
    std::vector<uint32_t> old;
    old.swap(slots_);
    const uint32_t old_mask = row_mask_;
    // Rows stay below the table size (ids <= 7/8 of it) unless rows were
    // freed and the table never grew with them; max_row covers that case.
    const int need = std::max(std::bit_width(new_size), std::bit_width(uint64_t{max_row} + 1));
    row_bits_ = std::max(row_bits_, std::min(need, 32));
    row_mask_ = static_cast<uint32_t>((uint64_t{1} << row_bits_) - 1);
    tag_mask_ = (uint64_t{1} << (32 - row_bits_)) - 1;
    slots_.assign(new_size, kNoRow);
    // Every old slot needs ids[row], a random read at scale: request them a
    // few slots ahead so the misses overlap.
    constexpr size_t kAhead = 16;
    for (size_t o = 0; o < old.size(); ++o) {
      if (o + kAhead < old.size() && old[o + kAhead] != kNoRow) __builtin_prefetch(&ids[old[o + kAhead] & old_mask]);
      const uint32_t s = old[o];
      if (s == kNoRow) continue;
      const uint32_t row = s & old_mask;
      const uint64_t h = Hash(ids[row]);
      size_t i = Home(h);
      while (slots_[i] != kNoRow) i = Next(i);
      slots_[i] = static_cast<uint32_t>((uint64_t{Tag(h)} << row_bits_) | row);
    }
  }

  std::vector<uint32_t> slots_;
  size_t count_ = 0;
  int row_bits_ = 1;
  uint32_t row_mask_ = 1;
  uint64_t tag_mask_ = 0;
};

// The id map in 256 segments (by the top bits of the id's hash) that grow
// on their own: a whole-map growth step rehashed every id under the
// namespace's lock, 110-230 ms at 6-10M ids (docs/BENCHMARKS.md, index
// pauses); a segment's is 1/256 of that.
class IdMap {
 public:
  uint32_t Find(DocId id, const RowIds& ids) const { return Part(id).Find(id, ids); }
  uint32_t InsertIfAbsent(DocId id, uint32_t row, const RowIds& ids) {
    return Part(id).InsertIfAbsent(id, row, ids);
  }
  void Erase(DocId id, const RowIds& ids) { Part(id).Erase(id, ids); }
  void Clear() {
    for (IdMapSegment& p : parts_) p.Clear();
  }
  // Room for about n ids in all (each segment a share plus the spread of
  // a uniform split).
  void Reserve(size_t n, uint32_t max_row, const RowIds& ids) {
    const size_t share = n / kParts + n / kParts / 16 + 16;
    for (IdMapSegment& p : parts_) p.Reserve(share, max_row, ids);
  }
  size_t MemoryBytes() const {
    size_t bytes = 0;
    for (const IdMapSegment& p : parts_) bytes += p.MemoryBytes();
    return bytes;
  }

 private:
  static constexpr size_t kParts = 256;
  IdMapSegment& Part(DocId id) { return parts_[SplitMix64(id) >> 56]; }
  const IdMapSegment& Part(DocId id) const { return parts_[SplitMix64(id) >> 56]; }
  std::array<IdMapSegment, kParts> parts_;
};

// All bit masks over `bits` bits with popcount <= r, smallest popcount first.
std::vector<uint32_t> MasksWithin(int bits, int r) {
  std::vector<uint32_t> out{0};
  std::vector<uint32_t> frontier{0};
  for (int level = 1; level <= r && level <= bits; ++level) {
    std::vector<uint32_t> next;
    for (uint32_t m : frontier) {
      // Extend only above the highest set bit so each mask is built once.
      const int lo = m == 0 ? 0 : 32 - std::countl_zero(m);
      for (int b = lo; b < bits; ++b) next.push_back(m | (1u << b));
    }
    out.insert(out.end(), next.begin(), next.end());
    frontier.swap(next);
  }
  return out;
}

class MultiIndex final : public HammingIndex {
 public:
  explicit MultiIndex(int blocks, uint64_t expected_size) : blocks_(blocks) {
    int start = 0;
    for (int t = 0; t < blocks; ++t) {
      Table table;
      table.start = start;
      table.width = 64 / blocks + (t < 64 % blocks ? 1 : 0);
      start += table.width;
      min_width_ = t == 0 ? table.width : std::min(min_width_, table.width);
      tables_.push_back(std::move(table));
    }
    SetBucketBits(TargetBucketBits(expected_size));
  }

  Status Add(uint64_t fingerprint, DocId id) override {
    if (size_ >= kMaxRows) return Status::ResourceExhausted("index is full (2^32 - 2 entries)");
    // The row AllocateRow will hand out; the id map is told first so one
    // probe both rejects a duplicate and inserts.
    const uint32_t row = free_rows_.empty() ? static_cast<uint32_t>(fps_.size()) : free_rows_.back();
    if (id_map_.InsertIfAbsent(id, row, ids_) != kNoRow) {
      return Status::AlreadyExists("id " + std::to_string(id) + " already indexed");
    }
    (void)AllocateRow(fingerprint, id);
    ++size_;
    if (bucket_bits_ < MaxBucketBits() && size_ > (uint64_t{1} << bucket_bits_) * kMaxMeanBucket) {
      SetBucketBits(TargetBucketBits(size_));  // re-buckets every row, including this one
    } else {
      for (Table& t : tables_) {
        const uint64_t rot = t.Rotated(fingerprint);
        t.buckets[BucketOf(rot)].Push(SigOf(rot), row);
      }
    }
    return Status::OK();
  }

  Status AddBatch(std::span<const Entry> entries) override {
    if (entries.empty()) return Status::OK();
    if (size_ + entries.size() > kMaxRows) return Status::ResourceExhausted("index is full (2^32 - 2 entries)");
    // Small batches relative to the index: plain adds into the live buckets.
    const bool rebuild = entries.size() >= 4096 && entries.size() * 4 >= size_;
    if (!rebuild) {
      for (const Entry& e : entries) {
        if (id_map_.Find(e.id, ids_) != kNoRow) {
          return Status::AlreadyExists("id " + std::to_string(e.id) + " already indexed");
        }
      }
      std::vector<DocId> batch_ids;
      batch_ids.reserve(entries.size());
      for (const Entry& e : entries) batch_ids.push_back(e.id);
      std::sort(batch_ids.begin(), batch_ids.end());
      auto dup = std::adjacent_find(batch_ids.begin(), batch_ids.end());
      if (dup != batch_ids.end()) {
        return Status::AlreadyExists("id " + std::to_string(*dup) + " appears twice in the batch");
      }
      for (const Entry& e : entries) NEARDUP_RETURN_IF_ERROR(Add(e.fingerprint, e.id));
      return Status::OK();
    }
    // Large batches: append rows (the id map doubles as the duplicate check),
    // then rebuild every table with exact bucket sizes (a counting sort)
    // instead of growing buckets one push at a time.
    const size_t appended = entries.size() > free_rows_.size() ? entries.size() - free_rows_.size() : 0;
    ReserveRows(fps_.size() + appended);
    id_map_.Reserve(size_ + entries.size(), static_cast<uint32_t>(fps_.size() + appended), ids_);
    std::vector<uint32_t> added;
    added.reserve(entries.size());
    for (const Entry& e : entries) {
      const uint32_t row = AllocateRow(e.fingerprint, e.id);
      if (id_map_.InsertIfAbsent(e.id, row, ids_) != kNoRow) {
        // Roll back: the batch is all-or-nothing and the tables are untouched.
        ReleaseRow(row);
        for (auto it = added.rbegin(); it != added.rend(); ++it) {
          id_map_.Erase(ids_[*it], ids_);
          ReleaseRow(*it);
        }
        return Status::AlreadyExists("id " + std::to_string(e.id) + " already indexed or repeated in the batch");
      }
      added.push_back(row);
    }
    size_ += entries.size();
    SetBucketBits(std::max(bucket_bits_, TargetBucketBits(size_)));
    return Status::OK();
  }

  bool Remove(DocId id) override {
    const uint32_t row = id_map_.Find(id, ids_);
    if (row == kNoRow) return false;
    const uint64_t fp = fps_[row];
    for (Table& t : tables_) {
      Bucket& b = t.buckets[BucketOf(t.Rotated(fp))];
      const uint32_t* rows = b.rows();
      for (uint32_t i = 0; i < b.size; ++i) {
        if (rows[i] == row) {
          b.EraseAt(i);
          break;
        }
      }
    }
    id_map_.Erase(id, ids_);
    ReleaseRow(row);
    --size_;
    if (size_ == 0) Clear();
    return true;
  }

  void Clear() override {
    fps_.release();
    ids_.release();
    dead_.clear();
    dead_.shrink_to_fit();
    free_rows_.clear();
    free_rows_.shrink_to_fit();
    id_map_.Clear();
    size_ = 0;
    SetBucketBits(kMinBucketBits);
  }

  Status Search(uint64_t query, int k, std::vector<Match>* out) const override {
    out->clear();
    if (k < 0 || k > kMaxSupportedK) return Status::InvalidArgument("k must be in [0, 8]");
    Probe(query, k, [&](uint32_t row, int d) {
      out->push_back(Match{ids_[row], fps_[row], d});
      return true;
    });
    std::sort(out->begin(), out->end(), [](const Match& a, const Match& b) {
      return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
    });
    return Status::OK();
  }

  bool AnyWithin(uint64_t query, int k, Match* first) const override {
    if (k < 0 || k > kMaxSupportedK) return false;
    bool found = false;
    Probe(query, k, [&](uint32_t row, int d) {
      found = true;
      if (first) *first = Match{ids_[row], fps_[row], d};
      return false;
    });
    return found;
  }

  Result<uint64_t> Get(DocId id) const override {
    const uint32_t row = id_map_.Find(id, ids_);
    if (row == kNoRow) return Status::NotFound("id " + std::to_string(id) + " not indexed");
    return fps_[row];
  }

  void ForEach(const std::function<void(const Entry&)>& fn) const override {
    for (uint32_t row = 0; row < fps_.size(); ++row) {
      if (!IsDead(row)) fn(Entry{fps_[row], ids_[row]});
    }
  }

  size_t size() const override { return size_; }
  int max_k() const override { return kMaxSupportedK; }

  size_t MemoryBytes() const override {
    size_t bytes = fps_.capacity() * 8 + ids_.capacity() * 8 + dead_.capacity() * 8 +
                   free_rows_.capacity() * 4 + id_map_.MemoryBytes();
    for (const Table& t : tables_) {
      bytes += t.buckets.capacity() * sizeof(Bucket);
      for (const Bucket& b : t.buckets) bytes += b.HeapBytes();
    }
    return bytes;
  }

  std::string Describe() const override {
    return "multi-index(blocks=" + std::to_string(blocks_) + ",bucket_bits=" + std::to_string(bucket_bits_) + ")";
  }

 private:
  int MaxBucketBits() const { return std::min(min_width_, kMaxBucketBits); }

  int TargetBucketBits(uint64_t n) const {
    int bits = kMinBucketBits;
    while (bits < MaxBucketBits() && (n >> bits) > kMaxMeanBucket / 2) ++bits;
    return bits;
  }

  // `rot` is a fingerprint rotated by Table::Rotated: key on top, then the
  // signature.
  uint32_t BucketOf(uint64_t rot) const { return static_cast<uint32_t>(rot >> (64 - bucket_bits_)); }
  uint16_t SigOf(uint64_t rot) const { return static_cast<uint16_t>((rot << bucket_bits_) >> (64 - kSigBits)); }
  bool IsDead(uint32_t row) const { return (dead_[row / 64] >> (row % 64)) & 1; }

  void ReserveRows(size_t rows) {
    if (rows <= fps_.capacity()) return;
    // Grow by 1/16 rather than std::vector's 2x: at 50M entries the difference
    // is hundreds of megabytes of slack. (Copying 16 B per row every 1/16th
    // of growth costs ~0.3 B of copy per add, far below an add's misses.)
    const size_t cap = std::max(rows, fps_.capacity() + fps_.capacity() / 16 + 1024);
    fps_.reserve(cap);
    ids_.reserve(cap);
    dead_.reserve(cap / 64 + 1);
  }

  uint32_t AllocateRow(uint64_t fp, DocId id) {
    if (!free_rows_.empty()) {
      const uint32_t row = free_rows_.back();
      free_rows_.pop_back();
      fps_[row] = fp;
      ids_[row] = id;
      dead_[row / 64] &= ~(uint64_t{1} << (row % 64));
      return row;
    }
    ReserveRows(fps_.size() + 1);
    const uint32_t row = static_cast<uint32_t>(fps_.size());
    fps_.push_back(fp);
    ids_.push_back(id);
    if (dead_.size() * 64 <= row) dead_.push_back(0);
    return row;
  }

  // Marks a row free for reuse; the caller has already unlinked it.
  void ReleaseRow(uint32_t row) {
    dead_[row / 64] |= uint64_t{1} << (row % 64);
    free_rows_.push_back(row);
  }

  // Rebuilds every table with 2^bits buckets sized exactly (counting sort).
  // Signatures depend on the key width, so this rewrites them too.
  void SetBucketBits(int bits) {
    bucket_bits_ = bits;
    const size_t nb = size_t{1} << bits;
    for (int r = 0; r <= kMaxRadius; ++r) masks_[r] = MasksWithin(bits, r);
    std::vector<uint32_t> counts;
    for (Table& t : tables_) {
      t.sig_block_bits = std::clamp(t.width - bits, 0, kSigBits);
      t.FreeAll();
      t.buckets.assign(nb, Bucket{});
      counts.assign(nb, 0);
      for (uint32_t row = 0; row < fps_.size(); ++row) {
        if (!IsDead(row)) ++counts[BucketOf(t.Rotated(fps_[row]))];
      }
      for (size_t b = 0; b < nb; ++b) {
        if (counts[b]) t.buckets[b].Reallocate(counts[b]);
      }
      for (uint32_t row = 0; row < fps_.size(); ++row) {
        if (IsDead(row)) continue;
        const uint64_t rot = t.Rotated(fps_[row]);
        Bucket& b = t.buckets[BucketOf(rot)];
        b.sigs()[b.size] = SigOf(rot);
        b.rows()[b.size] = row;
        ++b.size;
      }
    }
  }

  // Pigeonhole plan: probe `tables` tables, each within `radius` of the query
  // block. Any t = floor(k/(r+1)) + 1 blocks cannot all differ in more than r
  // bits when the total distance is <= k.
  struct Plan {
    int radius;
    int tables;
  };
  Plan PlanFor(int k) const {
    int r = 0;
    while (k / (r + 1) + 1 > blocks_) ++r;
    return Plan{r, k / (r + 1) + 1};
  }

  // Calls emit(row, distance) once per entry within k; stops when emit
  // returns false. An entry reachable from several probed tables is reported
  // only from the first of them (its lowest table whose block is within r),
  // which keeps results unique without a hash set.
  template <typename Emit>
  void Probe(uint64_t query, int k, Emit&& emit) const {
    if (size_ == 0) return;
    const Plan plan = PlanFor(k);
    const std::vector<uint32_t>& masks = masks_[plan.radius];
    // Issue the first loads of every probed bucket up front: at 50M entries
    // each is a cache miss, and they are independent.
    struct Probed {
      const Bucket* bucket;
      int table;
      // The bucket key differs from the query's in this many bits (the
      // probe mask's popcount); the signature may then differ in k - it in
      // total and in r - it within the block.
      int key_distance;
    };
    Probed probed[64];
    size_t nprobed = 0;
    // Survivors of the signature filter are few (~1% of a bucket) but each
    // needs two random reads (its row, then its fingerprint). They are
    // collected across all probed buckets and their loads issued before any
    // is used, so the misses overlap instead of queueing one after another.
    struct Survivor {
      const uint32_t* row;
      int table;
    };
    constexpr size_t kMaxSurvivors = 512;
    Survivor survivors[kMaxSurvivors];
    uint32_t row_of[kMaxSurvivors];
    size_t nsurvivors = 0;
    auto verify = [&]() -> bool {
      for (size_t c = 0; c < nsurvivors; ++c) {
        row_of[c] = *survivors[c].row;
        __builtin_prefetch(&fps_[row_of[c]]);
      }
      const size_t n = nsurvivors;
      nsurvivors = 0;
      for (size_t c = 0; c < n; ++c) {
        const uint32_t row = row_of[c];
        const uint64_t diff = fps_[row] ^ query;
        const int d = std::popcount(diff);
        if (d > k) continue;
        // The signature filter on the block is exact only when key and
        // signature cover the whole block; for wide blocks at small N (2
        // blocks of 32 bits, few key bits) it is a lower bound, and an entry
        // must not be reported from a table whose block is beyond r.
        if (tables_[survivors[c].table].BlockDistance(diff) > plan.radius) continue;
        bool reported_earlier = false;
        for (int tj = 0; tj < survivors[c].table; ++tj) {
          if (tables_[tj].BlockDistance(diff) <= plan.radius) {
            reported_earlier = true;
            break;
          }
        }
        if (reported_earlier) continue;
        if (!emit(row, d)) return false;
      }
      return true;
    };
    auto scan = [&](const Probed& p) -> bool {
      const Table& t = tables_[p.table];
      const uint32_t qsig = SigOf(t.Rotated(query));
      const int total_limit = k - p.key_distance;
      const int block_limit = plan.radius - p.key_distance;
      const int block_shift = kSigBits - t.sig_block_bits;  // 16: no block bits in the signature
      const uint16_t* sigs = p.bucket->sigs();
      const uint32_t* rows = p.bucket->rows();
      const uint32_t n = p.bucket->size;
      // Branch-free filter into a small buffer.
      uint32_t cand[256];
      for (uint32_t base = 0; base < n; base += 256) {
        const uint32_t end = std::min<uint32_t>(n, base + 256);
        uint32_t nc = 0;
        for (uint32_t i = base; i < end; ++i) {
          cand[nc] = i;
          nc += std::popcount(static_cast<uint32_t>(sigs[i]) ^ qsig) <= total_limit;
        }
        for (uint32_t c = 0; c < nc; ++c) {
          const uint32_t i = cand[c];
          if (std::popcount((static_cast<uint32_t>(sigs[i]) ^ qsig) >> block_shift) > block_limit) continue;
          __builtin_prefetch(&rows[i]);
          survivors[nsurvivors++] = Survivor{&rows[i], p.table};
          if (nsurvivors == kMaxSurvivors && !verify()) return false;
        }
      }
      return true;
    };
    auto flush = [&]() -> bool {
      for (size_t i = 0; i < nprobed; ++i) {
        if (!scan(probed[i])) return false;
      }
      nprobed = 0;
      return true;
    };
    for (int ti = 0; ti < plan.tables; ++ti) {
      const Table& t = tables_[ti];
      const uint32_t qbucket = BucketOf(t.Rotated(query));
      // (flush() scans queued buckets; verify() checks their survivors.)
      for (uint32_t mask : masks) {
        const Bucket& b = t.buckets[qbucket ^ mask];
        if (b.size == 0) continue;
        // Request every line of the signature array now: at 50M entries a
        // bucket's signatures are ~1.5 KB of cold memory, and the probed
        // buckets' lines then arrive in parallel rather than as each scan
        // reaches them.
        // A small bucket (3 blocks, or under 2M entries: tens of entries) is
        // fetched whole, rows too: a few lines more, and a survivor's row is
        // then at hand instead of one more miss before its fingerprint's.
        const bool small = b.cap <= 64;
        const char* line = reinterpret_cast<const char*>(small ? b.data : reinterpret_cast<const unsigned char*>(b.sigs()));
        const size_t bytes = small ? size_t{b.cap} * Bucket::kEntryBytes : size_t{b.size} * sizeof(uint16_t);
        for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(line + off);
        probed[nprobed++] = Probed{&b, ti, std::popcount(mask)};
        if (nprobed == 64 && (!flush() || !verify())) return;
      }
    }
    if (flush()) verify();
  }

  const int blocks_;
  int min_width_ = 64;
  int bucket_bits_ = kMinBucketBits;
  std::vector<Table> tables_;
  std::vector<uint32_t> masks_[kMaxRadius + 1];

  // ReallocArray: growing 10M+ rows is a page remap, not a copy.
  internal::ReallocArray<uint64_t> fps_;
  RowIds ids_;
  std::vector<uint64_t> dead_;  // bit per row: removed and on the free list
  std::vector<uint32_t> free_rows_;
  IdMap id_map_;
  size_t size_ = 0;
};

}  // namespace

int DefaultBlocks(int k, uint64_t expected_size) {
  (void)expected_size;
  // Measured in bench_index (docs/BENCHMARKS.md).
  if (k <= 2) return 3;
  return 4;
}

Result<std::unique_ptr<HammingIndex>> NewMultiIndex(const MultiIndexOptions& options) {
  if (options.expected_k < 0 || options.expected_k > kMaxSupportedK) {
    return Status::InvalidArgument("expected_k must be in [0, 8]");
  }
  int blocks = options.blocks == 0 ? DefaultBlocks(options.expected_k, options.expected_size) : options.blocks;
  if (blocks < 2 || blocks > 8) return Status::InvalidArgument("blocks must be in [2, 8]");
  return std::unique_ptr<HammingIndex>(new MultiIndex(blocks, options.expected_size));
}

}  // namespace neardup
