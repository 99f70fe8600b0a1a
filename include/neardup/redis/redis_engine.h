// RedisClusterEngine: the Engine (engine.h) over a Redis Cluster, so any
// number of stateless `neardup serve` instances share one index.
// docs/cluster.md has the key layout, the fenced protocol and its failure
// cases; this header is the contract.
//
// Semantics: those of engine.h, with these differences (docs/cluster.md):
//  * Matching is NearDupSet's (near_dup_set.h): the same signature
//    (MakeSignature), candidates (equal text, fingerprint radius, anchors)
//    and pair rule (DecidePair), per namespace ("recheck", changed by PUT).
//    Stop keys count kept documents (kept marks), as the embedded store's
//    do, and a stop key is skipped for the next anchor. Where it differs
//    from the embedded store: marks are counted per live time window (a stop
//    key ends when its marks expire; deleted documents still count); a pair
//    of *concurrent* checks is always settled when it shares one of both
//    documents' first `anchors` anchors, stop key or not; the short-text
//    radius applies when either text of a pair is short (the protocol needs
//    the relation symmetric); with the re-check off no sketch is written, so
//    similarity comes from the distance and such documents are later matched
//    as documents without a sketch (distance <= k).
//  * Exactly one of concurrent near-duplicates is kept, across instances, by
//    the fenced protocol. A check that cannot be decided safely (its record
//    was not acknowledged by a replica, a peer that fenced it never
//    committed, the cluster is down past the retry budget) fails with
//    kUnavailable and leaves nothing kept: the client retries (HTTP 503).
//  * NamespaceStats counters (checks, duplicates, inserted, deleted) are
//    cluster-wide; documents = inserted - deleted (documents that expired are
//    not subtracted); memory_bytes is 0 (the instance holds no index).
//  * Each namespace's table layout (which fingerprint bits key each table)
//    is fixed when the namespace is created, for max(k, recheck.short_k, 3);
//    raising k or recheck.short_k past it is kFailedPrecondition.
//
// Thread-safety: all methods may be called concurrently, from any number of
// engines in any number of processes sharing the cluster.
#ifndef NEARDUP_REDIS_ENGINE_H_
#define NEARDUP_REDIS_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/engine/engine.h"
#include "neardup/util/status.h"

namespace neardup {

// Which bits of a fingerprint key each table: two fingerprints within
// design_k bits agree on all bits of at least one mask (pigeonhole).
struct RedisTableLayout {
  std::string name;             // "pigeonhole", "nested" or "manku"
  int design_k = 3;
  std::vector<uint64_t> masks;  // one per table

  // pigeonhole: k+1 blocks, one table each (k=3: 4 tables, 16-bit keys).
  // nested: k+1 outer blocks, each combined with one of k+1 blocks of the
  //   other bits ((k+1)^2 tables; k=3: 16 tables, 28-bit keys).
  // manku: k+3 blocks, one table per 3 of them (C(k+3,3) tables; k=3: 20
  //   tables, 31-33-bit keys).
  // auto: pigeonhole while a bucket holds <= 4096 records at
  //   expected_documents, else nested.
  // kInvalidArgument for an unknown name or k outside 0..8.
  static Result<RedisTableLayout> Make(std::string_view name, int k, uint64_t expected_documents);
  // The table's key: the masked bits, packed.
  static uint64_t Key(uint64_t fingerprint, uint64_t mask);
  int key_bits(size_t table) const;
  // Expected records read per query at n stored documents (uniform keys).
  double ExpectedRecordsRead(double n) const;
};

struct RedisEngineOptions {
  // redis-cluster://host:port,host:port,...[?key=value&...] where the keys
  // layout, expected_documents, lease_ms, windows_per_retention,
  // wait_timeout_ms and retry_budget_ms override the fields below (so that
  // `neardup serve --store URI` can set them).
  std::string uri;
  NamespaceSettings default_settings;   // for auto-created namespaces
  bool auto_create = true;
  std::string layout = "auto";          // of namespaces created by this engine
  uint64_t expected_documents = 100000000;  // per namespace; picks the "auto" layout
  int windows_per_retention = 4;        // time windows per retention period (bucket keys carry one)
  int64_t lease_ms = 2000;              // a pending record older than this may be fenced by peers
  int wait_timeout_ms = 1000;           // WAIT for one replica after each deciding write
  int retry_budget_ms = 15000;          // per Redis call, across redirections and CLUSTERDOWN
  std::function<int64_t()> clock_ms;    // tests inject time; default: system clock
  // Tests: called between protocol steps ("appended", "read", "resolved",
  // "committed", "marked": a kept check's kept marks written, its decided
  // marks not yet); returning false abandons the check right there, as if the
  // process died (nothing more is written; the answer is kUnavailable).
  std::function<bool(std::string_view step)> step_hook;
};

// Connects to the cluster. kInvalidArgument for a bad uri or options,
// kUnavailable if no node answers.
Result<std::unique_ptr<Engine>> OpenRedisClusterEngine(const RedisEngineOptions& options);

}  // namespace neardup

#endif  // NEARDUP_REDIS_ENGINE_H_
