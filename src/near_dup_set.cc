#include "neardup/near_dup_set.h"

#include <string>

namespace neardup {

DocSignature MakeSignature(const TextAnalysis& analysis) {
  return DocSignature{analysis.content_hash, analysis.fingerprint, analysis.has_features()};
}

Result<std::unique_ptr<NearDupSet>> NearDupSet::Create(const NearDupOptions& options) {
  if (options.k < 0 || options.k > kMaxSupportedK) {
    return Status::InvalidArgument("k must be in [0, " + std::to_string(kMaxSupportedK) + "], got " +
                                   std::to_string(options.k));
  }
  MultiIndexOptions index_options = options.index;
  index_options.expected_k = options.k;
  auto index = NewMultiIndex(index_options);
  if (!index.ok()) return index.status();
  return std::unique_ptr<NearDupSet>(new NearDupSet(options, std::move(index).value()));
}

NearDupSet::NearDupSet(const NearDupOptions& options, std::unique_ptr<HammingIndex> index)
    : options_(options), index_(std::move(index)) {
  options_.index.expected_k = options_.k;
}

std::optional<DocId> NearDupSet::ExactMatch(uint64_t content_hash) const {
  auto [begin, end] = by_hash_.equal_range(content_hash);
  std::optional<DocId> best;
  for (auto it = begin; it != end; ++it) {
    if (!best || it->second < *best) best = it->second;
  }
  return best;
}

bool NearDupSet::Accept(const DocSignature& doc, const Match& candidate) const {
  (void)doc;
  (void)candidate;
  return true;  // fingerprint distance alone decides; the re-check stage goes here
}

Status NearDupSet::FindDuplicate(const DocSignature& doc, std::optional<DuplicateMatch>* best,
                                 std::vector<DuplicateMatch>* all) const {
  best->reset();
  if (all) all->clear();
  const std::optional<DocId> exact = ExactMatch(doc.content_hash);
  if (exact && (options_.exact_fast_path || !doc.has_features)) {
    // Equal normalized text => equal fingerprint: nothing can be nearer, and
    // the first kept copy of that text is the answer.
    *best = DuplicateMatch{*exact, 0, true};
    if (all) all->push_back(**best);
    if (!all) return Status::OK();
  }
  if (!doc.has_features) return Status::OK();
  std::vector<Match> candidates;
  NEARDUP_RETURN_IF_ERROR(index_->Search(doc.fingerprint, options_.k, &candidates));
  for (const Match& c : candidates) {
    if (best->has_value() && (*best)->id == c.id) continue;  // the exact match, already listed
    if (!Accept(doc, c)) continue;
    bool same_text = false;
    for (auto [it, end] = by_hash_.equal_range(doc.content_hash); it != end; ++it) same_text |= it->second == c.id;
    const DuplicateMatch m{c.id, c.distance, same_text};
    if (all) all->push_back(m);
    if (!best->has_value()) {
      *best = m;
      if (!all) break;
    }
  }
  return Status::OK();
}

Status NearDupSet::Insert(DocId id, const DocSignature& doc) {
  if (doc.has_features) {
    NEARDUP_RETURN_IF_ERROR(index_->Add(doc.fingerprint, id));
  } else {
    // Featureless documents are not in the index; keep ids unique anyway.
    for (auto [it, end] = by_hash_.equal_range(doc.content_hash); it != end; ++it) {
      if (it->second == id) return Status::AlreadyExists("id " + std::to_string(id) + " already kept");
    }
  }
  by_hash_.emplace(doc.content_hash, id);
  ++size_;
  return Status::OK();
}

bool NearDupSet::Remove(DocId id, const DocSignature& doc) {
  bool found = false;
  for (auto [it, end] = by_hash_.equal_range(doc.content_hash); it != end; ++it) {
    if (it->second == id) {
      by_hash_.erase(it);
      found = true;
      break;
    }
  }
  if (!found) return false;
  if (doc.has_features) index_->Remove(id);
  --size_;
  return true;
}

size_t NearDupSet::MemoryBytes() const {
  // unordered_multimap: a node (key, value, next pointer, cached hash) per
  // entry plus one bucket pointer.
  return index_->MemoryBytes() + by_hash_.size() * 32 + by_hash_.bucket_count() * 8;
}

}  // namespace neardup
