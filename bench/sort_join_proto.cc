// sort_join_proto: a prototype of the batch decision as a sort-based join,
// to measure what the issue 17 design would cost and find before building
// it (docs/BENCHMARKS.md, "A sort-based batch decision: prototype"). It is
// NOT `neardup dedup`'s rule: its stop keys do not depend on the decisions,
// so every candidate pair is known before the first decision is made.
//
//   sort_join_proto SIG_FILE [--threads T] [--cap 64] [--rule positional|global]
//                   [--compare DEC_FILE] [--oracle]
//
// SIG_FILE: one signature shard of `neardup stage fingerprint` (default
// settings). The steps, each timed (CPU seconds of the process, and wall):
//  1. live anchors: (anchor, doc, slot) for each of every document's
//     kAnchorCount anchors, radix sorted by anchor (document order inside a
//     group). The stop rule (--rule):
//       positional  a is a stop key for document d iff `cap` earlier
//                   documents hold a: a group's first cap postings are live
//                   candidates, the rest stop keys (the dedup rule counts
//                   earlier *kept* documents that registered a);
//       global      a is a stop key for everyone iff more than cap documents
//                   of the whole input hold it.
//     A document's live anchors are its first `anchors` (16) non-stop ones.
//     Either way a group of live postings has at most cap members.
//  2. anchor pairs: inside each group, every pair that the size and
//     bucket-count filter (exact) cannot rule out. Members are sorted by
//     n-gram count so the size test is a window, not a test per pair.
//  3. fingerprint pairs: SelfJoin at max(k, short_k), each kept if within
//     the later document's radius.
//  4. exact pairs: equal content hash.
//  5. the pair rule (DecidePair) on the distinct pairs, on all threads.
//  6. the decision in stream order: the best accepted earlier kept document
//     (an equal text first, then RanksBefore), else kept.
// --compare DEC_FILE: `neardup stage decide`'s decisions of the same shard
// (the dedup rule), compared document by document.
// --oracle: the decision over ALL pairs (the filter, then the pair rule):
// ground truth by definition, quadratic (about 75 CPU s at 100k documents).
//
// Known gaps (why this is a prototype): steps 3 and 4 are quadratic in a
// group of equal fingerprints or texts (m copies give m(m-1)/2 pairs; the
// dedup rule sees only kept documents, so one per group); everything is in
// memory (about 1.3 KB per short document at 1M); --load-index, --keep
// longest and the outputs are not wired.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "dedup/bucket_counts.h"
#include "dedup/sketch_record.h"
#include "neardup/dedup/pair_rule.h"
#include "neardup/dedup/staged_files.h"
#include "neardup/index/self_join.h"
#include "neardup/util/parallel.h"

using namespace neardup;

