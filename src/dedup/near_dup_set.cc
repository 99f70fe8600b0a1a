#include "neardup/dedup/near_dup_set.h"

#include <algorithm>
#include <array>
#include <deque>
#include <cmath>
#include <numbers>
#include <string>

#include "dedup/anchor_table.h"
#include "dedup/bucket_counts.h"
#include "dedup/sketch_arena.h"
#include "dedup/sketch_record.h"
#include "neardup/dedup/setting.h"
#include "util/hash.h"
#include "util/segmented_table.h"

namespace neardup {

// The tables' classes are named per file (not anonymous: NearDupSet::Tables
// holds them).
namespace near_dup_set_internal {

using internal::AnchorTable;

// 64-bit key -> 64-bit value slots (value UINT64_MAX: empty); a key may
// repeat (the exact-match table is a multimap).
using KeyValueSlot = internal::KeyValueSlot;
struct KeyValueOps {
  static uint64_t Hash(const KeyValueSlot& s) { return Murmur3Fmix64(s.key); }
  static bool Empty(const KeyValueSlot& s) { return s.value == KeyValueSlot::kEmptyValue; }
};
using KeyValueTable = internal::SegmentedTable<KeyValueSlot, KeyValueOps>;

// kept id -> its sketch record's place and the record's bucket counts
// (RecordFilter): 32 bytes, so most candidates are ruled out without a read.
struct SketchSlot {
  uint64_t key = 0;
  uint64_t value = KeyValueSlot::kEmptyValue;
  internal::BucketCounts counts;
};
struct SketchSlotOps {
  static uint64_t Hash(const SketchSlot& s) { return Murmur3Fmix64(s.key); }
  static bool Empty(const SketchSlot& s) { return s.value == KeyValueSlot::kEmptyValue; }
};
using SketchTable = internal::SegmentedTable<SketchSlot, SketchSlotOps>;

}  // namespace near_dup_set_internal
using namespace near_dup_set_internal;
using internal::SketchArena;
using namespace sketch_record;

namespace {

int LargestRadius(const NearDupOptions& o) { return o.recheck.enabled ? std::max(o.k, o.recheck.short_k) : o.k; }

// Buffers for the records one FindDuplicate reads from a file arena: a
// deque, so the ones handed out stay put while more are added.
class RecordBuffers {
 public:
  void Reset() { used_ = 0; }
  uint32_t* Next() {
    if (used_ == bufs_.size()) bufs_.emplace_back();
    return bufs_[used_++].data();
  }

 private:
  std::deque<std::array<uint32_t, kMaxRecordWords>> bufs_;
  size_t used_ = 0;
};
thread_local RecordBuffers t_record_buffers;

// The filter of the document a FindDuplicate on this thread is deciding.
thread_local RecordFilter t_filter;

}  // namespace

class NearDupSet::Tables {
 public:
  KeyValueTable by_hash;      // content_hash -> kept id
  SketchTable sketch_slot;    // kept id -> Place() of its record in `arena`, and its counts
  std::unique_ptr<SketchArena> arena;
  AnchorTable anchors;

  // A record's place: its offset (40 bits), length in words (9 bits: records
  // are at most kMaxRecordWords < 2^9 words, so a place is never the empty
  // mark) and its text's distinct n-gram count (15 bits, saturated), for
  // RecordFilter.
  static uint64_t Place(uint64_t offset, size_t words, uint32_t shingles) {
    return offset << 24 | uint64_t{words} << 15 | SlotShingles(shingles);
  }
  static uint64_t OffsetOf(uint64_t place) { return place >> 24; }
  static size_t WordsOf(uint64_t place) { return (place >> 15) & 511; }
  static uint32_t ShinglesOf(uint64_t place) { return place & kShinglesUnknown; }

