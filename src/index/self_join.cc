#include "neardup/index/self_join.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <ctime>
#include <mutex>
#include <string>
#include <utility>

#include "neardup/util/parallel.h"

namespace neardup {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU seconds of the calling thread: on shared cores the phases' own cost,
// not the time spent waiting for a core.
double ThreadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Groups larger than this are sorted by full fingerprint so that identical
// fingerprints form runs compared once. Random data at 10M, k = 3 has groups
// of ~150 (16-bit keys), far below it: only clusters of equal keys pay.
constexpr size_t kRunGroup = 1024;

// Groups from this size on are bucketed by sub-block (ScanBinned); below it
// comparing all pairs is cheaper than bucketing.
constexpr size_t kBinGroup = 32;

// Radix digits of at most 8 bits: 256 write streams stay within the cache
// and the TLB. At 10M, two 8-bit passes scatter in 0.05 s where one 16-bit
// pass (65,536 streams) takes 0.11 s.
constexpr int kMaxDigitBits = 8;

// Thrown out of a block's task when it alone passes options.max_pairs;
// ParallelFor rethrows it on the caller's thread.
struct TooManyPairs {};

// The block's bits of fps sorted by key, each with its input position.
struct Columns {
  std::vector<uint64_t> fp;
  std::vector<uint32_t> pos;
  void Resize(size_t n) {
    fp.resize(n);
    pos.resize(n);
  }
};

uint64_t LowMask(int bits) { return bits >= 64 ? ~0ULL : (1ULL << bits) - 1; }

// One stable counting-sort pass on bits [shift, shift + bits) from src into
// dst. src_pos == nullptr means the identity (src is the caller's input).
void CountingPass(const uint64_t* src_fp, const uint32_t* src_pos, size_t n, int shift, int bits,
                  Columns* dst, std::vector<uint32_t>* count) {
  const uint64_t mask = LowMask(bits);
  count->assign((size_t{1} << bits) + 1, 0);
  uint32_t* c = count->data();
  for (size_t i = 0; i < n; ++i) ++c[((src_fp[i] >> shift) & mask) + 1];
  for (size_t d = 1; d < count->size(); ++d) c[d] += c[d - 1];
  uint64_t* out_fp = dst->fp.data();
  uint32_t* out_pos = dst->pos.data();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t at = c[(src_fp[i] >> shift) & mask]++;
    out_fp[at] = src_fp[i];
    out_pos[at] = src_pos ? src_pos[i] : static_cast<uint32_t>(i);
  }
}

// LSD radix sort of fps by the block's bits, in as few <= 16-bit digits as
// the width allows (one pass for k >= 3).
// Sort buffers, reused from block to block: fresh ones cost page faults and
// zeroing (0.06 s per 120 MB at 10M, a third of an unbuffered block sort).
struct Scratch {
  Columns a, b;
};

class ScratchPool {
 public:
  Scratch Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return {};
    Scratch s = std::move(free_.back());
    free_.pop_back();
    return s;
  }
  void Give(Scratch s) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(s));
  }

 private:
  std::mutex mu_;
  std::vector<Scratch> free_;
};

// Leaves the sorted columns in s->a.
void SortByBlock(std::span<const uint64_t> fps, JoinBlock block, Scratch* s) {
  const int passes = (block.width + kMaxDigitBits - 1) / kMaxDigitBits;
  Columns& a = s->a;
  Columns& b = s->b;
  a.Resize(fps.size());
  if (passes > 1) b.Resize(fps.size());
  std::vector<uint32_t> count;
  int done = 0;
  for (int p = 0; p < passes; ++p) {
    const int bits = (block.width - done) / (passes - p);
    if (p == 0) {
      CountingPass(fps.data(), nullptr, fps.size(), block.offset, bits, &a, &count);
    } else {
      CountingPass(a.fp.data(), a.pos.data(), fps.size(), block.offset + done, bits, &b, &count);
      std::swap(a, b);
    }
    done += bits;
  }
}

