// bench_selfjoin: the batch self-join (every pair within k bits in one set),
// the old path beside SelfJoin, on peers_selfjoin's data, in one process.
//
//   bench_selfjoin [--n 10000000] [--k 3] [--seed 42] [--runs 3] [--methods old,join1,join2,floor]
//
// Data: bench/peers/peers_common.h's generator with kmax = 6 and seed + n,
// as peers_selfjoin, so the pair count and checksum (1,991,468 and
// dfa0f016... at 10M, k = 3) compare with docs/BENCHMARKS.md's peers table.
// Methods, interleaved (run r starts at method r mod M, so drift and other
// load hit every method alike):
//   old    MultiIndex AddBatch + SearchBatch of every row in 1M chunks on 2
//          threads (peers_selfjoin --method neardup); build and join timed
//   joinT  SelfJoin on T threads: wall time, and its CPU seconds in the sorts
//          and the group scans, and the merge's wall time
// Every method also prints cpu_s, the process's CPU seconds over all threads.
//   seomozB  seomoz/simhash-cpp's Simhash::find_all with B blocks (C(B, k)
//          permutations, one sort of the whole set each), only in a build
//          configured with -DNEARDUP_SEOMOZ_DIR=<a checkout you obtained>
//          (cmake/peers.cmake; docs/BENCHMARKS.md "Self-join by sorting"):
//          the unordered_set it takes is built outside the timing (set_s),
//          its hash-value pairs are mapped back to row pairs to compare
//   floor  the hardware anchors: one read of the fingerprint array, one
//          copy of it, sort_floor = SelfJoin's counting passes at those rates
//          (two reads and 1.5 copies each), and the compare kernel (xor +
//          popcount over all pairs of a cache-resident group) run for as many
//          pairs as the join compares
// Prints each run, then medians and ratios.
#include <algorithm>
#include <bit>
#include <cstring>
#include <ctime>
#include <map>
#include <span>

#include "neardup/index/multi_index.h"
#include "neardup/index/self_join.h"
#include "peers/peers_common.h"
#include "util/hash.h"
#ifdef NEARDUP_SEOMOZ
#include <unordered_set>

#include "simhash.h"  // seomoz/simhash-cpp, from NEARDUP_SEOMOZ_DIR/include
#endif

using namespace peers;

