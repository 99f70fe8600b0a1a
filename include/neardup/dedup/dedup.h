// Deduplicator: streaming, deterministic, first-wins near-duplicate removal.
//
// Documents are numbered 0, 1, 2, ... in the order they are given (across all
// batches: the "sequence number") and decided strictly in that order:
//
//  1. Exact fast path (exact_fast_path): if the document's content_hash (hash
//     of the normalized text) equals that of a kept document, it is a
//     duplicate of the first such kept document (distance 0, exact = true).
//  2. A document without features (empty, whitespace- or punctuation-only
//     text) is only ever matched by content_hash equality, whatever
//     exact_fast_path says: all such documents with the same normalized text
//     collapse to the first one, and they never match (or are matched by)
//     anything by fingerprint.
//  3. Otherwise the kept documents within Hamming distance k of its
//     fingerprint are the candidates. If there is any, it is a duplicate of
//     the nearest (smallest distance, then smallest sequence number); exact
//     is true when that document also has the same content_hash.
//     With the re-check (options.recheck, on by default) short texts search
//     a wider radius and their candidates must pass a similarity check, and
//     the most similar accepted candidate wins: see NearDupSet
//     (near_dup_set.h), which holds the rule for the batch job and the
//     service alike.
//  4. Otherwise it is kept: added to the index under DocId = sequence number.
//
// A duplicate is never added to the index, so chains do not form: every
// duplicate points at a kept document. Decisions depend only on the input
// order, never on the number of threads or the batch boundaries.
//
// Thread-safety: a Deduplicator is not thread-safe; ProcessBatch uses its own
// worker threads internally. Distinct Deduplicators are independent.
#ifndef NEARDUP_DEDUP_H_
#define NEARDUP_DEDUP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "neardup/text/fingerprint.h"
#include "neardup/index/hamming_index.h"
#include "neardup/index/multi_index.h"
#include "neardup/dedup/near_dup_set.h"
#include "neardup/util/parallel.h"
#include "neardup/util/status.h"

namespace neardup {

struct DedupOptions {
  // Largest Hamming distance (inclusive) at which two documents are
  // near-duplicates; 0..kMaxSupportedK.
  int k = 3;
  FingerprintOptions fingerprint;
  // Options of the MultiIndex over kept documents; expected_k is overridden
  // with k.
  MultiIndexOptions index;
  // Check content_hash equality before searching the index. Decisions are
  // the same either way (kept documents are pairwise more than k apart, so
  // an exact repeat's only distance-0 candidate is its original); turning it
  // off just costs an index search per exact repeat. Texts without features
  // are always matched by content_hash.
  bool exact_fast_path = true;
  // The length-aware re-check of short texts (near_dup_set.h,
  // docs/ACCURACY.md); recheck.enabled = false gives the plain rule above.
  RecheckOptions recheck;
  // Empty: the kept documents' sketch records live in memory; else in an
  // unnamed temporary file in this directory (NearDupOptions::sketch_dir):
  // the same decisions in much less memory, a read per candidate.
  std::string sketch_dir;
  // With the re-check off (recheck.enabled = false) no decision reads a
  // signature's sketch, and making it is about a fifth of the analysis.
  // false skips it then. Keep true where signatures outlive this run's
  // settings: a saved index may be loaded by a run with the re-check on.
  bool sketch_without_recheck = true;
  // DecideByJoin only: the most pairs of texts that share an anchor it
  // lists, all held at once; 0 (the default): JoinAnchorPairLimit. Tests
  // set it low.
  uint64_t join_max_anchor_pairs = 0;
};

struct DedupDecision {
  bool duplicate = false;
  // Sequence number (0-based input order) of the kept document this one
  // duplicates; meaningful only when duplicate is true.
  uint64_t duplicate_of = 0;
  int distance = 0;           // Hamming distance to duplicate_of's fingerprint
  bool exact = false;         // content_hash equals duplicate_of's
  bool has_features = false;  // the text yielded at least one feature
  // Estimated similarity to duplicate_of (DuplicateMatch::similarity);
  // meaningful only when duplicate is true.
  double similarity = 0;
  bool similarity_exact = false;  // computed from whole n-gram sets, not estimated
  friend bool operator==(const DedupDecision&, const DedupDecision&) = default;
};

// The decision of a document that duplicates match's kept document.
inline DedupDecision DuplicateDecision(const DuplicateMatch& match, bool has_features) {
  DedupDecision d;
  d.duplicate = true;
  d.duplicate_of = match.id;
  d.distance = match.distance;
  d.exact = match.exact;
  d.has_features = has_features;
  d.similarity = match.similarity;
  d.similarity_exact = SimilarityIsExact(match);
  return d;
}

struct DedupStats {
  uint64_t documents = 0;         // decided so far
  uint64_t kept = 0;
  uint64_t exact_duplicates = 0;  // duplicates with exact = true
  uint64_t near_duplicates = 0;   // duplicates with exact = false
  uint64_t without_features = 0;  // documents whose text had no features
  uint64_t invalid_utf8 = 0;      // invalid byte sequences replaced (sum)
  uint64_t duplicates() const { return exact_duplicates + near_duplicates; }
};

class Deduplicator {
 public:
  // kInvalidArgument for k outside [0, kMaxSupportedK] or bad fingerprint /
  // index options.
  static Result<std::unique_ptr<Deduplicator>> Create(const DedupOptions& options);

