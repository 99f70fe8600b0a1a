// NearDupSet::SliceCandidates: FindDuplicate's candidate sources and pair
// rule applied among a slice's documents, as if each earlier one were kept,
// so that only the choice among the kept ones is left for the in-order half.

#include <algorithm>

#include "dedup/sketch_record.h"
#include "neardup/dedup/near_dup_set.h"
#include "neardup/text/fingerprint.h"
#include "util/hash.h"

namespace neardup {

using namespace sketch_record;

namespace {
constexpr uint32_t kNoEntry = ~uint32_t{0};
}

void NearDupSet::SliceCandidates::Chains::Reset(size_t expected) {
  size_t size = 16;
  while (size < 2 * expected) size *= 2;
  heads_.assign(size, kNoEntry);
  entries_.clear();
}

void NearDupSet::SliceCandidates::Chains::Add(uint64_t key, uint32_t i) {
  uint32_t& head = heads_[Murmur3Fmix64(key) & (heads_.size() - 1)];
  entries_.push_back(Entry{key, i, head});
  head = static_cast<uint32_t>(entries_.size() - 1);
}

template <typename Fn>
void NearDupSet::SliceCandidates::Chains::ForEach(uint64_t key, Fn&& fn) const {
  for (uint32_t e = heads_[Murmur3Fmix64(key) & (heads_.size() - 1)]; e != kNoEntry; e = entries_[e].next) {
    if (entries_[e].key == key) fn(entries_[e].i);
  }
}

void NearDupSet::SliceCandidates::Reset(const NearDupSet& set, size_t n, DocId first_id) {
  set_ = &set;
  first_id_ = first_id;
  record_words_ = kMaxRecordWords;
  docs_.assign(n, nullptr);
  records_.resize(n * record_words_);
  keeps_.assign(n, 0);
  counts_.assign(n, {});
  kept_.assign(n, 0);
  if (exact_.size() < n) exact_.resize(n), near_.resize(n), indexed_.resize(n);
}

size_t NearDupSet::SliceCandidates::RecordAnchors() const {
  return std::min(kAnchorCount, set_->IndexedAnchorCount() + kMarginAnchors);
}

void NearDupSet::SliceCandidates::Prepare(size_t i, const DocSignature& doc, std::vector<uint32_t>* probed) {
  docs_[i] = &doc;
  uint32_t* rec = records_.data() + i * record_words_;
  keeps_[i] = set_->KeepsSketch(doc);
  if (!keeps_[i]) {
    rec[kRecAnchors] = 0;
    set_->ProbedAnchors(doc, probed);
    return;
  }
  set_->MakeRecord(first_id_ + i, doc, rec, RecordAnchors());
  counts_[i] = SlotCounts(doc).words;
  // The record's anchors are the first live ones, at least as many as are
  // probed (IndexedAnchorCount >= recheck.anchors): no second lookup.
  const uint32_t* anchors = rec + kRecHeader + rec[kRecCount];
  probed->assign(anchors, anchors + std::min<size_t>(rec[kRecAnchors], set_->ProbedAnchorCount(doc)));
}

void NearDupSet::SliceCandidates::Index() {
  const size_t n = docs_.size();
  fingerprints_.resize(n);
  features_.resize(n);
  by_hash_.Reset(n);
  by_anchor_.Reset(n * RecordAnchors());
  for (uint32_t i = 0; i < n; ++i) {
    fingerprints_[i] = docs_[i]->fingerprint;
    features_[i] = docs_[i]->has_features;
    by_hash_.Add(docs_[i]->content_hash, i);
    if (!keeps_[i]) continue;
    const uint32_t* rec = Record(i);
    const uint32_t* anchors = rec + kRecHeader + rec[kRecCount];
    for (uint32_t a = 0; a < rec[kRecAnchors]; ++a) by_anchor_.Add(anchors[a], i);
  }
}

const uint32_t* NearDupSet::SliceCandidates::Load(size_t i, const RecordFilter& filter, bool* rejected) const {
  *rejected = false;
  if (!keeps_[i]) return nullptr;
  *rejected = SlotRejected(filter, SlotShingles(docs_[i]->sketch.num_shingles), internal::BucketCounts{counts_[i]});
  return *rejected ? nullptr : Record(i);
}

// FindDuplicate's exact step lists equal texts from the smallest id; all that
// pass are kept here, since which is the first kept one is not known yet.
void NearDupSet::SliceCandidates::FindExact(size_t j, const RecordFilter& filter) {
  const DocSignature& doc = *docs_[j];
  thread_local std::vector<uint32_t> equal;
  equal.clear();
  by_hash_.ForEach(doc.content_hash, [&](uint32_t i) {
    if (i < j) equal.push_back(i);
  });
  for (auto it = equal.rbegin(); it != equal.rend(); ++it) {
    bool rejected = false;
    const uint32_t* rec = doc.has_sketch() ? Load(*it, filter, &rejected) : nullptr;
    DuplicateMatch m;
    if (rejected || !set_->Accept(doc, Match{first_id_ + *it, doc.fingerprint, 0}, rec, &m)) continue;
    m.exact = true;
    exact_[j].push_back(Found{*it, false, m});
  }
}

// The earlier documents within the search radius and those sharing a probed
// anchor with any live anchor of theirs (indexed ones only: a document
// without a kept sketch has none).
void NearDupSet::SliceCandidates::NearCandidates(size_t j, const std::vector<uint32_t>& probed,
                                                 std::vector<uint32_t>* out) const {
  const DocSignature& doc = *docs_[j];
  out->clear();
  const int radius = set_->SearchRadius(doc);
  for (uint32_t i = 0; i < j; ++i) {
    if (HammingDistance(fingerprints_[i], doc.fingerprint) <= radius && features_[i]) out->push_back(2 * i);
  }
  const RecheckOptions& r = set_->options_.recheck;
  if (!r.enabled || r.anchors <= 0 || !doc.has_sketch()) return;
  const size_t found = out->size();
  for (uint32_t a : probed) {
    by_anchor_.ForEach(a, [&](uint32_t i) {
      if (i < j) out->push_back(2 * i + 1);
    });
  }
  if (out->size() == found) return;
  // One entry per document, the fingerprint's first.
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end(), [](uint32_t a, uint32_t b) { return a / 2 == b / 2; }), out->end());
}

