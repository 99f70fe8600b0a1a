#include "neardup/dedup/batch_join.h"

#include <algorithm>
#include <bit>
#include <chrono>
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

Status FindClasses(std::span<const DocSignature> sigs, int threads, Classes* c) {
  const size_t n = sigs.size();
  std::vector<std::pair<uint64_t, uint32_t>> by_hash(n);
  ParallelFor(n, threads, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) by_hash[i] = {SignatureHash(sigs[i]), static_cast<uint32_t>(i)};
  });
  std::sort(by_hash.begin(), by_hash.end());
  // rep[d]: the first document with d's signature. Inside one hash value the
  // signatures are compared whole, so a collision cannot merge two classes.
  std::vector<uint32_t> rep(n), reps;
  for (size_t b = 0, e; b < n; b = e) {
    for (e = b + 1; e < n && by_hash[e].first == by_hash[b].first; ++e) {
    }
    reps.clear();
    for (size_t i = b; i < e; ++i) {
      const uint32_t d = by_hash[i].second;
      auto same = std::find_if(reps.begin(), reps.end(), [&](uint32_t r) { return sigs[r] == sigs[d]; });
      if (same != reps.end()) {
        rep[d] = *same;
      } else {
        rep[d] = d;
        reps.push_back(d);
      }
    }
  }
  c->of.resize(n);
  for (uint32_t d = 0; d < n; ++d) {
    if (rep[d] != d) {
      c->of[d] = c->of[rep[d]];
      c->last[c->of[d]] = d;
      continue;
    }
    if (c->first.size() >= kMaxClasses) {
      return Status::InvalidArgument("the join takes fewer than 2^27 distinct documents");
    }
    c->of[d] = static_cast<uint32_t>(c->first.size());
    c->first.push_back(d);
    c->last.push_back(d);
  }
  return Status::OK();
}

// What the rule reads of a class (its first document's signature).
struct Rule {
  const DedupOptions& options;
  NearDupOptions pair_options;  // DecidePair's view of the options
  std::span<const DocSignature> sigs;
  const Classes& classes;

  const DocSignature& Sig(uint32_t c) const { return sigs[classes.first[c]]; }
  bool Keeps(uint32_t c) const {
    return Sig(c).has_sketch() && Sig(c).num_chars <= static_cast<uint32_t>(options.recheck.sketch_max_chars);
  }
  int Radius(uint32_t c) const {
    const RecheckOptions& r = options.recheck;
    return r.enabled && Sig(c).has_sketch() && IsShortText(r, Sig(c).num_chars) ? std::max(options.k, r.short_k)
                                                                                : options.k;
  }
  bool UsesAnchors() const { return options.recheck.enabled && options.recheck.anchors > 0; }
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

uint32_t AnchorOf(uint64_t p) { return static_cast<uint32_t>(p >> 32); }
uint32_t ClassOf(uint64_t p) { return static_cast<uint32_t>(p >> 5) & (kMaxClasses - 1); }
uint32_t SlotOf(uint64_t p) { return static_cast<uint32_t>(p & 31); }

// Stable LSD radix sort by the anchor (the high 32 bits): 11, 11, 10 bits.
void SortByAnchor(std::vector<uint64_t>* v) {
  std::vector<uint64_t> tmp(v->size());
  for (int shift = 32; shift < 64; shift += 11) {
    const int bits = std::min(11, 64 - shift);
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    std::vector<size_t> count((size_t{1} << bits) + 1, 0);
    for (uint64_t x : *v) ++count[((x >> shift) & mask) + 1];
    for (size_t b = 1; b < count.size(); ++b) count[b] += count[b - 1];
    for (uint64_t x : *v) tmp[count[(x >> shift) & mask]++] = x;
    v->swap(tmp);
  }
}

// Starts of the runs of equal anchors in sorted postings, and the end.
std::vector<size_t> GroupStarts(const std::vector<uint64_t>& postings) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < postings.size(); ++i) {
    if (i == 0 || AnchorOf(postings[i]) != AnchorOf(postings[i - 1])) starts.push_back(i);
  }
  starts.push_back(postings.size());
  return starts;
}

