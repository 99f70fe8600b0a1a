// RedisClusterClient against a live local cluster (scripts/redis_cluster.sh):
// slot routing and hash tags, pipelines across nodes, MOVED after a slot
// migration, ASK during one, TRYAGAIN and CLUSTERDOWN retried. Migrations are
// done by hand with CLUSTER SETSLOT IMPORTING/MIGRATING + MIGRATE. Each test
// uses its own hash tags (slots), so the tests may share one cluster.
#include "redis/redis_cluster.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "util/redis_test_cluster.h"

namespace neardup {
namespace {

using testing::LocalRedisCluster;
using testing::SharedRedisClusterTest;

TEST(RedisClusterSlot, Crc16AndHashTags) {
  // The cluster spec's check value: CRC16/XMODEM("123456789") = 0x31C3.
  EXPECT_EQ(RedisClusterClient::KeySlot("123456789"), 0x31C3 & 16383);
  EXPECT_EQ(RedisClusterClient::KeySlot("{user1000}.following"), RedisClusterClient::KeySlot("{user1000}.followers"));
  EXPECT_EQ(RedisClusterClient::KeySlot("foo{user1000}bar"), RedisClusterClient::KeySlot("user1000"));
  // Only the first {...} counts; an empty tag means "hash the whole key".
  EXPECT_EQ(RedisClusterClient::KeySlot("foo{bar}{zap}"), RedisClusterClient::KeySlot("bar"));
  EXPECT_EQ(RedisClusterClient::KeySlot("foo{}{bar}"), RedisClusterClient::KeySlot("foo{}{bar}"));
  EXPECT_NE(RedisClusterClient::KeySlot("foo{}{bar}"), RedisClusterClient::KeySlot("bar"));
  EXPECT_EQ(RedisClusterClient::KeySlot("foo{{bar}}zap"), RedisClusterClient::KeySlot("{bar"));
}

TEST(RedisClusterSlot, ParsesUris) {
  auto s = ParseRedisClusterUri("redis-cluster://127.0.0.1:7000,127.0.0.1:7001");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s.value(), (std::vector<std::string>{"127.0.0.1:7000", "127.0.0.1:7001"}));
  EXPECT_TRUE(ParseRedisClusterUri("localhost:1").ok());
  EXPECT_FALSE(ParseRedisClusterUri("redis-cluster://").ok());
  EXPECT_FALSE(ParseRedisClusterUri("redis-cluster://host").ok());
  EXPECT_FALSE(ParseRedisClusterUri("redis-cluster://h:1,h:99999").ok());
}

class RedisClusterTest : public SharedRedisClusterTest {
 protected:
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr) << "could not start a local redis cluster (scripts/redis_cluster.sh)";
    client_ = Connect();
    ASSERT_NE(client_, nullptr);
  }

  static std::unique_ptr<RedisClusterClient> Connect(int retry_budget_ms = 15000) {
    RedisClusterOptions o;
    o.seeds = {cluster_->seeds()[0]};  // one seed: the rest is learned from CLUSTER SLOTS
    o.retry_budget_ms = retry_budget_ms;
    auto c = RedisClusterClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  RedisReply On(const std::string& addr, std::vector<std::string> args) {
    auto r = client_->ExecuteOnNode(addr, args);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r.ok() && r->is_error()) << args[0] << " " << (args.size() > 1 ? args[1] : "") << ": " << r->str;
    return r.ok() ? r.value() : RedisReply{};
  }
  std::string NodeId(const std::string& addr) { return On(addr, {"CLUSTER", "MYID"}).str; }
  std::string OtherMaster(const std::string& addr) {
    for (const std::string& m : client_->Masters()) {
      if (m != addr) return m;
    }
    return "";
  }
  void BeginMigration(int slot, const std::string& src, const std::string& dst) {
    On(dst, {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", NodeId(src)});
    On(src, {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", NodeId(dst)});
  }
  void MigrateKeys(const std::string& src, const std::string& dst, const std::vector<std::string>& keys) {
    const size_t colon = dst.rfind(':');
    std::vector<std::string> args = {"MIGRATE", dst.substr(0, colon), dst.substr(colon + 1), "", "0", "5000", "KEYS"};
    args.insert(args.end(), keys.begin(), keys.end());
    On(src, args);
  }
  // SETSLOT NODE on every master, the destination first (the cluster spec's order).
  void EndMigration(int slot, const std::string& dst) {
    const std::string id = NodeId(dst);
    On(dst, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", id});
    for (const std::string& m : client_->Masters()) {
      if (m != dst) On(m, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", id});
    }
  }

  std::unique_ptr<RedisClusterClient> client_;
};


TEST_F(RedisClusterTest, KeySlotAgreesWithTheServer) {
  std::mt19937_64 rng(7);
  const std::string addr = client_->Masters()[0];
  for (int i = 0; i < 300; ++i) {
    std::string key;
    const int len = 1 + static_cast<int>(rng() % 12);
    for (int j = 0; j < len; ++j) key.push_back("ab{}xyz0\xff"[rng() % 9]);
    const RedisReply r = On(addr, {"CLUSTER", "KEYSLOT", key});
    ASSERT_EQ(r.integer, RedisClusterClient::KeySlot(key)) << "key " << key;
  }
}

TEST_F(RedisClusterTest, RoutesToMastersAndHashTagsShareASlot) {
  EXPECT_EQ(client_->Masters().size(), 3u);
  for (const std::string& m : client_->Masters()) {
    const std::string info = On(m, {"INFO", "replication"}).str;
    EXPECT_NE(info.find("role:master"), std::string::npos) << m;
  }
  // Multi-key commands work when the keys share a hash tag.
  auto set = client_->Execute({"MSET", "{route}a", "1", "{route}b", "2"}, "{route}");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_FALSE(set->is_error()) << set->str;
  auto get = client_->Execute({"MGET", "{route}a", "{route}b"}, "{route}");
  ASSERT_TRUE(get.ok());
  ASSERT_EQ(get->elements.size(), 2u);
  EXPECT_EQ(get->elements[0].str, "1");
  EXPECT_EQ(get->elements[1].str, "2");
  // A key really lives on the master the table names.
  const std::string owner = client_->MasterForSlot(RedisClusterClient::KeySlot("{route}a"));
  EXPECT_EQ(On(owner, {"EXISTS", "{route}a"}).integer, 1);
  auto elsewhere = client_->ExecuteOnNode(OtherMaster(owner), {"EXISTS", "{route}a"});
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_EQ(elsewhere->str.rfind("MOVED", 0), 0u) << elsewhere->str;
  // A non-redirect error reply is a reply, not a call failure.
  auto wrong = client_->Command({"LPUSH", "{route}a", "x"});
  ASSERT_TRUE(wrong.ok());
  EXPECT_TRUE(wrong->is_error());
  EXPECT_EQ(wrong->str.rfind("WRONGTYPE", 0), 0u) << wrong->str;
}

TEST_F(RedisClusterTest, PipelinesAcrossNodesInOneRoundTripEach) {
  std::vector<RedisCommand> cmds;
  for (int i = 0; i < 600; ++i) {
    const std::string key = "pipe:" + std::to_string(i);
    cmds.push_back({{"SET", key, std::string("v").append(std::to_string(i))}, key});
    cmds.push_back({{"APPEND", key, "+"}, key});
    cmds.push_back({{"GET", key}, key});
  }
  std::vector<RedisReply> replies;
  const RedisClusterStats before = client_->stats();
  ASSERT_TRUE(client_->ExecuteBatch(cmds, &replies, {.wait_replicas = 1, .wait_timeout_ms = 2000}).ok());
  const RedisClusterStats after = client_->stats();
  EXPECT_EQ(after.round_trips - before.round_trips, 3u);  // one pipeline per master
  ASSERT_EQ(replies.size(), cmds.size());
  for (int i = 0; i < 600; ++i) {
    EXPECT_EQ(replies[3 * i].str, "OK");
    EXPECT_EQ(replies[3 * i + 1].integer, static_cast<int64_t>(std::to_string(i).size() + 2));
    ASSERT_EQ(replies[3 * i + 2].str, std::string("v").append(std::to_string(i)) + "+") << i;
  }
  // The writes reached the replicas: WAIT on the writing connections said so.
  for (const std::string& m : client_->Masters()) {
    const std::string info = On(m, {"INFO", "replication"}).str;
    EXPECT_NE(info.find("connected_slaves:1"), std::string::npos) << info;
  }
}

TEST_F(RedisClusterTest, MovedAfterASlotMigrationUpdatesTheTable) {
  const std::string key = "{moved}k";
  const int slot = RedisClusterClient::KeySlot(key);
  ASSERT_TRUE(client_->Command({"SET", key, "before"}).ok());
  const std::string src = client_->MasterForSlot(slot);
  const std::string dst = OtherMaster(src);
  // Another client migrates the slot; ours keeps its old table.
  BeginMigration(slot, src, dst);
  MigrateKeys(src, dst, {key});
  EndMigration(slot, dst);
  EXPECT_EQ(client_->MasterForSlot(slot), src);  // stale

  const RedisClusterStats before = client_->stats();
  auto r = client_->Command({"GET", key});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->str, "before");
  EXPECT_GE(client_->stats().moved - before.moved, 1u);
  EXPECT_GE(client_->stats().refreshes - before.refreshes, 1u);
  EXPECT_EQ(client_->MasterForSlot(slot), dst);
  // Writes go there directly now.
  const RedisClusterStats mid = client_->stats();
  ASSERT_TRUE(client_->Command({"APPEND", key, "+after"}).ok());
  EXPECT_EQ(client_->stats().moved, mid.moved);
  EXPECT_EQ(On(dst, {"GET", key}).str, "before+after");
  // A fresh client learns the new owner from CLUSTER SLOTS.
  EXPECT_EQ(Connect()->MasterForSlot(slot), dst);
}

TEST_F(RedisClusterTest, AskDuringAMigrationLeavesTheTableAlone) {
  const std::string moved_key = "{ask}moved", kept_key = "{ask}kept", new_key = "{ask}new";
  const int slot = RedisClusterClient::KeySlot(moved_key);
  ASSERT_TRUE(client_->Command({"SET", moved_key, "m"}).ok());
  ASSERT_TRUE(client_->Command({"SET", kept_key, "k"}).ok());
  const std::string src = client_->MasterForSlot(slot);
  const std::string dst = OtherMaster(src);
  BeginMigration(slot, src, dst);
  MigrateKeys(src, dst, {moved_key});

  const RedisClusterStats before = client_->stats();
  // Pipelined: the moved key is redirected with ASK, the other answered by the source.
  std::vector<RedisCommand> cmds = {{{"GET", moved_key}, moved_key},
                                    {{"GET", kept_key}, kept_key},
                                    {{"APPEND", new_key, "n"}, new_key},  // a new key goes to the target
                                    {{"GET", new_key}, new_key}};
  std::vector<RedisReply> replies;
  ASSERT_TRUE(client_->ExecuteBatch(cmds, &replies).ok());
  EXPECT_EQ(replies[0].str, "m");
  EXPECT_EQ(replies[1].str, "k");
  EXPECT_EQ(replies[2].integer, 1);
  EXPECT_EQ(replies[3].str, "n");
  const RedisClusterStats after = client_->stats();
  EXPECT_GE(after.ask - before.ask, 3u);
  EXPECT_EQ(after.moved, before.moved);
  EXPECT_EQ(client_->MasterForSlot(slot), src);  // ASK never changes the table
  // Without ASKING the target refuses the slot it is importing.
  EXPECT_EQ(client_->ExecuteOnNode(dst, {"GET", moved_key})->str.rfind("MOVED", 0), 0u);

  MigrateKeys(src, dst, {kept_key});
  EndMigration(slot, dst);
  auto r = client_->Command({"GET", kept_key});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->str, "k");
  EXPECT_EQ(client_->MasterForSlot(slot), dst);
}

TEST_F(RedisClusterTest, TryAgainIsRetriedUntilTheMigrationEnds) {
  const std::string a = "{try}a", b = "{try}b";
  const int slot = RedisClusterClient::KeySlot(a);
  ASSERT_TRUE(client_->Command({"SET", a, "1"}).ok());
  ASSERT_TRUE(client_->Command({"SET", b, "2"}).ok());
  const std::string src = client_->MasterForSlot(slot);
  const std::string dst = OtherMaster(src);
  BeginMigration(slot, src, dst);
  MigrateKeys(src, dst, {a});  // the keys are split: a multi-key command gets TRYAGAIN

  // With a short budget the retries run out: kUnavailable, never a wrong answer.
  auto impatient = Connect(/*retry_budget_ms=*/300);
  auto r = impatient->Execute({"MGET", a, b}, a);
  EXPECT_EQ(r.status().code(), Status::Code::kUnavailable) << r.status().ToString();
  EXPECT_GE(impatient->stats().tryagain, 1u);

  // With the default budget the call outlasts the migration and succeeds.
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    MigrateKeys(src, dst, {b});
    EndMigration(slot, dst);
  });
  auto ok = client_->Execute({"MGET", a, b}, a);
  finisher.join();
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->elements.size(), 2u);
  EXPECT_EQ(ok->elements[0].str, "1");
  EXPECT_EQ(ok->elements[1].str, "2");
}

