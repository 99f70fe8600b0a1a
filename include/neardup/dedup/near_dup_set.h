// NearDupSet: the kept documents of one stream (the batch job) or one
// namespace (the service), and the rule that decides whether a new document
// duplicates one of them. The batch Deduplicator and the service's namespaces
// both decide through this class, so the policy is written once.
//
// The rule, for a document with signature `doc` (docs/ACCURACY.md):
//  1. Exact: a kept document with the same content_hash (hash of the
//     normalized text, which drops punctuation) is a candidate at distance 0
//     (exact = true); the first that passes step 3 is the answer. Texts
//     without features are found this way only, never by fingerprint.
//  2. Candidates: the kept documents within Hamming distance r of its
//     fingerprint, where r = max(k, short_k) for a short query (normalized
//     text of at most short_max_chars code points) and r = k otherwise; and
//     the kept documents that share one of its anchors (similarity.h).
//  3. Decision (DecidePair(), pair_rule.h): a candidate is a duplicate iff
//     the similarity of the two texts (text/shingles.h: Jaccard of their
//     character n-gram sets) is at least recheck.threshold, computed from
//     the sketches: exactly when both sets fit a sketch (kSketchSize n-grams),
//     estimated otherwise. A pair whose distinct n-gram counts alone rule
//     that out (|A| < threshold * |B|) is rejected without an estimate, so
//     sampling noise cannot accept it. A pair with a sketch missing on
//     either side (a signature made without text, a document stored before
//     sketch scheme v2, or a kept text longer than sketch_max_chars) is a
//     duplicate iff its distance is at most k.
//  4. The best of the accepted candidates is the most similar one (then the
//     nearest, then the smallest id).
// With recheck.enabled = false the rule is the plain one: every fingerprint
// candidate within k is a duplicate, nearest first, then smallest id.
//
// Ids are chosen by the caller (the batch job uses input sequence numbers;
// the service its internal document numbers), must be unique and at most
// kMaxDocId.
//
// Thread-safety: const methods may run concurrently; Insert/Remove/set_k/
// SetPolicy need exclusive access (the service holds its namespace lock).
#ifndef NEARDUP_NEAR_DUP_SET_H_
#define NEARDUP_NEAR_DUP_SET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "neardup/dedup/pair_rule.h"
#include "neardup/dedup/signature.h"
#include "neardup/index/hamming_index.h"
#include "neardup/index/multi_index.h"
#include "neardup/util/status.h"

namespace neardup {

class NearDupSet {
 public:
  // kInvalidArgument for k out of range or bad index options; kIOError if
  // the sketch file cannot be created.
  static Result<std::unique_ptr<NearDupSet>> Create(const NearDupOptions& options);

  NearDupSet(const NearDupSet&) = delete;
  NearDupSet& operator=(const NearDupSet&) = delete;
  ~NearDupSet();

  // The kept document `doc` duplicates, or nullopt. When `all` is given it
  // receives every accepted match, best first (best == (*all)[0]).
  // kIOError if a candidate's record cannot be read from the sketch file.
  Status FindDuplicate(const DocSignature& doc, std::optional<DuplicateMatch>* best,
                       std::vector<DuplicateMatch>* all = nullptr) const;

  // Deciding a batch on several threads (Deduplicator::ProcessBatch) splits
  // FindDuplicate in two: a search of this set as it was before the batch,
  // which runs for many documents at once, and, in order, a search of a
  // small set holding only the documents kept since, whose anchors are those
  // this set indexed for them (Insert's `indexed`) and whose queries probe those
  // this set would probe (ProbedAnchors). Combine gives FindDuplicate's
  // answer over both as long as none of the query's probed anchors became a
  // stop key in between (stop_keys_made() unchanged, or IsStopKey false for
  // each); otherwise the caller searches this set whole.
  //
  // The first recheck.anchors of doc's anchors that are not stop keys here:
  // the ones FindDuplicate(doc) probes now (none when it probes none).
  void ProbedAnchors(const DocSignature& doc, std::vector<uint32_t>* out) const;
  bool IsStopKey(uint32_t anchor) const;
  // How many anchors have become stop keys so far (never decreases).
  uint64_t stop_keys_made() const;
  // FindDuplicate's answer over the union of two sets, given each set's own
  // answer, when every id of `older`'s set is below every id of `newer`'s.
  std::optional<DuplicateMatch> Combine(const DocSignature& doc, const std::optional<DuplicateMatch>& older,
                                        const std::optional<DuplicateMatch>& newer) const;

  // The largest id Insert takes (the anchor table's widest word tags lists
  // with the top bit).
  static constexpr DocId kMaxDocId = (DocId{1} << 63) - 2;

