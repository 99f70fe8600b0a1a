// ExactStream: the ground truth of the stream decision, by definition.
//
// Documents arrive in order; a document is a near-duplicate iff some KEPT
// document has similarity >= threshold with it (text/shingles.h defines the
// similarity: Jaccard of character n-gram sets); otherwise it is kept. This
// class computes that outcome exactly: every kept document that can reach the
// threshold is found by prefix filtering (Xiao et al., WWW 2008) over a fixed
// hash order, and every candidate's similarity is computed from the full
// sets. BruteForceStream computes the same by comparing with every kept
// document; tests check that the two agree. Used by `neardup eval` as the
// truth a policy is scored against, never as the service's decision (it
// keeps every kept document's whole n-gram set in memory).
//
// Which kept document a duplicate names: the most similar one, then the
// earliest kept.
//
// Thread-safety: none (one caller at a time).
#ifndef NEARDUP_DEDUP_EXACT_STREAM_H_
#define NEARDUP_DEDUP_EXACT_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace neardup {

struct StreamDecision {
  bool duplicate = false;
  size_t duplicate_of = 0;  // index (in arrival order) of the kept document
  double similarity = 0;    // its similarity
};

class ExactStream {
 public:
  // threshold in (0, 1].
  explicit ExactStream(double threshold) : threshold_(threshold) {}
  // Decides the next document from its sorted distinct n-gram hashes
  // (ShingleHashes) and keeps it unless it is a duplicate.
  StreamDecision Add(std::vector<uint64_t> set);
  // Candidate pairs verified so far (cost accounting for the evaluation).
  uint64_t verified() const { return verified_; }

 private:
  size_t ProbePrefix(size_t size) const;

  double threshold_;
  size_t next_ = 0;  // arrival index of the next document
  struct Kept {
    size_t index;
    std::vector<uint64_t> set;
  };
  std::vector<Kept> kept_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> postings_;  // hash -> kept_ slots
  std::vector<uint32_t> seen_;                                    // per kept slot: last query that saw it
  uint64_t verified_ = 0;
};

class BruteForceStream {
 public:
  explicit BruteForceStream(double threshold) : threshold_(threshold) {}
  StreamDecision Add(std::vector<uint64_t> set);

 private:
  double threshold_;
  size_t next_ = 0;
  std::vector<std::pair<size_t, std::vector<uint64_t>>> kept_;
};

// Whether similarity `s` reaches `threshold`, the one comparison both
// streams (and the evaluation) use.
inline bool Reaches(double s, double threshold) { return s >= threshold; }

}  // namespace neardup

#endif  // NEARDUP_DEDUP_EXACT_STREAM_H_
