#include "neardup/dedup/batch_join.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <xxhash.h>

#include "dedup/sketch_record.h"
#include "neardup/dedup/pair_rule.h"
#include "neardup/index/self_join.h"
#include "neardup/util/parallel.h"

namespace neardup {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Postings pack a class in 27 bits beside a 5-bit anchor slot.
constexpr uint32_t kMaxClasses = uint32_t{1} << 27;
static_assert(kAnchorCount <= 32, "an anchor slot takes 5 bits");

// Documents with equal signatures, numbered in order of their first document.
struct Classes {
  std::vector<uint32_t> of;     // each document's class
  std::vector<uint32_t> first;  // each class's first document (ascending)
  std::vector<uint32_t> last;   // each class's last document
  size_t size() const { return first.size(); }
};

uint64_t SignatureHash(const DocSignature& s) {
  const uint64_t head[4] = {s.content_hash, s.fingerprint, uint64_t{s.num_chars} << 1 | s.has_features,
                            s.sketch.num_shingles};
  return XXH3_64bits_withSeed(s.sketch.mins.data(), s.sketch.mins.size() * sizeof(uint32_t),
                              XXH3_64bits(head, sizeof(head)));
}

// Calls fn(run_begin, run_end) for each run of equal key(i) in [0, n) that
// starts in [b, e): a run that starts before b belongs to an earlier range,
// one that starts before e may end past it. So ranges that cover [0, n)
// visit every run once, whatever their bounds.
template <typename Key, typename Fn>
void ForEachRunStartingIn(size_t b, size_t e, size_t n, Key key, Fn fn) {
  while (b < e && b > 0 && key(b) == key(b - 1)) ++b;
  for (size_t end; b < e; b = end) {
    for (end = b + 1; end < n && key(end) == key(b); ++end) {
    }
    fn(b, end);
  }
}

// Calls fn(k, from, to) for threads * 4 contiguous ranges [from, to) that
// cover [0, n) in order, k = 0, 1, ..., on all threads: enough ranges that
// uneven ones balance, few enough that per-range tables stay small.
struct Ranges {
  size_t n, count, size;
  Ranges(size_t n, int threads) : n(n), count(static_cast<size_t>(std::max(threads, 1)) * 4), size(n / count + 1) {}
  template <typename Fn>
  void Each(int threads, Fn fn) const {
    ParallelFor(count, threads, [&](size_t b, size_t e) {
      for (size_t k = b; k < e; ++k) fn(k, std::min(n, k * size), std::min(n, (k + 1) * size));
    });
  }
};

// Numbers the classes in order of their first documents, on all threads:
// rep[d] is the first document with d's signature and last_doc[r] (for such
// a first r) the last.
Status NumberClasses(const std::vector<uint32_t>& rep, const std::vector<uint32_t>& last_doc, int threads,
                     Classes* c) {
  const Ranges ranges(rep.size(), threads);
  std::vector<size_t> base(ranges.count + 1, 0);  // classes whose first is before range k
  ranges.Each(threads, [&](size_t k, size_t from, size_t to) {
    for (size_t d = from; d < to; ++d) base[k + 1] += rep[d] == d;
  });
  for (size_t k = 0; k < ranges.count; ++k) base[k + 1] += base[k];
  if (base[ranges.count] > kMaxClasses) {
    return Status::InvalidArgument("the join takes fewer than 2^27 distinct documents");
  }
  c->of.resize(rep.size());
  c->first.resize(base[ranges.count]);
  c->last.resize(base[ranges.count]);
  ranges.Each(threads, [&](size_t k, size_t from, size_t to) {
    uint32_t id = static_cast<uint32_t>(base[k]);
    for (size_t d = from; d < to; ++d) {
      if (rep[d] != d) continue;
      c->of[d] = id;
      c->first[id] = static_cast<uint32_t>(d);
      c->last[id++] = last_doc[d];
    }
  });
  // A later document's first is numbered by now, in whichever range it is.
  ranges.Each(threads, [&](size_t, size_t from, size_t to) {
    for (size_t d = from; d < to; ++d) {
      if (rep[d] != d) c->of[d] = c->of[rep[d]];
    }
  });
  return Status::OK();
}

Status FindClasses(std::span<const DocSignature> sigs, int threads, Classes* c) {
  const size_t n = sigs.size();
  std::vector<std::pair<uint64_t, uint32_t>> by_hash(n);
  ParallelFor(n, threads, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) by_hash[i] = {SignatureHash(sigs[i]), static_cast<uint32_t>(i)};
  });
  ParallelSort(by_hash, threads, std::less<>());
  // Inside one hash value the signatures are compared whole, so a collision
  // cannot merge two classes. A run is in document order (the sort's second
  // key), so last_doc[r] ends at r's class's last document.
  std::vector<uint32_t> rep(n), last_doc(n);
  auto hash_at = [&](size_t i) { return by_hash[i].first; };
  auto classes_of_run = [&](size_t b, size_t e) {
    thread_local std::vector<uint32_t> reps;
    reps.clear();
    for (size_t i = b; i < e; ++i) {
      const uint32_t d = by_hash[i].second;
      auto same = std::find_if(reps.begin(), reps.end(), [&](uint32_t r) { return sigs[r] == sigs[d]; });
      if (same == reps.end()) same = reps.insert(reps.end(), d);
      rep[d] = *same;
      last_doc[*same] = d;
    }
  };
  ParallelFor(n, threads, [&](size_t b, size_t e) { ForEachRunStartingIn(b, e, n, hash_at, classes_of_run); });
  return NumberClasses(rep, last_doc, threads, c);
}

