// RedisClusterClient: see redis_cluster.h for the contract.
#include "redis/redis_cluster.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>
#include <unordered_map>

namespace neardup {
namespace {

using Clock = std::chrono::steady_clock;

// CRC16/XMODEM: polynomial 0x1021, init 0, not reflected (cluster spec).
constexpr std::array<uint16_t, 256> MakeCrcTable() {
  std::array<uint16_t, 256> t{};
  for (int i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b) crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : static_cast<uint16_t>(crc << 1);
    t[i] = crc;
  }
  return t;
}
constexpr std::array<uint16_t, 256> kCrcTable = MakeCrcTable();

uint16_t Crc16(std::string_view s) {
  uint16_t crc = 0;
  for (unsigned char c : s) crc = static_cast<uint16_t>((crc << 8) ^ kCrcTable[((crc >> 8) ^ c) & 0xff]);
  return crc;
}

RedisReply Convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING: out.type = RedisReply::Type::kString; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_STATUS: out.type = RedisReply::Type::kStatus; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_ERROR: out.type = RedisReply::Type::kError; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_INTEGER: out.type = RedisReply::Type::kInteger; out.integer = r->integer; break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Convert(r->element[i]));
      break;
    default: out.type = RedisReply::Type::kNil; break;
  }
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// "MOVED 3999 127.0.0.1:6381" / "ASK ..." -> slot and address.
bool ParseRedirect(std::string_view err, int* slot, std::string* addr) {
  const size_t a = err.find(' ');
  if (a == std::string_view::npos) return false;
  const size_t b = err.find(' ', a + 1);
  if (b == std::string_view::npos) return false;
  const std::string_view num = err.substr(a + 1, b - a - 1);
  const auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), *slot);
  if (ec != std::errc() || p != num.data() + num.size() || *slot < 0 || *slot >= 16384) return false;
  *addr = std::string(err.substr(b + 1));
  return !addr->empty();
}

bool SplitHostPort(std::string_view addr, std::string* host, int* port) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view h = addr.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  const std::string_view p = addr.substr(colon + 1);
  int v = 0;
  const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (ec != std::errc() || end != p.data() + p.size() || v <= 0 || v > 65535) return false;
  *host = std::string(h);
  *port = v;
  return true;
}

enum class ErrorKind { kNone, kMoved, kAsk, kRetry, kRetryRefresh, kFinal };

ErrorKind Classify(const RedisReply& r) {
  if (!r.is_error()) return ErrorKind::kNone;
  const std::string_view e = r.str;
  if (StartsWith(e, "MOVED ")) return ErrorKind::kMoved;
  if (StartsWith(e, "ASK ")) return ErrorKind::kAsk;
  if (StartsWith(e, "TRYAGAIN") || StartsWith(e, "LOADING") || StartsWith(e, "NOREPLICAS")) {
    return ErrorKind::kRetry;
  }
  // A write reached a node that was demoted to replica, or the cluster is
  // failing over (CLUSTERDOWN, MASTERDOWN): the table is or is about to be
  // stale. Refreshing on the first such reply (not after timeouts) lets the
  // next round reach the promoted replica as soon as the cluster names it.
  if (StartsWith(e, "READONLY") || StartsWith(e, "CLUSTERDOWN") || StartsWith(e, "MASTERDOWN")) {
    return ErrorKind::kRetryRefresh;
  }
  return ErrorKind::kFinal;
}

}  // namespace

struct RedisClusterClient::Conn {
  redisContext* ctx = nullptr;
  ~Conn() {
    if (ctx) redisFree(ctx);
  }
  bool broken() const { return ctx == nullptr || ctx->err != 0; }
  std::string error() const { return ctx ? std::string(ctx->errstr) : std::string("no connection"); }
};

struct RedisClusterClient::Node {
  std::string addr, host;
  int port = 0;
  std::mutex mu;
  std::vector<std::unique_ptr<Conn>> idle;
  // steady_clock ticks of the last connection failure (0: none): a table
  // refresh asks such nodes last, so a dead master does not cost a connect
  // timeout on every refresh.
  std::atomic<int64_t> failed_at{0};
};

