#include "neardup/near_dup_set.h"

#include <algorithm>
#include <array>
#include <deque>
#include <cmath>
#include <numbers>
#include <string>

namespace neardup {

// ---- AnchorTable -------------------------------------------------------------
// anchor (u32) -> kept document ids. Open addressing with linear probing and
// backward-shift deletion. Most anchors are held by one document, whose id is
// stored in the slot itself; more go to a side list. A key that receives more
// than `cap` documents becomes a stop key for good (its list is freed).
// Open addressing split into kSegments independent tables (by the top bits
// of the key's hash): a table grows by doubling, which rehashes everything it
// holds while the namespace waits. Whole, at 10M documents (~90M anchors,
// 2 GB of slots) that was a 10-20 s stall of every check in the namespace; a
// segment holds 1/256 of it, so a growth costs tens of milliseconds and the
// segments grow at different moments.
class NearDupSet::AnchorTable {
 public:
  bool IsStop(uint32_t key) const {
    const Slot* s = Find(key);
    return s != nullptr && s->n == kStop;
  }

  // Appends the ids under key to *out; false (and nothing) for a stop key.
  bool Collect(uint32_t key, std::vector<DocId>* out) const {
    const Slot* s = Find(key);
    if (s == nullptr) return true;
    if (s->n == kStop) return false;
    if (s->n == 1) {
      out->push_back(s->v);
    } else {
      const auto& l = lists_[s->v];
      out->insert(out->end(), l.begin(), l.end());
    }
    return true;
  }

  void Add(uint32_t key, DocId id, uint32_t cap) {
    const uint64_t h = Mix64(key);
    Segment& g = segments_[SegmentOf(h)];
    if ((g.used + 1) * 10 > g.slots.size() * 7) Grow(&g);
    size_t i = h & g.mask;
    while (g.slots[i].n != 0 && g.slots[i].key != key) i = (i + 1) & g.mask;
    Slot& s = g.slots[i];
    if (s.n == 0) {
      s = Slot{key, 1, id};
      ++g.used;
      if (cap == 0) MakeStop(&s);
      return;
    }
    if (s.n == kStop) return;
    if (s.n + 1 > cap) {
      MakeStop(&s);
      return;
    }
    if (s.n == 1) {
      const uint64_t list = NewList();
      lists_[list].push_back(s.v);
      s.v = list;
    }
    lists_[s.v].push_back(id);
    ++s.n;
  }

  void Remove(uint32_t key, DocId id) {
    Slot* s = const_cast<Slot*>(Find(key));
    if (s == nullptr || s->n == kStop) return;
    if (s->n == 1) {
      if (s->v == id) {
        Segment& g = segments_[SegmentOf(Mix64(key))];
        Erase(&g, static_cast<size_t>(s - g.slots.data()));
      }
      return;
    }
    auto& l = lists_[s->v];
    auto it = std::find(l.begin(), l.end(), id);
    if (it == l.end()) return;
    l.erase(it);
    if (--s->n == 1) {
      const DocId last = l[0];
      FreeList(s->v);
      s->v = last;
    }
  }

  size_t MemoryBytes() const {
    size_t bytes = sizeof(segments_) + lists_.size() * sizeof(std::vector<DocId>) + free_.capacity() * sizeof(uint64_t);
    for (const Segment& g : segments_) bytes += g.slots.capacity() * sizeof(Slot);
    for (const auto& l : lists_) bytes += l.capacity() * sizeof(DocId);
    return bytes;
  }

 private:
  static constexpr uint32_t kStop = UINT32_MAX;
  static constexpr int kSegmentBits = 8;
  struct Slot {
    uint32_t key = 0;
    uint32_t n = 0;  // 0: empty; kStop: stop key; 1: v is the id; else v indexes lists_
    uint64_t v = 0;
  };
  struct Segment {
    std::vector<Slot> slots;
    size_t mask = 0;
    size_t used = 0;
  };

  // The top bits pick the segment, the low bits the home slot in it.
  static size_t SegmentOf(uint64_t h) { return static_cast<size_t>(h >> (64 - kSegmentBits)); }

  const Slot* Find(uint32_t key) const {
    const uint64_t h = Mix64(key);
    const Segment& g = segments_[SegmentOf(h)];
    if (g.slots.empty()) return nullptr;
    for (size_t i = h & g.mask;; i = (i + 1) & g.mask) {
      const Slot& s = g.slots[i];
      if (s.n == 0) return nullptr;
      if (s.key == key) return &s;
    }
  }

  void MakeStop(Slot* s) {
    if (s->n >= 2 && s->n != kStop) FreeList(s->v);
    s->n = kStop;
    s->v = 0;
  }

  uint64_t NewList() {
    if (!free_.empty()) {
      const uint64_t l = free_.back();
      free_.pop_back();
      return l;
    }
    lists_.emplace_back();
    return lists_.size() - 1;
  }
  void FreeList(uint64_t l) {
    std::vector<DocId>().swap(lists_[l]);
    free_.push_back(l);
  }