void NearDupSet::SliceCandidates::Find(size_t j, const std::vector<uint32_t>& probed) {
  exact_[j].clear();
  near_[j].clear();
  const DocSignature& doc = *docs_[j];
  const RecordFilter filter = FilterFor(set_->options_.recheck, doc);
  if (set_->options_.exact_fast_path || !doc.has_features) FindExact(j, filter);
  if (!doc.has_features) return;
  thread_local std::vector<uint32_t> candidates;
  NearCandidates(j, probed, &candidates);
  for (uint32_t c : candidates) {
    const uint32_t i = c / 2;
    bool rejected = false;
    const uint32_t* rec = doc.has_sketch() ? Load(i, filter, &rejected) : nullptr;
    if (rejected) continue;
    const DocSignature& kept = *docs_[i];
    DuplicateMatch m;
    if (!set_->Accept(doc, Match{first_id_ + i, kept.fingerprint, HammingDistance(kept.fingerprint, doc.fingerprint)},
                      rec, &m)) {
      continue;
    }
    m.exact = kept.content_hash == doc.content_hash;
    near_[j].push_back(Found{i, (c & 1) != 0, m});
  }
}

// As FindDuplicate: the first kept exact answer; else the best accepted
// candidate by RanksBefore (without the re-check, the nearest, then the
// smallest id: the first FindDuplicate accepts in its candidates' order).
std::optional<DuplicateMatch> NearDupSet::SliceCandidates::Best(size_t j, const std::vector<uint32_t>& probed) const {
  for (const Found& f : exact_[j]) {
    if (kept_[f.i]) return f.match;
  }
  std::optional<DuplicateMatch> best;
  if (!docs_[j]->has_features) return best;
  const bool recheck = set_->options_.recheck.enabled;
  auto meets = [&](const std::vector<uint32_t>& indexed) {
    return std::any_of(indexed.begin(), indexed.end(),
                       [&](uint32_t a) { return std::find(probed.begin(), probed.end(), a) != probed.end(); });
  };
  for (const Found& f : near_[j]) {
    if (!kept_[f.i] || (f.by_anchor_only && !meets(indexed_[f.i]))) continue;
    if (!best || RanksBefore(RankOf(f.match), RankOf(*best), recheck)) best = f.match;
  }
  return best;
}

// Stop keys only grow, so the indexed anchors are a subsequence of those
// live at Prepare; they are covered unless they reach past the record's.
bool NearDupSet::SliceCandidates::Kept(size_t i, const std::vector<uint32_t>& indexed) {
  kept_[i] = 1;
  indexed_[i] = indexed;
  const uint32_t* rec = Record(i);
  const uint32_t* live = rec + kRecHeader + (keeps_[i] ? rec[kRecCount] : 0);
  return indexed.empty() || std::find(live, live + rec[kRecAnchors], indexed.back()) != live + rec[kRecAnchors];
}

bool NearDupSet::SliceCandidates::LiveAnchors(size_t i, const std::vector<uint32_t>& stopped,
                                              std::vector<uint32_t>* out) const {
  if (!keeps_[i]) return false;
  const uint32_t* rec = Record(i);
  const uint32_t* anchors = rec + kRecHeader + rec[kRecCount];
  out->clear();
  for (uint32_t a = 0; a < rec[kRecAnchors]; ++a) {
    if (!std::binary_search(stopped.begin(), stopped.end(), anchors[a])) out->push_back(anchors[a]);
  }
  // Known when the record holds all of the document's live anchors or
  // enough of them for Insert.
  return rec[kRecAnchors] < RecordAnchors() || out->size() >= set_->IndexedAnchorCount();
}

}  // namespace neardup
