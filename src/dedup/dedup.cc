#include "neardup/dedup/dedup.h"

#include <algorithm>
#include <atomic>
#include <exception>
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
  NEARDUP_ASSIGN_OR_RETURN(std::unique_ptr<NearDupSet> set, NearDupSet::Create(set_options));
  return std::unique_ptr<Deduplicator>(new Deduplicator(options, std::move(fp), std::move(set)));
}

Deduplicator::Deduplicator(const DedupOptions& options, Fingerprinter fingerprinter, std::unique_ptr<NearDupSet> set)
    : options_(options), fingerprinter_(std::move(fingerprinter)), set_(std::move(set)) {
  options_.index.expected_k = options_.k;
}

DocSignature Deduplicator::Signature(std::string_view text) const {
  TextAnalysis analysis;
  fingerprinter_.Analyze(text, &analysis);
  return MakeSignature(analysis, text, options_.recheck.shingle_size);
}

void Deduplicator::Analyze(std::span<const std::string_view> texts, std::vector<DocSignature>* out, int threads) {
  out->resize(texts.size());
  std::atomic<uint64_t> invalid_utf8{0};
  // Analysis is the expensive, embarrassingly parallel half.
  ParallelFor(texts.size(), threads, [&](size_t begin, size_t end) {
    TextAnalysis analysis;  // reused across the chunk
    uint64_t invalid = 0;
    for (size_t i = begin; i < end; ++i) {
      fingerprinter_.Analyze(texts[i], &analysis);
      (*out)[i] = MakeSignature(analysis, texts[i], options_.recheck.shingle_size);
      invalid += analysis.invalid_utf8;
    }
    invalid_utf8.fetch_add(invalid, std::memory_order_relaxed);
  });
  stats_.invalid_utf8 += invalid_utf8.load();
}

Status Deduplicator::ProcessBatch(std::span<const std::string_view> texts,
                                  std::vector<DedupDecision>* out, int threads) {
  out->assign(texts.size(), DedupDecision{});
  Analyze(texts, &sigs_, threads);
  // Decisions depend on every earlier one: strictly sequential.
  for (size_t i = 0; i < texts.size(); ++i) {
    auto decision = ProcessSignature(sigs_[i]);
    if (!decision.ok()) return decision.status();
    (*out)[i] = decision.value();
  }
  return Status::OK();
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

Result<DedupDecision> Deduplicator::ProcessSignature(const DocSignature& doc) {
  std::optional<DuplicateMatch> match;
  NEARDUP_RETURN_IF_ERROR(set_->FindDuplicate(doc, &match));
  const uint64_t sequence = next_sequence_;
  DedupDecision decision;
  decision.has_features = doc.has_features;
  if (match) {
    decision.duplicate = true;
    decision.duplicate_of = match->id;
    decision.distance = match->distance;
    decision.exact = match->exact;
    decision.similarity = match->similarity;
    decision.similarity_exact = SimilarityIsExact(*match);
    ++(decision.exact ? stats_.exact_duplicates : stats_.near_duplicates);
  } else {
    // A duplicate is never kept, so every duplicate points at a kept document.
    NEARDUP_RETURN_IF_ERROR(set_->Insert(sequence, doc));
    ++stats_.kept;
  }
  if (!doc.has_features) ++stats_.without_features;
  ++stats_.documents;
  next_sequence_ = sequence + 1;
  return decision;
}

}  // namespace neardup
