// DecideByJoin: the batch decision as a sort-based join (`neardup dedup
// --decide join`). The stream decision (Deduplicator) asks one index query
// per document; here every candidate pair is listed first, by sorting, and
// only then is each document decided in stream order. Most of the work is
// sequential scans and runs on all threads; the decisions are the same for
// any thread count.
//
// The rule is the stream rule of near_dup_set.h (exact step, fingerprint
// radius, anchors, pair rule, ranking) with one difference, in the stop keys,
// which is what lets the pairs be listed before any decision:
//
//  * Signature classes. Documents with equal signatures (every field of
//    DocSignature) form a class; its first document in stream order stands
//    for it. Only a class's first document can be kept (a later one always
//    has its first, or what its first duplicates, as an accepted candidate).
//  * Stop keys. A class "holds" an anchor when the anchor is one of its
//    sketch's anchors and the class keeps its sketch (sketch_max_chars). An
//    anchor is a stop key for class C iff at least anchor_max_postings
//    classes before C hold it. (The stream rule counts the *kept* documents
//    that were indexed under it, which is known only while deciding.)
//    A class probes its first `anchors` anchors that are not stop keys for
//    it, and is found under its first max(anchors, 16) such anchors.
//  * Candidates of document d, among the documents before it: equal
//    content_hash (the exact step, when exact_fast_path is on or d has no
//    features); fingerprint distance within d's radius (both with features);
//    an anchor d probes that the other is found under (d with features and a
//    sketch). The pair rule (DecidePair) and ranking (RanksBefore, the exact
//    step first) are the stream rule's, over the candidates that were kept.
//
// So the decisions can differ from the stream rule's only where a stop key
// differs; tests/batch_join_test.cc checks them against a brute-force oracle
// of this rule, and docs/BENCHMARKS.md compares them with the stream rule's.
//
// Cost: all in memory, about 1.1 KB per short document at its peak
// (signatures, 32 postings of 8 bytes per class, the pairs). Classes of one
// fingerprint value are not paired by the join: each is compared with that
// value's kept classes while deciding, as the stream rule's index would.
//
// Thread-safety: a pure function of its arguments; runs on up to `threads`
// threads of its own.
#ifndef NEARDUP_DEDUP_BATCH_JOIN_H_
#define NEARDUP_DEDUP_BATCH_JOIN_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "neardup/dedup/dedup.h"
#include "neardup/util/status.h"

namespace neardup {

// What the join did, for the summary (counts are deterministic; seconds are
// wall time of each step).
struct JoinStats {
  uint64_t classes = 0;            // distinct signatures
  uint64_t live_postings = 0;      // (anchor, class) pairs a class probes or is found under
  uint64_t pairs = 0;              // distinct candidate pairs of classes
  uint64_t accepted = 0;           // (query class, candidate class) pairs that passed the pair rule
  double classes_s = 0, anchors_s = 0, fingerprints_s = 0, rule_s = 0, decide_s = 0;
};

// Decides sigs[0..n) in stream order by the rule above: (*out)[i] is
// document i's decision (duplicate_of is an index into sigs) and *stats
// (optional) what it took. The same result for any `threads` (<= 1: the
// calling thread). Errors: kInvalidArgument for options out of range or 2^27
// distinct signatures or more; kNotSupported for a search radius
// (max(k, short_k) with the re-check) above kMaxSelfJoinK;
// kResourceExhausted when pairs of nearby fingerprint values would list more
// than JoinPairLimit(sigs.size()) pairs of classes (many distinct texts near
// one fingerprint: the stream rule handles them), and when the pairs of
// classes that share a live anchor would pass
// options.join_max_anchor_pairs (a raised anchor_max_postings lets a common
// n-gram pair most of the input). *out is left empty on error.
Status DecideByJoin(std::span<const DocSignature> sigs, const DedupOptions& options, int threads,
                    std::vector<DedupDecision>* out, JoinStats* stats = nullptr);

// The most pairs of classes the join lists for `documents` documents:
// max(2^24, 64 per document). Per document, not per class (distinct
// signature): whether a run fails must not depend on what its signatures
// hold (a --no-recheck run without sketches has fewer classes than one with).
uint64_t JoinPairLimit(uint64_t documents);

// The most pairs of classes sharing an anchor that the join lists by
// default: max(JoinPairLimit(documents), as many as take a quarter of
// `memory_bytes` (MemoryBytesAllowed) at 24 bytes each, the
// list and its merge). Not JoinPairLimit alone: under the default
// anchor_max_postings natural long texts already list about 64 such pairs
// per document at 3,000 (docs/cli.md), more as the kept groups fill up, so
// that limit would refuse runs the machine can hold. This one turns a run
// that would exhaust memory into an error.
uint64_t JoinAnchorPairLimit(uint64_t documents, uint64_t memory_bytes);
// The memory this process may use: the machine's, or less under a
// RLIMIT_AS (ulimit -v) or a cgroup v2 memory.max (a Slurm job, a
// container).
uint64_t MemoryBytesAllowed();

// DecideByJoin one document at a time: Create runs the join (all of it but
// the pass in input order, which is serial) and Next decides the documents
// in input order, so a caller can write each batch while it reads the next.
// Next() called size() times gives DecideByJoin's decisions, in order.
// `sigs` must outlive the decider. Create's errors are DecideByJoin's
// (stats->decide_s is left to the caller); Next returns kFailedPrecondition past the
// last document, kInternal if the join broke its own rule.
// Thread-safety: one thread at a time.
class JoinDecider {
 public:
  static Result<std::unique_ptr<JoinDecider>> Create(std::span<const DocSignature> sigs, const DedupOptions& options,
                                                     int threads, JoinStats* stats = nullptr);
  ~JoinDecider();
  JoinDecider(const JoinDecider&) = delete;
  JoinDecider& operator=(const JoinDecider&) = delete;

  size_t size() const;  // documents
  Result<DedupDecision> Next();

 private:
  struct State;
  explicit JoinDecider(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Counts decisions into *stats as the Deduplicator does (documents, kept,
// exact and near duplicates, without features).
void CountDecisions(std::span<const DedupDecision> decisions, DedupStats* stats);

}  // namespace neardup

#endif  // NEARDUP_DEDUP_BATCH_JOIN_H_
