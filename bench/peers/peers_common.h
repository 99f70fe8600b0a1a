// Shared by the peers benchmark programs (bench_peers, peers_selfjoin):
// the seeded data generator, the brute-force ground truth, and small
// measurement helpers (RSS, machine description, percentiles).
//
// Data: N 64-bit fingerprints. Each "centre" is uniform random; one centre in
// five also gets a planted cluster of 1..4 near copies, each 1..kmax bits
// from the centre. The array is then shuffled. Row i has id i.
// Queries for radius k: even positions are a stored fingerprint with 0..k bits
// flipped (a true match exists), odd positions are uniform random.
#ifndef NEARDUP_BENCH_PEERS_COMMON_H_
#define NEARDUP_BENCH_PEERS_COMMON_H_

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace peers {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

inline size_t StatusField(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string k = key;
  while (std::getline(in, line)) {
    if (line.rfind(k, 0) == 0) return std::stoull(line.substr(k.size())) * 1024;
  }
  return 0;
}
// Current resident set, after returning freed heap to the OS.
inline size_t RssBytes() {
  malloc_trim(0);
  return StatusField("VmRSS:");
}
inline size_t PeakRssBytes() { return StatusField("VmHWM:"); }

inline std::string MachineInfo() {
  std::string model = "unknown";
  {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) == 0) {
        model = line.substr(line.find(':') + 2);
        break;
      }
    }
  }
  size_t mem_kb = 0;
  {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("MemTotal:", 0) == 0) mem_kb = std::stoull(line.substr(9));
    }
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "nproc=%u cpu=\"%s\" ram=%.1f GiB", std::thread::hardware_concurrency(),
                model.c_str(), mem_kb / 1048576.0);
  return buf;
}

inline uint64_t Flip(uint64_t fp, int n, std::mt19937_64& rng) {
  uint64_t mask = 0;
  while (std::popcount(mask) < n) mask |= uint64_t{1} << (rng() % 64);
  return fp ^ mask;
}

inline std::vector<uint64_t> MakeFingerprints(uint64_t n, int kmax, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out;
  out.reserve(n);
  while (out.size() < n) {
    const uint64_t centre = rng();
    out.push_back(centre);
    if (rng() % 5 == 0) {
      const int members = 1 + static_cast<int>(rng() % 4);
      for (int m = 0; m < members && out.size() < n; ++m) {
        out.push_back(Flip(centre, 1 + static_cast<int>(rng() % std::max(kmax, 1)), rng));
      }
    }
  }
  for (size_t i = n - 1; i > 0; --i) std::swap(out[i], out[rng() % (i + 1)]);
  return out;
}

inline std::vector<uint64_t> MakeQueries(const std::vector<uint64_t>& fps, size_t nq, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> q(nq);
  for (size_t i = 0; i < nq; ++i) {
    q[i] = (i % 2) ? rng() : Flip(fps[rng() % fps.size()], static_cast<int>(rng() % (k + 1)), rng);
  }
  return q;
}

// Brute-force range search of many queries: a blocked popcount scan (blocks of
// the data stay in cache while every query passes over them). radius[i] is the
// inclusive radius of query i. Returns, per query, the sorted matching rows.
// Queries are split across `threads` threads.
inline std::vector<std::vector<uint64_t>> BlockedScan(const uint64_t* fps, size_t n, const uint64_t* queries,
                                                      const int* radius, size_t nq, int threads) {
  std::vector<std::vector<uint64_t>> out(nq);
  constexpr size_t kBlock = 16384;  // 128 KiB of fingerprints
  auto work = [&](size_t qb, size_t qe) {
    for (size_t b = 0; b < n; b += kBlock) {
      const size_t e = std::min(n, b + kBlock);
      for (size_t qi = qb; qi < qe; ++qi) {
        const uint64_t q = queries[qi];
        const int r = radius[qi];
        for (size_t j = b; j < e; ++j) {
          if (std::popcount(fps[j] ^ q) <= r) out[qi].push_back(j);
        }
      }
    }
  };
  threads = std::max(1, threads);
  if (threads == 1 || nq < 2) {
    work(0, nq);
  } else {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back(work, nq * t / threads, nq * (t + 1) / threads);
    for (auto& t : ts) t.join();
  }
  return out;
}

struct Percentiles {
  double p50 = 0, p99 = 0, mean = 0;
};
inline Percentiles Summarize(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  p.p50 = v[v.size() / 2];
  p.p99 = v[std::min(v.size() - 1, v.size() * 99 / 100)];
  p.mean = sum / v.size();
  return p;
}

inline std::vector<uint64_t> ParseList(const std::string& s) {
  std::vector<uint64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(std::stoull(item));
  }
  return out;
}

inline std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace peers

#endif  // NEARDUP_BENCH_PEERS_COMMON_H_
