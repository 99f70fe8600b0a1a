// peers_selfjoin: the batch job's core, all near-duplicate pairs within one
// set of N fingerprints (every unordered pair i < j with popcount(f_i ^ f_j)
// <= k), by one method per process so the peak RSS (VmHWM) is the method's.
//
//   peers_selfjoin --method neardup|faiss-mhash2x32|faiss-mhash4x16|faiss-flat|brute
//                  --n 10000000 --k 3 [--seed 42] [--threads 2] [--rows R]
//
// The data is bench_peers' generator (peers_common.h), kmax = 6, seed + N, so
// the set is the one bench_peers queries. Every row is a query against the
// whole set, in chunks of 1M rows (neardup: SearchBatch; faiss: range_search
// with radius k + 1 over the chunk, OpenMP threads). --rows R queries only the
// first R rows (for methods too slow for the whole set): the pairs are then
// those with i < R, and the full time is extrapolated linearly (labelled).
// Prints pairs, rows that have an earlier near-duplicate, an order-independent
// checksum of the pairs (equal across methods = same answer), build and join
// seconds, and peak RSS.
#include <faiss/IndexBinaryFlat.h>
#include <faiss/IndexBinaryHash.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <omp.h>

#include <cstring>
#include <memory>
#include <span>

#include "neardup/index/multi_index.h"
#include "peers_common.h"
#include "util/hash.h"

using namespace peers;

int main(int argc, char** argv) {
  std::string method = "neardup";
  uint64_t n = 1000000, seed = 42, rows = 0;
  int k = 3, threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--method") method = v;
    else if (a == "--n") n = std::stoull(v);
    else if (a == "--k") k = std::stoi(v);
    else if (a == "--seed") seed = std::stoull(v);
    else if (a == "--threads") threads = std::stoi(v);
    else if (a == "--rows") rows = std::stoull(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (rows == 0 || rows > n) rows = n;
  auto t0 = Clock::now();
  std::vector<uint64_t> fps = MakeFingerprints(n, 6, seed + n);
  fps.push_back(0);  // padding: faiss MultiHash reads up to 4 bytes past a code
  const double gen_s = Seconds(t0, Clock::now());
  const size_t rss_data = RssBytes();

  std::unique_ptr<neardup::HammingIndex> nd;
  std::unique_ptr<faiss::IndexBinary> fx;
  std::string settings;
  t0 = Clock::now();
  if (method == "neardup") {
    neardup::MultiIndexOptions opt;
    opt.expected_k = k;
    opt.expected_size = n;
    nd = std::move(neardup::NewMultiIndex(opt)).value();
    std::vector<neardup::Entry> entries(n);
    for (size_t i = 0; i < n; ++i) entries[i] = {fps[i], i};
    if (!nd->AddBatch(entries).ok()) return 1;
    settings = nd->Describe();
  } else if (method == "faiss-flat") {
    omp_set_num_threads(threads);
    auto idx = std::make_unique<faiss::IndexBinaryFlat>(64);
    idx->add(n, reinterpret_cast<const uint8_t*>(fps.data()));
    fx = std::move(idx);
    settings = "IndexBinaryFlat(64)";
  } else if (method.rfind("faiss-mhash", 0) == 0) {
    omp_set_num_threads(threads);
    const std::string s = method.substr(11);
    const int h = std::stoi(s.substr(0, s.find('x'))), b = std::stoi(s.substr(s.find('x') + 1));
    auto idx = std::make_unique<faiss::IndexBinaryMultiHash>(64, h, b);
    idx->add(n, reinterpret_cast<const uint8_t*>(fps.data()));  // fps is padded
    idx->nflip = k / h;
    fx = std::move(idx);
    settings = "IndexBinaryMultiHash(64," + std::to_string(h) + "," + std::to_string(b) + "),nflip=" +
               std::to_string(k / h);
  } else if (method != "brute") {
    std::fprintf(stderr, "unknown method %s\n", method.c_str());
    return 2;
  } else {
    settings = "blocked popcount scan";
  }
  const double build_s = Seconds(t0, Clock::now());
  const size_t rss_index = RssBytes();

  uint64_t pairs = 0, dup_rows = 0, checksum = 0;
  t0 = Clock::now();
  const size_t chunk = method == "brute" || method == "faiss-flat" ? 256 : 1000000;
  for (size_t begin = 0; begin < rows; begin += chunk) {
    const size_t c = std::min(chunk, rows - begin);
    auto account = [&](size_t i, uint64_t j) {
      if (j > i) {
        ++pairs;
        checksum += neardup::SplitMix64(i * 0x9E3779B97F4A7C15ULL ^ j);
      }
    };
    if (nd) {
      std::vector<std::vector<neardup::Match>> out;
      (void)nd->SearchBatch(std::span<const uint64_t>(fps.data() + begin, c), k, &out, threads);
      for (size_t q = 0; q < c; ++q) {
        bool earlier = false;
        for (const auto& m : out[q]) {
          account(begin + q, m.id);
          earlier |= m.id < begin + q;
        }
        dup_rows += earlier;
      }
    } else if (fx) {
      faiss::RangeSearchResult res(c);
      fx->range_search(c, reinterpret_cast<const uint8_t*>(fps.data() + begin), k + 1, &res);
      for (size_t q = 0; q < c; ++q) {
        bool earlier = false;
        for (size_t e = res.lims[q]; e < res.lims[q + 1]; ++e) {
          account(begin + q, static_cast<uint64_t>(res.labels[e]));
          earlier |= static_cast<uint64_t>(res.labels[e]) < begin + q;
        }
        dup_rows += earlier;
      }
    } else {
      std::vector<int> radius(c, k);
      auto out = BlockedScan(fps.data(), n, fps.data() + begin, radius.data(), c, threads);
      for (size_t q = 0; q < c; ++q) {
        bool earlier = false;
        for (uint64_t j : out[q]) {
          account(begin + q, j);
          earlier |= j < begin + q;
        }
        dup_rows += earlier;
      }
    }
  }
  const double join_s = Seconds(t0, Clock::now());
  std::printf("# peers_selfjoin  machine: %s\n# command:", MachineInfo().c_str());
  for (int i = 0; i < argc; ++i) std::printf(" %s", argv[i]);
  std::printf("\nmethod=%s settings=\"%s\" n=%llu k=%d seed=%llu threads=%d rows_queried=%llu gen_s=%.1f "
              "build_s=%.2f join_s=%.2f%s pairs=%llu dup_rows=%llu checksum=%016llx data_rss_gb=%.2f "
              "index_rss_gb=%.2f peak_rss_gb=%.2f\n",
              method.c_str(), settings.c_str(), (unsigned long long)n, k, (unsigned long long)seed, threads,
              (unsigned long long)rows, gen_s, build_s, join_s,
              rows < n ? (" join_s_extrapolated=" + std::to_string(join_s * n / rows)).c_str() : "",
              (unsigned long long)pairs, (unsigned long long)dup_rows, (unsigned long long)checksum, rss_data / 1e9,
              (rss_index - rss_data) / 1e9, PeakRssBytes() / 1e9);
  return 0;
}
