// The single-machine Engine: per-namespace in-memory index (NearDupSet) in
// front of a durable DocumentStore (RocksDB by default).
//
// Concurrency and durability (docs/service.md has the full argument):
//  * Each namespace has one mutex. A check-and-insert fingerprints the text
//    outside it, then, under it, searches, decides, updates memory and
//    enqueues the store write — so decisions in a namespace are serial and
//    every decision sees all earlier ones.
//  * One committer thread drains the write queue into a single store batch
//    (group commit: one fsync for every write that arrived meanwhile).
//  * An answer waits, after releasing the lock, until every document it names
//    as stored (its own, or the matches it reports) is durable. If the write
//    fails, the document is removed from memory and the answer is an error.
//  * Likewise memory follows the store when other writes fail: a delete
//    takes the document out of memory only once the deletion is durable; a
//    namespace whose settings record fails is removed again (a new one) or
//    keeps its old settings (an update). Settings changes run one at a time.
//  * A retention sweeper removes expired documents from memory and the store;
//    matches older than the retention are filtered even before the sweep.
#ifndef NEARDUP_LOCAL_ENGINE_H_
#define NEARDUP_LOCAL_ENGINE_H_

#include <functional>
#include <memory>
#include <string>

#include "neardup/engine/engine.h"
#include "neardup/engine/store.h"

namespace neardup {

struct LocalEngineOptions {
  std::string data_dir;                 // RocksDB directory (store/rocks_store.h; ignored by the store overload)
  bool sync = true;                     // fsync per group commit
  bool accept_wal_loss = false;         // RocksStoreOptions::accept_wal_loss (ignored by the store overload)
  bool create_if_missing = true;        // RocksStoreOptions::create_if_missing (ignored by the store overload)
  // Where namespaces keep their re-check sketches (NearDupOptions::sketch_dir):
  // empty, in memory. The RocksDB overload puts them in data_dir unless
  // sketches_in_memory; the store overload uses sketch_dir as given.
  std::string sketch_dir;
  bool sketches_in_memory = false;
  // Documents of a namespace the start-up rebuild sorts in memory at once;
  // past it, sorted runs go to unnamed files in data_dir (empty data_dir:
  // never), so a restart's peak memory stays near the rebuilt state's.
  size_t rebuild_run_docs = 1000000;
  NamespaceSettings default_settings;   // for auto-created namespaces
  bool auto_create = true;              // unknown namespaces are created on first use
  // Most namespaces; creating one more (PUT or auto-create) is
  // kFailedPrecondition. 0: no limit. Namespaces loaded at open are never
  // refused, even past the limit.
  size_t max_namespaces = 0;
  // Retention sweeper period; 0 (or less): no sweeper thread, sweeps run only
  // when SweepExpiredForTesting() asks (expired documents still never match).
  int64_t sweep_interval_ms = 1000;
  size_t max_commit_batch = 4096;       // writes per group commit
  // Under load (the previous group commit held more than one write), the
  // committer waits up to this long for more writes before the next fsync.
  // Fewer, larger commits cost less CPU per write; an idle server never waits.
  int64_t commit_delay_us = 0;
  std::function<int64_t()> clock_ms;    // tests inject time; default: system clock
};

// Opens the engine over `store` (the engine owns it) and rebuilds every
// namespace from it. kFailedPrecondition if a namespace was written with a
// fingerprint scheme this build does not produce. The embedded default,
// over RocksDB in options.data_dir, is OpenLocalEngine(options) in
// neardup/store/rocks_store.h.
Result<std::unique_ptr<Engine>> OpenLocalEngine(const LocalEngineOptions& options,
                                                std::unique_ptr<DocumentStore> store);

// Tests: runs one retention sweep of every namespace now, on the calling
// thread (what the sweeper thread does every sweep_interval_ms): removes the
// documents older than their namespace's retention at options.clock_ms()
// from memory and the store, and returns once those deletions are durable
// (their status). kInvalidArgument if `engine` is not a local engine.
Status SweepExpiredForTesting(Engine& engine);

}  // namespace neardup

#endif  // NEARDUP_LOCAL_ENGINE_H_
