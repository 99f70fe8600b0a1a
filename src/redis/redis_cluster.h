// RedisClusterClient: a Redis Cluster routing layer on hiredis 0.14 (which
// has none). Internal to neardup (the Redis store, its tests and benchmarks).
//
// What it does (redis.io cluster spec; docs/cluster.md):
//  * Routing. A command's key is hashed to one of 16384 slots with CRC16
//    (XMODEM) of the key, or of its hash tag: the bytes between the first '{'
//    and the next '}' when at least one byte lies between them. The slot table
//    is loaded from CLUSTER SLOTS and maps every slot to its *master*; the
//    client never sends READONLY, so it never reads from a replica (a replica
//    answers MOVED), because replica reads are stale and break the fenced
//    protocol of the Redis engine.
//  * Redirections. -MOVED: the slot is updated, the command resent to the new
//    owner and the whole table refreshed once the batch round ends (a MOVED
//    usually means many slots moved). -ASK: the command is resent once, after
//    ASKING on the same connection, to the named node; the table is not
//    changed (the slot is still being migrated).
//  * Retries. -TRYAGAIN, -CLUSTERDOWN, -LOADING, -MASTERDOWN, -NOREPLICAS,
//    -READONLY and connection failures are retried with exponential backoff
//    (10 ms doubling to 50 ms), refreshing the table at once after a
//    connection failure, READONLY, CLUSTERDOWN or MASTERDOWN (a failover is
//    under way: the next round finds the promoted replica) until
//    Options::retry_budget_ms has passed or Options::max_attempts rounds were
//    made; then the call fails with kUnavailable. A failover makes the cluster
//    answer CLUSTERDOWN for ~4 s: the budget must exceed it.
//  * Pipelining. ExecuteBatch groups the commands by owner, writes each
//    node's group on one connection, flushes them all before reading any
//    reply (so the nodes work in parallel), and matches replies by position.
//    Only the commands that were redirected or failed are sent again.
//    Commands of one batch to one slot keep their order (one connection per
//    node per round); across rounds, only the redirected ones are re-sent.
//  * WAIT. With BatchOptions::wait_replicas > 0, "WAIT n timeout" is
//    appended after each node's group *on the connection that wrote it* (WAIT
//    only counts that connection's writes).
//
// Delivery: a command whose connection broke before its reply may have been
// applied; it is sent again. Callers must only send commands whose
// repetition is harmless (an APPEND of an idempotent record, SET NX with a
// value unique to the writer, GET, ...).
//
// Errors: kInvalidArgument (empty command, unparsable seed), kUnavailable
// (no node reachable, retry budget exhausted, a WAIT that reached fewer
// replicas than asked). A Redis error reply that is not a redirection or a
// retryable condition (e.g. WRONGTYPE) is not a call failure: it is returned
// as a reply of type kError.
//
// Thread-safety: all methods may be called concurrently. Connections are
// pooled per node; a call holds one connection per node it talks to.
#ifndef NEARDUP_REDIS_CLUSTER_H_
#define NEARDUP_REDIS_CLUSTER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/util/status.h"

struct redisContext;

namespace neardup {

// An owned copy of a RESP2 reply.
struct RedisReply {
  enum class Type { kNil, kString, kStatus, kInteger, kArray, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray

  bool is_nil() const { return type == Type::kNil; }
  bool is_error() const { return type == Type::kError; }
  bool is_string() const { return type == Type::kString; }
};

// A command and the key that routes it (normally one of its arguments).
// Commands with several keys must keep them in one slot (hash tags).
struct RedisCommand {
  std::vector<std::string> args;
  std::string key;
};

struct RedisClusterOptions {
  std::vector<std::string> seeds;  // "host:port", any nodes of the cluster
  int connect_timeout_ms = 1000;
  int command_timeout_ms = 5000;   // a node silent this long: connection dropped, retried
  int retry_budget_ms = 15000;     // give up (kUnavailable) after this long
  int max_attempts = 200;          // rounds per call, whatever the time
  int backoff_initial_ms = 10;     // doubled per retry round up to backoff_max_ms
  // Short: after a failover the cluster answers again within a round trip
  // of the replica's promotion, and a caller asleep in a long backoff would
  // answer that much later (issue 16: ~8 s of silence with 400 ms and no
  // refresh on CLUSTERDOWN).
  int backoff_max_ms = 50;
  size_t max_idle_connections_per_node = 64;
};

// Parses "redis-cluster://h1:p1,h2:p2" or "h1:p1,h2:p2" into seeds.
Result<std::vector<std::string>> ParseRedisClusterUri(std::string_view uri);

struct RedisClusterStats {
  uint64_t commands = 0;     // commands sent (retries included)
  uint64_t round_trips = 0;  // node pipelines written and read
  uint64_t moved = 0;
  uint64_t ask = 0;
  uint64_t tryagain = 0;
  uint64_t clusterdown = 0;  // CLUSTERDOWN, LOADING, MASTERDOWN, NOREPLICAS, READONLY
  uint64_t connection_errors = 0;
  uint64_t refreshes = 0;
};

class RedisClusterClient {
 public:
  // Connects to the first reachable seed and loads the slot table.
  // kInvalidArgument for bad seeds; kUnavailable if no seed answers.
  static Result<std::unique_ptr<RedisClusterClient>> Connect(const RedisClusterOptions& options);

