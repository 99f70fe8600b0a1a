#include "neardup/dedup.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <string>
#include <thread>
#include <utility>

namespace neardup {

void ParallelFor(size_t n, int threads, const std::function<void(size_t begin, size_t end)>& fn) {
  if (n == 0) return;
  const size_t workers = std::min<size_t>(threads <= 1 ? 1 : static_cast<size_t>(threads), n);
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  // Small chunks balance uneven texts; large enough to keep the atomic cold.
  const size_t chunk = std::clamp<size_t>(n / (workers * 8), 1, 256);
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto work = [&] {
    try {
      while (!failed.load(std::memory_order_relaxed)) {
        const size_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
        if (begin >= n) break;
        fn(begin, std::min(n, begin + chunk));
      }
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (size_t i = 1; i < workers; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

Result<std::unique_ptr<Deduplicator>> Deduplicator::Create(const DedupOptions& options) {
  if (options.k < 0 || options.k > kMaxSupportedK) {
    return Status::InvalidArgument("k must be in [0, " + std::to_string(kMaxSupportedK) +
                                   "], got " + std::to_string(options.k));
  }
  auto fp = Fingerprinter::Create(options.fingerprint);
  if (!fp.ok()) return fp.status();
  MultiIndexOptions index_options = options.index;
  index_options.expected_k = options.k;
  auto index = NewMultiIndex(index_options);
  if (!index.ok()) return index.status();
  if (index.value()->max_k() < options.k) {
    return Status::InvalidArgument("index " + index.value()->Describe() + " cannot search k = " +
                                   std::to_string(options.k));
  }
  return std::unique_ptr<Deduplicator>(
      new Deduplicator(options, std::move(fp).value(), std::move(index).value()));
}

Deduplicator::Deduplicator(const DedupOptions& options, Fingerprinter fingerprinter,
                           std::unique_ptr<HammingIndex> index)
    : options_(options), fingerprinter_(std::move(fingerprinter)), index_(std::move(index)) {
  options_.index.expected_k = options_.k;
}

DocSignature Deduplicator::Signature(std::string_view text) const {
  TextAnalysis analysis;
  fingerprinter_.Analyze(text, &analysis);
  return DocSignature{analysis.content_hash, analysis.fingerprint, analysis.has_features()};
}

Status Deduplicator::ProcessBatch(std::span<const std::string_view> texts,
                                  std::vector<DedupDecision>* out, int threads) {
  out->assign(texts.size(), DedupDecision{});
  sigs_.resize(texts.size());
  std::atomic<uint64_t> invalid_utf8{0};
  // Analysis is the expensive, embarrassingly parallel half.
  ParallelFor(texts.size(), threads, [&](size_t begin, size_t end) {
    TextAnalysis analysis;  // reused across the chunk
    uint64_t invalid = 0;
    for (size_t i = begin; i < end; ++i) {
      fingerprinter_.Analyze(texts[i], &analysis);
      sigs_[i] = DocSignature{analysis.content_hash, analysis.fingerprint, analysis.has_features()};
      invalid += analysis.invalid_utf8;
    }
    invalid_utf8.fetch_add(invalid, std::memory_order_relaxed);
  });
  stats_.invalid_utf8 += invalid_utf8.load();
  // Decisions depend on every earlier one: strictly sequential.
  for (size_t i = 0; i < texts.size(); ++i) {
    auto decision = ProcessSignature(sigs_[i]);
    if (!decision.ok()) return decision.status();
    (*out)[i] = decision.value();
  }
  return Status::OK();
}

Result<DedupDecision> Deduplicator::ProcessSignature(const DocSignature& doc) {
  NEARDUP_RETURN_IF_ERROR(FindCandidates(doc, &candidates_));
  const DedupDecision decision = Decide(doc, candidates_);
  const uint64_t sequence = next_sequence_;
  NEARDUP_RETURN_IF_ERROR(Commit(doc, sequence, decision));
  return decision;
}

Status Deduplicator::FindCandidates(const DocSignature& doc, std::vector<Match>* candidates) const {
  candidates->clear();
  const auto exact = kept_by_hash_.find(doc.content_hash);
  if (exact != kept_by_hash_.end() && (options_.exact_fast_path || !doc.has_features)) {
    // Equal normalized text => equal fingerprint: distance 0.
    candidates->push_back(Match{exact->second, doc.fingerprint, 0});
    return Status::OK();
  }
  if (!doc.has_features) return Status::OK();
  return index_->Search(doc.fingerprint, options_.k, candidates);
}

DedupDecision Deduplicator::Decide(const DocSignature& doc, std::span<const Match> candidates) const {
  DedupDecision decision;
  decision.has_features = doc.has_features;
  if (candidates.empty()) return decision;
  // Every candidate is acceptable today; a re-check stage would loop here.
  const Match& best = candidates.front();
  decision.duplicate = true;
  decision.duplicate_of = best.id;
  decision.distance = best.distance;
  const auto exact = kept_by_hash_.find(doc.content_hash);
  decision.exact = exact != kept_by_hash_.end() && exact->second == best.id;
  return decision;
}

Status Deduplicator::Commit(const DocSignature& doc, uint64_t sequence, const DedupDecision& decision) {
  if (!decision.duplicate) {
    if (doc.has_features) NEARDUP_RETURN_IF_ERROR(index_->Add(doc.fingerprint, sequence));
    kept_by_hash_.emplace(doc.content_hash, sequence);  // keeps the first on a (2^-64) collision
    ++stats_.kept;
  } else if (decision.exact) {
    ++stats_.exact_duplicates;
  } else {
    ++stats_.near_duplicates;
  }
  if (!doc.has_features) ++stats_.without_features;
  ++stats_.documents;
  next_sequence_ = sequence + 1;
  return Status::OK();
}

}  // namespace neardup
