// bench_index: the pigeonhole MultiIndex beside a brute-force popcount scan,
// on the same data and queries, in one run.
//
//   bench_index [--n 1000000,10000000] [--k 3] [--blocks 0,3,4] [--queries 20000]
//               [--brute-queries 200] [--incremental 1000000] [--save-dir /tmp]
//               [--json FILE]
//
// Data: N fingerprints, 80% uniform random, 20% members of planted clusters
// (1..k bits flipped from a random centre), seeded. Queries: half are stored
// fingerprints with 0..k bits flipped (true matches), half uniform random.
// Reported per N: bulk build inserts/s, incremental inserts/s, bytes per entry
// (the index's own accounting, the process RSS growth, and the bytes malloc
// holds free in its heap after the adds: fragmentation), single-query latency
// p50/p99/mean on one core, batch queries/s on 1 and 2 threads, save and load
// time, and the same queries through the brute-force scan with a recall check.
#include <malloc.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "neardup/index/index_io.h"
#include "neardup/index/multi_index.h"

using namespace neardup;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

size_t RssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

std::vector<uint64_t> ParseList(const char* s) {
  std::vector<uint64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoull(item));
  return out;
}

uint64_t Flip(uint64_t fp, int n, std::mt19937_64& rng) {
  uint64_t mask = 0;
  while (std::popcount(mask) < n) mask |= uint64_t{1} << (rng() % 64);
  return fp ^ mask;
}

std::vector<Entry> MakeData(uint64_t n, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Entry> out;
  out.reserve(n);
  while (out.size() < n) {
    const uint64_t fp = rng();
    out.push_back({fp, out.size()});
    if (rng() % 5 == 0) {  // a planted cluster of 1..4 near copies
      const int members = 1 + static_cast<int>(rng() % 4);
      for (int m = 0; m < members && out.size() < n; ++m) {
        out.push_back({Flip(fp, 1 + static_cast<int>(rng() % std::max(k, 1)), rng), out.size()});
      }
    }
  }
  // Shuffle so clusters are not contiguous in insertion order.
  for (size_t i = n - 1; i > 0; --i) std::swap(out[i].fingerprint, out[rng() % (i + 1)].fingerprint);
  return out;
}

std::vector<uint64_t> MakeQueries(const std::vector<Entry>& data, size_t n, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> q(n);
  for (size_t i = 0; i < n; ++i) {
    q[i] = i % 2 ? rng() : Flip(data[rng() % data.size()].fingerprint, static_cast<int>(rng() % (k + 1)), rng);
  }
  return q;
}

size_t BruteScan(const std::vector<uint64_t>& fps, uint64_t q, int k) {
  size_t hits = 0;
  for (uint64_t fp : fps) hits += std::popcount(fp ^ q) <= k;
  return hits;
}