namespace {

double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Prints a step's CPU and wall seconds when it goes out of scope.
struct Timer {
  const char* name;
  double cpu0 = CpuSeconds(), wall0 = WallSeconds();
  explicit Timer(const char* n) : name(n) {}
  ~Timer() { std::fprintf(stderr, "  %-18s cpu %7.3f s  wall %7.3f s\n", name, CpuSeconds() - cpu0, WallSeconds() - wall0); }
};

// The documents of the shard, column by column.
struct Docs {
  size_t n = 0;
  std::vector<uint64_t> fp, content;
  std::vector<uint8_t> has_features;
  std::vector<uint32_t> chars, shingles;
  std::vector<internal::BucketCounts> counts;
  std::vector<uint64_t> mins_at;  // n + 1 offsets into mins
  std::vector<uint32_t> mins;
  std::vector<uint32_t> anchors_at;  // n + 1 offsets into anchors
  std::vector<uint32_t> anchors;
  PairSide Side(uint32_t d) const {
    return PairSide{chars[d], mins.data() + mins_at[d], static_cast<size_t>(mins_at[d + 1] - mins_at[d]), shingles[d]};
  }
  uint32_t AnchorCount(uint32_t d) const { return anchors_at[d + 1] - anchors_at[d]; }
};

Status Load(const std::string& path, Docs* docs) {
  NEARDUP_ASSIGN_OR_RETURN(auto reader, StageFileReader::Open(path, StageFileKind::kSignatures));
  std::string_view rec;
  StagedDoc d;
  docs->mins_at.push_back(0);
  docs->anchors_at.push_back(0);
  while (reader->Next(&rec)) {
    if (rec.empty() || rec[0] != static_cast<char>(StageRecordType::kDocument)) continue;
    NEARDUP_RETURN_IF_ERROR(DecodeStagedDoc(rec, &d));
    docs->fp.push_back(d.sig.fingerprint);
    docs->content.push_back(d.sig.content_hash);
    docs->has_features.push_back(d.sig.has_features);
    docs->chars.push_back(d.sig.num_chars);
    docs->shingles.push_back(d.sig.sketch.num_shingles);
    docs->counts.push_back(sketch_record::SlotCounts(d.sig));
    docs->mins.insert(docs->mins.end(), d.sig.sketch.mins.begin(), d.sig.sketch.mins.end());
    docs->mins_at.push_back(docs->mins.size());
    docs->anchors.insert(docs->anchors.end(), d.sig.sketch.anchors.begin(), d.sig.sketch.anchors.end());
    docs->anchors_at.push_back(static_cast<uint32_t>(docs->anchors.size()));
  }
  NEARDUP_RETURN_IF_ERROR(reader->status());
  docs->n = docs->fp.size();
  if (docs->n >= (size_t{1} << 27)) return Status::InvalidArgument("the prototype packs ids in 27 bits");
  return Status::OK();
}

// A posting: anchor << 32 | doc << 5 | slot (slot < kAnchorCount = 32).
uint32_t AnchorOf(uint64_t p) { return static_cast<uint32_t>(p >> 32); }
uint32_t DocOf(uint64_t p) { return static_cast<uint32_t>((p >> 5) & 0x7FFFFFF); }
uint32_t SlotOf(uint64_t p) { return static_cast<uint32_t>(p & 31); }

// Stable LSD radix sort by the anchor: passes of 11, 11 and 10 bits (2,048
// buckets keep the scatter's write streams in cache).
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

// Calls fn(begin, end) for each run of equal anchors in sorted postings.
template <typename Fn>
void ForEachGroup(const std::vector<uint64_t>& postings, Fn fn) {
  for (size_t b = 0, e; b < postings.size(); b = e) {
    e = b + 1;
    while (e < postings.size() && AnchorOf(postings[e]) == AnchorOf(postings[b])) ++e;
    fn(b, e);
  }
}

enum class StopRule { kPositional, kGlobal };

// Step 1: the live postings, sorted by anchor then document.
std::vector<uint64_t> LivePostings(const Docs& docs, StopRule rule, size_t cap, int anchors) {
  std::vector<uint64_t> postings;
  postings.reserve(docs.anchors.size());
  for (uint32_t d = 0; d < docs.n; ++d) {
    for (uint32_t s = 0; s < docs.AnchorCount(d); ++s) {
      postings.push_back(uint64_t{docs.anchors[docs.anchors_at[d] + s]} << 32 | uint64_t{d} << 5 | s);
    }
  }
  SortByAnchor(&postings);
  std::vector<uint32_t> stop(docs.n, 0);  // bit s: the anchor in slot s is a stop key for d
  ForEachGroup(postings, [&](size_t b, size_t e) {
    if (e - b <= cap) return;
    for (size_t i = rule == StopRule::kPositional ? b + cap : b; i < e; ++i) {
      stop[DocOf(postings[i])] |= 1u << SlotOf(postings[i]);
    }
  });
  std::vector<uint32_t> live(docs.n, 0);
  for (uint32_t d = 0; d < docs.n; ++d) {
    int taken = 0;
    for (uint32_t s = 0; s < docs.AnchorCount(d) && taken < anchors; ++s) {
      if (!(stop[d] >> s & 1)) {
        live[d] |= 1u << s;
        ++taken;
      }
    }
  }
  size_t kept = 0;
  for (uint64_t p : postings) {
    if (live[DocOf(p)] >> SlotOf(p) & 1) postings[kept++] = p;
  }
  postings.resize(kept);
  return postings;
}

struct Candidate {
  uint32_t later, earlier;
  uint8_t distance;  // 255: not known yet (an anchor pair)
  uint8_t exact;
};

// Step 2: the pairs inside each live group that the exact filter keeps.
// Returns the number of pairs the filter looked at.
uint64_t AnchorPairs(const Docs& docs, const std::vector<uint64_t>& postings, double threshold, int threads,
                     std::vector<Candidate>* out) {
  std::vector<size_t> starts;
  ForEachGroup(postings, [&](size_t b, size_t) { starts.push_back(b); });
  starts.push_back(postings.size());
  std::mutex mu;
  std::atomic<uint64_t> looked{0};
  ParallelFor(starts.size() - 1, threads, [&](size_t gb, size_t ge) {
    struct Member {
      uint32_t shingles, doc;
      internal::BucketCounts counts;
    };
    std::vector<Member> m;
    std::vector<Candidate> local;
    uint64_t seen = 0;
    auto emit = [&](uint32_t a, uint32_t b) { local.push_back(Candidate{std::max(a, b), std::min(a, b), 255, 0}); };
    for (size_t g = gb; g < ge; ++g) {
      if (starts[g + 1] - starts[g] < 2) continue;
      m.clear();
      for (size_t i = starts[g]; i < starts[g + 1]; ++i) {
        const uint32_t d = DocOf(postings[i]);
        m.push_back(Member{docs.shingles[d], d, docs.counts[d]});
      }
      // By n-gram count: for member j the size test keeps a window of the
      // smaller ones (|A_i| >= t |A_j|). No sketch (0 n-grams): no filter.
      std::sort(m.begin(), m.end(), [](const Member& x, const Member& y) {
        return x.shingles != y.shingles ? x.shingles < y.shingles : x.doc < y.doc;
      });
      size_t zeros = 0;
      while (zeros < m.size() && m[zeros].shingles == 0) ++zeros;
      for (size_t j = 0; j < zeros; ++j) {
        for (size_t i = j + 1; i < m.size(); ++i) emit(m[i].doc, m[j].doc);
      }
      size_t lo = zeros;
      for (size_t j = zeros; j < m.size(); ++j) {
        const uint32_t sj = m[j].shingles;
        while (lo < j && static_cast<double>(m[lo].shingles) < threshold * sj) ++lo;
        const bool whole = sj <= kSketchSize;
        for (size_t i = lo; i < j; ++i) {
          ++seen;
          uint32_t bound = 0;
          if (whole && m[i].shingles <= kSketchSize && internal::SharedBucketBound(m[j].counts, m[i].counts, &bound) &&
              static_cast<double>(bound) < (threshold - 1e-9) * (static_cast<double>(sj) + m[i].shingles - bound)) {
            continue;
          }
          emit(m[i].doc, m[j].doc);
        }
      }
    }
    looked += seen;
    std::lock_guard<std::mutex> lock(mu);
    out->insert(out->end(), local.begin(), local.end());
  });
  return looked;
}

// Step 3: fingerprint pairs within the later document's radius.
Status FingerprintPairs(const Docs& docs, const NearDupOptions& options, int threads, std::vector<Candidate>* out) {
  const RecheckOptions& r = options.recheck;
  const int radius = r.enabled ? std::max(options.k, r.short_k) : options.k;
  std::vector<JoinPair> pairs;
  SelfJoinOptions so;
  so.threads = threads;
  NEARDUP_RETURN_IF_ERROR(SelfJoin(docs.fp, radius, so, &pairs));
  for (const JoinPair& p : pairs) {
    if (!docs.has_features[p.i] || !docs.has_features[p.j]) continue;
    const bool short_text = r.enabled && docs.shingles[p.j] != 0 && IsShortText(r, docs.chars[p.j]);
    if (static_cast<int>(p.distance) > (short_text ? radius : options.k)) continue;
    out->push_back(Candidate{p.j, p.i, static_cast<uint8_t>(p.distance), 0});
  }
  return Status::OK();
}

// Step 4: pairs of equal content hash.
void ExactPairs(const Docs& docs, std::vector<Candidate>* out) {
  std::vector<std::pair<uint64_t, uint32_t>> by_hash(docs.n);
  for (uint32_t d = 0; d < docs.n; ++d) by_hash[d] = {docs.content[d], d};
  std::sort(by_hash.begin(), by_hash.end());
  for (size_t b = 0, e; b < docs.n; b = e) {
    e = b + 1;
    while (e < docs.n && by_hash[e].first == by_hash[b].first) ++e;
    for (size_t j = b + 1; j < e; ++j) {
      for (size_t i = b; i < j; ++i) out->push_back(Candidate{by_hash[j].second, by_hash[i].second, 0, 1});
    }
  }
}

// A pair that passed the rule, listed under its later document.
struct Accepted {
  uint32_t earlier;
  uint8_t distance;
  uint8_t exact;
  double similarity;
  MatchRank Rank() const { return MatchRank{exact != 0, similarity, distance, earlier}; }
};

// Step 5: distinct pairs (an exact one wins), then the pair rule; accepted
// pairs by later document: (*at)[d] .. (*at)[d + 1] in *acc.
void ApplyPairRule(const Docs& docs, const NearDupOptions& options, int threads, std::vector<Candidate>* cands,
                   std::vector<uint32_t>* at, std::vector<Accepted>* acc) {
  std::sort(cands->begin(), cands->end(), [](const Candidate& a, const Candidate& b) {
    if (a.later != b.later) return a.later < b.later;
    if (a.earlier != b.earlier) return a.earlier < b.earlier;
    return a.exact > b.exact;
  });
  cands->erase(std::unique(cands->begin(), cands->end(),
                           [](const Candidate& a, const Candidate& b) { return a.later == b.later && a.earlier == b.earlier; }),
               cands->end());
  std::vector<PairDecision> decided(cands->size());
  ParallelFor(cands->size(), threads, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      Candidate& c = (*cands)[i];
      if (c.distance == 255) c.distance = static_cast<uint8_t>(__builtin_popcountll(docs.fp[c.later] ^ docs.fp[c.earlier]));
      decided[i] = DecidePair(options, docs.Side(c.later), docs.Side(c.earlier), c.distance);
    }
  });
  at->assign(docs.n + 1, 0);
  for (size_t i = 0; i < cands->size(); ++i) {
    if (!decided[i].duplicate) continue;
    const Candidate& c = (*cands)[i];
    acc->push_back(Accepted{c.earlier, c.distance, c.exact, decided[i].similarity});
    ++(*at)[c.later + 1];
  }
  for (size_t d = 1; d <= docs.n; ++d) (*at)[d] += (*at)[d - 1];
}

