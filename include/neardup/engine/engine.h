// Engine: the online deduplication service's core, independent of HTTP.
//
// An Engine holds namespaces (topics), each with its own settings and its own
// set of stored documents; documents of different namespaces never match.
// The HTTP layer (src/http_server.*) only translates requests into these
// calls and Status codes into HTTP statuses. Backends: the local engine
// (in-memory index + DocumentStore, local_engine.h); a Redis Cluster engine
// implements the same interface.
//
// Semantics every implementation guarantees:
//  * Check(..., kCheckAndInsert) is atomic per namespace: when near-duplicates
//    arrive concurrently exactly one is stored and every other answer names a
//    stored document.
//  * An answer that says "stored" (or that names a stored document) is given
//    only after that document is durable.
//  * Re-sending an id that is stored is idempotent: nothing changes and the
//    answer says replay = true, stored = true.
//  * A document older than its namespace's retention never matches.
//
// Errors: kInvalidArgument (bad name, id, text or settings), kNotFound
// (unknown namespace or document), kFailedPrecondition (a settings change
// that would mix fingerprint schemes, or a new namespace past the engine's
// limit, LocalEngineOptions::max_namespaces), kUnavailable (shutting down or the
// store is unreachable), kIOError.
//
// Thread-safety: all methods may be called concurrently.
#ifndef NEARDUP_ENGINE_H_
#define NEARDUP_ENGINE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/dedup/near_dup_set.h"
#include "neardup/engine/settings.h"
#include "neardup/util/status.h"

namespace neardup {

// Namespace names: 1..64 characters of [A-Za-z0-9_.-], not dots only ("." and
// ".." are path segments).
Status ValidateNamespaceName(std::string_view name);
// Document ids: 1..512 bytes of valid UTF-8.
Status ValidateDocumentId(std::string_view id);

struct DocumentInput {
  std::string id;
  std::string text;
  std::optional<int64_t> timestamp_ms;  // event time; default: arrival time
};

enum class CheckMode {
  kCheckAndInsert,  // store it unless it duplicates a stored document
  kQueryOnly,       // answer, never store
  kInsertAlways,    // store it even if it duplicates (still report matches)
};

struct MatchedDocument {
  std::string id;
  int distance = 0;        // Hamming distance of the fingerprints
  double similarity = 0;   // documented in docs/http-api.md
  bool similarity_exact = false;  // from whole n-gram sets (else estimated from sketches)
  bool exact = false;      // same normalized text
  int64_t timestamp_ms = 0;
};

struct CheckOutcome {
  bool duplicate = false;                // some stored document matches
  std::vector<MatchedDocument> matches;  // best first, at most max_matches
  bool stored = false;                   // the document is stored (now or by an earlier call)
  bool replay = false;                   // its id was already stored: nothing changed
  uint64_t fingerprint = 0;
  bool has_features = false;
};

struct DocumentInfo {
  std::string id;
  uint64_t fingerprint = 0;
  bool has_features = false;
  int64_t timestamp_ms = 0;
};

struct NamespaceStats {
  std::string name;
  NamespaceSettings settings;
  uint64_t documents = 0;      // stored, not expired
  uint64_t memory_bytes = 0;   // index and per-document state
  uint64_t checks = 0;         // Check calls answered
  uint64_t duplicates = 0;     // answers with duplicate = true
  uint64_t inserted = 0;       // documents stored
  uint64_t expired = 0;        // documents removed by retention
  uint64_t deleted = 0;        // documents removed by DeleteDocument
};

struct EngineMetrics {
  uint64_t namespaces = 0;
  uint64_t documents = 0;
  uint64_t memory_bytes = 0;
  uint64_t disk_bytes = 0;
  uint64_t sketch_file_bytes = 0;   // re-check sketches kept in files, not memory
  uint64_t store_commits = 0;       // durable write batches (group commits)
  uint64_t store_commit_docs = 0;   // documents written by them
};

class Engine {
 public:
  virtual ~Engine() = default;

  // Creates the namespace, or updates its settings (*created = false).
  // Changing tokenizer/cjk_ngram of a non-empty namespace is
  // kFailedPrecondition (it would mix fingerprint schemes); k, retention and
  // max_matches may change at any time.
  virtual Status PutNamespace(const std::string& name, const NamespaceSettings& settings, bool* created) = 0;
  // Merges `patch` (a JSON object with any subset of the settings, read as
  // NamespaceSettings::FromJson does) over the namespace's current settings,
  // or over `defaults` when it does not exist (then creates it), and applies
  // the result as PutNamespace would. Read, merge and apply are one atomic
  // step: concurrent updates of different fields never undo each other.
  virtual Status UpdateNamespace(const std::string& name, std::string_view patch,
                                 const NamespaceSettings& defaults, bool* created) = 0;
  virtual Result<NamespaceStats> GetNamespace(const std::string& name) = 0;
  // Deletes the namespace and every document in it.
  virtual Status DeleteNamespace(const std::string& name) = 0;
  virtual std::vector<std::string> ListNamespaces() = 0;

  // Unknown namespaces are created with the default settings when the engine
  // was opened with auto_create (the default), else kNotFound.
  virtual Result<CheckOutcome> Check(const std::string& ns, const DocumentInput& doc, CheckMode mode) = 0;
  // Answers in order; each document is decided as if sent alone, in order
  // (a later document may be a duplicate of an earlier one of the same batch).
  virtual Status CheckBatch(const std::string& ns, std::span<const DocumentInput> docs, CheckMode mode,
                            std::vector<Result<CheckOutcome>>* out) = 0;

  // Asynchronous CheckBatch: done(status, answers) is called exactly once
  // with what CheckBatch would have returned, on this thread before the call
  // returns or later on an engine thread (so it must be quick and must not
  // call back into the engine's blocking methods). `docs` is read only
  // before the call returns. The default runs CheckBatch and then done.
  using CheckDone = std::function<void(Status, std::vector<Result<CheckOutcome>>)>;
  virtual void CheckBatchAsync(const std::string& ns, std::span<const DocumentInput> docs, CheckMode mode,
                               CheckDone done);
  // True when CheckBatchAsync never waits for I/O or other requests on the
  // calling thread (it decides in memory and completes once durable): an
  // event-driven server may then call it on its event threads. False (the
  // default) means "may block": such calls belong on a worker thread.
  virtual bool CheckBatchAsyncNeverBlocks() const { return false; }

  virtual Result<DocumentInfo> GetDocument(const std::string& ns, const std::string& id) = 0;
  virtual Status DeleteDocument(const std::string& ns, const std::string& id) = 0;

  virtual EngineMetrics Metrics() = 0;

  // Stops accepting calls (kUnavailable), waits for calls in flight, flushes
  // the store. Idempotent.
  virtual Status Shutdown() = 0;
};

}  // namespace neardup

#endif  // NEARDUP_ENGINE_H_