TEST_F(RedisClusterTest, ClusterDownIsRetriedNeverAnsweredWrongly) {
  const std::string key = "{down}k";
  const int slot = RedisClusterClient::KeySlot(key);
  ASSERT_TRUE(client_->Command({"SET", key, "v"}).ok());
  const std::string owner = client_->MasterForSlot(slot);
  // The owner stops serving the slot: it answers CLUSTERDOWN for it.
  On(owner, {"CLUSTER", "DELSLOTS", std::to_string(slot)});
  auto impatient = Connect(/*retry_budget_ms=*/300);
  auto r = impatient->Command({"GET", key});
  EXPECT_EQ(r.status().code(), Status::Code::kUnavailable) << r.status().ToString();

  std::thread healer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    On(owner, {"CLUSTER", "ADDSLOTS", std::to_string(slot)});
  });
  const RedisClusterStats before = client_->stats();
  auto ok = client_->Command({"GET", key});
  healer.join();
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->str, "v");
  EXPECT_GE(client_->stats().clusterdown + impatient->stats().clusterdown - before.clusterdown, 1u);
}

// Issue 16.3: CLUSTERDOWN (a failover under way) refreshes the slot table at
// once, and the retry follows the cluster's recovery within a short backoff
// (it was 400 ms at most, without a refresh: ~8 s of silence after a kill).
TEST_F(RedisClusterTest, ClusterDownRefreshesTheTableAndRetriesPromptly) {
  const std::string key = "{down2}k";
  const int slot = RedisClusterClient::KeySlot(key);
  ASSERT_TRUE(client_->Command({"SET", key, "v"}).ok());
  const std::string owner = client_->MasterForSlot(slot);
  On(owner, {"CLUSTER", "DELSLOTS", std::to_string(slot)});
  std::atomic<int64_t> healed_at{0};
  std::thread healer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    On(owner, {"CLUSTER", "ADDSLOTS", std::to_string(slot)});
    healed_at = std::chrono::steady_clock::now().time_since_epoch().count();
  });
  const RedisClusterStats before = client_->stats();
  auto ok = client_->Command({"GET", key});
  const int64_t answered_at = std::chrono::steady_clock::now().time_since_epoch().count();
  healer.join();
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->str, "v");
  EXPECT_GE(client_->stats().refreshes - before.refreshes, 1u);
  const auto late = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::duration(answered_at - healed_at.load()));
  EXPECT_LT(late.count(), 200) << "answered " << late.count() << " ms after the slot was served again";
}

TEST_F(RedisClusterTest, ConcurrentCallersShareTheClient) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string key = "conc:" + std::to_string(t) + ":" + std::to_string(i % 17);
        std::vector<RedisCommand> cmds = {{{"APPEND", key, "x"}, key}, {{"STRLEN", key}, key}};
        std::vector<RedisReply> replies;
        if (!client_->ExecuteBatch(cmds, &replies).ok() || replies[1].integer != replies[0].integer) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace neardup
