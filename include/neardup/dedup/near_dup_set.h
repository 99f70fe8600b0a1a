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

#include <array>
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

namespace sketch_record {
struct RecordFilter;  // src/dedup/sketch_record.h
}

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

  // Deciding a batch on several threads (Deduplicator::DecideBatch) splits
  // FindDuplicate in two, both run for many documents at once: a search of
  // this set as it was before a slice of the batch, and SliceCandidates,
  // each document's accepted candidates among the slice's earlier documents.
  // In order, SliceCandidates::Best gives the answer over the slice's kept
  // documents and Combine the answer over both, which is FindDuplicate's as
  // long as none of the query's probed anchors became a stop key in between
  // (stop_keys_made() unchanged, or IsStopKey false for each) and every kept
  // document of the slice was indexed under the anchors SliceCandidates
  // assumed (SliceCandidates::Kept); otherwise the caller searches
  // this set whole.
  class SliceCandidates;

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
  // `live`, when given, must be doc's anchors that are not stop keys now, in
  // order (SliceCandidates::LiveAnchors): it spares looking each one up.
  Status Insert(DocId id, const DocSignature& doc, std::vector<uint32_t>* indexed = nullptr,
                const std::vector<uint32_t>* live = nullptr);
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
  friend class SliceCandidates;
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
  // With the first `anchors` live ones (Insert: IndexedAnchorCount), taken
  // from `live` when given (Insert's).
  size_t MakeRecord(DocId id, const DocSignature& doc, uint32_t* rec, size_t anchors,
                    const std::vector<uint32_t>* live = nullptr) const;
  size_t IndexedAnchorCount() const;
  // How many live anchors FindDuplicate(doc) probes (ProbedAnchors' count):
  // recheck.anchors, or 0 when it probes none.
  size_t ProbedAnchorCount(const DocSignature& doc) const;
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

// The candidates of a slice's documents among each other, found before the
// slice is decided (NearDupSet's comment above). Use, per slice:
//   Reset(set, n, first_id);
//   Prepare(i, doc, &probed[i]) for i < n any thread, concurrently
//   Index();                              once
//   Find(j, probed) for every j < n       any thread, concurrently
//   then for j = 0, 1, ... in order: Best(j, probed), and Kept(j, indexed)
//   when document j is kept, until Kept returns false
// Document i of the slice gets id first_id + i if kept; `probed` are its
// ProbedAnchors, as Prepare gives them, `indexed` the anchors Insert
// indexed it under.
// `doc` must outlive the slice's use; `set` must not change between Reset
// and the last Find. Best(j, probed) is FindDuplicate's answer over a set
// holding exactly the documents i < j that were Kept, each indexed under its
// `indexed` anchors, searched with `probed` as the probed anchors, as long
// as every Kept so far returned true: Find looks a few anchors past the ones
// Insert indexes at Prepare (kMarginAnchors), and Kept returns false when
// the slice's new stop keys pushed a document's indexed anchors past them.
class NearDupSet::SliceCandidates {
 public:
  void Reset(const NearDupSet& set, size_t n, DocId first_id);
  // Also gives ProbedAnchors(doc), from the record where it holds them.
  void Prepare(size_t i, const DocSignature& doc, std::vector<uint32_t>* probed);
  void Index();
  void Find(size_t j, const std::vector<uint32_t>& probed);
  std::optional<DuplicateMatch> Best(size_t j, const std::vector<uint32_t>& probed) const;
  [[nodiscard]] bool Kept(size_t i, const std::vector<uint32_t>& indexed);
  // Anchors looked at past the indexed ones: enough for this many of a
  // document's to become stop keys during its slice.
  static constexpr size_t kMarginAnchors = 4;
  // Document i's anchors that are not stop keys once `stopped` (sorted) are,
  // for Insert's `live`: false when not known here (no kept sketch, or more
  // anchors than a record holds).
  bool LiveAnchors(size_t i, const std::vector<uint32_t>& stopped, std::vector<uint32_t>* out) const;

 private:
  // An accepted candidate: its slice index, whether only an anchor found it
  // (so it counts only if its indexed anchors meet the probed ones), and
  // the match.
  struct Found {
    uint32_t i;
    bool by_anchor_only;
    DuplicateMatch match;
  };
  // A multimap key -> slice index, built per slice in O(n): each key's
  // entries form a chain from its bucket, newest first.
  class Chains {
   public:
    void Reset(size_t expected);
    void Add(uint64_t key, uint32_t i);
    // fn(i) for every entry of `key`, in descending i.
    template <typename Fn>
    void ForEach(uint64_t key, Fn&& fn) const;

   private:
    struct Entry {
      uint64_t key;
      uint32_t i;
      uint32_t next;
    };
    std::vector<uint32_t> heads_;
    std::vector<Entry> entries_;
  };

  const uint32_t* Record(size_t i) const { return records_.data() + i * record_words_; }
  // How many live anchors a record holds: the indexed ones and the margin.
  size_t RecordAnchors() const;
  // The record FindDuplicate would read for candidate i (null: none kept),
  // or *rejected when the record filter rules the pair out.
  const uint32_t* Load(size_t i, const sketch_record::RecordFilter& filter, bool* rejected) const;
  void FindExact(size_t j, const sketch_record::RecordFilter& filter);
  // Candidates i < j, each as 2 * i + (found by an anchor only).
  void NearCandidates(size_t j, const std::vector<uint32_t>& probed, std::vector<uint32_t>* out) const;

  const NearDupSet* set_ = nullptr;
  DocId first_id_ = 0;
  size_t record_words_ = 0;
  std::vector<const DocSignature*> docs_;
  // As kept in the arena, but with kMarginAnchors more live anchors.
  std::vector<uint32_t> records_;
  std::vector<uint8_t> keeps_;          // KeepsSketch
  std::vector<std::array<uint64_t, 2>> counts_;  // the sketch slot's bucket counts (their words)
  std::vector<uint64_t> fingerprints_;  // the scan's input, packed
  std::vector<uint8_t> features_;       // has_features
  Chains by_anchor_;
  Chains by_hash_;  // content_hash
  std::vector<std::vector<Found>> exact_;  // per j: the exact step's passing candidates, ascending i
  std::vector<std::vector<Found>> near_;   // per j: the other accepted candidates
  std::vector<uint8_t> kept_;
  std::vector<std::vector<uint32_t>> indexed_;  // per kept i
};

}  // namespace neardup

#endif  // NEARDUP_NEAR_DUP_SET_H_