// What the anchor groups read of a class, in one place: the steps that
// visit every posting read one line of memory per posting.
struct ClassInfo {
  internal::BucketCounts counts;  // of the whole n-gram set (complete sketches only)
  uint32_t shingles = 0, first = 0, last = 0;
  uint32_t probe = 0, found = 0;  // LiveSlots
  uint8_t flags = 0;
};
constexpr uint8_t kHasFeatures = 1, kHasSketch = 2, kKeeps = 4;

// What the rule reads of a class (its first document's signature).
struct Rule {
  const DedupOptions& options;
  NearDupOptions pair_options;  // DecidePair's view of the options
  std::span<const DocSignature> sigs;
  const Classes& classes;
  std::vector<ClassInfo> info;
  std::vector<uint8_t> flags;  // info[c].flags, packed for the scans by posting

  const DocSignature& Sig(uint32_t c) const { return sigs[classes.first[c]]; }
  bool Keeps(uint32_t c) const { return flags[c] & kKeeps; }
  int Radius(uint32_t c) const { return QueryRadius(pair_options, Sig(c)); }
  bool UsesAnchors() const { return options.recheck.enabled && options.recheck.anchors > 0; }
  // info and flags, from the signatures.
  void Describe(int threads) {
    info.resize(classes.size());
    flags.resize(classes.size());
    ParallelFor(info.size(), threads, [&](size_t b, size_t e) {
      for (uint32_t c = static_cast<uint32_t>(b); c < e; ++c) {
        const DocSignature& s = Sig(c);
        ClassInfo& i = info[c];
        i.counts = sketch_record::SlotCounts(s);
        i.shingles = s.sketch.num_shingles, i.first = classes.first[c], i.last = classes.last[c];
        const bool keeps = KeepsSketch(options.recheck, s);
        i.flags = (s.has_features ? kHasFeatures : 0) | (s.has_sketch() ? kHasSketch : 0) | (keeps ? kKeeps : 0);
        flags[c] = i.flags;
      }
    });
  }
  // The pair rule for query class q against candidate class c, as
  // NearDupSet::Accept sees it: c's sketch only if q has one and c keeps it.
  PairDecision Decide(uint32_t q, uint32_t c, int distance) const {
    const PairSide side = Sig(q).has_sketch() && Keeps(c) ? PairSide::Of(Sig(c)) : PairSide{};
    return DecidePair(pair_options, PairSide::Of(Sig(q)), side, distance);
  }
};

// A candidate pair of classes, later > earlier. kForward: the later class
// queries the earlier one. kBackward: a later document of the earlier class
// queries the later class (only listed when the earlier class has one after
// the later class's first).
struct Pair {
  uint32_t later = 0, earlier = 0;
  uint8_t directions = 0;
};
constexpr uint8_t kForward = 1, kBackward = 2;

// ---- anchors ----------------------------------------------------------------

// A posting: anchor << 32 | class << 5 | slot.
uint32_t AnchorOf(uint64_t p) { return static_cast<uint32_t>(p >> 32); }
uint32_t ClassOf(uint64_t p) { return static_cast<uint32_t>(p >> 5) & (kMaxClasses - 1); }
uint32_t SlotOf(uint64_t p) { return static_cast<uint32_t>(p & 31); }

// Postings are split by the anchor's top bits into buckets that are sorted,
// scanned and paired independently, on all threads: one anchor's group never
// spans two buckets.
constexpr int kBucketBits = 10;
constexpr size_t kBuckets = size_t{1} << kBucketBits;
size_t BucketOf(uint64_t p) { return static_cast<size_t>(p >> (64 - kBucketBits)); }

