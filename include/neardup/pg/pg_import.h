// ImportIntoPg: fills an empty namespace of the PostgreSQL store
// (pg_engine.h) from a stream of documents, in one transaction written with
// COPY, far faster than checking them one by one through the service (one
// transaction, three round trips and a WAL flush each). docs/postgresql.md
// ("Bulk import") has why the result is what the service would hold.
//
// What: the documents are decided in stream order, each exactly as a
// check-and-insert of the PostgreSQL store decides it (the same code over an
// in-memory copy of what the namespace holds so far), and the kept
// documents, their anchor postings, the duplicates' rows, the counters and
// the document-number sequence are written as the service would have
// written them after checking the same documents in the same order from one
// connection: the same rows, the same numbers. A document whose id is
// already kept is a replay (counted as a check, nothing written); one whose
// timestamp is past retention is decided but not stored.
//
// Exactly one kept: the import holds the namespace's advisory lock
// exclusively from its emptiness test to COMMIT. Checks hold it shared, so
// none is in flight while the import decides, and none starts: a check of
// that namespace waits (lock_timeout, then retried and answered 503) until
// the import commits, then sees every imported row. Other namespaces are
// not affected.
//
// Errors: kNotFound when the namespace does not exist and
// options.create_settings is empty; kFailedPrecondition when it already holds
// documents (rows in its tables, live or expired), or was created by an
// earlier table layout or anchor scheme; kInvalidArgument for a document the service would refuse
// (its position in the stream is in the message) or an error `next`
// returns; kUnavailable when the database cannot be reached or the
// connection is lost. On any error nothing is written (the transaction is
// rolled back), except a namespace created by the call.
//
// Memory: the decision's in-memory copy, ≈ 0.6–0.7 KB per kept short
// document (its re-check bytes, id, hashes and postings): 5.5 GB for 9.35M.
//
// Thread-safety: one call uses one connection of its own; concurrent calls
// for the same namespace serialize on its lock (the second finds it full).
#ifndef NEARDUP_PG_PG_IMPORT_H_
#define NEARDUP_PG_PG_IMPORT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "neardup/engine/engine.h"
#include "neardup/util/status.h"

namespace neardup {

struct PgImportOptions {
  std::string uri;  // as PgEngineOptions::uri (its pool_size etc. are ignored)
  std::string ns;   // the namespace to fill
  // Creates the namespace with these settings when it does not exist; an
  // existing namespace keeps its own.
  std::optional<NamespaceSettings> create_settings;
  std::function<int64_t()> clock_ms;  // tests inject time; default: system clock
  // Called every `progress_every` documents read (and once at the end of
  // the deciding), for a progress line.
  std::function<void(uint64_t documents_read)> progress;
  uint64_t progress_every = 100000;
};

struct PgImportStats {
  uint64_t documents = 0;   // read from the stream (checked)
  uint64_t kept = 0;        // stored
  uint64_t duplicates = 0;  // answered duplicate
  uint64_t replays = 0;     // an id already kept: nothing written
  uint64_t not_stored = 0;  // past retention (decided, not stored)
  uint64_t postings = 0;    // anchor postings written
  bool created = false;     // the namespace was created by this call
  // The VACUUM (ANALYZE) after COMMIT, which marks the imported pages
  // all-visible so that lookups are index-only scans: empty when it ran,
  // else why not (the import itself is committed either way).
  std::string vacuum_error;
};

// The next document of the stream: true with *doc filled, false at its end,
// or an error (the import then fails with it and writes nothing).
using PgDocumentSource = std::function<Result<bool>(DocumentInput* doc)>;

Result<PgImportStats> ImportIntoPg(const PgImportOptions& options, const PgDocumentSource& next);

}  // namespace neardup

#endif  // NEARDUP_PG_PG_IMPORT_H_