  // Adds a kept document. kInvalidArgument for an id past kMaxDocId;
  // kAlreadyExists if `id` is present; with a sketch
  // file (NearDupOptions::sketch_dir), kStorageFull or kIOError when its
  // record cannot be written. On error nothing of the document is kept.
  // `indexed`, when given, receives the anchors it was indexed under.
  Status Insert(DocId id, const DocSignature& doc, std::vector<uint32_t>* indexed = nullptr);
  // Removes a kept document (its content_hash, fingerprint and has_features
  // as inserted; the sketch is not needed). False if absent.
  bool Remove(DocId id, const DocSignature& doc);

  // Changes the radius of later searches (0..kMaxSupportedK); the index
  // serves any k, so nothing is rebuilt. Needs exclusive access.
  Status set_k(int k);
  // Changes the re-check policy of later searches (sketch_max_chars must be
  // unchanged: kFailedPrecondition). kInvalidArgument for out-of-range
  // values. Needs exclusive access.
  Status SetPolicy(const RecheckOptions& recheck);
  // kInvalidArgument unless k and every policy field are in range.
  static Status ValidateOptions(const NearDupOptions& options);

  size_t size() const { return size_; }
  // Kept documents whose sketch is held for re-checks.
  size_t sketches() const;
  // Resident bytes: index, exact-match table, kept sketches (or their
  // places, when they live in a file) and anchor table.
  size_t MemoryBytes() const;
  // MemoryBytes by structure (a batch job's summary shows where they go).
  struct MemoryUse {
    size_t index = 0;         // the fingerprint index
    size_t exact = 0;         // content hash -> kept ids
    size_t sketch_slots = 0;  // kept id -> its record's place and bucket counts
    size_t anchors = 0;       // anchor table and its posting lists
    size_t records = 0;       // sketch records in memory (bookkeeping only with a file)
    size_t total() const { return index + exact + sketch_slots + anchors + records; }
  };
  MemoryUse Memory() const;
  // Bytes of the sketch file (0 when sketches are in memory).
  size_t SketchFileBytes() const;
  const NearDupOptions& options() const { return options_; }
  const HammingIndex& index() const { return *index_; }

 private:
  NearDupSet(const NearDupOptions& options, std::unique_ptr<HammingIndex> index);
  // Whether a fingerprint candidate is a real duplicate (re-check stage);
  // fills the match's similarity.
  // `rec` is the candidate's sketch record (null: none kept).
  bool Accept(const DocSignature& doc, const Match& candidate, const uint32_t* rec, DuplicateMatch* match) const;
  // Every kept id whose content_hash is this (usually none or one).
  void ExactMatches(uint64_t content_hash, std::vector<DocId>* ids) const;
  bool IsShort(uint32_t num_chars) const { return IsShortText(options_.recheck, num_chars); }
  int SearchRadius(const DocSignature& doc) const;
  // FindDuplicate's steps (near_dup_set.cc): its candidate sources, then the
  // pair rule and ranking. A candidate travels with its sketch record (null:
  // none kept).
  using SketchedMatch = std::pair<Match, const uint32_t*>;
  Status ExactAnswer(const DocSignature& doc, std::vector<DocId>& exact_ids,
                     std::optional<DuplicateMatch>* answer) const;
  Status FingerprintCandidates(const DocSignature& doc, bool sketches, std::vector<SketchedMatch>* out) const;
  Status AddAnchorCandidates(const DocSignature& doc, std::vector<SketchedMatch>* checked) const;
  void RankAccepted(const DocSignature& doc, const std::vector<SketchedMatch>& checked,
                    const std::vector<DocId>& exact_ids, std::optional<DuplicateMatch>* best,
                    std::vector<DuplicateMatch>* all) const;
  bool KeepsSketch(const DocSignature& doc) const;
  size_t MakeRecord(DocId id, const DocSignature& doc, uint32_t* rec) const;
  size_t IndexedAnchorCount() const;
  // The first m of doc's anchors that are not stop keys, into out
  // (kAnchorCount); returns how many.
  uint32_t FirstLiveAnchors(const DocSignature& doc, size_t m, uint32_t* out) const;
  void RemoveRecord(DocId id);

  NearDupOptions options_;
  std::unique_ptr<HammingIndex> index_;
  // The exact-match table (content_hash -> ids), the kept sketch records and
  // the anchor table (near_dup_set.cc): flat tables that grow in small
  // pieces, so no insert stalls the namespace for a whole-table rehash.
  class Tables;
  std::unique_ptr<Tables> t_;
  size_t size_ = 0;
};

}  // namespace neardup

#endif  // NEARDUP_NEAR_DUP_SET_H_
