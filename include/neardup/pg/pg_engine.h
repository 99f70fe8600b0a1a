// PgEngine: the Engine (engine.h) over a PostgreSQL database, so any number
// of stateless `neardup serve` instances share one set of namespaces kept in
// the user's own database (backed up, replicated and queryable with the rest
// of their data). docs/postgresql.md has the schema, the queries and why
// exactly one of concurrent near-duplicates is kept; this header is the
// contract.
//
// What: one transaction per check. It takes transaction-scoped advisory
// locks on every key the decision rule can reach a conflicting document
// through (the document id, its content hash, its fingerprint's block in
// each table, each of its anchors), sorted, then reads the candidates,
// decides with NearDupSet's rule (pair_rule.h: DecidePair, RanksBefore), and
// inserts; the answer is sent only after COMMIT returned.
//
// Semantics: those of engine.h, with these differences (docs/postgresql.md):
//  * Stop keys count the kept documents filed under an anchor that are
//    live (not expired, not deleted): a stop key ends when enough of them
//    expire or are deleted (the embedded store's is permanent).
//  * Each namespace's table layout (k+1 fingerprint blocks) is fixed when
//    the namespace is created, for max(k, recheck.short_k, 3); raising k or
//    recheck.short_k past it is kFailedPrecondition (as the cluster store).
//  * A namespace created by a build before the anchor table (its record has
//    no "layout": 2) is kFailedPrecondition for every call that reads its
//    record: delete and recreate it.
//  * Retention drops whole time partitions (window = retention / 4, at
//    least 60 s, fixed at creation; 7 days without retention); a document
//    past retention never matches before its partition is dropped.
//  * NamespaceStats: counters are database-wide; documents = inserted -
//    deleted - expired (expired counted when a partition is dropped);
//    memory_bytes is 0.
//
// Errors: those of engine.h. kUnavailable (HTTP 503) when the database
// cannot be reached within the retry budget, or a connection was lost and
// the retry could not finish: the check is then either committed (a retry
// with the same id answers replay) or not at all, never answered wrongly.
//
// Bulk loading: an empty namespace can be filled in one transaction by
// ImportIntoPg (pg_import.h), with the rows these checks would write.
//
// Ownership: the engine owns its connections (a pool opened by
// OpenPgEngine, closed by the destructor). Tables live in the database and
// outlive the engine.
//
// Thread-safety: all methods may be called concurrently, from any number of
// engines in any number of processes sharing the database.
#ifndef NEARDUP_PG_PG_ENGINE_H_
#define NEARDUP_PG_PG_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "neardup/engine/engine.h"
#include "neardup/util/status.h"

namespace neardup {

struct PgEngineOptions {
  // A libpq connection URI, postgresql://user@host:port/db[?...] (or
  // postgres://), or a key=value conninfo string. URI parameters
  // pool_size, retry_budget_ms and windows_per_retention override the
  // fields below and are not passed to libpq.
  std::string uri;
  NamespaceSettings default_settings;  // for auto-created namespaces
  bool auto_create = true;
  int pool_size = 16;                  // connections (each check holds one)
  int retry_budget_ms = 15000;         // a check retried across lost connections and deadlocks
  int windows_per_retention = 4;       // time partitions per retention period
  std::function<int64_t()> clock_ms;   // tests inject time; default: system clock
  // Tests: called when a check starts ("started"), inside a check-and-insert
  // transaction after its locks are taken ("locked") and after its writes
  // are built, just before they are sent with COMMIT ("writing"); returning
  // false abandons the check (the connection is closed, as if the process
  // died: PostgreSQL rolls the transaction back) and it answers kUnavailable.
  std::function<bool(std::string_view step)> step_hook;
};

// Connects, creates the shared tables if missing. kInvalidArgument for bad
// options, kUnavailable if the database cannot be reached.
Result<std::unique_ptr<Engine>> OpenPgEngine(const PgEngineOptions& options);

// True for the URIs OpenPgEngine takes from `neardup serve --store`.
inline bool IsPgStoreUri(std::string_view uri) {
  return uri.starts_with("postgresql://") || uri.starts_with("postgres://");
}

}  // namespace neardup

#endif  // NEARDUP_PG_PG_ENGINE_H_