  void Erase(Segment* g, size_t i) {
    // Backward shift: move later members of the probe run into the hole.
    size_t hole = i;
    for (size_t j = (i + 1) & g->mask; g->slots[j].n != 0; j = (j + 1) & g->mask) {
      const size_t home = Mix64(g->slots[j].key) & g->mask;
      // j may move to hole iff its home is not cyclically within (hole, j].
      const bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!stays) {
        g->slots[hole] = g->slots[j];
        hole = j;
      }
    }
    g->slots[hole] = Slot{};
    --g->used;
  }

  static void Grow(Segment* g) {
    std::vector<Slot> old = std::move(g->slots);
    g->slots.assign(old.empty() ? 16 : old.size() * 2, Slot{});
    g->mask = g->slots.size() - 1;
    for (const Slot& s : old) {
      if (s.n == 0) continue;
      size_t i = Mix64(s.key) & g->mask;
      while (g->slots[i].n != 0) i = (i + 1) & g->mask;
      g->slots[i] = s;
    }
  }

  std::array<Segment, size_t{1} << kSegmentBits> segments_;
  // A deque: growing it never moves the lists already there (a vector's
  // doubling copied millions of them at once).
  std::deque<std::vector<DocId>> lists_;
  std::vector<uint64_t> free_;
};

// ---- signatures ----------------------------------------------------------------

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
  if (r.anchors < 0 || r.anchors > static_cast<int>(kAnchorCount)) {
    return bad("anchors must be in [0, " + std::to_string(kAnchorCount) + "]");
  }
  if (r.anchor_max_postings < 0) return bad("anchor_max_postings must be >= 0");
  if (!(r.min_similarity >= 0 && r.min_similarity <= 1)) return bad("min_similarity must be in [0, 1]");
  if (!(r.min_similarity_small >= 0 && r.min_similarity_small <= 1)) {
    return bad("min_similarity_small must be in [0, 1]");
  }
  if (r.small_text_shingles < 0) return bad("small_text_shingles must be >= 0");
  return Status::OK();
}

int LargestRadius(const NearDupOptions& o) { return o.recheck.enabled ? std::max(o.k, o.recheck.short_k) : o.k; }

// Record layout in the sketch arena.
// [num_chars, num_shingles, fp low, fp high, n, a, mins[n], anchors[a]]: a is
// the number of anchors the document was added under (for Remove).
constexpr size_t kRecChars = 0, kRecShingles = 1, kRecFpLo = 2, kRecFpHi = 3, kRecCount = 4, kRecAnchors = 5,
                 kRecHeader = 6;

size_t RecordSize(const uint32_t* rec) { return kRecHeader + rec[kRecCount] + rec[kRecAnchors]; }

}  // namespace

// ---- NearDupSet -------------------------------------------------------------------

