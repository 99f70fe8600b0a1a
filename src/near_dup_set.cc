#include "neardup/near_dup_set.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace neardup {

DocSignature MakeSignature(const TextAnalysis& analysis) {
  DocSignature sig{analysis.content_hash, analysis.fingerprint, analysis.has_features()};
  sig.num_chars = static_cast<uint32_t>(std::min<size_t>(analysis.num_chars, UINT32_MAX));
  if (sig.has_features) ComputeSketch(analysis.normalized, &sig.sketch);
  return sig;
}

double SimilarityFromDistance(int distance) {
  const double c = std::cos(std::numbers::pi * static_cast<double>(distance) / 64.0);
  return c <= 0 ? 0.0 : c / (2.0 - c);
}

namespace {

Status ValidateRecheck(const RecheckOptions& r) {
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  if (r.short_k < 0 || r.short_k > kMaxSupportedK) {
    return bad("short_k must be in [0, " + std::to_string(kMaxSupportedK) + "], got " + std::to_string(r.short_k));
  }
  if (r.short_max_chars < 0) return bad("short_max_chars must be >= 0");
  if (r.sketch_max_chars < 0) return bad("sketch_max_chars must be >= 0");
  if (!(r.min_similarity >= 0 && r.min_similarity <= 1)) return bad("min_similarity must be in [0, 1]");
  if (!(r.min_containment >= 0)) return bad("min_containment must be >= 0");
  if (r.containment_min_shingles < 0) return bad("containment_min_shingles must be >= 0");
  return Status::OK();
}

int LargestRadius(const NearDupOptions& o) { return o.recheck.enabled ? std::max(o.k, o.recheck.short_k) : o.k; }

}  // namespace

Status NearDupSet::ValidateOptions(const NearDupOptions& o) {
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  if (o.k < 0 || o.k > kMaxSupportedK) {
    return bad("k must be in [0, " + std::to_string(kMaxSupportedK) + "], got " + std::to_string(o.k));
  }
  return ValidateRecheck(o.recheck);
}

Result<std::unique_ptr<NearDupSet>> NearDupSet::Create(const NearDupOptions& options) {
  NEARDUP_RETURN_IF_ERROR(ValidateOptions(options));
  MultiIndexOptions index_options = options.index;
  index_options.expected_k = LargestRadius(options);
  auto index = NewMultiIndex(index_options);
  if (!index.ok()) return index.status();
  return std::unique_ptr<NearDupSet>(new NearDupSet(options, std::move(index).value()));
}

NearDupSet::NearDupSet(const NearDupOptions& options, std::unique_ptr<HammingIndex> index)
    : options_(options), index_(std::move(index)) {
  options_.index.expected_k = LargestRadius(options_);
}

std::optional<DocId> NearDupSet::ExactMatch(uint64_t content_hash) const {
  auto [begin, end] = by_hash_.equal_range(content_hash);
  std::optional<DocId> best;
  for (auto it = begin; it != end; ++it) {
    if (!best || it->second < *best) best = it->second;
  }
  return best;
}

int NearDupSet::SearchRadius(const DocSignature& doc) const {
  if (options_.recheck.enabled && doc.has_sketch() && IsShort(doc.num_chars)) {
    return std::min(std::max(options_.k, options_.recheck.short_k), index_->max_k());
  }
  return options_.k;
}

bool NearDupSet::Accept(const DocSignature& doc, const Match& candidate, DuplicateMatch* match) const {
  match->id = candidate.id;
  match->distance = candidate.distance;
  const uint32_t* rec = nullptr;
  if (doc.has_sketch()) {
    if (auto it = sketch_slot_.find(candidate.id); it != sketch_slot_.end()) rec = &sketch_arena_[it->second];
  }
  if (rec == nullptr) {
    // No sketch on one side: the fingerprint distance decides.
    match->similarity = SimilarityFromDistance(candidate.distance);
    match->rechecked = false;
    return candidate.distance <= options_.k;
  }
  // Views the stored record as a sketch without copying: EstimateSimilarity
  // needs only the counts and the values.
  thread_local ShingleSketch kept;
  kept.num_shingles = rec[1];
  kept.mins.assign(rec + 3, rec + 3 + rec[2]);
  const SimilarityEstimate e = EstimateSimilarity(doc.sketch, kept);
  match->similarity = e.jaccard;
  match->rechecked = true;
  const RecheckOptions& r = options_.recheck;
  if (!r.enabled) return candidate.distance <= options_.k;
  const uint32_t kept_chars = rec[0];
  if (!IsShort(doc.num_chars) && !IsShort(kept_chars)) return candidate.distance <= options_.k;
  if (e.jaccard >= r.min_similarity) return true;
  const uint32_t smaller = std::min(doc.sketch.num_shingles, kept.num_shingles);
  return e.containment >= r.min_containment && smaller >= static_cast<uint32_t>(r.containment_min_shingles);
}