// Every anchor slot of the classes that use anchors, by bucket: bucket b is
// postings[(*at)[b] .. (*at)[b + 1]), in class order (a stable scatter of
// contiguous ranges of classes, straight from the signatures).
std::vector<uint64_t> BucketedPostings(const Rule& rule, int threads, std::vector<size_t>* at) {
  const uint32_t n = static_cast<uint32_t>(rule.classes.size());
  auto for_each_posting = [&](uint32_t c, auto fn) {
    if (!rule.UsesAnchors() || !(rule.flags[c] & kHasSketch)) return;
    const std::vector<uint32_t>& anchors = rule.Sig(c).sketch.anchors;
    for (uint32_t s = 0; s < anchors.size() && s < kAnchorCount; ++s) fn(uint64_t{anchors[s]} << 32 | uint64_t{c} << 5 | s);
  };
  const Ranges ranges(n, threads);
  std::vector<std::vector<size_t>> pos(ranges.count, std::vector<size_t>(kBuckets, 0));
  auto each_range = [&](auto fn) {
    ranges.Each(threads, [&](size_t k, size_t from, size_t to) {
      for (auto c = static_cast<uint32_t>(from); c < to; ++c) for_each_posting(c, [&](uint64_t p) { fn(k, p); });
    });
  };
  each_range([&](size_t k, uint64_t p) { ++pos[k][BucketOf(p)]; });
  at->assign(kBuckets + 1, 0);
  size_t next = 0;
  for (size_t bucket = 0; bucket < kBuckets; ++bucket) {
    (*at)[bucket] = next;
    for (size_t k = 0; k < ranges.count; ++k) next += std::exchange(pos[k][bucket], next);
  }
  (*at)[kBuckets] = next;
  std::vector<uint64_t> out(next);
  each_range([&](size_t k, uint64_t p) { out[pos[k][BucketOf(p)]++] = p; });
  return out;
}

// Sorts one bucket by anchor: a stable LSD radix sort of the bits below the
// bucket's, so class order stays inside each anchor's group.
void SortBucket(uint64_t* p, size_t n, std::vector<uint64_t>* tmp) {
  tmp->resize(n);
  uint64_t *from = p, *to = tmp->data();
  for (int shift = 32; shift < 64 - kBucketBits; shift += 11) {
    const int bits = std::min(11, 64 - kBucketBits - shift);
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    size_t count[(1 << 11) + 1] = {};
    for (size_t i = 0; i < n; ++i) ++count[((from[i] >> shift) & mask) + 1];
    for (size_t b = 1; b <= mask + 1; ++b) count[b] += count[b - 1];
    for (size_t i = 0; i < n; ++i) to[count[(from[i] >> shift) & mask]++] = from[i];
    std::swap(from, to);
  }
  if (from != p) std::copy(from, from + n, p);
}

// The scans by posting read their classes' entries in no useful order, one
// cache miss each: prefetched this many postings ahead (the misses are
// independent, so they overlap): the anchor step went from 4.4 s to
// 3.6-4.0 s at 1M short documents on one thread (single runs, noisy VM).
constexpr size_t kAhead = 16;

// Calls fn(begin, end) for each run of one anchor in a sorted bucket.
template <typename Fn>
void ForEachGroup(const uint64_t* p, size_t n, Fn fn) {
  ForEachRunStartingIn(0, n, n, [&](size_t i) { return AnchorOf(p[i]); }, [&](size_t b, size_t e) { fn(p + b, p + e); });
}

// Bit s of (*stop)[c]: anchor slot s of class c is a stop key for it, as at
// least anchor_max_postings classes before it hold the anchor. A group is in
// class order, so those are the holders before the posting.
void MarkStops(const Rule& rule, const uint64_t* p, size_t n, std::vector<uint32_t>* stop) {
  const uint32_t cap = static_cast<uint32_t>(rule.options.recheck.anchor_max_postings);
  const uint64_t* const end = p + n;
  ForEachGroup(p, n, [&](const uint64_t* b, const uint64_t* e) {
    uint32_t holders = 0;
    for (; b != e; ++b) {
      if (b + kAhead < end) __builtin_prefetch(&(*stop)[ClassOf(b[kAhead])], 1);
      const uint32_t c = ClassOf(*b);
      if (holders >= cap) std::atomic_ref<uint32_t>((*stop)[c]).fetch_or(uint32_t{1} << SlotOf(*b), std::memory_order_relaxed);
      holders += rule.Keeps(c);
    }
  });
}

// Bit s of probe[c] / found[c]: anchor slot s of class c is one it probes /
// is found under: the first `anchors` / max(anchors, 16) that are not stop
// keys for it.
void LiveSlots(Rule& rule, const std::vector<uint32_t>& stop, int threads) {
  const size_t n = rule.classes.size();
  const int probes = rule.options.recheck.anchors;
  const int founds = std::max(probes, RecheckOptions{}.anchors);
  ParallelFor(n, threads, [&](size_t b, size_t e) {
    for (uint32_t c = static_cast<uint32_t>(b); c < e; ++c) {
      ClassInfo& i = rule.info[c];
      if (!rule.UsesAnchors() || !(i.flags & kHasSketch)) continue;
      const size_t slots = std::min(rule.Sig(c).sketch.anchors.size(), kAnchorCount);
      int live = 0;
      for (uint32_t s = 0; s < slots && live < founds; ++s) {
        if (stop[c] >> s & 1) continue;
        if (live < probes) i.probe |= uint32_t{1} << s;
        if (i.flags & kKeeps) i.found |= uint32_t{1} << s;
        ++live;
      }
    }
  });
}