  // The slot of a kept id's sketch record, or null.
  near_dup_set_internal::SketchSlot* SketchSlot(DocId id) {
    return sketch_slot.Find(Murmur3Fmix64(id), [id](const near_dup_set_internal::SketchSlot& x) { return x.key == id; });
  }
  const near_dup_set_internal::SketchSlot* SketchSlot(DocId id) const {
    return const_cast<Tables*>(this)->SketchSlot(id);
  }
  // *rec = the kept id's record (null if it has none), read into `buf`
  // (kMaxRecordWords) when the arena is a file.
  Status Record(DocId id, uint32_t* buf, const uint32_t** rec) const {
    *rec = nullptr;
    const auto* s = SketchSlot(id);
    if (s == nullptr) return Status::OK();
    return arena->Read(OffsetOf(s->value), WordsOf(s->value), buf, rec);
  }
  // Record() for FindDuplicate: a file arena's record stays readable until
  // the thread's next FindDuplicate. *rejected (and no record) when the
  // filter rules the pair out without it.
  Status Load(DocId id, const RecordFilter& filter, const uint32_t** rec, bool* rejected) const {
    *rec = nullptr;
    *rejected = false;
    const auto* s = SketchSlot(id);
    if (s == nullptr) return Status::OK();
    if (SlotRejected(filter, ShinglesOf(s->value), s->counts)) {
      *rejected = true;
      return Status::OK();
    }
    return arena->Read(OffsetOf(s->value), WordsOf(s->value), arena->in_file() ? t_record_buffers.Next() : nullptr,
                       rec);
  }
};


// ---- NearDupSet -------------------------------------------------------------------

Status NearDupSet::ValidateOptions(const NearDupOptions& o) {
  if (o.k < 0 || o.k > kMaxSupportedK) {
    return Status::InvalidArgument("k must be in [0, " + std::to_string(kMaxSupportedK) + "], got " +
                                   std::to_string(o.k));
  }
  return ValidateSettings(RecheckSettingTable(), o.recheck);
}

Result<std::unique_ptr<NearDupSet>> NearDupSet::Create(const NearDupOptions& options) {
  NEARDUP_RETURN_IF_ERROR(ValidateOptions(options));
  MultiIndexOptions index_options = options.index;
  index_options.expected_k = LargestRadius(options);
  auto index = NewMultiIndex(index_options);
  if (!index.ok()) return index.status();
  std::unique_ptr<SketchArena> arena = std::make_unique<SketchArena>();
  if (!options.sketch_dir.empty()) {
    NEARDUP_ASSIGN_OR_RETURN(arena, SketchArena::InFile(options.sketch_dir));
  }
  std::unique_ptr<NearDupSet> set(new NearDupSet(options, std::move(index).value()));
  set->t_->arena = std::move(arena);
  return set;
}

NearDupSet::NearDupSet(const NearDupOptions& options, std::unique_ptr<HammingIndex> index)
    : options_(options), index_(std::move(index)), t_(std::make_unique<Tables>()) {
  options_.index.expected_k = LargestRadius(options_);
}

NearDupSet::~NearDupSet() = default;

void NearDupSet::ExactMatches(uint64_t content_hash, std::vector<DocId>* ids) const {
  ids->clear();
  t_->by_hash.ForEachInRun(Murmur3Fmix64(content_hash), [&](const KeyValueSlot& s) {
    if (s.key == content_hash) ids->push_back(s.value);
  });
}

size_t NearDupSet::sketches() const { return t_->sketch_slot.size(); }

int NearDupSet::SearchRadius(const DocSignature& doc) const {
  return std::min(QueryRadius(options_, doc), index_->max_k());  // max_k >= k: built for the largest radius
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
  match->similarity_exact = d.exact;
  return d.duplicate;
}

// FindDuplicate gathers candidates from three sources, cheapest first (equal
// text, the fingerprint radius, shared anchors), then runs the pair rule on
// each and ranks the accepted ones. It is on every check's path: the scratch
// vectors are thread_local (no allocation once warm) and the random reads of
// a source are prefetched before the first is used.
Status NearDupSet::FindDuplicate(const DocSignature& doc, std::optional<DuplicateMatch>* best,
                                 std::vector<DuplicateMatch>* all) const {
  best->reset();
  if (all) all->clear();
  t_record_buffers.Reset();
  const RecheckOptions& r = options_.recheck;
  t_filter = FilterFor(r, doc);
  const bool sketches = doc.has_sketch() && t_->sketch_slot.size() != 0;
  const bool use_anchors = r.enabled && r.anchors > 0 && sketches;
  // The anchor slots are random reads: request them all before the first.
  if (use_anchors) {
    for (uint32_t a : doc.sketch.anchors) t_->anchors.Prefetch(a);
  }
  thread_local std::vector<DocId> exact_ids;
  ExactMatches(doc.content_hash, &exact_ids);
  if (!exact_ids.empty() && (options_.exact_fast_path || !doc.has_features)) {
    NEARDUP_RETURN_IF_ERROR(ExactAnswer(doc, exact_ids, best));
    if (best->has_value() && !all) return Status::OK();
    if (best->has_value()) all->push_back(**best);
  }
  if (!doc.has_features) return Status::OK();
  thread_local std::vector<SketchedMatch> checked;
  NEARDUP_RETURN_IF_ERROR(FingerprintCandidates(doc, sketches, &checked));
  if (use_anchors) NEARDUP_RETURN_IF_ERROR(AddAnchorCandidates(doc, &checked));
  RankAccepted(doc, checked, exact_ids, best, all);
  return Status::OK();
}

// Equal normalized text => equal fingerprint: nothing can be nearer, and the
// first kept copy of that text that passes the pair rule is the answer. The
// normalized text drops punctuation, which the similarity counts: with the
// re-check on, an equal normalized text is a candidate like any other.
Status NearDupSet::ExactAnswer(const DocSignature& doc, std::vector<DocId>& exact_ids,
                               std::optional<DuplicateMatch>* answer) const {
  std::sort(exact_ids.begin(), exact_ids.end());
  for (DocId id : exact_ids) {
    const uint32_t* rec = nullptr;
    bool rejected = false;
    if (doc.has_sketch()) NEARDUP_RETURN_IF_ERROR(t_->Load(id, t_filter, &rec, &rejected));
    if (rejected) continue;
    DuplicateMatch m;
    if (!Accept(doc, Match{id, doc.fingerprint, 0}, rec, &m)) continue;
    m.exact = true;
    *answer = m;
    return Status::OK();
  }
  return Status::OK();
}

// Ordered by distance, then id: the index's order.
Status NearDupSet::FingerprintCandidates(const DocSignature& doc, bool sketches,
                                         std::vector<SketchedMatch>* out) const {
  thread_local std::vector<Match> candidates;
  NEARDUP_RETURN_IF_ERROR(index_->Search(doc.fingerprint, SearchRadius(doc), &candidates));
  out->clear();
  for (const Match& c : candidates) {
    const uint32_t* rec = nullptr;
    bool rejected = false;
    if (sketches) NEARDUP_RETURN_IF_ERROR(t_->Load(c.id, t_filter, &rec, &rejected));
    if (!rejected) out->emplace_back(c, rec);
  }
  return Status::OK();
}

namespace {
// Drops from *ids the repeats and the ids already among `listed`, keeping
// the rest in order. A hash set rather than a sort: ~120 ids per document
// on short text, and their order does not matter (candidates are ranked).
template <typename Listed>  // a vector of (Match, record) pairs
void KeepNewIds(const Listed& listed, std::vector<DocId>* ids) {
  constexpr DocId kFree = ~DocId{0};  // never an id (ids are below 2^63)
  thread_local std::vector<DocId> set;
  size_t size = 16;
  while (size < 2 * (ids->size() + listed.size())) size *= 2;
  set.assign(size, kFree);
  // True if id was not in the set (and now is).
  auto insert = [&](DocId id) {
    size_t i = Murmur3Fmix64(id) & (size - 1);
    for (; set[i] != kFree; i = (i + 1) & (size - 1)) {
      if (set[i] == id) return false;
    }
    set[i] = id;
    return true;
  };
  for (const auto& c : listed) insert(c.first.id);
  size_t kept = 0;
  for (DocId id : *ids) {
    if (insert(id)) (*ids)[kept++] = id;
  }
  ids->resize(kept);
}
}  // namespace

// Kept documents sharing one of the document's first `anchors` live anchors
// (a stop key is skipped, not counted) and not already found by fingerprint:
// the short near-duplicates simhash misses. `checked` stays ordered by
// distance, then id.
Status NearDupSet::AddAnchorCandidates(const DocSignature& doc, std::vector<SketchedMatch>* checked) const {
  thread_local std::vector<DocId> ids;
  ids.clear();
  t_->anchors.CollectFirstLive(doc.sketch.anchors.data(), doc.sketch.anchors.size(), options_.recheck.anchors, &ids);
  if (ids.empty()) return Status::OK();
  KeepNewIds(*checked, &ids);
  const size_t found = checked->size();
  for (DocId id : ids) t_->sketch_slot.Prefetch(Murmur3Fmix64(id));
  // Each candidate is two dependent random reads (its slot, then its
  // record): one pass per level, so the misses of a level overlap.
  for (DocId id : ids) {
    const uint32_t* rec = nullptr;
    bool rejected = false;
    NEARDUP_RETURN_IF_ERROR(t_->Load(id, t_filter, &rec, &rejected));
    if (rec == nullptr) continue;
    // The header and the sketch values: up to 5 cache lines (reading the
    // record's length first would wait for the first of them).
    for (size_t w = 0; w < kRecHeader + kSketchSize; w += 16) __builtin_prefetch(rec + w);
    checked->emplace_back(Match{id, 0, 0}, rec);
  }
  for (size_t i = found; i < checked->size(); ++i) {
    const uint32_t* rec = (*checked)[i].second;
    const uint64_t fp = rec[kRecFpLo] | (uint64_t{rec[kRecFpHi]} << 32);
    (*checked)[i].first.fingerprint = fp;
    (*checked)[i].first.distance = HammingDistance(fp, doc.fingerprint);
  }
  if (checked->size() > found) {
    std::sort(checked->begin(), checked->end(), [](const auto& a, const auto& b) {
      return a.first.distance != b.first.distance ? a.first.distance < b.first.distance : a.first.id < b.first.id;
    });
  }
  return Status::OK();
}

// The pair rule on each candidate, nearest first; the best by RanksBefore
// (the ranking the cluster store shares). An exact answer already in *best
// stays the best: it is listed first and not again.
void NearDupSet::RankAccepted(const DocSignature& doc, const std::vector<SketchedMatch>& checked,
                              const std::vector<DocId>& exact_ids, std::optional<DuplicateMatch>* best,
                              std::vector<DuplicateMatch>* all) const {
  const bool recheck = options_.recheck.enabled;
  const size_t first_near = all ? all->size() : 0;
  std::optional<DuplicateMatch> best_near;
  for (const auto& [c, rec] : checked) {
    if (best->has_value() && (*best)->id == c.id) continue;
    DuplicateMatch m;
    if (!Accept(doc, c, rec, &m)) continue;
    m.exact = std::find(exact_ids.begin(), exact_ids.end(), c.id) != exact_ids.end();
    if (all) all->push_back(m);
    if (!best_near || RanksBefore(RankOf(m), RankOf(*best_near), recheck)) best_near = m;
    // Candidates come nearest first: without the re-check the first is best.
    if (!recheck && !all) break;
  }
  if (all) {
    std::sort(all->begin() + static_cast<std::ptrdiff_t>(first_near), all->end(),
              [&](const DuplicateMatch& a, const DuplicateMatch& b) { return RanksBefore(RankOf(a), RankOf(b), recheck); });
  }
  if (!best->has_value()) *best = best_near;
}


bool NearDupSet::KeepsSketch(const DocSignature& doc) const {
  return neardup::KeepsSketch(options_.recheck, doc);
}

Status NearDupSet::Insert(DocId id, const DocSignature& doc, std::vector<uint32_t>* indexed,
                          const std::vector<uint32_t>* live) {
  if (indexed != nullptr) indexed->clear();
  if (id > kMaxDocId) return Status::InvalidArgument("ids must be below 2^63 - 1, got " + std::to_string(id));
  if (!doc.has_features) {
    // Featureless documents are not in the index; keep ids unique anyway.
    thread_local std::vector<DocId> same;
    ExactMatches(doc.content_hash, &same);
    if (std::find(same.begin(), same.end(), id) != same.end()) {
      return Status::AlreadyExists("id " + std::to_string(id) + " already kept");
    }
  }
  // The record first: in a file it is the step that can fail (a full disk),
  // and then nothing of the document may stay.
  std::array<uint32_t, kMaxRecordWords> rec;
  const bool sketch = KeepsSketch(doc);
  const size_t words = sketch ? MakeRecord(id, doc, rec.data(), IndexedAnchorCount(), live) : 0;
  uint64_t offset = 0;
  if (sketch) NEARDUP_RETURN_IF_ERROR(t_->arena->Append(rec.data(), words, &offset));
  if (doc.has_features) {
    if (Status st = index_->Add(doc.fingerprint, id); !st.ok()) {
      if (sketch) t_->arena->Release(offset, words);
      return st;
    }
  }
  t_->by_hash.Insert(Murmur3Fmix64(doc.content_hash), KeyValueSlot{doc.content_hash, id});
  ++size_;
  if (!sketch) return Status::OK();
  const uint32_t cap = static_cast<uint32_t>(options_.recheck.anchor_max_postings);
  const uint32_t* anchors = rec.data() + kRecHeader + rec[kRecCount];
  for (uint32_t i = 0; i < rec[kRecAnchors]; ++i) t_->anchors.Add(anchors[i], id, cap);
  if (indexed != nullptr) indexed->assign(anchors, anchors + rec[kRecAnchors]);
  t_->sketch_slot.Insert(Murmur3Fmix64(id),
                         SketchSlot{id, Tables::Place(offset, words, doc.sketch.num_shingles), SlotCounts(doc)});
  return Status::OK();
}

// Fills rec (kMaxRecordWords) with the document's record; returns its words.
// Anchors are indexed whatever the current policy says, so that a later
// SetPolicy() can turn them on: the first `anchors` non-stop ones (at least
// the default number). Anchors are distinct, so adding one cannot make a
// later one a stop key: choosing them all before adding any is the same.
size_t NearDupSet::MakeRecord(DocId id, const DocSignature& doc, uint32_t* rec, size_t anchors,
                              const std::vector<uint32_t>* live) const {
  const size_t n = std::min(doc.sketch.mins.size(), kSketchSize);
  rec[kRecIdLo] = static_cast<uint32_t>(id);
  rec[kRecIdHi] = static_cast<uint32_t>(id >> 32);
  rec[kRecChars] = doc.num_chars;
  rec[kRecShingles] = doc.sketch.num_shingles;
  rec[kRecFpLo] = static_cast<uint32_t>(doc.fingerprint);
  rec[kRecFpHi] = static_cast<uint32_t>(doc.fingerprint >> 32);
  rec[kRecCount] = static_cast<uint32_t>(n);
  std::copy(doc.sketch.mins.begin(), doc.sketch.mins.begin() + static_cast<std::ptrdiff_t>(n), rec + kRecHeader);
  uint32_t added = 0;
  if (live != nullptr) {
    added = static_cast<uint32_t>(std::min(anchors, live->size()));
    std::copy(live->begin(), live->begin() + added, rec + kRecHeader + n);
  } else {
    added = FirstLiveAnchors(doc, anchors, rec + kRecHeader + n);
  }
  rec[kRecAnchors] = added;
  return kRecHeader + n + added;
}

size_t NearDupSet::IndexedAnchorCount() const {
  if (options_.policy_fixed && !options_.recheck.enabled) return 0;
  return static_cast<size_t>(std::max(options_.recheck.anchors, RecheckOptions{}.anchors));
}

uint32_t NearDupSet::FirstLiveAnchors(const DocSignature& doc, size_t m, uint32_t* out) const {
  uint32_t n = 0;
  for (uint32_t a : doc.sketch.anchors) {
    if (n == m) break;
    if (!t_->anchors.IsStop(a)) out[n++] = a;
  }
  return n;
}

size_t NearDupSet::ProbedAnchorCount(const DocSignature& doc) const {
  const bool probes = options_.recheck.enabled && options_.recheck.anchors > 0 && doc.has_sketch();
  return probes ? static_cast<size_t>(options_.recheck.anchors) : 0;
}

void NearDupSet::ProbedAnchors(const DocSignature& doc, std::vector<uint32_t>* out) const {
  out->resize(kAnchorCount);
  out->resize(FirstLiveAnchors(doc, ProbedAnchorCount(doc), out->data()));
}

bool NearDupSet::IsStopKey(uint32_t anchor) const { return t_->anchors.IsStop(anchor); }

uint64_t NearDupSet::stop_keys_made() const { return t_->anchors.stops_made(); }

// The exact step's answer (the smallest passing id with equal text) comes
// first, and older ids are smaller; otherwise both are the best of their
// set by RanksBefore, a total order, so the better of the two is the best.
std::optional<DuplicateMatch> NearDupSet::Combine(const DocSignature& doc, const std::optional<DuplicateMatch>& older,
                                                  const std::optional<DuplicateMatch>& newer) const {
  if (!older || !newer) return older ? older : newer;
  if (options_.exact_fast_path || !doc.has_features) {
    if (older->exact) return older;
    if (newer->exact) return newer;
  }
  return RanksBefore(RankOf(*newer), RankOf(*older), options_.recheck.enabled) ? newer : older;
}

bool NearDupSet::Remove(DocId id, const DocSignature& doc) {
  KeyValueSlot* entry = t_->by_hash.Find(Murmur3Fmix64(doc.content_hash), [&](const KeyValueSlot& s) {
    return s.key == doc.content_hash && s.value == id;
  });
  if (entry == nullptr) return false;
  t_->by_hash.Erase(entry);
  if (doc.has_features) index_->Remove(id);
  RemoveRecord(id);
  --size_;
  return true;
}

// A record that cannot be read back (a file's I/O error) leaves its anchor
// postings behind: harmless, as a posting without a record is skipped.
void NearDupSet::RemoveRecord(DocId id) {
  SketchSlot* slot = t_->SketchSlot(id);
  if (slot == nullptr) return;
  const uint64_t offset = Tables::OffsetOf(slot->value);
  const size_t words = Tables::WordsOf(slot->value);
  std::array<uint32_t, kMaxRecordWords> buf;
  const uint32_t* rec = nullptr;
  if (t_->arena->Read(offset, words, buf.data(), &rec).ok()) {
    const uint32_t* anchors = rec + kRecHeader + rec[kRecCount];
    for (uint32_t i = 0; i < rec[kRecAnchors]; ++i) t_->anchors.Remove(anchors[i], id);
  }
  const int64_t evacuate = t_->arena->Release(offset, words);
  t_->sketch_slot.Erase(slot);
  if (evacuate < 0) return;
  // Move the chunk's live records (those their id's slot still points at)
  // to the tail. A failed move (a full disk) keeps the chunk: nothing lost.
  Tables& t = *t_;
  (void)t.arena->Evacuate(static_cast<uint64_t>(evacuate), RecordSize, [&t](uint64_t old, const uint32_t* r) -> int64_t {
    const DocId rid = r[kRecIdLo] | (uint64_t{r[kRecIdHi]} << 32);
    SketchSlot* s = t.SketchSlot(rid);
    if (s == nullptr || Tables::OffsetOf(s->value) != old) return 0;
    const size_t n = RecordSize(r);
    uint64_t moved = 0;
    if (!t.arena->Append(r, n, &moved).ok()) return -1;
    s->value = Tables::Place(moved, n, r[kRecShingles]);
    return static_cast<int64_t>(n);
  });
}

Status NearDupSet::set_k(int k) {
  if (k < 0 || k > kMaxSupportedK || k > index_->max_k()) {
    return Status::InvalidArgument("k must be in [0, " + std::to_string(index_->max_k()) + "]");
  }
  options_.k = k;
  return Status::OK();
}

Status NearDupSet::SetPolicy(const RecheckOptions& recheck) {
  if (options_.policy_fixed) return Status::FailedPrecondition("the re-check policy of this set is fixed");
  NEARDUP_RETURN_IF_ERROR(ValidateSettings(RecheckSettingTable(), recheck));
  if (recheck.sketch_max_chars != options_.recheck.sketch_max_chars) {
    return Status::FailedPrecondition("sketch_max_chars is fixed when the set is created");
  }
  if (recheck.short_k > index_->max_k()) {
    return Status::InvalidArgument("short_k must be at most " + std::to_string(index_->max_k()));
  }
  options_.recheck = recheck;
  return Status::OK();
}

size_t NearDupSet::MemoryBytes() const { return Memory().total(); }

NearDupSet::MemoryUse NearDupSet::Memory() const {
  MemoryUse m;
  m.index = index_->MemoryBytes();
  m.exact = t_->by_hash.MemoryBytes();
  m.sketch_slots = t_->sketch_slot.MemoryBytes();
  m.anchors = t_->anchors.MemoryBytes();
  m.records = t_->arena->MemoryBytes();
  return m;
}

size_t NearDupSet::SketchFileBytes() const { return t_->arena->FileBytes();
}

}  // namespace neardup
