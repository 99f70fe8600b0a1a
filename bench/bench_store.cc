// Apply() throughput of the RocksDB store: synced vs unsynced, batch sizes
// 1/16/128, and 1/4/16 concurrent synced writers (group commit). Each document
// carries 100 bytes of extra payload (record ~135 bytes + key).
//
//   ./bench_store [--store_dir=DIR] [google-benchmark flags]
//
// DIR defaults to $TMPDIR or /tmp; it must be on the disk you want to measure
// (fsync cost is the whole story for sync=true). Results: docs/storage.md.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "neardup/store/rocks_store.h"

namespace {

std::string g_base_dir;
std::unique_ptr<neardup::DocumentStore> g_store;
std::atomic<uint64_t> g_next{0};

std::string StoreDir() { return g_base_dir + "/neardup_bench_store_" + std::to_string(getpid()); }

void OpenFresh(bool sync) {
  g_store.reset();
  std::filesystem::remove_all(StoreDir());
  neardup::RocksStoreOptions o;
  o.sync = sync;
  auto r = neardup::OpenRocksStore(StoreDir(), o);
  if (!r.ok()) {
    std::fprintf(stderr, "open: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  g_store = std::move(r).value();
}

neardup::StoreWrite MakeWrite(uint64_t n) {
  neardup::StoreWrite w;
  w.ns = "bench";
  w.doc.id = "doc-" + std::to_string(n);
  w.doc.number = n;
  w.doc.signature = {n * 0x9E3779B97F4A7C15ull, ~n * 0xC2B2AE3D27D4EB4Full, true};
  w.doc.timestamp_ms = 1'700'000'000'000 + static_cast<int64_t>(n);
  w.doc.extra.resize(100);
  for (size_t i = 0; i < w.doc.extra.size(); ++i) w.doc.extra[i] = static_cast<char>((n * 131 + i * 7) & 0xff);
  return w;
}

// Args: batch size, sync (0/1).
void BM_Apply(benchmark::State& state) {
  const auto batch = static_cast<size_t>(state.range(0));
  const bool sync = state.range(1) != 0;
  if (state.thread_index() == 0) OpenFresh(sync);
  std::vector<neardup::StoreWrite> writes(batch);
  for (auto _ : state) {
    for (auto& w : writes) w = MakeWrite(g_next.fetch_add(1, std::memory_order_relaxed));
    neardup::Status st = g_store->Apply(writes);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batch));
  state.counters["batches/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  if (state.thread_index() == 0) {
    state.counters["disk_MB"] = static_cast<double>(g_store->ApproximateDiskBytes()) / 1e6;
  }
}

BENCHMARK(BM_Apply)
    ->ArgNames({"batch", "sync"})
    ->ArgsProduct({{1, 16, 128}, {1, 0}})
    ->UseRealTime()
    ->MinTime(1.0);
// Concurrent synced writers of single documents (RocksDB groups them into one
// WAL write + fsync). Each iteration starts `writers` threads that apply 32
// documents each, one per Apply; timed by the wall clock around the round.
void BM_ConcurrentSyncedApply(benchmark::State& state) {
  const int writers = static_cast<int>(state.range(0));
  constexpr int kPerWriter = 32;
  OpenFresh(/*sync=*/true);
  std::atomic<int> failures{0};
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < writers; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kPerWriter; ++i) {
          if (!g_store->Apply({MakeWrite(g_next.fetch_add(1, std::memory_order_relaxed))}).ok()) failures++;
        }
      });
    }
    for (auto& th : threads) th.join();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (failures.load() != 0) state.SkipWithError("Apply failed");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * writers * kPerWriter);
}

BENCHMARK(BM_ConcurrentSyncedApply)->ArgName("writers")->Arg(1)->Arg(4)->Arg(16)->UseManualTime()->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) {
  const char* tmp = std::getenv("TMPDIR");
  g_base_dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--store_dir=", 12) == 0) {
      g_base_dir = argv[i] + 12;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_store.reset();
  std::filesystem::remove_all(StoreDir());
  return 0;
}