namespace {

struct Answer {
  uint64_t pairs = 0, checksum = 0;
};

// peers_selfjoin's order-independent checksum of the pairs.
void Account(Answer* a, uint64_t i, uint64_t j) {
  ++a->pairs;
  a->checksum += neardup::SplitMix64(i * 0x9E3779B97F4A7C15ULL ^ j);
}

using Timings = std::map<std::string, double>;

Answer RunOld(const std::vector<uint64_t>& fps, int k, Timings* t) {
  auto t0 = Clock::now();
  neardup::MultiIndexOptions opt;
  opt.expected_k = k;
  opt.expected_size = fps.size();
  auto index = std::move(neardup::NewMultiIndex(opt)).value();
  std::vector<neardup::Entry> entries(fps.size());
  for (size_t i = 0; i < fps.size(); ++i) entries[i] = {fps[i], i};
  if (!index->AddBatch(entries).ok()) std::abort();
  (*t)["build"] = Seconds(t0, Clock::now());
  t0 = Clock::now();
  Answer a;
  constexpr size_t kChunk = 1000000;
  for (size_t begin = 0; begin < fps.size(); begin += kChunk) {
    const size_t c = std::min(kChunk, fps.size() - begin);
    std::vector<std::vector<neardup::Match>> out;
    (void)index->SearchBatch(std::span<const uint64_t>(fps.data() + begin, c), k, &out, 2);
    for (size_t q = 0; q < c; ++q) {
      for (const auto& m : out[q]) {
        if (m.id > begin + q) Account(&a, begin + q, m.id);
      }
    }
  }
  (*t)["join"] = Seconds(t0, Clock::now());
  (*t)["total"] = (*t)["build"] + (*t)["join"];
  return a;
}

Answer RunJoin(const std::vector<uint64_t>& fps, int k, int threads, Timings* t, uint64_t* comparisons) {
  neardup::SelfJoinOptions o;
  o.threads = threads;
  neardup::SelfJoinStats stats;
  std::vector<neardup::JoinPair> out;
  const auto t0 = Clock::now();
  if (!neardup::SelfJoin(fps, k, o, &out, &stats).ok()) std::abort();
  (*t)["total"] = Seconds(t0, Clock::now());
  (*t)["sort_cpu"] = stats.sort_seconds;
  (*t)["scan_cpu"] = stats.scan_seconds;
  (*t)["merge"] = stats.merge_seconds;
  *comparisons = stats.comparisons;
  Answer a;
  for (const auto& p : out) Account(&a, p.i, p.j);
  return a;
}

#ifdef NEARDUP_SEOMOZ
// find_all takes a set of distinct hashes and returns (smaller, larger) hash
// pairs; each is expanded to the rows holding those values (rows with equal
// values are pairs at distance 0, which find_all cannot report: a few in
// peers_common.h data: two copies of one centre can flip the same bits).
Answer RunSeomoz(const std::vector<uint64_t>& fps, int k, int blocks, Timings* t) {
  auto t0 = Clock::now();
  std::unordered_set<Simhash::hash_t> set(fps.begin(), fps.end());
  (*t)["set"] = Seconds(t0, Clock::now());
  t0 = Clock::now();
  const Simhash::matches_t matches = Simhash::find_all(set, blocks, k);
  (*t)["find_all"] = Seconds(t0, Clock::now());
  (*t)["total"] = (*t)["find_all"];
  std::vector<std::pair<uint64_t, uint64_t>> rows(fps.size());  // (value, row), sorted
  for (size_t i = 0; i < fps.size(); ++i) rows[i] = {fps[i], i};
  std::sort(rows.begin(), rows.end());
  auto rows_of = [&](uint64_t v) {
    return std::equal_range(rows.begin(), rows.end(), std::pair<uint64_t, uint64_t>{v, 0},
                            [](const auto& x, const auto& y) { return x.first < y.first; });
  };
  Answer a;
  for (const auto& [x, y] : matches) {
    const auto [xb, xe] = rows_of(x);
    const auto [yb, ye] = rows_of(y);
    for (auto p = xb; p != xe; ++p) {
      for (auto q = yb; q != ye; ++q) Account(&a, std::min(p->second, q->second), std::max(p->second, q->second));
    }
  }
  for (size_t b = 0, e; b < rows.size(); b = e) {  // equal values
    for (e = b + 1; e < rows.size() && rows[e].first == rows[b].first; ++e) {
      for (size_t p = b; p < e; ++p) Account(&a, rows[p].second, rows[e].second);
    }
  }
  return a;
}
#endif

// All pairs of a 152-entry group (the mean group at 10M with 16-bit keys),
// repeated until `pairs` comparisons: the scan's compute floor.
double CompareKernel(const std::vector<uint64_t>& fps, uint64_t pairs, int k) {
  constexpr size_t kGroup = 152;
  const uint64_t per_group = kGroup * (kGroup - 1) / 2;
  uint64_t hits = 0;
  const auto t0 = Clock::now();
  for (uint64_t done = 0, g = 0; done < pairs; done += per_group, ++g) {
    const uint64_t* p = fps.data() + (g * kGroup) % (fps.size() - kGroup);
    for (size_t x = 0; x + 1 < kGroup; ++x) {
      for (size_t y = x + 1; y < kGroup; ++y) hits += std::popcount(p[x] ^ p[y]) <= k;
    }
  }
  const double s = Seconds(t0, Clock::now());
  if (hits == ~0ULL) std::puts("");  // keeps the loop
  return s;
}

void RunFloor(const std::vector<uint64_t>& fps, int k, uint64_t comparisons, Timings* t) {
  auto t0 = Clock::now();
  uint64_t sum = 0;
  for (uint64_t f : fps) sum += f;
  (*t)["read"] = Seconds(t0, Clock::now());
  std::vector<uint64_t> copy(fps.size());
  t0 = Clock::now();
  std::memcpy(copy.data(), fps.data(), fps.size() * sizeof(uint64_t));
  (*t)["copy"] = Seconds(t0, Clock::now());
  if (sum == copy[0] + 1) std::puts("");  // keeps the loops
  (*t)["compare_kernel"] = CompareKernel(fps, comparisons, k);
  // A counting pass reads the array twice (histogram, scatter) and writes 12
  // bytes per entry (fingerprint + position): its streaming floor, times the
  // passes SelfJoin makes (8-bit digits over each block).
  int passes = 0;
  for (const auto& b : neardup::SelfJoinBlocks(k)) passes += (b.width + 7) / 8;
  (*t)["sort_floor"] = passes * (2 * (*t)["read"] + 1.5 * (*t)["copy"]);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The 1-minute load average: the other engineers' work on the shared cores.
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 10000000, seed = 42;
  int k = 3, runs = 3;
  std::string methods = "old,join1,join2,floor";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--n") n = std::stoull(v);
    else if (a == "--k") k = std::stoi(v);
    else if (a == "--seed") seed = std::stoull(v);
    else if (a == "--runs") runs = std::stoi(v);
    else if (a == "--methods") methods = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::printf("# bench_selfjoin  machine: %s\n# command:", MachineInfo().c_str());
  for (int i = 0; i < argc; ++i) std::printf(" %s", argv[i]);
  std::printf("\n");
  const std::vector<uint64_t> fps = MakeFingerprints(n, 6, seed + n);
  const std::vector<std::string> order = SplitList(methods);
  std::map<std::string, std::map<std::string, std::vector<double>>> all;  // method -> phase -> runs
  uint64_t comparisons = uint64_t{1} << 32;  // until a join has counted them
  for (int r = 0; r < runs; ++r) {
    for (size_t m = 0; m < order.size(); ++m) {
      const std::string& name = order[(r + m) % order.size()];
      Timings t;
      Answer a;
      const std::clock_t cpu0 = std::clock();
      if (name == "old") a = RunOld(fps, k, &t);
      else if (name.rfind("join", 0) == 0) a = RunJoin(fps, k, std::stoi(name.substr(4)), &t, &comparisons);
      else if (name == "floor") RunFloor(fps, k, comparisons, &t);
#ifdef NEARDUP_SEOMOZ
      else if (name.rfind("seomoz", 0) == 0) a = RunSeomoz(fps, k, std::stoi(name.substr(6)), &t);
#endif
      else {
        std::fprintf(stderr, "unknown method %s\n", name.c_str());
        return 2;
      }
      // Process CPU seconds, all threads: on shared cores the stable measure.
      t["cpu"] = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
      std::printf("run=%d method=%s", r, name.c_str());
      for (const auto& [phase, s] : t) {
        std::printf(" %s_s=%.3f", phase.c_str(), s);
        all[name][phase].push_back(s);
      }
      if (name != "floor") std::printf(" pairs=%llu checksum=%016llx", (unsigned long long)a.pairs,
                                       (unsigned long long)a.checksum);
      std::printf(" load=\"%s\"\n", LoadAverage().c_str());
      std::fflush(stdout);
    }
  }
  std::printf("# medians over %d runs (n=%llu k=%d comparisons=%llu)\n", runs, (unsigned long long)n, k,
              (unsigned long long)comparisons);
  for (const auto& [name, phases] : all) {
    std::printf("median method=%s", name.c_str());
    for (const auto& [phase, v] : phases) std::printf(" %s_s=%.3f", phase.c_str(), Median(v));
    std::printf("\n");
  }
  auto med = [&](const std::string& m) { return all.count(m) ? Median(all[m]["total"]) : 0.0; };
  if (med("old") > 0 && med("join2") > 0) std::printf("ratio old_total/join2 = %.1f\n", med("old") / med("join2"));
  if (med("old") > 0 && med("join1") > 0) std::printf("ratio old_total/join1 = %.1f\n", med("old") / med("join1"));
  if (med("join1") > 0 && med("join2") > 0) std::printf("ratio join1/join2 = %.2f\n", med("join1") / med("join2"));
  for (const auto& [name, phases] : all) {
    if (name.rfind("seomoz", 0) == 0 && med("join1") > 0 && med("join2") > 0) {
      std::printf("ratio %s_total/join1 = %.1f\nratio %s_total/join2 = %.1f\n", name.c_str(), med(name) / med("join1"),
                  name.c_str(), med(name) / med("join2"));
    }
  }
  if (all.count("old") && all.count("join2")) {
    std::printf("ratio old_cpu/join2_cpu = %.1f\n", Median(all["old"]["cpu"]) / Median(all["join2"]["cpu"]));
  }
  return 0;
}