struct Percentiles {
  double p50, p99, mean;
};
Percentiles Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)], sum / v.size()};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes{1000000};
  std::vector<uint64_t> blocks_list{0};
  int k = 3;
  size_t nq = 20000, brute_q = 200, incremental = 1000000;
  std::string save_dir = "/tmp", json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--n") sizes = ParseList(argv[i + 1]);
    else if (a == "--k") k = std::atoi(argv[i + 1]);
    else if (a == "--blocks") blocks_list = ParseList(argv[i + 1]);
    else if (a == "--queries") nq = std::stoull(argv[i + 1]);
    else if (a == "--brute-queries") brute_q = std::stoull(argv[i + 1]);
    else if (a == "--incremental") incremental = std::stoull(argv[i + 1]);
    else if (a == "--save-dir") save_dir = argv[i + 1];
    else if (a == "--json") json_path = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::string json = "[\n";
  std::printf("%-10s %-34s %10s %10s %8s %8s %8s %8s %8s %10s %10s %11s %11s %7s %7s\n", "N", "index", "bulk/s",
              "incr/s", "B/entry", "RSS B/e", "free B/e", "p50 us", "p99 us", "q/s 1t", "q/s 2t", "hits/query",
              "brute p50us", "save s", "load s");
  for (uint64_t n : sizes) {
    auto data = MakeData(n, k, 1234 + n);
    auto queries = MakeQueries(data, nq, k, 99);
    std::vector<uint64_t> fps(n);
    for (size_t i = 0; i < n; ++i) fps[i] = data[i].fingerprint;

    // Brute force first, on a bounded query subset (it is O(N) per query).
    std::vector<double> brute_lat;
    std::vector<size_t> brute_hits;
    const size_t bq = std::min(brute_q, nq);
    for (size_t i = 0; i < bq; ++i) {
      auto t0 = Clock::now();
      brute_hits.push_back(BruteScan(fps, queries[i], k));
      brute_lat.push_back(Seconds(t0, Clock::now()) * 1e6);
    }
    const Percentiles bp = Summarize(brute_lat);

    for (uint64_t blocks : blocks_list) {
      MultiIndexOptions opt;
      opt.blocks = static_cast<int>(blocks);
      opt.expected_k = k;
      const size_t rss0 = RssBytes();
      auto index = std::move(NewMultiIndex(opt)).value();
      const size_t inc = std::min<size_t>(incremental, n / 2);
      auto t0 = Clock::now();
      if (!index->AddBatch(std::span<const Entry>(data.data(), n - inc)).ok()) return 1;
      const double bulk_s = Seconds(t0, Clock::now());
      t0 = Clock::now();
      for (size_t i = n - inc; i < n; ++i) (void)index->Add(data[i].fingerprint, data[i].id);
      const double inc_s = Seconds(t0, Clock::now());
      const size_t rss1 = RssBytes();
      const size_t heap_free = mallinfo2().fordblks;

      std::vector<double> lat(nq);
      std::vector<Match> out;
      size_t total_hits = 0;
      for (size_t i = 0; i < nq; ++i) {
        auto q0 = Clock::now();
        (void)index->Search(queries[i], k, &out);
        lat[i] = Seconds(q0, Clock::now()) * 1e6;
        total_hits += out.size();
        if (i < bq && out.size() != brute_hits[i]) {
          std::fprintf(stderr, "RECALL MISMATCH at query %zu: index %zu brute %zu\n", i, out.size(), brute_hits[i]);
          return 1;
        }
      }
      const Percentiles p = Summarize(lat);
      std::vector<std::vector<Match>> batch;
      t0 = Clock::now();
      (void)index->SearchBatch(queries, k, &batch, 1);
      const double qps1 = nq / Seconds(t0, Clock::now());
      t0 = Clock::now();
      (void)index->SearchBatch(queries, k, &batch, 2);
      const double qps2 = nq / Seconds(t0, Clock::now());

      const std::string path = save_dir + "/bench_index_" + std::to_string(n) + ".ndx";
      t0 = Clock::now();
      if (!SaveIndex(*index, 1, path).ok()) return 1;
      const double save_s = Seconds(t0, Clock::now());
      const std::string desc = index->Describe();
      const double bytes_per = static_cast<double>(index->MemoryBytes()) / n;
      const double rss_per = static_cast<double>(rss1 - rss0) / n;
      index.reset();
      t0 = Clock::now();
      auto loaded = LoadIndex(path, 1, opt);
      const double load_s = Seconds(t0, Clock::now());
      if (!loaded.ok() || (*loaded)->size() != n) return 1;
      loaded = Status::Internal("released");
      std::remove(path.c_str());

      const double free_per = static_cast<double>(heap_free) / n;
      std::printf("%-10llu %-34s %10.0f %10.0f %8.1f %8.1f %8.2f %8.2f %8.2f %10.0f %10.0f %11.2f %11.0f %7.2f %7.2f\n",
                  static_cast<unsigned long long>(n), desc.c_str(), (n - inc) / bulk_s, inc / inc_s, bytes_per,
                  rss_per, free_per, p.p50, p.p99, qps1, qps2, static_cast<double>(total_hits) / nq, bp.p50, save_s, load_s);
      std::fflush(stdout);
      char buf[1024];
      std::snprintf(buf, sizeof buf,
                    "  {\"n\": %llu, \"k\": %d, \"index\": \"%s\", \"bulk_inserts_per_s\": %.0f, "
                    "\"incremental_inserts_per_s\": %.0f, \"bytes_per_entry\": %.2f, \"rss_bytes_per_entry\": %.2f, "
                    "\"heap_free_bytes_per_entry\": %.2f, "
                    "\"query_p50_us\": %.3f, \"query_p99_us\": %.3f, \"query_mean_us\": %.3f, \"qps_1t\": %.0f, "
                    "\"qps_2t\": %.0f, \"hits_per_query\": %.3f, \"brute_p50_us\": %.1f, \"brute_p99_us\": %.1f, "
                    "\"brute_queries\": %zu, \"recall_checked\": true, \"save_s\": %.3f, \"load_s\": %.3f},\n",
                    static_cast<unsigned long long>(n), k, desc.c_str(), (n - inc) / bulk_s, inc / inc_s, bytes_per,
                    rss_per, free_per, p.p50, p.p99, p.mean, qps1, qps2, static_cast<double>(total_hits) / nq, bp.p50, bp.p99,
                    bq, save_s, load_s);
      json += buf;
    }
  }
  if (json.size() > 2) json.erase(json.size() - 2, 1);
  json += "]\n";
  if (!json_path.empty()) {
    std::ofstream(json_path) << json;
  }
  return 0;
}
