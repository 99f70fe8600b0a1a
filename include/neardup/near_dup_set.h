// NearDupSet: the kept documents of one stream (the batch job) or one
// namespace (the service), and the rule that decides whether a new document
// duplicates one of them. The batch Deduplicator and the service's namespaces
// both decide through this class, so the policy is written once.
//
// The rule, for a document with signature `doc`:
//  1. Exact: a kept document with the same content_hash (hash of the
//     normalized text) is a duplicate at distance 0 (exact = true). Texts
//     without features are matched this way only, never by fingerprint.
//  2. Near: otherwise every kept document within Hamming distance k of its
//     fingerprint is a candidate; candidates are tried nearest first (then by
//     smallest id) and the first one accepted is the duplicate.
// A verification stage (exact similarity of short texts) may reject
// candidates; it lives in Accept() so both callers get it.
//
// Ids are chosen by the caller (the batch job uses input sequence numbers;
// the service its internal document numbers) and must be unique.
//
// Thread-safety: const methods may run concurrently; Insert/Remove need
// exclusive access (the service holds its namespace lock).
#ifndef NEARDUP_NEAR_DUP_SET_H_
#define NEARDUP_NEAR_DUP_SET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "neardup/fingerprint.h"
#include "neardup/hamming_index.h"
#include "neardup/multi_index.h"
#include "neardup/status.h"

namespace neardup {

// What the decision needs from one analyzed text.
struct DocSignature {
  uint64_t content_hash = 0;
  uint64_t fingerprint = 0;  // ignored when !has_features
  bool has_features = false;
};

// The signature of an analyzed text: the one place that decides what the
// matching rule keeps of a text.
DocSignature MakeSignature(const TextAnalysis& analysis);

struct NearDupOptions {
  // Largest Hamming distance (inclusive) of a near-duplicate; 0..kMaxSupportedK.
  int k = 3;
  MultiIndexOptions index;  // expected_k is overridden with k
  // Check content_hash equality before searching the index. Off only costs an
  // index search per exact repeat (and loses nothing for texts with features).
  bool exact_fast_path = true;
};

struct DuplicateMatch {
  DocId id = 0;        // the kept document
  int distance = 0;    // Hamming distance of the fingerprints
  bool exact = false;  // equal content_hash
  friend bool operator==(const DuplicateMatch&, const DuplicateMatch&) = default;
};

class NearDupSet {
 public:
  // kInvalidArgument for k out of range or bad index options.
  static Result<std::unique_ptr<NearDupSet>> Create(const NearDupOptions& options);

  NearDupSet(const NearDupSet&) = delete;
  NearDupSet& operator=(const NearDupSet&) = delete;

  // The kept document `doc` duplicates, or nullopt. When `all` is given it
  // receives every accepted match, best first (best == (*all)[0]).
  Status FindDuplicate(const DocSignature& doc, std::optional<DuplicateMatch>* best,
                       std::vector<DuplicateMatch>* all = nullptr) const;

  // Adds a kept document. kAlreadyExists if `id` is present.
  Status Insert(DocId id, const DocSignature& doc);
  // Removes a kept document (its signature as inserted). False if absent.
  bool Remove(DocId id, const DocSignature& doc);

  size_t size() const { return size_; }
  // Index plus exact-match table.
  size_t MemoryBytes() const;
  const NearDupOptions& options() const { return options_; }
  const HammingIndex& index() const { return *index_; }

 private:
  NearDupSet(const NearDupOptions& options, std::unique_ptr<HammingIndex> index);
  // Whether a fingerprint candidate is a real duplicate (re-check stage).
  bool Accept(const DocSignature& doc, const Match& candidate) const;
  std::optional<DocId> ExactMatch(uint64_t content_hash) const;

  NearDupOptions options_;
  std::unique_ptr<HammingIndex> index_;
  // content_hash -> kept ids with that normalized text (usually one).
  std::unordered_multimap<uint64_t, DocId> by_hash_;
  size_t size_ = 0;
};

}  // namespace neardup

#endif  // NEARDUP_NEAR_DUP_SET_H_