// Scans one block's sorted columns and collects the pairs whose first equal
// block is this one.
class BlockScanner {
 public:
  BlockScanner(const std::vector<JoinBlock>& blocks, int block, int k, uint64_t max_pairs)
      : k_(k), block_(block), max_pairs_(max_pairs), key_mask_(LowMask(blocks[block].width)),
        shift_(blocks[block].offset) {
    for (int c = 0; c < block; ++c) earlier_.push_back(LowMask(blocks[c].width) << blocks[c].offset);
    // The bits outside this block, packed low, split again into k + 1
    // sub-blocks: a pair equal on this block differs in <= k of them, so it
    // is equal on some sub-block too (pigeonhole once more).
    const int rest = 64 - blocks[block].width;
    if (k > 0) {
      for (int s = 0, offset = 0; s <= k; ++s) {
        const int width = rest / (k + 1) + (s < rest % (k + 1) ? 1 : 0);
        subs_.push_back(LowMask(width) << offset);
        sub_shift_.push_back(offset);
        offset += width;
      }
    }
  }

  void Scan(const Columns& col) {
    const size_t n = col.fp.size();
    for (size_t a = 0; a < n;) {
      const uint64_t key = Key(col.fp[a]);
      size_t b = a + 1;
      while (b < n && Key(col.fp[b]) == key) ++b;
      largest_group_ = std::max<uint64_t>(largest_group_, b - a);
      if (b - a > kRunGroup) {
        ScanRuns(col, a, b);
      } else if (b - a >= kBinGroup && !subs_.empty()) {
        ScanBinned(col, a, b);
      } else {
        ScanPlain(col, a, b);
      }
      a = b;
    }
  }

  std::vector<JoinPair>& pairs() { return pairs_; }
  uint64_t comparisons() const { return comparisons_; }
  uint64_t largest_group() const { return largest_group_; }

 private:
  uint64_t Key(uint64_t fp) const { return (fp >> shift_) & key_mask_; }

  // True when the pair agrees on a block before this one: it was (or will
  // be) reported there.
  bool SeenEarlier(uint64_t diff) const {
    for (uint64_t m : earlier_) {
      if ((diff & m) == 0) return true;
    }
    return false;
  }

  // fp without this block's bits, the bits above it moved down.
  uint64_t Rest(uint64_t fp) const {
    const int above = shift_ + std::popcount(key_mask_);
    return (fp & LowMask(shift_)) | (above >= 64 ? 0 : (fp >> above) << shift_);
  }

  // The first sub-block on which a pair with this difference is equal.
  size_t FirstEqualSub(uint64_t diff) const {
    const uint64_t rest = Rest(diff);
    size_t s = 0;
    while (s < subs_.size() && (rest & subs_[s]) != 0) ++s;
    return s;
  }

  void Emit(uint32_t p, uint32_t q, int distance) {
    if (max_pairs_ != 0 && pairs_.size() >= max_pairs_) throw TooManyPairs{};
    pairs_.push_back({std::min(p, q), std::max(p, q), static_cast<uint32_t>(distance)});
  }

  void ScanPlain(const Columns& col, size_t a, size_t b) {
    const uint64_t* fp = col.fp.data();
    for (size_t x = a; x + 1 < b; ++x) {
      const uint64_t fx = fp[x];
      for (size_t y = x + 1; y < b; ++y) {
        const uint64_t diff = fx ^ fp[y];
        const int d = std::popcount(diff);
        if (d <= k_) [[unlikely]] {
          if (!SeenEarlier(diff)) Emit(col.pos[x], col.pos[y], d);
        }
      }
    }
    comparisons_ += (b - a) * (b - a - 1) / 2;
  }

  // A mid-size group: for each sub-block, bucket the group by (the low bits
  // of) its sub-key and compare pairs inside a bucket only. A pair counts at
  // the first sub-block on which it is equal, so it is reported once.
  void ScanBinned(const Columns& col, size_t a, size_t b) {
    const size_t g = b - a;
    const uint64_t bins = std::clamp<size_t>(std::bit_ceil(g) / 2, 8, 512);
    rest_.resize(g);
    for (size_t x = 0; x < g; ++x) rest_[x] = Rest(col.fp[a + x]);
    sfp_.resize(g);
    spos_.resize(g);
    for (size_t s = 0; s < subs_.size(); ++s) {
      const uint64_t mask = subs_[s], shift = sub_shift_[s];
      auto bin = [&](size_t x) { return ((rest_[x] & mask) >> shift) & (bins - 1); };
      start_.assign(bins + 1, 0);
      for (size_t x = 0; x < g; ++x) ++start_[bin(x) + 1];
      for (size_t i = 1; i <= bins; ++i) start_[i] += start_[i - 1];
      cursor_.assign(start_.begin(), start_.end() - 1);
      for (size_t x = 0; x < g; ++x) {
        const uint32_t at = cursor_[bin(x)]++;
        sfp_[at] = col.fp[a + x];
        spos_[at] = col.pos[a + x];
      }
      for (size_t i = 0; i < bins; ++i) {
        if (start_[i + 1] - start_[i] > 1) ScanBin(start_[i], start_[i + 1], s);
      }
    }
  }