Status NearDupSet::FindDuplicate(const DocSignature& doc, std::optional<DuplicateMatch>* best,
                                 std::vector<DuplicateMatch>* all) const {
  best->reset();
  if (all) all->clear();
  const std::optional<DocId> exact = ExactMatch(doc.content_hash);
  if (exact && (options_.exact_fast_path || !doc.has_features)) {
    // Equal normalized text => equal fingerprint: nothing can be nearer, and
    // the first kept copy of that text is the answer.
    DuplicateMatch m;
    m.id = *exact;
    m.distance = 0;
    m.exact = true;
    m.similarity = 1.0;
    m.rechecked = doc.has_sketch();
    *best = m;
    if (all) all->push_back(m);
    if (!all) return Status::OK();
  }
  if (!doc.has_features) return Status::OK();
  thread_local std::vector<Match> candidates;
  NEARDUP_RETURN_IF_ERROR(index_->Search(doc.fingerprint, SearchRadius(doc), &candidates));
  const size_t first_near = all ? all->size() : 0;
  std::optional<DuplicateMatch> best_near;
  for (const Match& c : candidates) {
    if (best->has_value() && (*best)->id == c.id) continue;  // the exact match, already listed
    DuplicateMatch m;
    if (!Accept(doc, c, &m)) continue;
    for (auto [it, end] = by_hash_.equal_range(doc.content_hash); it != end; ++it) m.exact |= it->second == c.id;
    if (m.exact) m.similarity = 1.0;
    if (all) all->push_back(m);
    if (options_.recheck.enabled) {
      // Most similar first, then nearest, then smallest id (candidates come
      // ordered by distance, then id).
      if (!best_near || m.similarity > best_near->similarity) best_near = m;
    } else if (!best_near) {
      best_near = m;
      if (!all) break;
    }
  }
  if (all && options_.recheck.enabled) {
    std::stable_sort(all->begin() + static_cast<std::ptrdiff_t>(first_near), all->end(),
                     [](const DuplicateMatch& a, const DuplicateMatch& b) { return a.similarity > b.similarity; });
  }
  if (!best->has_value()) *best = best_near;
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
  if (doc.has_features && doc.has_sketch() && doc.num_chars <= static_cast<uint32_t>(options_.recheck.sketch_max_chars)) {
    const size_t n = std::min(doc.sketch.mins.size(), kSketchSize);
    sketch_slot_[id] = sketch_arena_.size();
    sketch_arena_.push_back(doc.num_chars);
    sketch_arena_.push_back(doc.sketch.num_shingles);
    sketch_arena_.push_back(static_cast<uint32_t>(n));
    sketch_arena_.insert(sketch_arena_.end(), doc.sketch.mins.begin(),
                         doc.sketch.mins.begin() + static_cast<std::ptrdiff_t>(n));
  }
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
  if (auto it = sketch_slot_.find(id); it != sketch_slot_.end()) {
    sketch_garbage_ += 3 + sketch_arena_[it->second + 2];
    sketch_slot_.erase(it);
    if (sketch_garbage_ > 4096 && sketch_garbage_ * 2 > sketch_arena_.size()) CompactSketches();
  }
  --size_;
  return true;
}

void NearDupSet::CompactSketches() {
  std::vector<uint32_t> arena;
  arena.reserve(sketch_arena_.size() - sketch_garbage_);
  for (auto& [id, offset] : sketch_slot_) {
    const uint32_t* rec = &sketch_arena_[offset];
    const size_t len = 3 + rec[2];
    offset = arena.size();
    arena.insert(arena.end(), rec, rec + len);
  }
  sketch_arena_ = std::move(arena);
  sketch_garbage_ = 0;
}

Status NearDupSet::set_k(int k) {
  if (k < 0 || k > kMaxSupportedK || k > index_->max_k()) {
    return Status::InvalidArgument("k must be in [0, " + std::to_string(index_->max_k()) + "]");
  }
  options_.k = k;
  return Status::OK();
}

Status NearDupSet::SetPolicy(const RecheckOptions& recheck) {
  NEARDUP_RETURN_IF_ERROR(ValidateRecheck(recheck));
  if (recheck.sketch_max_chars != options_.recheck.sketch_max_chars) {
    return Status::FailedPrecondition("sketch_max_chars is fixed when the set is created");
  }
  if (recheck.short_k > index_->max_k()) {
    return Status::InvalidArgument("short_k must be at most " + std::to_string(index_->max_k()));
  }
  options_.recheck = recheck;
  return Status::OK();
}

size_t NearDupSet::MemoryBytes() const {
  // unordered_multimap / unordered_map: a node (key, value, next pointer,
  // cached hash) per entry plus one bucket pointer.
  return index_->MemoryBytes() + by_hash_.size() * 32 + by_hash_.bucket_count() * 8 + sketch_slot_.size() * 32 +
         sketch_slot_.bucket_count() * 8 + sketch_arena_.capacity() * sizeof(uint32_t);
}

}  // namespace neardup
