// HammingIndex: exact Hamming range search over 64-bit fingerprints.
//
// The one interface every index backend implements (faiss-style): the fast
// pigeonhole index (multi_index.h), the brute-force oracle
// (brute_force_index.h), and later store-backed indexes. Tests compare
// backends through this interface.
//
// Contract shared by every implementation:
//  * An entry is a (fingerprint, DocId) pair; DocIds are unique within an
//    index. Equal fingerprints under different ids are distinct entries and
//    all match.
//  * Search(q, k) returns every entry with popcount(fp ^ q) <= k (inclusive),
//    each exactly once, ordered by (distance, id) ascending.
//  * k must be within [0, max_k()]; otherwise kInvalidArgument.
//
// Thread-safety: const methods may run concurrently with each other; any
// mutation (Add, AddBatch, Remove, Clear) requires exclusive access.
#ifndef NEARDUP_HAMMING_INDEX_H_
#define NEARDUP_HAMMING_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "neardup/util/status.h"

namespace neardup {

using DocId = uint64_t;

// Largest radius any built-in index supports.
inline constexpr int kMaxSupportedK = 8;

struct Entry {
  uint64_t fingerprint = 0;
  DocId id = 0;
};

struct Match {
  DocId id = 0;
  uint64_t fingerprint = 0;
  int distance = 0;
  friend bool operator==(const Match&, const Match&) = default;
};

class HammingIndex {
 public:
  virtual ~HammingIndex() = default;

  // Adds one entry. kAlreadyExists if `id` is present (the index is unchanged).
  virtual Status Add(uint64_t fingerprint, DocId id) = 0;

  // Adds many entries; faster than repeated Add for large batches. All-or-
  // nothing: on a duplicate id (within the batch or against the index) returns
  // kAlreadyExists and leaves the index unchanged.
  virtual Status AddBatch(std::span<const Entry> entries) = 0;

  // Removes the entry with `id`. Returns false if there was none.
  virtual bool Remove(DocId id) = 0;

  virtual void Clear() = 0;

  // Appends nothing and returns kInvalidArgument if k is out of range;
  // otherwise replaces *out with all matches (see the contract above).
  virtual Status Search(uint64_t query, int k, std::vector<Match>* out) const = 0;

  // Early exit: true as soon as some entry is within k; *first (optional)
  // receives that entry (not necessarily the nearest). False on bad k.
  virtual bool AnyWithin(uint64_t query, int k, Match* first = nullptr) const = 0;

  // Search for each query; (*out)[i] holds the matches of queries[i].
  // `threads` <= 1 runs on the calling thread.
  virtual Status SearchBatch(std::span<const uint64_t> queries, int k,
                             std::vector<std::vector<Match>>* out, int threads = 1) const;

  // Fingerprint stored under `id`, or kNotFound.
  virtual Result<uint64_t> Get(DocId id) const = 0;

  // Calls fn(entry) for every entry, in unspecified order.
  virtual void ForEach(const std::function<void(const Entry&)>& fn) const = 0;

  virtual size_t size() const = 0;
  virtual int max_k() const = 0;
  // Heap bytes held by the index (fingerprints, ids, tables), excluding the
  // object itself. Approximate but includes allocation slack.
  virtual size_t MemoryBytes() const = 0;
  // Short description, e.g. "multi-index(tables=4,max_k=8)".
  virtual std::string Describe() const = 0;
};

}  // namespace neardup

#endif  // NEARDUP_HAMMING_INDEX_H_