// Bit s of probe[c] / found[c]: anchor slot s of class c is one it probes /
// is found under (the first `anchors` / max(anchors, 16) that are not stop
// keys for it). Returns the postings of those slots, sorted by anchor, then
// class.
std::vector<uint64_t> LivePostings(const Rule& rule, std::vector<uint32_t>* probe, std::vector<uint32_t>* found) {
  const size_t n = rule.classes.size();
  probe->assign(n, 0);
  found->assign(n, 0);
  std::vector<uint64_t> postings;
  if (!rule.UsesAnchors()) return postings;
  for (uint32_t c = 0; c < n; ++c) {
    const std::vector<uint32_t>& anchors = rule.Sig(c).sketch.anchors;
    if (!rule.Sig(c).has_sketch()) continue;
    for (uint32_t s = 0; s < anchors.size() && s < kAnchorCount; ++s) {
      postings.push_back(uint64_t{anchors[s]} << 32 | uint64_t{c} << 5 | s);
    }
  }
  SortByAnchor(&postings);
  // Classes come in order inside a group: the holders before a posting are
  // the classes before its class that hold the anchor.
  std::vector<uint32_t> stop(n, 0);
  const uint32_t cap = static_cast<uint32_t>(rule.options.recheck.anchor_max_postings);
  const std::vector<size_t> starts = GroupStarts(postings);
  for (size_t g = 0; g + 1 < starts.size(); ++g) {
    uint32_t holders = 0;
    for (size_t i = starts[g]; i < starts[g + 1]; ++i) {
      const uint32_t c = ClassOf(postings[i]);
      if (holders >= cap) stop[c] |= uint32_t{1} << SlotOf(postings[i]);
      holders += rule.Keeps(c);
    }
  }
  const int probes = rule.options.recheck.anchors;
  const int founds = std::max(probes, RecheckOptions{}.anchors);
  for (uint32_t c = 0; c < n; ++c) {
    const size_t slots = std::min(rule.Sig(c).sketch.anchors.size(), kAnchorCount);
    int live = 0;
    for (uint32_t s = 0; s < slots && live < founds; ++s) {
      if (stop[c] >> s & 1) continue;
      if (live < probes) (*probe)[c] |= uint32_t{1} << s;
      if (rule.Keeps(c)) (*found)[c] |= uint32_t{1} << s;
      ++live;
    }
  }
  size_t kept = 0;
  for (uint64_t p : postings) {
    if (((*probe)[ClassOf(p)] | (*found)[ClassOf(p)]) >> SlotOf(p) & 1) postings[kept++] = p;
  }
  postings.resize(kept);
  return postings;
}

