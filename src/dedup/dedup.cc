#include "neardup/dedup/dedup.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace neardup {

Result<std::unique_ptr<Deduplicator>> Deduplicator::Create(const DedupOptions& options) {
  NEARDUP_ASSIGN_OR_RETURN(Fingerprinter fp, Fingerprinter::Create(options.fingerprint));
  NearDupOptions set_options;
  set_options.k = options.k;
  set_options.index = options.index;
  set_options.exact_fast_path = options.exact_fast_path;
  set_options.recheck = options.recheck;
  set_options.sketch_dir = options.sketch_dir;
  set_options.policy_fixed = true;  // a run's options hold for the whole run
  NEARDUP_ASSIGN_OR_RETURN(std::unique_ptr<NearDupSet> set, NearDupSet::Create(set_options));
  return std::unique_ptr<Deduplicator>(new Deduplicator(options, std::move(fp), std::move(set)));
}

Deduplicator::Deduplicator(const DedupOptions& options, Fingerprinter fingerprinter, std::unique_ptr<NearDupSet> set)
    : options_(options), fingerprinter_(std::move(fingerprinter)), set_(std::move(set)) {
  options_.index.expected_k = options_.k;
}

DocSignature Deduplicator::Signature(std::string_view text) const {
  TextAnalysis analysis;
  fingerprinter_.Analyze(text, &analysis, /*with_features=*/false);
  return MakeSignature(analysis, text, options_.recheck.shingle_size, Sketches());
}

SketchMode Deduplicator::Sketches() const {
  const bool read = options_.recheck.enabled || options_.sketch_without_recheck;
  return read ? SketchMode::kMake : SketchMode::kNone;
}

void Deduplicator::Analyze(std::span<const std::string_view> texts, std::vector<DocSignature>* out, int threads) {
  CountAnalyzed(Sign(texts, out, threads));
}

uint64_t Deduplicator::Sign(std::span<const std::string_view> texts, std::vector<DocSignature>* out,
                            int threads) const {
  out->resize(texts.size());
  std::atomic<uint64_t> invalid_utf8{0};
  // Analysis is the expensive, embarrassingly parallel half.
  const SketchMode sketches = Sketches();
  ParallelFor(texts.size(), threads, [&](size_t begin, size_t end) {
    TextAnalysis analysis;  // reused across the chunk
    uint64_t invalid = 0;
    for (size_t i = begin; i < end; ++i) {
      fingerprinter_.Analyze(texts[i], &analysis, /*with_features=*/false);
      (*out)[i] = MakeSignature(analysis, texts[i], options_.recheck.shingle_size, sketches);
      invalid += analysis.invalid_utf8;
    }
    invalid_utf8.fetch_add(invalid, std::memory_order_relaxed);
  });
  return invalid_utf8.load();
}

Status Deduplicator::ProcessBatch(std::span<const std::string_view> texts,
                                  std::vector<DedupDecision>* out, int threads) {
  Analyze(texts, &sigs_, threads);
  return DecideBatch(sigs_, out, threads);
}

Status Deduplicator::DecideBatch(std::span<const DocSignature> sigs, std::vector<DedupDecision>* out, int threads,
                                 std::span<const std::optional<DuplicateMatch>> priors) {
  if (!priors.empty() && priors.size() != sigs.size()) {
    return Status::InvalidArgument("DecideBatch: " + std::to_string(priors.size()) + " priors for " +
                                   std::to_string(sigs.size()) + " documents");
  }
  out->assign(sigs.size(), DedupDecision{});
  if (threads > 1 && sigs.size() > 1) return DecideOnThreads(sigs, out, threads, priors);
  static const std::optional<DuplicateMatch> kNone;
  for (size_t i = 0; i < sigs.size(); ++i) {
    NEARDUP_ASSIGN_OR_RETURN((*out)[i], Decide(sigs[i], priors.empty() ? kNone : priors[i]));
  }
  return Status::OK();
}

Status Deduplicator::ProbeBatch(std::span<const DocSignature> sigs,
                                std::vector<std::optional<DuplicateMatch>>* matches, int threads) const {
  if (matches->size() != sigs.size()) return Status::InvalidArgument("ProbeBatch: one match slot per document");
  std::mutex mu;
  Status failed;
  ParallelFor(sigs.size(), threads, [&](size_t from, size_t to) {
    std::optional<DuplicateMatch> mine;
    for (size_t i = from; i < to; ++i) {
      if (Status st = set_->FindDuplicate(sigs[i], &mine); !st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        failed = st;
        return;
      }
      (*matches)[i] = set_->Combine(sigs[i], (*matches)[i], mine);
    }
  });
  return failed;
}

// A decision is a search of the documents kept before the document. On
// several threads a batch is decided in slices: first, on all threads, each
// document of the slice searches the documents kept before the slice and
// finds its candidates among the slice's earlier documents
// (NearDupSet::SliceCandidates); then, in order, it picks the best of them
// that were kept, and NearDupSet::Combine gives the sequential answer. A
// document one of whose probed anchors became a stop key meanwhile, or any
// after a kept one whose indexed anchors SliceCandidates did not cover, is
// searched whole instead (NearDupSet's contract). The slice bounds how stale
// the first search gets (more kept since it began, more new stop keys) and
// the pairs the second weighs (its fingerprint scan is quadratic in it).
// 128: 1M short documents on 2 threads took 8 % less time than with 512
// (and 256), 64 and 32 more (more waits for the slowest thread);
// docs/BENCHMARKS.md, "Two threads".
Status Deduplicator::DecideOnThreads(std::span<const DocSignature> sigs, std::vector<DedupDecision>* out,
                                     int threads, std::span<const std::optional<DuplicateMatch>> priors) {
  constexpr size_t kDecideSlice = 128;
  for (size_t begin = 0; begin < sigs.size(); begin += kDecideSlice) {
    const size_t end = std::min(sigs.size(), begin + kDecideSlice);
    NEARDUP_RETURN_IF_ERROR(SearchSlice(sigs, begin, end, threads));
    NEARDUP_RETURN_IF_ERROR(DecideInOrder(sigs, begin, end, out, priors));
  }
  return Status::OK();
}