// Step 6 (and the oracle's): in stream order, the best accepted earlier
// kept document; -1 = kept.
template <typename AcceptedOf>
std::vector<int64_t> DecideInOrder(size_t n, bool by_similarity, AcceptedOf accepted_of) {
  std::vector<int64_t> dup_of(n, -1);
  std::vector<uint8_t> kept(n, 0);
  for (uint32_t d = 0; d < n; ++d) {
    const Accepted* best = nullptr;
    for (const Accepted& x : accepted_of(d)) {
      if (kept[x.earlier] && (!best || RanksBefore(x.Rank(), best->Rank(), by_similarity))) best = &x;
    }
    if (best) dup_of[d] = best->earlier;
    else kept[d] = 1;
  }
  return dup_of;
}

// Every pair of the input through the filter and the pair rule.
std::vector<int64_t> Oracle(const Docs& docs, const NearDupOptions& options, int threads) {
  const double t = options.recheck.threshold;
  std::vector<std::vector<Accepted>> all(docs.n);
  ParallelFor(docs.n, threads, [&](size_t b, size_t e) {
    for (size_t j = b; j < e; ++j) {
      sketch_record::RecordFilter f;
      f.on = docs.shingles[j] != 0;
      f.shingles = docs.shingles[j];
      f.complete = docs.shingles[j] <= kSketchSize;
      f.counts = docs.counts[j];
      f.threshold = t;
      for (size_t i = 0; i < j; ++i) {
        const bool exact = docs.content[i] == docs.content[j];
        if (!exact && f.Rejects(docs.shingles[i], docs.shingles[i] <= kSketchSize, docs.counts[i])) continue;
        const int dist = __builtin_popcountll(docs.fp[i] ^ docs.fp[j]);
        const PairDecision pd =
            DecidePair(options, docs.Side(static_cast<uint32_t>(j)), docs.Side(static_cast<uint32_t>(i)), dist);
        if (pd.duplicate) all[j].push_back(Accepted{static_cast<uint32_t>(i), static_cast<uint8_t>(dist), exact, pd.similarity});
      }
    }
  });
  return DecideInOrder(docs.n, options.recheck.enabled, [&](uint32_t d) { return std::span<const Accepted>(all[d]); });
}