  Deduplicator(const Deduplicator&) = delete;
  Deduplicator& operator=(const Deduplicator&) = delete;

  // Analyzes `texts` on up to `threads` threads (<= 1: the calling thread),
  // then decides them in order. texts[i] gets sequence number
  // next_sequence() + i (as of the call) and (*out)[i] its decision; *out is
  // resized to texts.size(). Results are identical for any thread count.
  Status ProcessBatch(std::span<const std::string_view> texts, std::vector<DedupDecision>* out,
                      int threads);

  // The analysis half of ProcessBatch alone: (*out)[i] = the signature of
  // texts[i], made on up to `threads` threads; counts invalid UTF-8 in
  // stats(). For callers that decide in another order than the input's
  // (dedup --keep longest).
  void Analyze(std::span<const std::string_view> texts, std::vector<DocSignature>* out, int threads);

  // Analyze without touching stats(): makes the signatures and returns how
  // many invalid UTF-8 sequences the texts held, for CountAnalyzed to count
  // once the batch is decided. Reads only the fingerprint settings, which
  // never change: safe on another thread while this Deduplicator decides
  // (the batch job analyzes its next batch meanwhile).
  uint64_t Sign(std::span<const std::string_view> texts, std::vector<DocSignature>* out, int threads) const;
  void CountAnalyzed(uint64_t invalid_utf8) { stats_.invalid_utf8 += invalid_utf8; }

  // The decision half of ProcessBatch: decides already-analyzed documents in
  // order, as ProcessSignature would one by one, searching on up to
  // `threads` threads; (*out)[i] is sigs[i]'s decision. The same decisions
  // for any thread count. Errors as ProcessSignature's; documents before the
  // failing one stay decided.
  //
  // `priors`, when not empty (one per document), are answers from documents
  // kept before every document of this Deduplicator (their ids below all of
  // its sequence numbers), as ProbeBatch gave them: each decision is then the
  // one over those documents and this one's together (NearDupSet::Combine).
  // Deciding a stream in rounds of bounded memory rests on it.
  Status DecideBatch(std::span<const DocSignature> sigs, std::vector<DedupDecision>* out, int threads,
                     std::span<const std::optional<DuplicateMatch>> priors = {});

  // Searches the kept documents for each of `sigs` without deciding or
  // inserting anything: (*matches)[i] becomes the better of its value and
  // this set's answer (NearDupSet::Combine), for documents that come after
  // every kept one. On up to `threads` threads; reads only, so the answers
  // are the same for any number. matches->size() must equal sigs.size().
  Status ProbeBatch(std::span<const DocSignature> sigs, std::vector<std::optional<DuplicateMatch>>* matches,
                    int threads) const;

  // Decides one already-analyzed document (the sequential half of
  // ProcessBatch), giving it the next sequence number. Lets callers that
  // fingerprint elsewhere, and tests, drive the decision rule directly.
  Result<DedupDecision> ProcessSignature(const DocSignature& doc);