// One class of an anchor's group, gathered so that the group's pairs read
// only this array.
struct Member {
  internal::ExpandedCounts counts;
  uint32_t shingles = 0, cls = 0, first = 0, last = 0;
  bool probes = false;  // probes the anchor (and has features)
  bool found = false;   // is found under it
};

// The bucket-count test of the record filter (sketch_record::RecordFilter)
// for two complete sketches whose sizes passed its size test, in integers:
// reject when bound < c (|A| + |B|), c = t' / (1 + t') (from bound < t' (|A|
// + |B| - bound)), with c rounded down, so it rejects no pair the filter
// keeps (a pair it lets through is decided by the pair rule anyway). The
// pairing runs it ~85 times per document (1M short documents), where the
// filter's double arithmetic and its size test, already done by the group's
// window, were a third of the step.
class BucketTest {
 public:
  explicit BucketTest(double threshold)
      : threshold_(threshold),
        c_(threshold > 1e-9 ? static_cast<uint64_t>(std::floor((threshold - 1e-9) / (1 + threshold - 1e-9) * kOne))
                            : 0) {}  // 0: rejects nothing
  bool Rejects(const Member& a, const Member& b) const {
    if (a.shingles - 1 >= kSketchSize || b.shingles - 1 >= kSketchSize) return false;  // none, or incomplete
    uint32_t bound = 0;
    if (!internal::SharedBucketBound(a.counts, b.counts, &bound)) return false;
    return uint64_t{bound} * kOne < c_ * (uint64_t{a.shingles} + b.shingles);
  }
  double threshold() const { return threshold_; }

 private:
  static constexpr uint64_t kOne = uint64_t{1} << 20;
  double threshold_;
  uint64_t c_;
};

// The pairs of one group that share the anchor live: by n-gram count, so the
// pair rule's size test is a window, not a test per pair; the bucket counts
// then rule out most of the rest. Both sides of such a pair have sketches,
// so the filter decides as the pair rule would.
// False, the pairs cut short, once `out` would hold more than `cap`.
bool GroupPairs(std::vector<Member>& m, const BucketTest& test, size_t cap, std::vector<Pair>* out) {
  std::sort(m.begin(), m.end(), [](const Member& a, const Member& b) {
    return a.shingles != b.shingles ? a.shingles < b.shingles : a.cls < b.cls;
  });
  size_t lo = 0;
  for (size_t j = 1; j < m.size(); ++j) {
    // ShingleCountsRuleOut(threshold, m[i].shingles, m[j].shingles) exactly,
    // for the sorted group: false from lo on.
    while (lo < j && static_cast<double>(m[lo].shingles) < test.threshold() * m[j].shingles) ++lo;
    for (size_t i = lo; i < j; ++i) {
      if (test.Rejects(m[i], m[j])) continue;
      const Member &y = m[i].cls > m[j].cls ? m[i] : m[j], &x = m[i].cls > m[j].cls ? m[j] : m[i];
      uint8_t dirs = 0;
      if (y.probes && x.found) dirs |= kForward;
      if (x.probes && y.found && x.last > y.first) dirs |= kBackward;
      if (dirs == 0) continue;
      if (out->size() == cap) return false;
      out->push_back(Pair{y.cls, x.cls, dirs});
    }
  }
  return true;
}