  void ScanBin(size_t a, size_t b, size_t sub) {
    for (size_t x = a; x + 1 < b; ++x) {
      for (size_t y = x + 1; y < b; ++y) {
        const uint64_t diff = sfp_[x] ^ sfp_[y];
        const int d = std::popcount(diff);
        if (d <= k_ && FirstEqualSub(diff) == sub && !SeenEarlier(diff)) Emit(spos_[x], spos_[y], d);
      }
    }
    comparisons_ += (b - a) * (b - a - 1) / 2;
  }

  // A big group: sort it by fingerprint, compare distinct values once, and
  // expand matches to every pair of positions.
  void ScanRuns(const Columns& col, size_t a, size_t b) {
    std::vector<std::pair<uint64_t, uint32_t>> g;
    g.reserve(b - a);
    for (size_t x = a; x < b; ++x) g.emplace_back(col.fp[x], col.pos[x]);
    std::sort(g.begin(), g.end());
    std::vector<size_t> runs;  // start of each run of equal fingerprints, then g.size()
    for (size_t x = 0; x < g.size(); ++x) {
      if (x == 0 || g[x].first != g[x - 1].first) runs.push_back(x);
    }
    runs.push_back(g.size());
    const size_t r = runs.size() - 1;
    for (size_t s = 0; s < r; ++s) {
      // Identical fingerprints agree on block 0: reported there only.
      if (block_ == 0) EmitCross(g, runs[s], runs[s + 1], runs[s], runs[s + 1], 0);
      for (size_t t = s + 1; t < r; ++t) {
        const uint64_t diff = g[runs[s]].first ^ g[runs[t]].first;
        const int d = std::popcount(diff);
        if (d <= k_ && !SeenEarlier(diff)) EmitCross(g, runs[s], runs[s + 1], runs[t], runs[t + 1], d);
      }
    }
    comparisons_ += r * (r - 1) / 2;
  }

  // Every pair (x in [xa, xb), y in [ya, yb)); when the ranges are the same
  // run, each unordered pair once.
  void EmitCross(const std::vector<std::pair<uint64_t, uint32_t>>& g, size_t xa, size_t xb, size_t ya,
                 size_t yb, int d) {
    for (size_t x = xa; x < xb; ++x) {
      for (size_t y = xa == ya ? x + 1 : ya; y < yb; ++y) Emit(g[x].second, g[y].second, d);
    }
  }

  const int k_;
  const int block_;
  const uint64_t max_pairs_;
  const uint64_t key_mask_;
  const int shift_;
  std::vector<uint64_t> earlier_;  // bit masks of the blocks before this one
  std::vector<uint64_t> subs_;     // sub-block masks, in Rest() coordinates
  std::vector<int> sub_shift_;
  std::vector<uint64_t> rest_;     // ScanBinned's scratch: Rest() of the group,
  std::vector<uint64_t> sfp_;      // and the group by bucket
  std::vector<uint32_t> spos_;
  std::vector<uint32_t> start_, cursor_;
  std::vector<JoinPair> pairs_;
  uint64_t comparisons_ = 0;
  uint64_t largest_group_ = 0;
};

bool ByPosition(const JoinPair& x, const JoinPair& y) { return x.i != y.i ? x.i < y.i : x.j < y.j; }

struct BlockResult {
  std::vector<JoinPair> pairs;
  double sort_seconds = 0;
  double scan_seconds = 0;
  uint64_t comparisons = 0;
  uint64_t largest_group = 0;
};