  // Adds a document kept by an earlier run (a loaded kept-document file,
  // kept_file.h) without deciding it: it takes the next sequence number and
  // later documents are judged against it like any kept one. Not counted in
  // stats(), which describe the documents decided here.
  Status AddKept(const DocSignature& doc);

  // Resuming an interrupted run from its checkpoint: re-adds a document that
  // run kept at `sequence` (>= next_sequence(), else kInvalidArgument; later
  // documents are numbered after it), then RestoreProgress gives back the
  // stats and next sequence number the run had. Decisions then continue
  // exactly as in the run that was interrupted.
  Status AddKeptAt(uint64_t sequence, const DocSignature& doc);
  void RestoreProgress(const DedupStats& stats, uint64_t next_sequence) {
    stats_ = stats;
    next_sequence_ = next_sequence;
  }

  // The signatures of the last ProcessBatch call's texts, in order (valid
  // until the next call); lets a caller save the kept ones.
  std::span<const DocSignature> batch_signatures() const { return {sigs_.data(), sigs_.size()}; }

  // The signature ProcessBatch would decide for `text`.
  DocSignature Signature(std::string_view text) const;

  uint64_t next_sequence() const { return next_sequence_; }
  const DedupStats& stats() const { return stats_; }
  const DedupOptions& options() const { return options_; }
  const Fingerprinter& fingerprinter() const { return fingerprinter_; }
  // Memory of the kept documents' index and re-check state.
  size_t MemoryBytes() const;
  NearDupSet::MemoryUse Memory() const { return set_->Memory(); }
  uint64_t scheme_id() const { return fingerprinter_.scheme_id(); }
  // Fingerprints of the kept documents that have features, keyed by their
  // sequence numbers.
  const HammingIndex& index() const { return set_->index(); }

 private:
  Deduplicator(const DedupOptions& options, Fingerprinter fingerprinter, std::unique_ptr<NearDupSet> set);
  // ProcessBatch's decisions on several threads (dedup.cc).
  Status DecideOnThreads(std::span<const DocSignature> sigs, std::vector<DedupDecision>* out, int threads,
                         std::span<const std::optional<DuplicateMatch>> priors);
  Status SearchSlice(std::span<const DocSignature> sigs, size_t begin, size_t end, int threads);
  Status DecideInOrder(std::span<const DocSignature> sigs, size_t begin, size_t end, std::vector<DedupDecision>* out,
                       std::span<const std::optional<DuplicateMatch>> priors);
  // ProcessSignature with an earlier answer (DecideBatch's priors).
  Result<DedupDecision> Decide(const DocSignature& doc, const std::optional<DuplicateMatch>& prior);
  // The decision for `doc` given its match: counts it and, when it is kept,
  // inserts it (in a slice: keeping the anchors set_ indexed it under in
  // anchors_, and the stop keys that made in new_stops_); `live` is
  // NearDupSet::Insert's.
  Result<DedupDecision> Apply(const DocSignature& doc, const std::optional<DuplicateMatch>& match, bool in_slice,
                              const std::vector<uint32_t>* live = nullptr);
  // Adds to new_stops_ those of anchors_ (the last kept document's) that are
  // stop keys of set_ now.
  void NoteNewStops();

  SketchMode Sketches() const;  // whether signatures need a sketch

  DedupOptions options_;
  Fingerprinter fingerprinter_;
  // The kept documents, keyed by sequence number; holds the decision rule.
  std::unique_ptr<NearDupSet> set_;
  uint64_t next_sequence_ = 0;
  DedupStats stats_;
  std::vector<DocSignature> sigs_;  // scratch
  // DecideOnThreads' scratch, per document of the slice: its answer from the
  // documents kept before the slice, the anchors it probed then, its
  // candidates among the slice's earlier documents, and whether it was kept.
  std::vector<std::optional<DuplicateMatch>> older_;
  std::vector<std::vector<uint32_t>> probed_;
  NearDupSet::SliceCandidates slice_;
  std::vector<uint32_t> anchors_;
  std::vector<uint32_t> live_;
  // The anchors that became stop keys of set_ during the slice, sorted.
  std::vector<uint32_t> new_stops_;
};

}  // namespace neardup

#endif  // NEARDUP_DEDUP_H_