// The candidate pairs that share a live anchor and that the exact filter
// does not rule out: each bucket sorted and its stop keys marked, then the
// live slots of every class, then each bucket's groups paired. A group's
// pairs grow with the square of its size, which --anchor-max-postings
// bounds; raised far, a common n-gram pairs most of the input: past the
// limit (JoinAnchorPairLimit), kResourceExhausted instead of exhausting
// memory (an adversarial test's run grew to 23 GB, 2026-12-02).
Status AnchorPairs(Rule& rule, int threads, JoinStats* stats, std::vector<Pair>* pairs) {
  std::vector<size_t> at;
  std::vector<uint64_t> postings = BucketedPostings(rule, threads, &at);
  std::vector<uint32_t> stop(rule.classes.size(), 0);
  ParallelFor(kBuckets, threads, [&](size_t bb, size_t be) {
    std::vector<uint64_t> tmp;
    for (size_t b = bb; b < be; ++b) {
      SortBucket(postings.data() + at[b], at[b + 1] - at[b], &tmp);
      MarkStops(rule, postings.data() + at[b], at[b + 1] - at[b], &stop);
    }
  });
  LiveSlots(rule, stop, threads);
  // Reused as the live slots (probe | found), 4 bytes a class: every
  // posting is checked against it, and only live ones read their class.
  for (uint32_t c = 0; c < stop.size(); ++c) stop[c] = rule.info[c].probe | rule.info[c].found;
  const std::vector<uint32_t>& live_slots = stop;
  std::mutex mu;
  std::vector<Pair>& out = *pairs;
  std::atomic<uint64_t> live{0}, listed{0};
  std::atomic<bool> over{false};
  const uint64_t limit = rule.options.join_max_anchor_pairs != 0
                             ? rule.options.join_max_anchor_pairs
                             : JoinAnchorPairLimit(rule.sigs.size(), MemoryBytesAllowed());
  const BucketTest test(rule.options.recheck.threshold);
  ParallelFor(kBuckets, threads, [&](size_t bb, size_t be) {
    std::vector<Pair> local;
    std::vector<Member> m;
    uint64_t seen = 0;
    for (size_t b = bb; b < be && !over.load(std::memory_order_relaxed); ++b) {
      const uint64_t* const end = postings.data() + at[b + 1];
      ForEachGroup(postings.data() + at[b], at[b + 1] - at[b], [&](const uint64_t* p, const uint64_t* e) {
        if (over.load(std::memory_order_relaxed)) return;
        m.clear();
        for (; p != e; ++p) {
          // Two steps ahead: the live slots far ahead, a class's info once
          // its (by then cached) live slots say it will be read.
          if (p + 2 * kAhead < end) __builtin_prefetch(&live_slots[ClassOf(p[2 * kAhead])]);
          if (p + kAhead < end && (live_slots[ClassOf(p[kAhead])] >> SlotOf(p[kAhead]) & 1)) {
            __builtin_prefetch(&rule.info[ClassOf(p[kAhead])]);
          }
          const uint32_t c = ClassOf(*p), bit = uint32_t{1} << SlotOf(*p);
          if (!(live_slots[c] & bit)) continue;
          const ClassInfo& i = rule.info[c];
          m.push_back(Member{internal::Expand(i.counts), i.shingles, c, i.first, i.last, (i.probe & bit) && (i.flags & kHasFeatures),
                             (i.found & bit) != 0});
        }
        seen += m.size();
        // The other threads' pairs so far, and this one's: at most `limit`.
        const size_t before = local.size();
        const uint64_t others = listed.load(std::memory_order_relaxed);
        const size_t cap = others >= limit ? before : before + static_cast<size_t>(limit - others);
        if (!GroupPairs(m, test, cap, &local)) over = true;
        listed += local.size() - before;
      });
    }
    live += seen;
    std::lock_guard<std::mutex> lock(mu);
    out.insert(out.end(), local.begin(), local.end());
  });
  stats->live_postings = live.load();
  if (over.load()) {
    std::vector<Pair>().swap(out);
    return Status::ResourceExhausted("the join would list more than " + std::to_string(limit) +
                                     " pairs of texts that share an anchor n-gram (--anchor-max-postings " +
                                     std::to_string(rule.options.recheck.anchor_max_postings) +
                                     " lets that many texts share one): use --decide stream, or a lower "
                                     "--anchor-max-postings");
  }
  return Status::OK();
}

// ---- fingerprints -----------------------------------------------------------