// The candidate pairs that share a live anchor, except those the exact
// filter (sketch_record::RecordFilter: the n-gram counts and bucket counts)
// rules out: both sides of such a pair have sketches, so the filter decides
// as the pair rule would.
std::vector<Pair> AnchorPairs(const Rule& rule, int threads, JoinStats* stats) {
  std::vector<uint32_t> probe, found;
  const std::vector<uint64_t> postings = LivePostings(rule, &probe, &found);
  stats->live_postings = postings.size();
  const std::vector<size_t> starts = GroupStarts(postings);
  std::vector<sketch_record::RecordFilter> filters(rule.classes.size());
  for (uint32_t c = 0; c < filters.size(); ++c) filters[c] = sketch_record::FilterFor(rule.options.recheck, rule.Sig(c));
  std::mutex mu;
  std::vector<Pair> out;
  ParallelFor(starts.size() - 1, threads, [&](size_t gb, size_t ge) {
    std::vector<Pair> local;
    for (size_t g = gb; g < ge; ++g) {
      for (size_t j = starts[g] + 1; j < starts[g + 1]; ++j) {
        const uint32_t y = ClassOf(postings[j]);
        const bool y_probes = (probe[y] >> SlotOf(postings[j]) & 1) && rule.Sig(y).has_features;
        const bool y_found = found[y] >> SlotOf(postings[j]) & 1;
        for (size_t i = starts[g]; i < j; ++i) {
          const uint32_t x = ClassOf(postings[i]);
          const bool x_probes = (probe[x] >> SlotOf(postings[i]) & 1) && rule.Sig(x).has_features;
          const bool x_found = found[x] >> SlotOf(postings[i]) & 1;
          uint8_t dirs = 0;
          if (y_probes && x_found) dirs |= kForward;
          if (x_probes && y_found && rule.classes.last[x] > rule.classes.first[y]) dirs |= kBackward;
          if (dirs == 0) continue;
          const sketch_record::RecordFilter& f = filters[y];
          if (f.Rejects(filters[x].shingles, filters[x].complete, filters[x].counts)) continue;
          local.push_back(Pair{y, x, dirs});
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    out.insert(out.end(), local.begin(), local.end());
  });
  return out;
}

// ---- fingerprints -----------------------------------------------------------

// The pairs of classes with features within the later's radius (kForward)
// or the earlier's (kBackward), joined over distinct fingerprint values.
Status FingerprintPairs(const Rule& rule, int threads, std::vector<Pair>* out) {
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
  std::sort(by_fp.begin(), by_fp.end());
  std::vector<uint64_t> values;
  std::vector<size_t> at;  // value v's classes: by_fp[at[v] .. at[v + 1])
  for (size_t i = 0; i < by_fp.size(); ++i) {
    if (i == 0 || by_fp[i].first != by_fp[i - 1].first) {
      values.push_back(by_fp[i].first);
      at.push_back(i);
    }
  }
  at.push_back(by_fp.size());
  std::vector<JoinPair> joined;
  SelfJoinOptions so;
  so.threads = threads;
  NEARDUP_RETURN_IF_ERROR(SelfJoin(values, radius, so, &joined));
  auto emit = [&](uint32_t a, uint32_t b, int distance) {
    const uint32_t later = std::max(a, b), earlier = std::min(a, b);
    uint8_t dirs = 0;
    if (distance <= rule.Radius(later)) dirs |= kForward;
    if (distance <= rule.Radius(earlier) && rule.classes.last[earlier] > rule.classes.first[later]) dirs |= kBackward;
    if (dirs != 0) out->push_back(Pair{later, earlier, dirs});
  };
  for (size_t v = 0; v + 1 < at.size(); ++v) {  // equal fingerprints: distance 0
    for (size_t j = at[v] + 1; j < at[v + 1]; ++j) {
      for (size_t i = at[v]; i < j; ++i) emit(by_fp[i].second, by_fp[j].second, 0);
    }
  }
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
  std::sort(pairs->begin(), pairs->end(), [](const Pair& a, const Pair& b) {
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
  std::sort(out.begin(), out.end(), [&](const Accepted& a, const Accepted& b) {
    if (a.query != b.query) return a.query < b.query;
    return RanksBefore(sketch_record::RankOf(a.match), sketch_record::RankOf(b.match), by_similarity);
  });
  return out;
}

// ---- the decision in stream order ---------------------------------------

class StreamDecision {
 public:
  StreamDecision(const Rule& rule, std::vector<Accepted> accepted)
      : rule_(rule), accepted_(std::move(accepted)), kept_(rule.classes.size(), 0) {
    const size_t n = rule.classes.size();
    at_.assign(n + 1, 0);
    for (const Accepted& a : accepted_) ++at_[a.query + 1];
    for (size_t c = 0; c < n; ++c) at_[c + 1] += at_[c];
    // Classes of one normalized text, in order: the exact step's candidates.
    by_content_.resize(n);
    for (uint32_t c = 0; c < n; ++c) by_content_[c] = c;
    std::stable_sort(by_content_.begin(), by_content_.end(),
                     [&](uint32_t a, uint32_t b) { return rule.Sig(a).content_hash < rule.Sig(b).content_hash; });
    content_at_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const bool starts = i == 0 || rule.Sig(by_content_[i]).content_hash != rule.Sig(by_content_[i - 1]).content_hash;
      content_at_[by_content_[i]] = starts ? i : content_at_[by_content_[i - 1]];
    }
  }

  // Document d's decision (documents must come in order).
  Result<DedupDecision> Decide(uint32_t d) {
    const uint32_t c = rule_.classes.of[d];
    const DocSignature& sig = rule_.Sig(c);
    std::optional<DuplicateMatch> m;
    if (rule_.options.exact_fast_path || !sig.has_features) m = ExactStep(d, c);
    if (!m && sig.has_features) m = NearStep(d, c);
    DedupDecision decision;
    decision.has_features = sig.has_features;
    if (!m) {
      if (d != rule_.classes.first[c]) {
        return Status::Internal("join: document " + std::to_string(d) + " matches nothing its class's first did");
      }
      kept_[c] = 1;
      return decision;
    }
    decision.duplicate = true;
    decision.duplicate_of = m->id;
    decision.distance = m->distance;
    decision.exact = m->exact;
    decision.similarity = m->similarity;
    decision.similarity_exact = SimilarityIsExact(*m);
    return decision;
  }

 private:
  // The first kept class with c's normalized text, before d, that passes.
  std::optional<DuplicateMatch> ExactStep(uint32_t d, uint32_t c) const {
    const uint64_t content = rule_.Sig(c).content_hash;
    for (size_t i = content_at_[c]; i < by_content_.size(); ++i) {
      const uint32_t e = by_content_[i];
      if (rule_.Sig(e).content_hash != content || rule_.classes.first[e] >= d) break;
      if (!kept_[e]) continue;
      const PairDecision pd = rule_.Decide(c, e, 0);
      if (pd.duplicate) return DuplicateMatch{rule_.classes.first[e], 0, true, pd.similarity, pd.rechecked, pd.exact};
    }
    return std::nullopt;
  }

  // The best accepted kept candidate before d; its own class's first counts
  // for a later document of the class.
  std::optional<DuplicateMatch> NearStep(uint32_t d, uint32_t c) const {
    std::optional<DuplicateMatch> best;
    for (size_t i = at_[c]; i < at_[c + 1]; ++i) {
      const Accepted& a = accepted_[i];
      if (kept_[a.candidate] && a.match.id < d) {
        best = a.match;
        break;
      }
    }
    if (rule_.classes.first[c] < d && kept_[c]) {
      const PairDecision pd = rule_.Decide(c, c, 0);
      const DuplicateMatch self{rule_.classes.first[c], 0, true, pd.similarity, pd.rechecked, pd.exact};
      const bool by_similarity = rule_.options.recheck.enabled;
      if (pd.duplicate &&
          (!best || RanksBefore(sketch_record::RankOf(self), sketch_record::RankOf(*best), by_similarity))) {
        best = self;
      }
    }
    return best;
  }

  const Rule& rule_;
  std::vector<Accepted> accepted_;
  std::vector<size_t> at_;  // class c's accepted pairs: accepted_[at_[c] .. at_[c + 1])
  std::vector<uint8_t> kept_;
  std::vector<uint32_t> by_content_;  // classes by (content hash, class)
  std::vector<size_t> content_at_;    // where c's content hash starts in by_content_
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

Status DecideByJoin(std::span<const DocSignature> sigs, const DedupOptions& options, int threads,
                    std::vector<DedupDecision>* out, JoinStats* stats) {
  out->clear();
  JoinStats local;
  if (stats == nullptr) stats = &local;
  *stats = JoinStats{};
  if (options.k < 0 || options.k > kMaxSupportedK || options.recheck.short_k < 0 ||
      options.recheck.short_k > kMaxSupportedK || options.recheck.anchors < 0 ||
      options.recheck.anchors > static_cast<int>(kAnchorCount) || options.recheck.anchor_max_postings < 0) {
    return Status::InvalidArgument("join: k, short_k, anchors or anchor_max_postings out of range");
  }
  if (sigs.size() >= UINT32_MAX) return Status::InvalidArgument("the join takes fewer than 2^32 documents");
  auto t0 = Clock::now();
  Classes classes;
  NEARDUP_RETURN_IF_ERROR(FindClasses(sigs, threads, &classes));
  stats->classes = classes.size();
  stats->classes_s = Since(t0);
  Rule rule{options, NearDupOptions{}, sigs, classes};
  rule.pair_options.k = options.k;
  rule.pair_options.exact_fast_path = options.exact_fast_path;
  rule.pair_options.recheck = options.recheck;

  t0 = Clock::now();
  std::vector<Pair> pairs = AnchorPairs(rule, threads, stats);
  stats->anchors_s = Since(t0);
  t0 = Clock::now();
  NEARDUP_RETURN_IF_ERROR(FingerprintPairs(rule, threads, &pairs));
  stats->fingerprints_s = Since(t0);
  t0 = Clock::now();
  std::vector<Accepted> accepted = AcceptedPairs(rule, &pairs, threads);
  stats->pairs = pairs.size();
  stats->accepted = accepted.size();
  std::vector<Pair>().swap(pairs);
  stats->rule_s = Since(t0);

  t0 = Clock::now();
  StreamDecision decide(rule, std::move(accepted));
  std::vector<DedupDecision> decisions(sigs.size());
  for (uint32_t d = 0; d < sigs.size(); ++d) {
    NEARDUP_ASSIGN_OR_RETURN(decisions[d], decide.Decide(d));
  }
  stats->decide_s = Since(t0);
  *out = std::move(decisions);
  return Status::OK();
}

}  // namespace neardup