Result<std::vector<std::string>> ParseRedisClusterUri(std::string_view uri) {
  constexpr std::string_view kScheme = "redis-cluster://";
  if (StartsWith(uri, kScheme)) uri.remove_prefix(kScheme.size());
  std::vector<std::string> seeds;
  while (!uri.empty()) {
    const size_t comma = uri.find(',');
    const std::string_view one = uri.substr(0, comma);
    std::string host;
    int port = 0;
    if (!SplitHostPort(one, &host, &port)) {
      return Status::InvalidArgument("redis cluster seed \"" + std::string(one) + "\" is not HOST:PORT");
    }
    seeds.emplace_back(one);
    if (comma == std::string_view::npos) break;
    uri.remove_prefix(comma + 1);
  }
  if (seeds.empty()) return Status::InvalidArgument("no redis cluster seeds (expected redis-cluster://HOST:PORT,...)");
  return seeds;
}

uint16_t RedisClusterClient::KeySlot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return Crc16(key) & 16383;
}

RedisClusterClient::RedisClusterClient(const RedisClusterOptions& options) : options_(options) {}
RedisClusterClient::~RedisClusterClient() = default;

Result<std::unique_ptr<RedisClusterClient>> RedisClusterClient::Connect(const RedisClusterOptions& options) {
  if (options.seeds.empty()) return Status::InvalidArgument("no redis cluster seeds");
  std::unique_ptr<RedisClusterClient> c(new RedisClusterClient(options));
  for (const std::string& seed : options.seeds) {
    std::string host;
    int port = 0;
    if (!SplitHostPort(seed, &host, &port)) return Status::InvalidArgument("redis cluster seed \"" + seed + "\" is not HOST:PORT");
    c->GetNode(seed);
  }
  NEARDUP_RETURN_IF_ERROR(c->RefreshTopology());
  return c;
}

RedisClusterClient::Node* RedisClusterClient::GetNode(const std::string& addr) {
  {
    std::shared_lock lk(mu_);
    auto it = nodes_.find(addr);
    if (it != nodes_.end()) return it->second.get();
  }
  std::unique_lock lk(mu_);
  auto& slot = nodes_[addr];
  if (!slot) {
    slot = std::make_unique<Node>();
    slot->addr = addr;
    if (!SplitHostPort(addr, &slot->host, &slot->port)) {
      slot->host = addr;  // unusable: connecting fails and is retried elsewhere
      slot->port = 0;
    }
  }
  return slot.get();
}

std::unique_ptr<RedisClusterClient::Conn> RedisClusterClient::Checkout(Node* node, Status* error) {
  {
    std::lock_guard lk(node->mu);
    if (!node->idle.empty()) {
      auto c = std::move(node->idle.back());
      node->idle.pop_back();
      return c;
    }
  }
  if (node->port == 0) {
    *error = Status::Unavailable("bad node address " + node->addr);
    return nullptr;
  }
  timeval tv{options_.connect_timeout_ms / 1000, (options_.connect_timeout_ms % 1000) * 1000};
  auto conn = std::make_unique<Conn>();
  conn->ctx = redisConnectWithTimeout(node->host.c_str(), node->port, tv);
  if (conn->broken()) {
    *error = Status::Unavailable("cannot connect to redis " + node->addr + ": " + conn->error());
    node->failed_at.store(Clock::now().time_since_epoch().count());
    return nullptr;
  }
  node->failed_at.store(0);
  timeval ctv{options_.command_timeout_ms / 1000, (options_.command_timeout_ms % 1000) * 1000};
  redisSetTimeout(conn->ctx, ctv);
  return conn;
}

void RedisClusterClient::Return(Node* node, std::unique_ptr<Conn> conn) {
  if (!conn || conn->broken()) return;  // freed
  std::lock_guard lk(node->mu);
  if (node->idle.size() < options_.max_idle_connections_per_node) node->idle.push_back(std::move(conn));
}