BlockResult JoinOneBlock(std::span<const uint64_t> fps, const std::vector<JoinBlock>& blocks, int block, int k,
                         uint64_t max_pairs, Scratch* scratch) {
  BlockResult r;
  double t0 = ThreadCpu();
  SortByBlock(fps, blocks[block], scratch);
  r.sort_seconds = ThreadCpu() - t0;
  t0 = ThreadCpu();
  BlockScanner scanner(blocks, block, k, max_pairs);
  scanner.Scan(scratch->a);
  r.scan_seconds = ThreadCpu() - t0;
  r.pairs = std::move(scanner.pairs());
  std::sort(r.pairs.begin(), r.pairs.end(), ByPosition);
  r.comparisons = scanner.comparisons();
  r.largest_group = scanner.largest_group();
  return r;
}

// Merges the per-block pairs (each sorted, disjoint by construction) into
// *out, sorted by (i, j) so the order does not depend on scheduling.
void Merge(std::vector<BlockResult>* results, std::vector<JoinPair>* out) {
  size_t total = 0;
  for (const auto& r : *results) total += r.pairs.size();
  out->reserve(total);
  std::vector<size_t> bounds{0};
  for (auto& r : *results) {
    out->insert(out->end(), r.pairs.begin(), r.pairs.end());
    std::vector<JoinPair>().swap(r.pairs);  // free as we go: peak = one copy plus one block
    bounds.push_back(out->size());
  }
  // Pairwise merges of neighbouring sorted runs, log2(blocks) rounds.
  for (size_t width = 1; width + 1 < bounds.size(); width *= 2) {
    for (size_t lo = 0; lo + width + 1 < bounds.size(); lo += 2 * width) {
      const size_t hi = std::min(lo + 2 * width, bounds.size() - 1);
      std::inplace_merge(out->begin() + bounds[lo], out->begin() + bounds[lo + width], out->begin() + bounds[hi],
                         ByPosition);
    }
  }
}

}  // namespace

std::vector<JoinBlock> SelfJoinBlocks(int k) {
  std::vector<JoinBlock> blocks;
  if (k < 0 || k > kMaxSelfJoinK) return blocks;
  const int count = k + 1, base = 64 / count, wider = 64 % count;
  int offset = 0;
  for (int b = 0; b < count; ++b) {
    const int width = base + (b < wider ? 1 : 0);
    blocks.push_back({offset, width});
    offset += width;
  }
  return blocks;
}

Status SelfJoin(std::span<const uint64_t> fps, int k, const SelfJoinOptions& options, std::vector<JoinPair>* out,
                SelfJoinStats* stats) {
  out->clear();
  if (k < 0 || k > kMaxSelfJoinK) {
    return Status::InvalidArgument("self-join k must be within [0, " + std::to_string(kMaxSelfJoinK) + "], got " +
                                   std::to_string(k));
  }
  if (fps.size() >= (uint64_t{1} << 32)) return Status::InvalidArgument("self-join takes fewer than 2^32 fingerprints");
  const std::vector<JoinBlock> blocks = SelfJoinBlocks(k);
  std::vector<BlockResult> results(blocks.size());
  ScratchPool pool;
  try {
    ParallelFor(blocks.size(), options.threads, [&](size_t begin, size_t end) {
      for (size_t b = begin; b < end; ++b) {
        Scratch scratch = pool.Take();
        results[b] = JoinOneBlock(fps, blocks, static_cast<int>(b), k, options.max_pairs, &scratch);
        pool.Give(std::move(scratch));
      }
    });
  } catch (const TooManyPairs&) {
    return Status::ResourceExhausted("self-join: more than max_pairs = " + std::to_string(options.max_pairs) +
                                     " pairs");
  }
  SelfJoinStats s;
  uint64_t total = 0;
  for (const auto& r : results) {
    s.sort_seconds += r.sort_seconds;
    s.scan_seconds += r.scan_seconds;
    s.comparisons += r.comparisons;
    s.largest_group = std::max(s.largest_group, r.largest_group);
    total += r.pairs.size();
  }
  if (options.max_pairs != 0 && total > options.max_pairs) {
    return Status::ResourceExhausted("self-join: " + std::to_string(total) + " pairs, more than max_pairs = " +
                                     std::to_string(options.max_pairs));
  }
  const auto t0 = Clock::now();
  Merge(&results, out);
  s.merge_seconds = Since(t0);
  if (stats) *stats = s;
  return Status::OK();
}

}  // namespace neardup