// `stage decide`'s decisions: duplicate_of, or -1 for kept.
Result<std::vector<int64_t>> LoadDecisions(const std::string& path, size_t n) {
  NEARDUP_ASSIGN_OR_RETURN(auto reader, StageFileReader::Open(path, StageFileKind::kDecisions));
  std::vector<int64_t> out;
  std::string_view rec;
  StagedDecision sd;
  while (reader->Next(&rec)) {
    if (rec.empty() || rec[0] != static_cast<char>(StageRecordType::kDecision)) continue;
    NEARDUP_RETURN_IF_ERROR(DecodeStagedDecision(rec, &sd));
    out.push_back(sd.decision.duplicate ? static_cast<int64_t>(sd.decision.duplicate_of) : -1);
  }
  NEARDUP_RETURN_IF_ERROR(reader->status());
  if (out.size() != n) return Status::InvalidArgument("the decision file is of another input");
  return out;
}

void CompareDuplicates(const char* a_name, const std::vector<int64_t>& a, const char* b_name,
                       const std::vector<int64_t>& b) {
  size_t na = 0, nb = 0, both = 0;
  for (size_t d = 0; d < a.size(); ++d) {
    na += a[d] >= 0;
    nb += b[d] >= 0;
    both += a[d] >= 0 && b[d] >= 0;
  }
  std::printf("%s %zu duplicates, %s %zu: both %zu, %s only %zu, %s only %zu\n", a_name, na, b_name, nb, both, a_name,
              na - both, b_name, nb - both);
}