Status RedisClusterClient::LoadSlotsFrom(Node* node) {
  Status err;
  auto conn = Checkout(node, &err);
  if (!conn) return err;
  auto* raw = static_cast<redisReply*>(redisCommand(conn->ctx, "CLUSTER SLOTS"));
  if (raw == nullptr) return Status::Unavailable("CLUSTER SLOTS on " + node->addr + ": " + conn->error());
  const RedisReply r = Convert(raw);
  freeReplyObject(raw);
  Return(node, std::move(conn));
  if (r.type != RedisReply::Type::kArray) {
    return Status::Unavailable("CLUSTER SLOTS on " + node->addr + ": " + (r.is_error() ? r.str : "unexpected reply"));
  }
  std::array<std::string, 16384> owner;
  size_t covered = 0;
  for (const RedisReply& range : r.elements) {
    if (range.elements.size() < 3 || range.elements[0].type != RedisReply::Type::kInteger ||
        range.elements[1].type != RedisReply::Type::kInteger || range.elements[2].elements.size() < 2) {
      return Status::Unavailable("CLUSTER SLOTS on " + node->addr + ": malformed reply");
    }
    const RedisReply& master = range.elements[2];  // the first node of a range is its master
    std::string host = master.elements[0].str;
    if (host.empty() || host == "?") host = node->host;  // "unknown endpoint": same host as the one asked
    const std::string addr = host + ":" + std::to_string(master.elements[1].integer);
    const int64_t lo = std::max<int64_t>(0, range.elements[0].integer);
    const int64_t hi = std::min<int64_t>(16383, range.elements[1].integer);
    for (int64_t s = lo; s <= hi; ++s) owner[s] = addr;
    covered += hi >= lo ? hi - lo + 1 : 0;
  }
  if (covered == 0) return Status::Unavailable("CLUSTER SLOTS on " + node->addr + ": no slot is assigned");
  std::array<Node*, 16384> table{};
  std::unordered_map<std::string, Node*> cache;
  for (int s = 0; s < 16384; ++s) {
    if (owner[s].empty()) continue;
    auto [it, fresh] = cache.emplace(owner[s], nullptr);
    if (fresh) it->second = GetNode(owner[s]);
    table[s] = it->second;
  }
  std::unique_lock lk(mu_);
  slots_ = table;
  return Status::OK();
}

Status RedisClusterClient::RefreshTopology() {
  const auto asked = Clock::now();
  std::lock_guard refresh(refresh_mu_);
  static_assert(sizeof(Clock::rep) == 8);
  // Another thread refreshed while we waited for the lock: that answer is as fresh as ours would be.
  if (last_refresh_.load() > asked.time_since_epoch().count()) return Status::OK();
  counters_.refreshes.fetch_add(1);
  std::vector<Node*> candidates;
  {
    std::shared_lock lk(mu_);
    for (Node* n : slots_) {
      if (n && std::find(candidates.begin(), candidates.end(), n) == candidates.end()) candidates.push_back(n);
    }
    for (const auto& [addr, n] : nodes_) {
      if (std::find(candidates.begin(), candidates.end(), n.get()) == candidates.end()) candidates.push_back(n.get());
    }
  }
  for (const std::string& seed : options_.seeds) {
    Node* n = GetNode(seed);
    if (std::find(candidates.begin(), candidates.end(), n) == candidates.end()) candidates.push_back(n);
  }
  // Nodes that answered last time first: after a kill the dead master is
  // asked last (on a real network a dead host costs a connect timeout).
  std::stable_partition(candidates.begin(), candidates.end(), [](Node* n) { return n->failed_at.load() == 0; });
  Status last = Status::Unavailable("no redis cluster node known");
  for (Node* n : candidates) {
    last = LoadSlotsFrom(n);
    if (last.ok()) {
      last_refresh_.store(Clock::now().time_since_epoch().count());
      return last;
    }
  }
  return Status::Unavailable("cannot load the redis cluster slot table: " + last.message());
}

std::string RedisClusterClient::MasterForSlot(uint16_t slot) const {
  std::shared_lock lk(mu_);
  Node* n = slots_[slot & 16383];
  return n ? n->addr : std::string();
}