// older_[i], probed_[i] and slice_ for sigs[begin, end), on all threads.
Status Deduplicator::SearchSlice(std::span<const DocSignature> sigs, size_t begin, size_t end, int threads) {
  const size_t n = end - begin;
  older_.assign(n, std::nullopt);
  probed_.resize(n);
  slice_.Reset(*set_, n, next_sequence_);
  std::mutex mu;
  Status failed;
  ParallelFor(n, threads, [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      if (Status st = set_->FindDuplicate(sigs[begin + i], &older_[i]); !st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        failed = st;
        return;
      }
      // After the search: it has brought the anchors' slots into the cache.
      slice_.Prepare(i, sigs[begin + i], &probed_[i]);
    }
  });
  NEARDUP_RETURN_IF_ERROR(failed);
  slice_.Index();
  ParallelFor(n, threads, [&](size_t from, size_t to) {
    for (size_t j = from; j < to; ++j) slice_.Find(j, probed_[j]);
  });
  return Status::OK();
}

Status Deduplicator::DecideInOrder(std::span<const DocSignature> sigs, size_t begin, size_t end,
                                   std::vector<DedupDecision>* out,
                                   std::span<const std::optional<DuplicateMatch>> priors) {
  new_stops_.clear();
  bool whole = false;  // SliceCandidates::Kept said its answers end here
  // The probed anchors were live when the slice began: one is a stop key
  // now iff a kept document of the slice made it one (Apply lists those).
  auto stopped = [&](uint32_t a) { return std::binary_search(new_stops_.begin(), new_stops_.end(), a); };
  for (size_t i = begin; i < end; ++i) {
    const DocSignature& doc = sigs[i];
    const auto& probed = probed_[i - begin];
    std::optional<DuplicateMatch> match;
    if (whole || (!new_stops_.empty() && std::any_of(probed.begin(), probed.end(), stopped))) {
      NEARDUP_RETURN_IF_ERROR(set_->FindDuplicate(doc, &match));
    } else {
      match = set_->Combine(doc, older_[i - begin], slice_.Best(i - begin, probed));
    }
    if (!priors.empty()) match = set_->Combine(doc, priors[i], match);
    const bool live = !match && slice_.LiveAnchors(i - begin, new_stops_, &live_);
    NEARDUP_ASSIGN_OR_RETURN((*out)[i], Apply(doc, match, true, live ? &live_ : nullptr));
    if (!(*out)[i].duplicate && !slice_.Kept(i - begin, anchors_)) whole = true;
  }
  return Status::OK();
}

void Deduplicator::NoteNewStops() {
  for (uint32_t a : anchors_) {
    if (!set_->IsStopKey(a)) continue;
    auto at = std::lower_bound(new_stops_.begin(), new_stops_.end(), a);
    if (at == new_stops_.end() || *at != a) new_stops_.insert(at, a);
  }
}

Status Deduplicator::AddKept(const DocSignature& doc) { return AddKeptAt(next_sequence_, doc); }

Status Deduplicator::AddKeptAt(uint64_t sequence, const DocSignature& doc) {
  if (sequence < next_sequence_) {
    return Status::InvalidArgument("kept document " + std::to_string(sequence) + " added after " +
                                   std::to_string(next_sequence_));
  }
  NEARDUP_RETURN_IF_ERROR(set_->Insert(sequence, doc));
  next_sequence_ = sequence + 1;
  return Status::OK();
}

size_t Deduplicator::MemoryBytes() const { return set_->MemoryBytes(); }

Result<DedupDecision> Deduplicator::ProcessSignature(const DocSignature& doc) { return Decide(doc, std::nullopt); }

Result<DedupDecision> Deduplicator::Decide(const DocSignature& doc, const std::optional<DuplicateMatch>& prior) {
  std::optional<DuplicateMatch> match;
  NEARDUP_RETURN_IF_ERROR(set_->FindDuplicate(doc, &match));
  return Apply(doc, set_->Combine(doc, prior, match), false);
}

Result<DedupDecision> Deduplicator::Apply(const DocSignature& doc, const std::optional<DuplicateMatch>& match,
                                          bool in_slice, const std::vector<uint32_t>* live) {
  const uint64_t sequence = next_sequence_;
  DedupDecision decision;
  decision.has_features = doc.has_features;
  if (match) {
    decision = DuplicateDecision(*match, doc.has_features);
    ++(decision.exact ? stats_.exact_duplicates : stats_.near_duplicates);
  } else {
    // A duplicate is never kept, so every duplicate points at a kept document.
    const uint64_t stops = set_->stop_keys_made();
    NEARDUP_RETURN_IF_ERROR(set_->Insert(sequence, doc, in_slice ? &anchors_ : nullptr, live));
    // Insert adds the document under anchors_ only, so any stop key it made
    // is among them (and their slots are in the cache).
    if (in_slice && set_->stop_keys_made() != stops) NoteNewStops();
    ++stats_.kept;
  }
  if (!doc.has_features) ++stats_.without_features;
  ++stats_.documents;
  next_sequence_ = sequence + 1;
  return decision;
}

}  // namespace neardup