int Fail(const Status& st) {
  std::fprintf(stderr, "sort_join_proto: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: sort_join_proto SIG_FILE [--threads T] [--cap 64] [--rule positional|global] "
                 "[--compare DEC_FILE] [--oracle]\n");
    return 2;
  }
  std::string path = argv[1], compare_path;
  int threads = 1;
  size_t cap = 64;
  StopRule rule = StopRule::kPositional;
  bool oracle = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--threads" && has_value) threads = std::atoi(argv[++i]);
    else if (a == "--cap" && has_value) cap = static_cast<size_t>(std::atoll(argv[++i]));
    else if (a == "--rule" && has_value) rule = std::string(argv[++i]) == "global" ? StopRule::kGlobal : StopRule::kPositional;
    else if (a == "--compare" && has_value) compare_path = argv[++i];
    else if (a == "--oracle") oracle = true;
    else return Fail(Status::InvalidArgument("unknown argument " + a));
  }
  const NearDupOptions options;  // the defaults `stage fingerprint` and `stage decide` use
  Docs docs;
  {
    Timer t("load");
    if (Status st = Load(path, &docs); !st.ok()) return Fail(st);
  }
  const double cpu0 = CpuSeconds(), wall0 = WallSeconds();
  std::vector<uint64_t> postings;
  {
    Timer t("live anchors");
    postings = LivePostings(docs, rule, cap, options.recheck.anchors);
  }
  std::vector<Candidate> cands;
  uint64_t looked = 0;
  {
    Timer t("anchor pairs");
    looked = AnchorPairs(docs, postings, options.recheck.threshold, threads, &cands);
  }
  const size_t anchor_candidates = cands.size();
  {
    Timer t("fingerprint pairs");
    if (Status st = FingerprintPairs(docs, options, threads, &cands); !st.ok()) return Fail(st);
  }
  {
    Timer t("exact pairs");
    ExactPairs(docs, &cands);
  }
  std::vector<uint32_t> at;
  std::vector<Accepted> acc;
  {
    Timer t("pair rule");
    ApplyPairRule(docs, options, threads, &cands, &at, &acc);
  }
  std::vector<int64_t> dup_of;
  {
    Timer t("decide");
    dup_of = DecideInOrder(docs.n, options.recheck.enabled,
                           [&](uint32_t d) { return std::span<const Accepted>(acc.data() + at[d], acc.data() + at[d + 1]); });
  }
  std::fprintf(stderr, "  %-18s cpu %7.3f s  wall %7.3f s\n", "total (no load)", CpuSeconds() - cpu0, WallSeconds() - wall0);
  std::printf("documents %zu, live postings %zu, anchor pairs looked at %llu, kept by the filter %zu, distinct pairs %zu, accepted %zu\n",
              docs.n, postings.size(), static_cast<unsigned long long>(looked), anchor_candidates, cands.size(), acc.size());
  std::vector<int64_t> stream;
  if (!compare_path.empty()) {
    auto loaded = LoadDecisions(compare_path, docs.n);
    if (!loaded.ok()) return Fail(loaded.status());
    stream = std::move(*loaded);
    CompareDuplicates("join", dup_of, "dedup", stream);
  }
  if (oracle) {
    std::vector<int64_t> truth;
    {
      Timer t("oracle");
      truth = Oracle(docs, options, threads);
    }
    CompareDuplicates("join", dup_of, "oracle", truth);
    if (!stream.empty()) CompareDuplicates("dedup", stream, "oracle", truth);
  }
  return 0;
}