Status NearDupSet::ValidateOptions(const NearDupOptions& o) {
  if (o.k < 0 || o.k > kMaxSupportedK) {
    return Status::InvalidArgument("k must be in [0, " + std::to_string(kMaxSupportedK) + "], got " +
                                   std::to_string(o.k));
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
    : options_(options), index_(std::move(index)), anchors_(std::make_unique<AnchorTable>()) {
  options_.index.expected_k = LargestRadius(options_);
}

NearDupSet::~NearDupSet() = default;

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

const uint32_t* NearDupSet::SketchRecord(DocId id) const {
  auto it = sketch_slot_.find(id);
  return it == sketch_slot_.end() ? nullptr : &sketch_arena_[it->second];
}

PairDecision DecidePair(const NearDupOptions& options, const PairSide& a, const PairSide& b, int distance) {
  PairDecision d;
  if (!a.has_sketch() || !b.has_sketch()) {
    // No sketch on one side: the fingerprint distance decides.
    d.similarity = SimilarityFromDistance(distance);
    d.duplicate = distance <= options.k;
    return d;
  }
  const SimilarityEstimate e = EstimateSimilarity(a.mins, a.num_mins, a.num_shingles, b.mins, b.num_mins, b.num_shingles);
  d.similarity = e.jaccard;
  d.rechecked = true;
  const RecheckOptions& r = options.recheck;
  if (!r.enabled) {
    d.duplicate = distance <= options.k;
    return d;
  }
  if (!IsShortText(r, a.num_chars) && !IsShortText(r, b.num_chars) && distance <= options.k) {
    d.duplicate = true;
    return d;
  }
  const uint32_t smaller = std::min(a.num_shingles, b.num_shingles);
  const double min_j =
      smaller < static_cast<uint32_t>(r.small_text_shingles) ? r.min_similarity_small : r.min_similarity;
  d.duplicate = e.jaccard >= min_j;
  return d;
}

bool NearDupSet::Accept(const DocSignature& doc, const Match& candidate, const uint32_t* rec,
                        DuplicateMatch* match) const {
  match->id = candidate.id;
  match->distance = candidate.distance;
  PairSide kept;
  if (rec != nullptr) kept = PairSide{rec[kRecChars], rec + kRecHeader, rec[kRecCount], rec[kRecShingles]};
  const PairDecision d = DecidePair(options_, PairSide::Of(doc), kept, candidate.distance);
  match->similarity = d.similarity;
  match->rechecked = d.rechecked;
  return d.duplicate;
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
  const RecheckOptions& r = options_.recheck;
  // (candidate, its sketch record or null), ordered by distance, then id.
  thread_local std::vector<std::pair<Match, const uint32_t*>> checked;
  checked.clear();
  const bool sketches = doc.has_sketch() && !sketch_slot_.empty();
  for (const Match& c : candidates) checked.emplace_back(c, sketches ? SketchRecord(c.id) : nullptr);
  if (r.enabled && r.anchors > 0 && sketches) {
    // Kept documents sharing an anchor, not already found by fingerprint.
    thread_local std::vector<DocId> ids;
    ids.clear();
    int probed = 0;
    for (uint32_t a : doc.sketch.anchors) {
      if (probed == r.anchors) break;
      if (anchors_->Collect(a, &ids)) ++probed;  // false: a stop key
    }
    if (!ids.empty()) {
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      const size_t found = checked.size();
      for (DocId id : ids) {
        bool listed = false;
        for (size_t i = 0; i < found && !listed; ++i) listed = checked[i].first.id == id;
        if (listed) continue;
        const uint32_t* rec = SketchRecord(id);
        if (rec == nullptr) continue;
        const uint64_t fp = rec[kRecFpLo] | (uint64_t{rec[kRecFpHi]} << 32);
        checked.emplace_back(Match{id, fp, HammingDistance(fp, doc.fingerprint)}, rec);
      }
      if (checked.size() > found) {
        std::sort(checked.begin(), checked.end(), [](const auto& a, const auto& b) {
          return a.first.distance != b.first.distance ? a.first.distance < b.first.distance : a.first.id < b.first.id;
        });
      }
    }
  }
  const size_t first_near = all ? all->size() : 0;
  std::optional<DuplicateMatch> best_near;
  for (const auto& [c, rec] : checked) {
    if (best->has_value() && (*best)->id == c.id) continue;  // the exact match, already listed
    DuplicateMatch m;
    if (!Accept(doc, c, rec, &m)) continue;
    for (auto [it, end] = by_hash_.equal_range(doc.content_hash); it != end; ++it) m.exact |= it->second == c.id;
    if (m.exact) m.similarity = 1.0;
    if (all) all->push_back(m);
    if (r.enabled) {
      // Most similar first, then nearest, then smallest id (candidates come
      // ordered by distance, then id).
      if (!best_near || m.similarity > best_near->similarity) best_near = m;
    } else if (!best_near) {
      best_near = m;
      if (!all) break;
    }
  }
  if (all && r.enabled) {
    std::stable_sort(all->begin() + static_cast<std::ptrdiff_t>(first_near), all->end(),
                     [](const DuplicateMatch& a, const DuplicateMatch& b) { return a.similarity > b.similarity; });
  }
  if (!best->has_value()) *best = best_near;
  return Status::OK();
}

bool NearDupSet::KeepsSketch(const DocSignature& doc) const {
  return doc.has_features && doc.has_sketch() &&
         doc.num_chars <= static_cast<uint32_t>(options_.recheck.sketch_max_chars);
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
  if (!KeepsSketch(doc)) return Status::OK();
  const size_t n = std::min(doc.sketch.mins.size(), kSketchSize);
  const size_t offset = sketch_arena_.size();
  sketch_slot_[id] = offset;
  sketch_arena_.push_back(doc.num_chars);
  sketch_arena_.push_back(doc.sketch.num_shingles);
  sketch_arena_.push_back(static_cast<uint32_t>(doc.fingerprint));
  sketch_arena_.push_back(static_cast<uint32_t>(doc.fingerprint >> 32));
  sketch_arena_.push_back(static_cast<uint32_t>(n));
  sketch_arena_.push_back(0);  // anchors, below
  sketch_arena_.insert(sketch_arena_.end(), doc.sketch.mins.begin(),
                       doc.sketch.mins.begin() + static_cast<std::ptrdiff_t>(n));
  // Anchors are indexed whatever the current policy says, so that a later
  // SetPolicy() can turn them on: the first `anchors` non-stop ones (at
  // least the default number).
  const int m = std::max(options_.recheck.anchors, RecheckOptions{}.anchors);
  const uint32_t cap = static_cast<uint32_t>(options_.recheck.anchor_max_postings);
  uint32_t added = 0;
  for (uint32_t a : doc.sketch.anchors) {
    if (added == static_cast<uint32_t>(m)) break;
    if (anchors_->IsStop(a)) continue;
    anchors_->Add(a, id, cap);
    sketch_arena_.push_back(a);
    ++added;
  }
  sketch_arena_[offset + kRecAnchors] = added;
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
    const uint32_t* rec = &sketch_arena_[it->second];
    const uint32_t* anchors = rec + kRecHeader + rec[kRecCount];
    for (uint32_t i = 0; i < rec[kRecAnchors]; ++i) anchors_->Remove(anchors[i], id);
    sketch_garbage_ += RecordSize(rec);
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
    const size_t len = RecordSize(rec);
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
         sketch_slot_.bucket_count() * 8 + sketch_arena_.capacity() * sizeof(uint32_t) + anchors_->MemoryBytes();
}

}  // namespace neardup
