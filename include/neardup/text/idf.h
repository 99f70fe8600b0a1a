// IdfTable: document frequencies of feature hashes, for tf-idf weighting of
// fingerprints (FingerprintOptions::idf).
//
//   idf(h) = ln((N + 1) / (df(h) + 1)) + 1
//
// where N is the number of documents the table was built from and df(h) the
// number of those documents containing the feature; features not in the
// table (never seen, or dropped by min_df) use df = 0, the rarest weight.
// The file format and exact arithmetic are specified in docs/fingerprint.md.
//
// Thread-safety: an IdfTable is immutable; share it freely between threads.
// A Builder is a plain value: use one per thread (or lock around it).
#ifndef NEARDUP_IDF_H_
#define NEARDUP_IDF_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "neardup/text/fingerprint.h"
#include "neardup/util/status.h"

namespace neardup {

class IdfTable {
 public:
  class Builder {
   public:
    // Counts each distinct feature hash of one document once.
    void AddDocument(const std::vector<Feature>& features);
    uint64_t num_documents() const { return num_documents_; }
    // Tokens with df < min_df are dropped (they get the default idf).
    std::shared_ptr<const IdfTable> Build(uint32_t min_df = 2) const;

   private:
    uint64_t num_documents_ = 0;
    std::unordered_map<uint64_t, uint64_t> df_;
    std::vector<uint64_t> scratch_;
  };

  // idf(h) = ln((N + 1) / (df(h) + 1)) + 1; tokens not in the table use
  // df = 0 (the rarest weight).
  double Idf(uint64_t token_hash) const;
  uint64_t num_documents() const { return num_documents_; }
  size_t size() const { return entries_.size(); }  // tokens stored
  // XXH3-64 over the serialized table (the file minus its checksum); part
  // of the fingerprint scheme id.
  uint64_t content_hash() const { return content_hash_; }
  // Versioned binary file with magic + checksum (docs/fingerprint.md).
  // Written to a temporary file and renamed into place.
  Status Save(const std::string& path) const;
  // kCorruption on a bad/truncated file, kIOError if unreadable.
  static Result<std::shared_ptr<const IdfTable>> Load(const std::string& path);

 private:
  IdfTable(uint64_t num_documents, std::vector<std::pair<uint64_t, uint64_t>> entries);
  std::string Serialize() const;  // file bytes without the trailing checksum

  uint64_t num_documents_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> entries_;  // (hash, df), hash ascending
  std::vector<double> idf_;                             // idf of entries_[i]
  double default_idf_ = 1.0;                            // idf at df = 0
  uint64_t content_hash_ = 0;
};

}  // namespace neardup

#endif  // NEARDUP_IDF_H_
