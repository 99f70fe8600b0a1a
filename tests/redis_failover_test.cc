// kill -9 of a Redis master under load (its own local cluster): the replica
// takes over (~4 s of CLUSTERDOWN, then NOREPLICAS until the old master is
// back as its replica: min-replicas-to-write 1). Meanwhile checks are retried
// or fail with kUnavailable (503), never answered wrongly. Afterwards every
// acknowledged document is there and no two near-duplicates are both kept.
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "neardup/redis/redis_engine.h"
#include "redis/redis_cluster.h"
#include "util/redis_test_cluster.h"

namespace neardup {
namespace {

using Clock = std::chrono::steady_clock;

std::string Id(int group, int member) {
  std::string s = "g";
  s += std::to_string(group);
  s += "-";
  s += std::to_string(member);
  return s;
}

TEST(RedisFailover, KillMasterUnderLoadLosesNoAcknowledgedDocument) {
  auto cluster = testing::LocalRedisCluster::Start();
  ASSERT_NE(cluster, nullptr) << "could not start a local redis cluster";
  RedisEngineOptions o;
  o.uri = cluster->uri();
  o.lease_ms = 500;
  o.retry_budget_ms = 3000;  // short: some checks run out during the failover and answer 503
  auto e1 = OpenRedisClusterEngine(o);
  auto e2 = OpenRedisClusterEngine(o);
  ASSERT_TRUE(e1.ok() && e2.ok());
  Engine* engines[2] = {e1.value().get(), e2.value().get()};
  const std::string ns = "failover";
  ASSERT_TRUE(engines[0]->PutNamespace(ns, NamespaceSettings{}, nullptr).ok());

  // Groups of two near-duplicates; a pair of threads sends each group's two
  // texts at the same moment, one to each engine.
  constexpr int kPairs = 2, kGroups = 4000;
  std::mt19937_64 rng(5);
  std::vector<std::vector<std::string>> groups;
  for (int g = 0; g < kGroups; ++g) groups.push_back(testing::NearDuplicateGroup(rng, 2));

  std::mutex mu;
  std::set<std::string> acknowledged;
  std::vector<int> stored_answers(kGroups, 0);
  std::vector<int> answered(kGroups, 0);
  std::atomic<int> unavailable{0}, next_group{0}, wrong{0};
  std::atomic<bool> stop{false};
  const auto load_deadline = Clock::now() + std::chrono::seconds(90);  // a bound, not a target
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<std::barrier<>>> barriers;
  std::vector<std::atomic<int>> pair_group(kPairs);
  for (int p = 0; p < kPairs; ++p) barriers.push_back(std::make_unique<std::barrier<>>(2));
  for (int p = 0; p < kPairs; ++p) {
    for (int m = 0; m < 2; ++m) {
      threads.emplace_back([&, p, m] {
        while (true) {
          if (m == 0) {
            const int g = next_group.fetch_add(1);
            pair_group[p] = (stop || Clock::now() > load_deadline || g >= kGroups) ? -1 : g;
          }
          barriers[p]->arrive_and_wait();  // member 0 picked the group
          const int g = pair_group[p].load();
          barriers[p]->arrive_and_wait();  // both read it: start together
          if (g < 0) return;
          auto r = engines[m]->Check(ns, {Id(g, m), groups[g][m], std::nullopt}, CheckMode::kCheckAndInsert);
          std::lock_guard lk(mu);
          if (!r.ok()) {
            if (r.status().code() != Status::Code::kUnavailable) ++wrong;
            ++unavailable;
            continue;
          }
          ++answered[g];
          if (r->stored) {
            acknowledged.insert(Id(g, m));
            ++stored_answers[g];
          } else if (!r->duplicate || r->matches.empty()) {
            ++wrong;  // neither stored nor naming a stored document
          }
        }
      });
    }
  }

  auto acked = [&] {
    std::lock_guard lk(mu);
    return static_cast<int>(acknowledged.size());
  };
  // Wait until the load has some acknowledged documents (bounded), then kill
  // the master of one third of the slots.
  for (int i = 0; i < 300 && acked() < 50; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  RedisClusterOptions co;
  co.seeds = cluster->seeds();
  auto admin = RedisClusterClient::Connect(co);
  ASSERT_TRUE(admin.ok());
  const std::string victim = admin.value()->MasterForSlot(0);
  const int victim_port = std::stoi(victim.substr(victim.rfind(':') + 1));
  const pid_t pid = cluster->Pid(victim_port);
  ASSERT_GT(pid, 0);
  const int acked_before_kill = acked();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  const auto killed_at = Clock::now();

  // Wait (bounded) for another node to own slot 0, then bring the old master
  // back: it rejoins as the new master's replica, and writes resume.
  std::string new_master;
  while (Clock::now() - killed_at < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (admin.value()->RefreshTopology().ok() && admin.value()->MasterForSlot(0) != victim) {
      new_master = admin.value()->MasterForSlot(0);
      break;
    }
  }
  const double failover_s = std::chrono::duration<double>(Clock::now() - killed_at).count();
  ASSERT_FALSE(new_master.empty()) << "no failover within 20 s";
  ASSERT_TRUE(cluster->RestartNode(victim_port));
  // Load runs on until writes are acknowledged again (bounded), then a little longer.
  const int acked_at_restart = acked();
  for (int i = 0; i < 300 && acked() < acked_at_restart + 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  stop = true;
  for (auto& t : threads) t.join();

  // Every acknowledged document is found (retried while the cluster settles).
  int missing = 0;
  for (const std::string& id : acknowledged) {
    Result<DocumentInfo> info = Status::Unavailable("not tried");
    for (int attempt = 0; attempt < 20; ++attempt) {
      info = engines[attempt % 2]->GetDocument(ns, id);
      if (info.ok() || info.status().code() != Status::Code::kUnavailable) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (!info.ok()) {
      ++missing;
      ADD_FAILURE() << "acknowledged document " << id << " is missing: " << info.status().ToString();
    }
  }
  // No group has two kept documents, by the answers or by the store.
  int groups_done = 0, both_kept = 0;
  for (int g = 0; g < next_group.load() && g < kGroups; ++g) {
    if (stored_answers[g] > 1) ++both_kept;
    int found = 0;
    for (int m = 0; m < 2; ++m) {
      for (int attempt = 0; attempt < 20; ++attempt) {
        auto info = engines[0]->GetDocument(ns, Id(g, m));
        if (info.ok()) ++found;
        if (info.ok() || info.status().code() != Status::Code::kUnavailable) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
    if (found > 1) ++both_kept;
    groups_done += answered[g] == 2;
  }
  std::printf("[          ] groups %d (both answered %d), acknowledged %zu (%d before the kill), 503s %d, "
              "failover seen after %.1f s\n",
              std::min(next_group.load(), kGroups), groups_done, acknowledged.size(), acked_before_kill,
              unavailable.load(), failover_s);
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(both_kept, 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(acked_before_kill, 0);
  EXPECT_GT(static_cast<int>(acknowledged.size()), acked_before_kill) << "no writes after the failover";
}

}  // namespace
}  // namespace neardup