  RedisClusterClient(const RedisClusterClient&) = delete;
  RedisClusterClient& operator=(const RedisClusterClient&) = delete;
  ~RedisClusterClient();

  // CRC16/XMODEM of the key (or its hash tag) mod 16384.
  static uint16_t KeySlot(std::string_view key);

  // One command, routed by `key`.
  Result<RedisReply> Execute(std::vector<std::string> args, std::string key);
  // Convenience: routed by args[1] (the key of most commands).
  Result<RedisReply> Command(std::vector<std::string> args);

  struct BatchOptions {
    int wait_replicas = 0;     // > 0: WAIT after each node's group
    int wait_timeout_ms = 1000;
  };
  // Runs every command (routing, redirections, retries as above); on OK,
  // (*replies)[i] answers cmds[i]. With wait_replicas, kUnavailable if some
  // node's WAIT reached fewer replicas (the replies are still filled: the
  // writes happened but may not survive a failover).
  Status ExecuteBatch(std::span<const RedisCommand> cmds, std::vector<RedisReply>* replies,
                      const BatchOptions& options);
  Status ExecuteBatch(std::span<const RedisCommand> cmds, std::vector<RedisReply>* replies) {
    return ExecuteBatch(cmds, replies, BatchOptions{});
  }

  // Reloads the slot table from the known nodes (then the seeds).
  Status RefreshTopology();

  // "host:port" of the master the table names for `slot` ("" if none).
  std::string MasterForSlot(uint16_t slot) const;
  // "host:port" of every master in the table.
  std::vector<std::string> Masters() const;
  // Runs `args` on one node by address, no routing or retries (admin and
  // test use: CLUSTER SETSLOT, INFO, ...).
  Result<RedisReply> ExecuteOnNode(const std::string& addr, const std::vector<std::string>& args);

  RedisClusterStats stats() const;
  const RedisClusterOptions& options() const { return options_; }

 private:
  struct Node;
  struct Conn;
  explicit RedisClusterClient(const RedisClusterOptions& options);
  Node* GetNode(const std::string& addr);
  std::unique_ptr<Conn> Checkout(Node* node, Status* error);
  void Return(Node* node, std::unique_ptr<Conn> conn);
  Status LoadSlotsFrom(Node* node);
  // ExecuteBatch's steps (redis_cluster.cc): one round groups, sends and
  // reads, then refreshes and backs off.
  struct Batch;
  struct Pipeline;
  std::vector<Pipeline> GroupByNode(Batch& b);
  void SendPipelines(Batch& b, std::vector<Pipeline>* pipelines);
  void ReadPipeline(Batch& b, Pipeline* p);
  void HandleReply(Batch& b, size_t i, RedisReply r);
  void EndRound(Batch& b);

  RedisClusterOptions options_;
  mutable std::shared_mutex mu_;  // guards slots_ and nodes_ (the map; Node has its own lock)
  std::array<Node*, 16384> slots_{};
  std::map<std::string, std::unique_ptr<Node>> nodes_;  // never erased: Node* stay valid
  std::mutex refresh_mu_;  // one refresh at a time; waiters reuse its answer
  std::atomic<int64_t> last_refresh_{0};  // steady_clock ticks when the last refresh ended

  struct Counters {
    std::atomic<uint64_t> commands{0}, round_trips{0}, moved{0}, ask{0}, tryagain{0}, clusterdown{0},
        connection_errors{0}, refreshes{0};
  };
  mutable Counters counters_;
};

}  // namespace neardup

#endif  // NEARDUP_REDIS_CLUSTER_H_
