// DocumentStore: durable storage of namespaces and their documents.
//
// The service keeps its index in memory and this store on disk: every
// acknowledged write is in the store before the client hears about it, and a
// restart rebuilds the in-memory state by scanning it. Backends: RocksDB
// (rocks_store.h, the embedded default); PostgreSQL and others implement the
// same interface.
//
// Errors: kIOError for storage failures, kCorruption for undecodable records,
// kNotFound from Get, kInvalidArgument for names that break the key layout.
//
// Thread-safety: every method may be called concurrently from any thread.
#ifndef NEARDUP_STORE_H_
#define NEARDUP_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "neardup/dedup/near_dup_set.h"
#include "neardup/util/status.h"

namespace neardup {

struct StoredDocument {
  std::string id;             // the client's document id (1..512 bytes)
  uint64_t number = 0;        // engine-internal number, unique in its namespace, increasing
  DocSignature signature;     // content_hash, fingerprint, has_features
  int64_t timestamp_ms = 0;   // event time (client-given or arrival), ms since the Unix epoch
  // Opaque bytes the engine may keep with a document (e.g. what an exact
  // re-check of short texts needs). Stored and returned unchanged.
  std::string extra;
  friend bool operator==(const StoredDocument&, const StoredDocument&) = default;
};

// One mutation of an Apply() batch.
struct StoreWrite {
  enum class Op { kPut, kDelete };
  Op op = Op::kPut;
  std::string ns;
  StoredDocument doc;  // kDelete uses doc.id only
};

class DocumentStore {
 public:
  virtual ~DocumentStore() = default;

  // Namespace settings are an opaque string (the engine stores JSON).
  virtual Status PutNamespace(const std::string& ns, const std::string& settings) = 0;
  // Deletes the namespace and all its documents.
  virtual Status DeleteNamespace(const std::string& ns) = 0;
  virtual Status ListNamespaces(std::vector<std::pair<std::string, std::string>>* out) = 0;

  // Applies all writes atomically (all or none). When it returns OK the writes
  // are durable in the sense of the store's sync option (see the backend).
  virtual Status Apply(const std::vector<StoreWrite>& writes) = 0;

  virtual Status Get(const std::string& ns, const std::string& id, StoredDocument* out) = 0;

  // Calls fn for every document of `ns` (order unspecified). Stops and returns
  // fn's status if it is not OK.
  virtual Status Scan(const std::string& ns, const std::function<Status(StoredDocument&&)>& fn) = 0;

  // Lets the backend reclaim disk after many deletes in `ns` (best effort).
  virtual Status Compact(const std::string& ns) = 0;

  // Approximate bytes on disk for the whole store.
  virtual uint64_t ApproximateDiskBytes() = 0;

  virtual std::string Describe() const = 0;
};

}  // namespace neardup

#endif  // NEARDUP_STORE_H_