// The pairs of classes with features within the later's radius (kForward)
// or the earlier's (kBackward), joined over distinct fingerprint values.
// Classes of one fingerprint value are not paired here: (*group)[c] numbers
// c's value (kNoGroup without features), and the decision compares a class
// with the kept classes of its value only, as the stream rule's index does,
// so a value shared by many distinct texts costs what it costs there.
constexpr uint32_t kNoGroup = UINT32_MAX;
Status FingerprintPairs(const Rule& rule, int threads, std::vector<Pair>* out, std::vector<uint32_t>* group) {
  const RecheckOptions& r = rule.options.recheck;
  const int radius = r.enabled ? std::max(rule.options.k, r.short_k) : rule.options.k;
  if (radius > kMaxSelfJoinK) {
    return Status::NotSupported("the join searches at most " + std::to_string(kMaxSelfJoinK) + " bits, not " +
                                std::to_string(radius));
  }
  std::vector<std::pair<uint64_t, uint32_t>> by_fp;
  for (uint32_t c = 0; c < rule.classes.size(); ++c) {
    if (rule.Sig(c).has_features) by_fp.emplace_back(rule.Sig(c).fingerprint, c);
  }
  ParallelSort(by_fp, threads, std::less<>());
  std::vector<uint64_t> values;
  std::vector<size_t> at;  // value v's classes: by_fp[at[v] .. at[v + 1])
  ForEachRunStartingIn(0, by_fp.size(), by_fp.size(), [&](size_t i) { return by_fp[i].first; }, [&](size_t b, size_t) {
    values.push_back(by_fp[b].first);
    at.push_back(b);
  });
  at.push_back(by_fp.size());
  group->assign(rule.classes.size(), kNoGroup);
  for (size_t v = 0; v + 1 < at.size(); ++v) {
    for (size_t i = at[v]; i < at[v + 1]; ++i) (*group)[by_fp[i].second] = static_cast<uint32_t>(v);
  }
  // Pairs of values multiply their classes: bounded, so that values shared
  // by many distinct texts fail with a message instead of exhausting memory.
  const uint64_t limit = JoinPairLimit(rule.sigs.size());
  std::vector<JoinPair> joined;
  SelfJoinOptions so;
  so.threads = threads;
  so.max_pairs = limit;
  uint64_t product = 0;
  Status st = SelfJoin(values, radius, so, &joined);
  for (const JoinPair& p : joined) product += (at[p.i + 1] - at[p.i]) * (at[p.j + 1] - at[p.j]);
  if (st.code() == Status::Code::kResourceExhausted || product > limit) {
    return Status::ResourceExhausted("the join would list more than " + std::to_string(limit) +
                                     " fingerprint pairs (many distinct texts near one fingerprint): use "
                                     "--decide stream");
  }
  NEARDUP_RETURN_IF_ERROR(st);
  auto emit = [&](uint32_t a, uint32_t b, int distance) {
    const uint32_t later = std::max(a, b), earlier = std::min(a, b);
    uint8_t dirs = 0;
    if (distance <= rule.Radius(later)) dirs |= kForward;
    if (distance <= rule.Radius(earlier) && rule.classes.last[earlier] > rule.classes.first[later]) dirs |= kBackward;
    if (dirs != 0) out->push_back(Pair{later, earlier, dirs});
  };
  for (const JoinPair& p : joined) {
    for (size_t i = at[p.i]; i < at[p.i + 1]; ++i) {
      for (size_t j = at[p.j]; j < at[p.j + 1]; ++j) emit(by_fp[i].second, by_fp[j].second, static_cast<int>(p.distance));
    }
  }
  return Status::OK();
}

// ---- the pair rule ----------------------------------------------------------

// A pair that passed the rule, listed under its query class.
struct Accepted {
  uint32_t query = 0, candidate = 0;
  DuplicateMatch match;  // id = the candidate class's first document
};