std::vector<std::string> RedisClusterClient::Masters() const {
  std::shared_lock lk(mu_);
  std::vector<std::string> out;
  for (Node* n : slots_) {
    if (n && std::find(out.begin(), out.end(), n->addr) == out.end()) out.push_back(n->addr);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<RedisReply> RedisClusterClient::ExecuteOnNode(const std::string& addr, const std::vector<std::string>& args) {
  if (args.empty()) return Status::InvalidArgument("empty redis command");
  Node* node = GetNode(addr);
  Status err;
  auto conn = Checkout(node, &err);
  if (!conn) return err;
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* raw = static_cast<redisReply*>(redisCommandArgv(conn->ctx, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (raw == nullptr) return Status::Unavailable("redis " + addr + ": " + conn->error());
  RedisReply r = Convert(raw);
  freeReplyObject(raw);
  Return(node, std::move(conn));
  return r;
}

Result<RedisReply> RedisClusterClient::Execute(std::vector<std::string> args, std::string key) {
  RedisCommand cmd{std::move(args), std::move(key)};
  std::vector<RedisReply> replies;
  NEARDUP_RETURN_IF_ERROR(ExecuteBatch(std::span<const RedisCommand>(&cmd, 1), &replies));
  return std::move(replies[0]);
}

Result<RedisReply> RedisClusterClient::Command(std::vector<std::string> args) {
  if (args.size() < 2) return Status::InvalidArgument("Command() needs a key as its second argument");
  std::string key = args[1];
  return Execute(std::move(args), std::move(key));
}

// ---- ExecuteBatch ------------------------------------------------------------
//
// Rounds until every command has a final reply: group the pending commands by
// the node that owns their slot (GroupByNode), write every node's pipeline
// and flush them all before reading any reply, so that the nodes work in
// parallel (SendPipelines), read each node's replies by position
// (ReadPipeline), sort each reply into final, redirected or to be retried
// (HandleReply), then refresh the slot table and back off as the round asked
// (EndRound). Only the commands that were redirected or failed go to the
// next round.

// One ExecuteBatch call, across its rounds.
struct RedisClusterClient::Batch {
  Batch(std::span<const RedisCommand> c, std::vector<RedisReply>* r, const BatchOptions& o,
        const RedisClusterOptions& client)
      : cmds(c),
        replies(r),
        opts(o),
        wait_replicas(std::to_string(o.wait_replicas)),
        wait_timeout(std::to_string(o.wait_timeout_ms)),
        deadline(Clock::now() + std::chrono::milliseconds(client.retry_budget_ms)),
        backoff_ms(client.backoff_initial_ms),
        ask_target(c.size(), nullptr),
        slot(c.size()),
        pending(c.size()) {
    for (size_t i = 0; i < c.size(); ++i) {
      slot[i] = KeySlot(c[i].key);
      pending[i] = i;
    }
  }
  // Command i goes to the next round; after a broken connection any ASK
  // redirection is forgotten (the slot table decides again).
  void Retry(size_t i, bool forget_ask) {
    retry.push_back(i);
    if (forget_ask) ask_target[i] = nullptr;
  }

  const std::span<const RedisCommand> cmds;
  std::vector<RedisReply>* const replies;
  const BatchOptions opts;
  const std::string wait_replicas, wait_timeout;  // WAIT's arguments
  const Clock::time_point deadline;
  int backoff_ms;
  std::vector<Node*> ask_target;  // non-null: send ASKING + the command there (one round only)
  std::vector<uint16_t> slot;
  std::vector<size_t> pending;    // this round's commands
  std::vector<size_t> retry;      // the next round's
  bool backoff = false, refresh = false;  // what this round asks of EndRound
  bool replication_short = false;         // some WAIT reached fewer replicas than asked
  std::string last_error;
};

// A node's share of a round: its commands, written on one connection (WAIT
// only counts the writes of its own connection).
struct RedisClusterClient::Pipeline {
  Node* node = nullptr;
  std::vector<size_t> idx;
  std::unique_ptr<Conn> conn;
};

Status RedisClusterClient::ExecuteBatch(std::span<const RedisCommand> cmds, std::vector<RedisReply>* replies,
                                        const BatchOptions& bopts) {
  replies->assign(cmds.size(), RedisReply{});
  for (const RedisCommand& c : cmds) {
    if (c.args.empty()) return Status::InvalidArgument("empty redis command");
  }
  Batch b(cmds, replies, bopts, options_);
  for (int attempt = 0; !b.pending.empty(); ++attempt) {
    if (attempt >= options_.max_attempts || Clock::now() > b.deadline) {
      return Status::Unavailable("redis cluster: gave up after " + std::to_string(attempt) + " rounds: " + b.last_error);
    }
    std::vector<Pipeline> pipelines = GroupByNode(b);
    SendPipelines(b, &pipelines);
    for (Pipeline& p : pipelines) ReadPipeline(b, &p);
    EndRound(b);
  }
  if (b.replication_short) {
    return Status::Unavailable("redis cluster: a write was not acknowledged by a replica (" + b.last_error + ")");
  }
  return Status::OK();
}

// Commands whose slot has no owner wait for a table refresh.
std::vector<RedisClusterClient::Pipeline> RedisClusterClient::GroupByNode(Batch& b) {
  b.retry.clear();
  b.backoff = b.refresh = false;
  std::vector<Pipeline> groups;
  std::shared_lock lk(mu_);
  for (size_t i : b.pending) {
    Node* n = b.ask_target[i] ? b.ask_target[i] : slots_[b.slot[i]];
    if (n == nullptr) {
      b.Retry(i, false);
      b.backoff = b.refresh = true;
      b.last_error = "slot " + std::to_string(b.slot[i]) + " has no owner";
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Pipeline& g) { return g.node == n; });
    if (it == groups.end()) {
      groups.push_back(Pipeline{n, {}, nullptr});
      it = groups.end() - 1;
    }
    it->idx.push_back(i);
  }
  return groups;
}

// Nodes that cannot be reached are dropped from `pipelines` (their commands
// retried); the others' pipelines are all flushed before any reply is read.
void RedisClusterClient::SendPipelines(Batch& b, std::vector<Pipeline>* pipelines) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (Pipeline& p : *pipelines) {
    Status err;
    p.conn = Checkout(p.node, &err);
    if (!p.conn) {
      counters_.connection_errors.fetch_add(1);
      b.last_error = err.message();
      for (size_t i : p.idx) b.Retry(i, true);
      b.backoff = b.refresh = true;
      continue;
    }
    for (size_t i : p.idx) {
      if (b.ask_target[i]) redisAppendCommand(p.conn->ctx, "ASKING");
      argv.clear();
      lens.clear();
      for (const std::string& a : b.cmds[i].args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
      }
      redisAppendCommandArgv(p.conn->ctx, static_cast<int>(argv.size()), argv.data(), lens.data());
    }
    if (b.opts.wait_replicas > 0) {
      redisAppendCommand(p.conn->ctx, "WAIT %s %s", b.wait_replicas.c_str(), b.wait_timeout.c_str());
    }
    counters_.commands.fetch_add(p.idx.size());
    counters_.round_trips.fetch_add(1);
  }
  std::erase_if(*pipelines, [](const Pipeline& p) { return p.conn == nullptr; });
  for (Pipeline& p : *pipelines) {
    int done = 0;
    while (!p.conn->broken() && !done) {
      if (redisBufferWrite(p.conn->ctx, &done) != REDIS_OK) break;
    }
  }
}

// Replies match commands by position. A broken connection retries every
// command without a reply (it may have been applied: "Delivery" in the
// header); a lost WAIT reply retries the whole group, since whether its
// writes replicated is unknown.
void RedisClusterClient::ReadPipeline(Batch& b, Pipeline* p) {
  auto read = [&](RedisReply* out) {
    void* raw = nullptr;
    if (p->conn->broken() || redisGetReply(p->conn->ctx, &raw) != REDIS_OK || raw == nullptr) return false;
    *out = Convert(static_cast<redisReply*>(raw));
    freeReplyObject(raw);
    return true;
  };
  size_t k = 0;
  for (; k < p->idx.size(); ++k) {
    const size_t i = p->idx[k];
    RedisReply r;
    const bool asked = b.ask_target[i] != nullptr;
    b.ask_target[i] = nullptr;  // an ASK redirection holds for one attempt only
    if (asked && !read(&r)) break;  // the ASKING reply (+OK)
    if (!read(&r)) break;
    HandleReply(b, i, std::move(r));
  }
  auto broken = [&] {
    counters_.connection_errors.fetch_add(1);
    b.last_error = p->node->addr + ": " + p->conn->error();
    b.backoff = b.refresh = true;
    p->node->failed_at.store(Clock::now().time_since_epoch().count());
    // The node died or restarted: its pooled connections are dead too. Drop
    // them now rather than fail one round on each.
    std::vector<std::unique_ptr<Conn>> dead;
    std::lock_guard lk(p->node->mu);
    dead.swap(p->node->idle);
  };
  if (k < p->idx.size()) {
    broken();
    for (; k < p->idx.size(); ++k) b.Retry(p->idx[k], true);
  } else if (b.opts.wait_replicas > 0) {
    RedisReply w;
    if (!read(&w)) {
      broken();
      for (size_t i : p->idx) {
        if (std::find(b.retry.begin(), b.retry.end(), i) == b.retry.end()) b.Retry(i, false);
      }
    } else if (w.type != RedisReply::Type::kInteger || w.integer < b.opts.wait_replicas) {
      b.replication_short = true;
      b.last_error = p->node->addr + ": WAIT reached " + std::to_string(w.integer) + " replicas";
    }
  }
  Return(p->node, std::move(p->conn));
}

// Final replies (values and errors that no retry changes) are kept; MOVED
// updates the slot at once and asks for a table refresh (a MOVED usually
// means many slots moved); ASK resends once to the named node without
// touching the table (the slot is mid-migration); the rest is retried after
// a backoff.
void RedisClusterClient::HandleReply(Batch& b, size_t i, RedisReply r) {
  switch (Classify(r)) {
    case ErrorKind::kNone:
    case ErrorKind::kFinal:
      (*b.replies)[i] = std::move(r);
      return;
    case ErrorKind::kMoved: {
      counters_.moved.fetch_add(1);
      int s = 0;
      std::string addr;
      if (ParseRedirect(r.str, &s, &addr)) {
        Node* target = GetNode(addr);
        std::unique_lock lk(mu_);
        slots_[s] = target;
      }
      b.refresh = true;
      break;
    }
    case ErrorKind::kAsk: {
      counters_.ask.fetch_add(1);
      int s = 0;
      std::string addr;
      if (ParseRedirect(r.str, &s, &addr)) {
        b.ask_target[i] = GetNode(addr);
      } else {
        b.backoff = true;
      }
      break;
    }
    case ErrorKind::kRetry:
      (StartsWith(r.str, "TRYAGAIN") ? counters_.tryagain : counters_.clusterdown).fetch_add(1);
      b.backoff = true;
      break;
    case ErrorKind::kRetryRefresh:
      counters_.clusterdown.fetch_add(1);
      b.backoff = b.refresh = true;
      break;
  }
  b.last_error = r.str;
  b.Retry(i, false);
}

// The backoff never sleeps past the deadline: the next round reports it.
void RedisClusterClient::EndRound(Batch& b) {
  if (b.refresh) (void)RefreshTopology();  // failure: the next round retries it
  if (b.backoff && !b.retry.empty()) {
    const auto now = Clock::now();
    if (now < b.deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(b.deadline - now).count();
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(b.backoff_ms, left)));
      b.backoff_ms = std::min(b.backoff_ms * 2, options_.backoff_max_ms);
    }
  }
  std::sort(b.retry.begin(), b.retry.end());  // keep the callers' order within a node
  b.pending = std::move(b.retry);
  b.retry.clear();
}

RedisClusterStats RedisClusterClient::stats() const {
  RedisClusterStats s;
  s.commands = counters_.commands.load();
  s.round_trips = counters_.round_trips.load();
  s.moved = counters_.moved.load();
  s.ask = counters_.ask.load();
  s.tryagain = counters_.tryagain.load();
  s.clusterdown = counters_.clusterdown.load();
  s.connection_errors = counters_.connection_errors.load();
  s.refreshes = counters_.refreshes.load();
  return s;
}

}  // namespace neardup