// Merges the pairs found twice, runs the pair rule in each listed direction
// on all threads, and returns the accepted ones sorted by query class and,
// inside it, best first.
std::vector<Accepted> AcceptedPairs(const Rule& rule, std::vector<Pair>* pairs, int threads) {
  ParallelSort(*pairs, threads, [](const Pair& a, const Pair& b) {
    return a.later != b.later ? a.later < b.later : a.earlier < b.earlier;
  });
  size_t kept = 0;
  for (size_t i = 0; i < pairs->size(); ++i) {
    Pair& p = (*pairs)[i];
    if (kept > 0 && (*pairs)[kept - 1].later == p.later && (*pairs)[kept - 1].earlier == p.earlier) {
      (*pairs)[kept - 1].directions |= p.directions;
    } else {
      (*pairs)[kept++] = p;
    }
  }
  pairs->resize(kept);
  std::mutex mu;
  std::vector<Accepted> out;
  ParallelFor(pairs->size(), threads, [&](size_t b, size_t e) {
    std::vector<Accepted> local;
    for (size_t i = b; i < e; ++i) {
      const Pair& p = (*pairs)[i];
      const DocSignature &later = rule.Sig(p.later), &earlier = rule.Sig(p.earlier);
      const int distance = std::popcount(later.fingerprint ^ earlier.fingerprint);
      for (uint8_t dir : {kForward, kBackward}) {
        if (!(p.directions & dir)) continue;
        const uint32_t q = dir == kForward ? p.later : p.earlier, c = dir == kForward ? p.earlier : p.later;
        const PairDecision d = rule.Decide(q, c, distance);
        if (!d.duplicate) continue;
        Accepted a{q, c, {}};
        a.match = DuplicateMatch{rule.classes.first[c], distance, later.content_hash == earlier.content_hash,
                                 d.similarity, d.rechecked, d.exact};
        local.push_back(a);
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    out.insert(out.end(), local.begin(), local.end());
  });
  const bool by_similarity = rule.options.recheck.enabled;
  ParallelSort(out, threads, [&](const Accepted& a, const Accepted& b) {
    if (a.query != b.query) return a.query < b.query;
    return RanksBefore(sketch_record::RankOf(a.match), sketch_record::RankOf(b.match), by_similarity);
  });
  return out;
}

// ---- the decision in stream order ---------------------------------------

class StreamDecision {
 public:
  StreamDecision(const Rule& rule, std::vector<Accepted> accepted, std::vector<uint32_t> fp_group, int threads)
      : rule_(rule),
        accepted_(std::move(accepted)),
        kept_(rule.classes.size(), 0),
        fp_group_(std::move(fp_group)),
        last_kept_(rule.classes.size(), kNone),
        kept_before_(rule.classes.size(), kNone) {
    const size_t n = rule.classes.size();
    at_.assign(n + 1, 0);
    for (const Accepted& a : accepted_) ++at_[a.query + 1];
    for (size_t c = 0; c < n; ++c) at_[c + 1] += at_[c];
    // Classes of one normalized text, in order: the exact step's candidates.
    std::vector<std::pair<uint64_t, uint32_t>> by_content(n);
    for (uint32_t c = 0; c < n; ++c) by_content[c] = {rule.Sig(c).content_hash, c};
    ParallelSort(by_content, threads, std::less<>());
    by_content_.resize(n);
    content_run_.resize(n);
    for (size_t b = 0, e; b < n; b = e) {
      for (e = b + 1; e < n && by_content[e].first == by_content[b].first; ++e) {
      }
      for (size_t i = b; i < e; ++i) {
        by_content_[i] = by_content[i].second;
        content_run_[by_content[i].second] = {b, e};
      }
    }
  }

  // Document d's decision (documents must come in order).
  Result<DedupDecision> Decide(uint32_t d) {
    const uint32_t c = rule_.classes.of[d];
    const bool features = rule_.flags[c] & kHasFeatures;
    std::optional<DuplicateMatch> m;
    if (rule_.options.exact_fast_path || !features) m = ExactStep(d, c);
    if (!m && features) m = NearStep(d, c);
    if (m) return DuplicateDecision(*m, features);
    if (d != rule_.classes.first[c]) {
      return Status::Internal("join: document " + std::to_string(d) + " matches nothing its class's first did");
    }
    kept_[c] = 1;
    if (fp_group_[c] != kNoGroup) {
      kept_before_[c] = last_kept_[fp_group_[c]];
      last_kept_[fp_group_[c]] = c;
    }
    DedupDecision kept;
    kept.has_features = features;
    return kept;
  }

 private:
  // The first kept class with c's normalized text, before d, that passes.
  std::optional<DuplicateMatch> ExactStep(uint32_t d, uint32_t c) const {
    const auto [begin, end] = content_run_[c];
    for (size_t i = begin; i < end; ++i) {
      const uint32_t e = by_content_[i];
      if (rule_.classes.first[e] >= d) break;
      if (!kept_[e]) continue;
      const PairDecision pd = rule_.Decide(c, e, 0);
      if (pd.duplicate) return DuplicateMatch{rule_.classes.first[e], 0, true, pd.similarity, pd.rechecked, pd.exact};
    }
    return std::nullopt;
  }

  // The best accepted kept candidate before d: from the listed pairs, and
  // the kept classes of its fingerprint value (its own class's first among
  // them, for a later document of the class), tried now.
  std::optional<DuplicateMatch> NearStep(uint32_t d, uint32_t c) const {
    std::optional<DuplicateMatch> best;
    for (size_t i = at_[c]; i < at_[c + 1]; ++i) {
      const Accepted& a = accepted_[i];
      if (kept_[a.candidate] && a.match.id < d) {
        best = a.match;
        break;
      }
    }
    const bool by_similarity = rule_.options.recheck.enabled;
    const uint64_t content = rule_.Sig(c).content_hash;
    for (uint32_t e = last_kept_[fp_group_[c]]; e != kNone; e = kept_before_[e]) {
      const PairDecision pd = rule_.Decide(c, e, 0);
      if (!pd.duplicate) continue;
      const DuplicateMatch m{rule_.classes.first[e], 0, rule_.Sig(e).content_hash == content, pd.similarity,
                             pd.rechecked, pd.exact};
      if (!best || RanksBefore(sketch_record::RankOf(m), sketch_record::RankOf(*best), by_similarity)) best = m;
    }
    return best;
  }


  const Rule& rule_;
  std::vector<Accepted> accepted_;
  std::vector<size_t> at_;  // class c's accepted pairs: accepted_[at_[c] .. at_[c + 1])
  std::vector<uint8_t> kept_;
  static constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> fp_group_;     // FingerprintPairs' value numbers
  std::vector<uint32_t> last_kept_;    // by value: its last kept class
  std::vector<uint32_t> kept_before_;  // by kept class: the value's kept class before it
  std::vector<uint32_t> by_content_;  // classes by (content hash, class)
  std::vector<std::pair<size_t, size_t>> content_run_;  // c's content hash in by_content_
};

}  // namespace

void CountDecisions(std::span<const DedupDecision> decisions, DedupStats* stats) {
  for (const DedupDecision& d : decisions) {
    ++stats->documents;
    if (!d.has_features) ++stats->without_features;
    if (!d.duplicate) ++stats->kept;
    else ++(d.exact ? stats->exact_duplicates : stats->near_duplicates);
  }
}

// Everything the decisions read: the classes, the rule over them and the
// accepted pairs; Rule and StreamDecision refer to the members before them.
struct JoinDecider::State {
  State(std::span<const DocSignature> s, const DedupOptions& o) : sigs(s), options(o) {}
  std::span<const DocSignature> sigs;
  DedupOptions options;
  Classes classes;
  std::optional<Rule> rule;
  std::optional<StreamDecision> decide;
  uint32_t next = 0;
};

JoinDecider::JoinDecider(std::unique_ptr<State> state) : state_(std::move(state)) {}
JoinDecider::~JoinDecider() = default;

size_t JoinDecider::size() const { return state_->sigs.size(); }

Result<std::unique_ptr<JoinDecider>> JoinDecider::Create(std::span<const DocSignature> sigs,
                                                         const DedupOptions& options, int threads, JoinStats* stats) {
  JoinStats local;
  if (stats == nullptr) stats = &local;
  *stats = JoinStats{};
  if (options.k < 0 || options.k > kMaxSupportedK || options.recheck.short_k < 0 ||
      options.recheck.short_k > kMaxSupportedK || options.recheck.anchors < 0 ||
      options.recheck.anchors > static_cast<int>(kAnchorCount) || options.recheck.anchor_max_postings < 0) {
    return Status::InvalidArgument("join: k, short_k, anchors or anchor_max_postings out of range");
  }
  if (sigs.size() >= UINT32_MAX) return Status::InvalidArgument("the join takes fewer than 2^32 documents");
  auto state = std::make_unique<State>(sigs, options);
  auto t0 = Clock::now();
  NEARDUP_RETURN_IF_ERROR(FindClasses(sigs, threads, &state->classes));
  stats->classes = state->classes.size();
  stats->classes_s = Since(t0);
  Rule& rule = state->rule.emplace(Rule{state->options, NearDupOptions{}, sigs, state->classes, {}, {}});
  rule.Describe(threads);
  rule.pair_options.k = options.k;
  rule.pair_options.exact_fast_path = options.exact_fast_path;
  rule.pair_options.recheck = options.recheck;

  t0 = Clock::now();
  std::vector<Pair> pairs;
  NEARDUP_RETURN_IF_ERROR(AnchorPairs(rule, threads, stats, &pairs));
  stats->anchors_s = Since(t0);
  t0 = Clock::now();
  std::vector<uint32_t> fp_group;
  NEARDUP_RETURN_IF_ERROR(FingerprintPairs(rule, threads, &pairs, &fp_group));
  stats->fingerprints_s = Since(t0);
  t0 = Clock::now();
  std::vector<Accepted> accepted = AcceptedPairs(rule, &pairs, threads);
  stats->pairs = pairs.size();
  stats->accepted = accepted.size();
  std::vector<Pair>().swap(pairs);
  stats->rule_s = Since(t0);
  state->decide.emplace(rule, std::move(accepted), std::move(fp_group), threads);
  return std::unique_ptr<JoinDecider>(new JoinDecider(std::move(state)));
}

Result<DedupDecision> JoinDecider::Next() {
  if (state_->next >= state_->sigs.size()) return Status::FailedPrecondition("join: every document is decided");
  return state_->decide->Decide(state_->next++);
}

uint64_t JoinPairLimit(uint64_t documents) { return std::max<uint64_t>(uint64_t{1} << 24, uint64_t{64} * documents); }

uint64_t JoinAnchorPairLimit(uint64_t documents, uint64_t memory_bytes) {
  static_assert(sizeof(Pair) <= 12);
  return std::max(JoinPairLimit(documents), memory_bytes / 4 / 24);
}

uint64_t MemoryBytesAllowed() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  uint64_t bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  struct rlimit as {};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) bytes = std::min<uint64_t>(bytes, as.rlim_cur);
  // cgroup v2 (a Slurm job's, a container's): /proc/self/cgroup's "0::PATH".
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    if (!line.starts_with("0::")) continue;
    std::ifstream max("/sys/fs/cgroup" + line.substr(3) + "/memory.max");
    uint64_t limit = 0;
    if (max >> limit) bytes = std::min(bytes, limit);  // "max" (no limit) reads as nothing
  }
  return bytes;
}

Status DecideByJoin(std::span<const DocSignature> sigs, const DedupOptions& options, int threads,
                    std::vector<DedupDecision>* out, JoinStats* stats) {
  out->clear();
  JoinStats local;
  if (stats == nullptr) stats = &local;
  NEARDUP_ASSIGN_OR_RETURN(std::unique_ptr<JoinDecider> decider, JoinDecider::Create(sigs, options, threads, stats));
  auto t0 = Clock::now();
  std::vector<DedupDecision> decisions(sigs.size());
  for (DedupDecision& d : decisions) {
    NEARDUP_ASSIGN_OR_RETURN(d, decider->Next());
  }
  stats->decide_s = Since(t0);
  *out = std::move(decisions);
  return Status::OK();
}

}  // namespace neardup
