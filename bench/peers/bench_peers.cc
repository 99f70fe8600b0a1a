// bench_peers: neardup's Hamming index beside what a user would pick instead,
// on the same data and the same queries, in one run (issue 5).
//
//   bench_peers --n 1000000,10000000 --k 3,6 --queries 2000 --seed 42
//               --methods neardup,neardup-b3,neardup-b5,brute,faiss-flat,faiss-hash16,
//                         faiss-mhash2x32,faiss-mhash4x16,pg
//               [--pg "host=127.0.0.1 port=5544 user=postgres dbname=postgres"]
//               [--budget 15] [--json FILE]
//
// Methods (built one at a time, measured, then freed, so peak memory is the
// data plus the largest single index):
//   neardup         NewMultiIndex with default options (DefaultBlocks)
//   neardup-bM      NewMultiIndex with blocks = M (the settings sweep; the
//                   fastest neardup setting per k is reported as "fastest")
//   brute           popcount scan of a contiguous uint64 array (hardware
//                   POPCNT); batches use a blocked scan (data blocks in cache)
//   faiss-flat      faiss::IndexBinaryFlat(64), range_search(radius = k + 1)
//   faiss-hashB     faiss::IndexBinaryHash(64, B), nflip = k (exact)
//   faiss-mhashHxB  faiss::IndexBinaryMultiHash(64, H, B), nflip = floor(k / H)
//                   (exact by pigeonhole)
//   pg              PostgreSQL: table fp(id, fp, b0..b3) with the fingerprint
//                   split into four 16-bit block columns, a B-tree on each
//                   block and a primary key on id, bulk-loaded with COPY; a
//                   query ORs the four block lookups (every block value within
//                   floor(k/4) bits) and filters bit_count(fp # q) <= k.
//
// Per (N, k, method): build seconds, bytes per fingerprint (resident growth of
// this process; for pg the relation sizes on disk incl. indexes), single-query
// latency p50/p99 on one thread (time-budgeted prefix of the queries), batch
// queries/s on 1 and 2 threads, and recall/false positives against the
// brute-force ground truth of every query run. Exact methods must have recall
// 1.0 and no false positives: any failure is printed as RECALL FAILURE and the
// program exits with status 3 after writing its results.
#include <faiss/IndexBinaryFlat.h>
#include <faiss/IndexBinaryHash.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <libpq-fe.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>

#include "neardup/index/multi_index.h"
#include "peers_common.h"

using namespace peers;

namespace {

// ---------------------------------------------------------------- methods --
class Method {
 public:
  virtual ~Method() = default;
  virtual std::string Name() const = 0;
  virtual std::string Settings() const = 0;
  virtual bool Exact(int /*k*/) const { return true; }
  virtual void Build(const std::vector<uint64_t>& fps) = 0;
  virtual void SetK(int /*k*/) {}
  virtual void Query(uint64_t q, int k, std::vector<uint64_t>* rows) = 0;
  virtual void Batch(const uint64_t* qs, size_t n, int k, int threads, std::vector<std::vector<uint64_t>>* rows) = 0;
  // Bytes per fingerprint by the method's own accounting (< 0: unknown).
  virtual double OwnBytes(size_t /*n*/) const { return -1; }
  // True if OwnBytes is the figure to report (pg: on disk; brute: the array).
  virtual bool PreferOwnBytes() const { return false; }
  virtual void Release() = 0;
};

class NeardupMethod : public Method {
 public:
  explicit NeardupMethod(int blocks) : blocks_(blocks) {}
  std::string Name() const override { return blocks_ == 0 ? "neardup" : "neardup-b" + std::to_string(blocks_); }
  std::string Settings() const override { return index_ ? index_->Describe() : "unbuilt"; }
  void Build(const std::vector<uint64_t>& fps) override {
    neardup::MultiIndexOptions opt;
    opt.blocks = blocks_;
    opt.expected_k = 3;
    opt.expected_size = fps.size();
    index_ = std::move(neardup::NewMultiIndex(opt)).value();
    std::vector<neardup::Entry> entries(fps.size());
    for (size_t i = 0; i < fps.size(); ++i) entries[i] = {fps[i], i};
    if (!index_->AddBatch(entries).ok()) throw std::runtime_error("AddBatch failed");
  }
  void Query(uint64_t q, int k, std::vector<uint64_t>* rows) override {
    (void)index_->Search(q, k, &out_);
    rows->clear();
    for (const auto& m : out_) rows->push_back(m.id);
  }
  void Batch(const uint64_t* qs, size_t n, int k, int threads, std::vector<std::vector<uint64_t>>* rows) override {
    std::vector<std::vector<neardup::Match>> out;
    (void)index_->SearchBatch(std::span<const uint64_t>(qs, n), k, &out, threads);
    rows->assign(n, {});
    for (size_t i = 0; i < n; ++i) {
      for (const auto& m : out[i]) (*rows)[i].push_back(m.id);
    }
  }
  double OwnBytes(size_t n) const override { return static_cast<double>(index_->MemoryBytes()) / n; }
  void Release() override { index_.reset(); }

 private:
  int blocks_;
  std::unique_ptr<neardup::HammingIndex> index_;
  std::vector<neardup::Match> out_;
};

class BruteMethod : public Method {
 public:
  std::string Name() const override { return "brute"; }
  std::string Settings() const override { return "popcount scan, uint64[N]"; }
  void Build(const std::vector<uint64_t>& fps) override { fps_ = &fps; }
  void Query(uint64_t q, int k, std::vector<uint64_t>* rows) override {
    rows->clear();
    const uint64_t* p = fps_->data();
    const size_t n = fps_->size();
    for (size_t j = 0; j < n; ++j) {
      if (std::popcount(p[j] ^ q) <= k) rows->push_back(j);
    }
  }
  void Batch(const uint64_t* qs, size_t n, int k, int threads, std::vector<std::vector<uint64_t>>* rows) override {
    std::vector<int> radius(n, k);
    *rows = BlockedScan(fps_->data(), fps_->size(), qs, radius.data(), n, threads);
  }
  double OwnBytes(size_t) const override { return 8.0; }
  bool PreferOwnBytes() const override { return true; }
  void Release() override { fps_ = nullptr; }

 private:
  const std::vector<uint64_t>* fps_ = nullptr;
};

// faiss binary indexes share the query path.
class FaissMethod : public Method {
 public:
  void Query(uint64_t q, int k, std::vector<uint64_t>* rows) override {
    omp_set_num_threads(1);
    uint64_t buf[2] = {q, 0};  // MultiHash reads up to 4 bytes past a code
    faiss::RangeSearchResult res(1);
    index_->range_search(1, reinterpret_cast<const uint8_t*>(buf), k + 1, &res);  // strict radius
    rows->assign(res.labels + res.lims[0], res.labels + res.lims[1]);
  }
  void Batch(const uint64_t* qs, size_t n, int k, int threads, std::vector<std::vector<uint64_t>>* rows) override {
    omp_set_num_threads(threads);
    // qs is followed by at least one more uint64 (the query arrays are padded).
    faiss::RangeSearchResult res(n);
    index_->range_search(n, reinterpret_cast<const uint8_t*>(qs), k + 1, &res);
    rows->assign(n, {});
    for (size_t i = 0; i < n; ++i) (*rows)[i].assign(res.labels + res.lims[i], res.labels + res.lims[i + 1]);
  }
  void Release() override { index_.reset(); }

 protected:
  std::unique_ptr<faiss::IndexBinary> index_;
};

class FaissFlat : public FaissMethod {
 public:
  std::string Name() const override { return "faiss-flat"; }
  std::string Settings() const override { return "IndexBinaryFlat(64)"; }
  void Build(const std::vector<uint64_t>& fps) override {
    omp_set_num_threads(1);
    auto idx = std::make_unique<faiss::IndexBinaryFlat>(64);
    idx->add(fps.size(), reinterpret_cast<const uint8_t*>(fps.data()));
    index_ = std::move(idx);
  }
};

class FaissHash : public FaissMethod {
 public:
  explicit FaissHash(int b) : b_(b) {}
  std::string Name() const override { return "faiss-hash" + std::to_string(b_); }
  std::string Settings() const override { return "IndexBinaryHash(64," + std::to_string(b_) + "),nflip=k"; }
  void Build(const std::vector<uint64_t>& fps) override {
    omp_set_num_threads(1);
    auto idx = std::make_unique<faiss::IndexBinaryHash>(64, b_);
    idx->add(fps.size(), reinterpret_cast<const uint8_t*>(fps.data()));
    hash_ = idx.get();
    index_ = std::move(idx);
  }
  void SetK(int k) override { hash_->nflip = k; }

 private:
  int b_;
  faiss::IndexBinaryHash* hash_ = nullptr;
};

class FaissMultiHash : public FaissMethod {
 public:
  FaissMultiHash(int nhash, int b) : nhash_(nhash), b_(b) {}
  std::string Name() const override { return "faiss-mhash" + std::to_string(nhash_) + "x" + std::to_string(b_); }
  std::string Settings() const override {
    return "IndexBinaryMultiHash(64," + std::to_string(nhash_) + "," + std::to_string(b_) + "),nflip=k/" +
           std::to_string(nhash_);
  }
  void Build(const std::vector<uint64_t>& fps) override {
    omp_set_num_threads(1);
    auto idx = std::make_unique<faiss::IndexBinaryMultiHash>(64, nhash_, b_);
    const size_t n = fps.size();
    // add() reads up to 4 bytes past the last code: add the last one from a padded buffer.
    idx->add(n - 1, reinterpret_cast<const uint8_t*>(fps.data()));
    uint64_t last[2] = {fps[n - 1], 0};
    idx->add(1, reinterpret_cast<const uint8_t*>(last));
    mhash_ = idx.get();
    index_ = std::move(idx);
  }
  void SetK(int k) override { mhash_->nflip = k / nhash_; }

 private:
  int nhash_, b_;
  faiss::IndexBinaryMultiHash* mhash_ = nullptr;
};

// ------------------------------------------------------------- PostgreSQL --
void Exec(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const auto st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    std::string err = PQerrorMessage(c);
    PQclear(r);
    throw std::runtime_error("pg: " + sql.substr(0, 80) + ": " + err);
  }
  PQclear(r);
}

std::string QueryOne(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    std::string err = PQerrorMessage(c);
    PQclear(r);
    throw std::runtime_error("pg: " + err);
  }
  std::string out;
  for (int i = 0; i < PQntuples(r); ++i) out += std::string(PQgetvalue(r, i, 0)) + "\n";
  PQclear(r);
  return out;
}

constexpr const char* kPgQuery =
    "SELECT id FROM fp WHERE (b0 = ANY($2::int4[]) OR b1 = ANY($3::int4[]) OR b2 = ANY($4::int4[]) "
    "OR b3 = ANY($5::int4[])) AND bit_count(int8send(fp # $1::int8)) <= $6::int4";

class PgMethod : public Method {
 public:
  explicit PgMethod(std::string conninfo) : conninfo_(std::move(conninfo)) {}
  ~PgMethod() override { Release(); }
  std::string Name() const override { return "pg"; }
  std::string Settings() const override { return "PostgreSQL " + version_ + ", 4x16-bit block B-trees"; }
  void Build(const std::vector<uint64_t>& fps) override {
    for (int i = 0; i < 2; ++i) {
      conns_[i] = PQconnectdb(conninfo_.c_str());
      if (PQstatus(conns_[i]) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(conns_[i]));
    }
    PGconn* c = conns_[0];
    version_ = QueryOne(c, "SHOW server_version");
    if (!version_.empty()) version_.pop_back();
    Exec(c, "DROP TABLE IF EXISTS fp");
    Exec(c, "BEGIN");
    Exec(c, "CREATE TABLE fp (id bigint NOT NULL, fp bigint NOT NULL, b0 int NOT NULL, b1 int NOT NULL, "
            "b2 int NOT NULL, b3 int NOT NULL)");
    PGresult* r = PQexec(c, "COPY fp FROM STDIN");
    if (PQresultStatus(r) != PGRES_COPY_IN) throw std::runtime_error(PQerrorMessage(c));
    PQclear(r);
    std::string buf;
    buf.reserve(1 << 22);
    char line[128];
    for (size_t i = 0; i < fps.size(); ++i) {
      const uint64_t f = fps[i];
      const int len = std::snprintf(line, sizeof line, "%zu\t%lld\t%u\t%u\t%u\t%u\n", i,
                                    static_cast<long long>(static_cast<int64_t>(f)), unsigned(f & 0xFFFF),
                                    unsigned((f >> 16) & 0xFFFF), unsigned((f >> 32) & 0xFFFF),
                                    unsigned((f >> 48) & 0xFFFF));
      buf.append(line, len);
      if (buf.size() > (1u << 22) - 128 || i + 1 == fps.size()) {
        if (PQputCopyData(c, buf.data(), static_cast<int>(buf.size())) != 1) {
          throw std::runtime_error(PQerrorMessage(c));
        }
        buf.clear();
      }
    }
    if (PQputCopyEnd(c, nullptr) != 1) throw std::runtime_error(PQerrorMessage(c));
    r = PQgetResult(c);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) throw std::runtime_error(PQerrorMessage(c));
    PQclear(r);
    while ((r = PQgetResult(c)) != nullptr) PQclear(r);
    Exec(c, "COMMIT");
    Exec(c, "ALTER TABLE fp ADD PRIMARY KEY (id)");
    for (int b = 0; b < 4; ++b) Exec(c, "CREATE INDEX fp_b" + std::to_string(b) + " ON fp (b" + std::to_string(b) + ")");
    Exec(c, "VACUUM ANALYZE fp");
    for (int i = 0; i < 2; ++i) {
      PGresult* p = PQprepare(conns_[i], "near", kPgQuery, 6, nullptr);
      if (PQresultStatus(p) != PGRES_COMMAND_OK) throw std::runtime_error(PQerrorMessage(conns_[i]));
      PQclear(p);
    }
    bytes_ = std::stod(QueryOne(c, "SELECT pg_total_relation_size('fp')"));
  }
  double OwnBytes(size_t n) const override { return bytes_ / n; }
  bool PreferOwnBytes() const override { return true; }

  static std::string BlockArray(uint64_t q, int block, int r) {
    const unsigned v = unsigned((q >> (16 * block)) & 0xFFFF);
    std::string s = "{";
    s += std::to_string(v);
    for (int i = 0; i < 16 && r >= 1; ++i) {
      s += ',';
      s += std::to_string(v ^ (1u << i));
      for (int j = i + 1; j < 16 && r >= 2; ++j) {
        s += ',';
        s += std::to_string(v ^ (1u << i) ^ (1u << j));
      }
    }
    s += '}';
    return s;
  }

  void QueryOn(PGconn* c, uint64_t q, int k, std::vector<uint64_t>* rows) {
    const int r = k / 4;
    std::string p[6];
    p[0] = std::to_string(static_cast<int64_t>(q));
    for (int b = 0; b < 4; ++b) p[1 + b] = BlockArray(q, b, r);
    p[5] = std::to_string(k);
    const char* vals[6];
    for (int i = 0; i < 6; ++i) vals[i] = p[i].c_str();
    PGresult* res = PQexecPrepared(c, "near", 6, vals, nullptr, nullptr, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
      std::string err = PQerrorMessage(c);
      PQclear(res);
      throw std::runtime_error("pg query: " + err);
    }
    rows->clear();
    for (int i = 0; i < PQntuples(res); ++i) rows->push_back(std::strtoull(PQgetvalue(res, i, 0), nullptr, 10));
    PQclear(res);
  }
  void Query(uint64_t q, int k, std::vector<uint64_t>* rows) override { QueryOn(conns_[0], q, k, rows); }
  void Batch(const uint64_t* qs, size_t n, int k, int threads, std::vector<std::vector<uint64_t>>* rows) override {
    rows->assign(n, {});
    threads = std::clamp(threads, 1, 2);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        for (size_t i = n * t / threads; i < n * (t + 1) / threads; ++i) QueryOn(conns_[t], qs[i], k, &(*rows)[i]);
      });
    }
    for (auto& t : ts) t.join();
  }
  std::string Explain(uint64_t q, int k) {
    const int r = k / 4;
    std::string sql = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE near(" + std::to_string(static_cast<int64_t>(q));
    for (int b = 0; b < 4; ++b) sql += ", '" + BlockArray(q, b, r) + "'";
    sql += ", " + std::to_string(k) + ")";
    return QueryOne(conns_[0], sql);
  }
  void Release() override {
    if (conns_[0]) {
      try {
        Exec(conns_[0], "DROP TABLE IF EXISTS fp");
      } catch (...) {
      }
    }
    for (auto& c : conns_) {
      if (c) PQfinish(c);
      c = nullptr;
    }
  }

 private:
  std::string conninfo_, version_;
  PGconn* conns_[2] = {nullptr, nullptr};
  double bytes_ = 0;
};

std::unique_ptr<Method> MakeMethod(const std::string& spec, const std::string& pg) {
  if (spec == "neardup") return std::make_unique<NeardupMethod>(0);
  if (spec.rfind("neardup-b", 0) == 0) return std::make_unique<NeardupMethod>(std::stoi(spec.substr(9)));
  if (spec == "brute") return std::make_unique<BruteMethod>();
  if (spec == "faiss-flat") return std::make_unique<FaissFlat>();
  if (spec.rfind("faiss-hash", 0) == 0) return std::make_unique<FaissHash>(std::stoi(spec.substr(10)));
  if (spec.rfind("faiss-mhash", 0) == 0) {
    const std::string s = spec.substr(11);
    const size_t x = s.find('x');
    const int h = std::stoi(s.substr(0, x)), b = std::stoi(s.substr(x + 1));
    if (h * b > 64) throw std::runtime_error("faiss-mhash needs nhash*b <= 64");
    return std::make_unique<FaissMultiHash>(h, b);
  }
  if (spec == "pg") {
    if (pg.empty()) throw std::runtime_error("method pg needs --pg CONNINFO");
    return std::make_unique<PgMethod>(pg);
  }
  throw std::runtime_error("unknown method " + spec);
}

// ---------------------------------------------------------------- results --
struct Row {
  uint64_t n = 0;
  int k = 0;
  std::string method, settings;
  double build_s = 0, bytes_rss = 0, bytes_own = -1;
  Percentiles lat;
  size_t single_n = 0, batch_n1 = 0, batch_n2 = 0;
  double qps1 = 0, qps2 = 0;
  double recall = 0;
  uint64_t true_total = 0, found = 0, false_pos = 0;
  size_t checked = 0;
  bool exact = true, ok = true;
  double bytes() const { return bytes_own >= 0 && (bytes_rss <= 0 || prefer_own) ? bytes_own : bytes_rss; }
  bool prefer_own = false;
};

// Compares rows of `got` (sorted here) with the truth; accumulates into row.
void Check(std::vector<uint64_t> got, const std::vector<uint64_t>& truth, Row* row) {
  std::sort(got.begin(), got.end());
  const size_t before = got.size();
  got.erase(std::unique(got.begin(), got.end()), got.end());
  std::vector<uint64_t> common;
  std::set_intersection(got.begin(), got.end(), truth.begin(), truth.end(), std::back_inserter(common));
  row->true_total += truth.size();
  row->found += common.size();
  row->false_pos += (got.size() - common.size()) + (before - got.size());  // duplicates count as errors
  row->checked += 1;
}

std::string Fmt(double v, const char* f = "%.2f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string Json(const Row& r, uint64_t seed) {
  char b[2048];
  std::snprintf(b, sizeof b,
                "{\"n\": %llu, \"k\": %d, \"seed\": %llu, \"method\": \"%s\", \"settings\": \"%s\", \"build_s\": %.3f, "
                "\"bytes_per_fp\": %.2f, \"bytes_per_fp_rss\": %.2f, \"bytes_per_fp_own\": %.2f, \"p50_us\": %.3f, "
                "\"p99_us\": %.3f, \"mean_us\": %.3f, \"single_queries\": %zu, \"qps_1t\": %.1f, \"batch_queries_1t\": %zu, "
                "\"qps_2t\": %.1f, \"batch_queries_2t\": %zu, \"recall\": %.6f, \"false_positives\": %llu, "
                "\"true_matches\": %llu, \"checked_queries\": %zu, \"exact_ok\": %s}",
                (unsigned long long)r.n, r.k, (unsigned long long)seed, r.method.c_str(), r.settings.c_str(), r.build_s,
                r.bytes(), r.bytes_rss, r.bytes_own, r.lat.p50, r.lat.p99, r.lat.mean, r.single_n, r.qps1, r.batch_n1,
                r.qps2, r.batch_n2, r.recall, (unsigned long long)r.false_pos, (unsigned long long)r.true_total,
                r.checked, r.ok ? "true" : "false");
  return b;
}

void PrintHeader() {
  std::printf("%-10s %-2s %-17s %9s %8s %8s %10s %10s %6s %10s %10s %8s %7s %s\n", "N", "k", "method", "build_s",
              "B/fp", "B/fp_own", "p50_us", "p99_us", "n_1q", "qps_1t", "qps_2t", "recall", "falsep", "settings");
}
void PrintRow(const Row& r) {
  std::printf("%-10llu %-2d %-17s %9.2f %8.1f %8.1f %10.2f %10.2f %6zu %10.0f %10.0f %8.6f %7llu %s%s\n",
              (unsigned long long)r.n, r.k, r.method.c_str(), r.build_s, r.bytes(), r.bytes_own, r.lat.p50, r.lat.p99,
              r.single_n, r.qps1, r.qps2, r.recall, (unsigned long long)r.false_pos, r.settings.c_str(),
              r.ok ? "" : "   <-- RECALL FAILURE");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes{1000000};
  std::vector<uint64_t> ks{3, 6};
  size_t nq = 2000;
  uint64_t seed = 42;
  double budget = 15;
  std::string methods = "neardup,brute,faiss-flat,faiss-hash16,faiss-mhash2x32,faiss-mhash4x16";
  std::string pg, json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const std::string v = argv[i + 1];
    if (a == "--n") sizes = ParseList(v);
    else if (a == "--k") ks = ParseList(v);
    else if (a == "--queries") nq = std::stoull(v);
    else if (a == "--seed") seed = std::stoull(v);
    else if (a == "--budget") budget = std::stod(v);
    else if (a == "--methods") methods = v;
    else if (a == "--pg") pg = v;
    else if (a == "--json") json_path = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const int kmax = static_cast<int>(*std::max_element(ks.begin(), ks.end()));
  std::printf("# bench_peers  machine: %s\n", MachineInfo().c_str());
  std::printf("# command:");
  for (int i = 0; i < argc; ++i) std::printf(" %s", argv[i]);
  std::printf("\n# data: seed %llu; N fingerprints = centres uniform random, 1 in 5 with a cluster of 1..4 copies "
              "1..%d bits away, shuffled; queries: %zu per k, even = stored fp with 0..k bits flipped, odd = random\n",
              (unsigned long long)seed, kmax, nq);
  std::printf("# single-query latency: one thread, a time-budgeted (%.0f s) prefix of the queries; batch: all queries "
              "or a budgeted prefix, in chunks; recall: every query a method ran, against the brute-force scan\n",
              budget);
  std::fflush(stdout);

  std::vector<Row> all;
  bool failed = false;
  std::string json = "[\n";
  for (uint64_t n : sizes) {
    auto t0 = Clock::now();
    const size_t rss_start = RssBytes();
    const std::vector<uint64_t> fps = MakeFingerprints(n, kmax, seed + n);
    std::map<int, std::vector<uint64_t>> queries;  // padded by one (faiss MultiHash over-read)
    std::vector<uint64_t> allq;
    std::vector<int> allr;
    for (uint64_t k : ks) {
      auto q = MakeQueries(fps, nq, static_cast<int>(k), seed * 1000003 + n * 31 + k);
      allq.insert(allq.end(), q.begin(), q.end());
      allr.insert(allr.end(), nq, static_cast<int>(k));
      q.push_back(0);
      queries[static_cast<int>(k)] = std::move(q);
    }
    const double gen_s = Seconds(t0, Clock::now());
    t0 = Clock::now();
    auto truth_all = BlockedScan(fps.data(), n, allq.data(), allr.data(), allq.size(), 2);
    const double truth_s = Seconds(t0, Clock::now());
    std::map<int, std::vector<std::vector<uint64_t>>> truth;
    double hits_near = 0;
    for (size_t ki = 0; ki < ks.size(); ++ki) {
      auto& t = truth[static_cast<int>(ks[ki])];
      for (size_t i = 0; i < nq; ++i) {
        t.push_back(std::move(truth_all[ki * nq + i]));
        if (i % 2 == 0) hits_near += t.back().size();
      }
    }
    truth_all.clear();
    truth_all.shrink_to_fit();
    {
      std::ifstream la("/proc/loadavg");
      std::string l;
      std::getline(la, l);
      std::printf("\n# load average at start of N=%llu: %s", (unsigned long long)n, l.c_str());
    }
    std::printf("\n# N=%llu: data generated in %.1f s; ground truth (blocked brute force, 2 threads, %zu queries) in "
                "%.1f s; mean true matches per near query %.2f\n",
                (unsigned long long)n, gen_s, allq.size(), truth_s, hits_near / (ks.size() * (nq / 2.0)));
    PrintHeader();

    for (const std::string& spec : SplitList(methods)) {
      std::unique_ptr<Method> m;
      try {
        m = MakeMethod(spec, pg);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "skip %s: %s\n", spec.c_str(), e.what());
        continue;
      }
      const size_t rss0 = RssBytes();
      t0 = Clock::now();
      try {
        m->Build(fps);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "FAILED to build %s at N=%llu: %s\n", spec.c_str(), (unsigned long long)n, e.what());
        failed = true;
        m->Release();
        continue;
      }
      const double build_s = Seconds(t0, Clock::now());
      const size_t rss1 = RssBytes();
      for (uint64_t k64 : ks) {
        const int k = static_cast<int>(k64);
        Row row;
        row.n = n;
        row.k = k;
        row.method = m->Name();
        row.settings = m->Settings();
        row.build_s = build_s;
        row.bytes_rss = (static_cast<double>(rss1) - static_cast<double>(rss0)) / n;
        row.bytes_own = m->OwnBytes(n);
        row.prefer_own = m->PreferOwnBytes();
        m->SetK(k);
        const auto& q = queries[k];
        const auto& tr = truth[k];
        try {
          if (spec == "pg" && k == static_cast<int>(ks.front())) {
            std::printf("# pg plan (k=%d, one near query):\n", k);
            std::string plan = static_cast<PgMethod*>(m.get())->Explain(q[0], k);
            for (size_t p = 0, e; p < plan.size(); p = e + 1) {
              e = plan.find('\n', p);
              std::printf("#   %s\n", plan.substr(p, e - p).c_str());
            }
          }
          // Single queries, one thread, a time-budgeted prefix.
          std::vector<double> lat;
          std::vector<uint64_t> rows;
          const auto s0 = Clock::now();
          for (size_t i = 0; i < nq; ++i) {
            const auto a = Clock::now();
            m->Query(q[i], k, &rows);
            const auto b = Clock::now();
            lat.push_back(Seconds(a, b) * 1e6);
            Check(rows, tr[i], &row);
            if (i >= 20 && Seconds(s0, b) > budget) break;
          }
          row.lat = Summarize(lat);
          row.single_n = lat.size();
          // Batches on 1 and 2 threads: chunks of ~2 s of single-query work. Passes over the query
          // set repeat until at least 1 s was measured (fast methods) or the budget is spent (slow
          // ones stop early, after at least one chunk). Recall is checked on the first pass.
          for (int threads : {1, 2}) {
            const size_t chunk =
                std::clamp<size_t>(static_cast<size_t>(2.0 / std::max(row.lat.p50 * 1e-6, 1e-9)), 4, nq);
            std::vector<std::vector<uint64_t>> out;
            size_t done = 0, pos = 0;
            double spent = 0;
            bool first_pass = true;
            for (int iter = 0; iter < 1000000; ++iter) {
              if (done > 0 && (spent >= budget || (!first_pass && spent >= 1.0))) {
                break;
              }
              const size_t c = std::min(chunk, nq - pos);
              const auto a = Clock::now();
              m->Batch(q.data() + pos, c, k, threads, &out);
              spent += Seconds(a, Clock::now());
              if (first_pass) {
                for (size_t i = 0; i < c; ++i) Check(out[i], tr[pos + i], &row);
              }
              done += c;
              pos += c;
              if (pos == nq) {
                pos = 0;
                first_pass = false;
              }
            }
            (threads == 1 ? row.qps1 : row.qps2) = done / spent;
            (threads == 1 ? row.batch_n1 : row.batch_n2) = done;
          }
        } catch (const std::exception& e) {
          std::fprintf(stderr, "FAILED %s k=%d N=%llu: %s\n", spec.c_str(), k, (unsigned long long)n, e.what());
          failed = true;
          continue;
        }
        row.recall = row.true_total ? static_cast<double>(row.found) / row.true_total : 1.0;
        row.ok = !m->Exact(k) || (row.found == row.true_total && row.false_pos == 0);
        if (!row.ok) {
          failed = true;
          std::fprintf(stderr,
                       "RECALL FAILURE: %s k=%d N=%llu recall %.6f (%llu of %llu) false positives %llu over %zu "
                       "checked queries\n",
                       row.method.c_str(), k, (unsigned long long)n, row.recall, (unsigned long long)row.found,
                       (unsigned long long)row.true_total, (unsigned long long)row.false_pos, row.checked);
        }
        PrintRow(row);
        all.push_back(row);
        json += "  " + Json(row, seed) + ",\n";
        if (!json_path.empty()) {
          std::string j = json;
          j.erase(j.size() - 2, 1);
          std::ofstream(json_path) << j << "]\n";
        }
      }
      m->Release();
      m.reset();
    }
    std::printf("# N=%llu done; process peak RSS so far %.2f GB (data + ground truth %.2f GB)\n",
                (unsigned long long)n, PeakRssBytes() / 1e9, (RssBytes() - rss_start) / 1e9);
  }

  // Ratio tables: each peer against neardup (default and fastest neardup setting), per N and k.
  std::printf("\n# ratios: peer / neardup for p50, p99, bytes, build; neardup / peer for qps "
              "(> 1 means neardup is better)\n");
  std::printf("%-10s %-2s %-17s %-10s %9s %9s %9s %9s %9s %9s\n", "N", "k", "peer", "vs", "p50", "p99", "B/fp",
              "build", "qps_1t", "qps_2t");
  for (const Row& base : all) {
    if (base.method.rfind("neardup", 0) != 0) continue;
    // The fastest neardup setting for (N, k) is the one with the lowest p50.
    const Row* fastest = &base;
    for (const Row& r : all) {
      if (r.n == base.n && r.k == base.k && r.method.rfind("neardup", 0) == 0 && r.lat.p50 < fastest->lat.p50) {
        fastest = &r;
      }
    }
    const bool is_default = base.method == "neardup";
    const bool is_fastest = fastest == &base;
    if (!is_default && !is_fastest) continue;
    const std::string tag = is_default && is_fastest ? "default=fastest" : is_default ? "default" : "fastest";
    std::printf("# N=%llu k=%d neardup %s: %s\n", (unsigned long long)base.n, base.k, tag.c_str(),
                base.method.c_str());
    for (const Row& r : all) {
      if (r.n != base.n || r.k != base.k || r.method.rfind("neardup", 0) == 0) continue;
      std::printf("%-10llu %-2d %-17s %-10s %9s %9s %9s %9s %9s %9s\n", (unsigned long long)r.n, r.k, r.method.c_str(),
                  base.method.c_str(), Fmt(r.lat.p50 / base.lat.p50).c_str(), Fmt(r.lat.p99 / base.lat.p99).c_str(),
                  Fmt(r.bytes() / base.bytes()).c_str(), Fmt(r.build_s / base.build_s).c_str(),
                  Fmt(base.qps1 / r.qps1).c_str(), Fmt(base.qps2 / r.qps2).c_str());
    }
  }
  if (json.size() > 2) json.erase(json.size() - 2, 1);
  json += "]\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  {
    std::ifstream la("/proc/loadavg");
    std::string l;
    std::getline(la, l);
    std::printf("# peak RSS %.2f GB; load average at end: %s\n", PeakRssBytes() / 1e9, l.c_str());
  }
  if (failed) {
    std::fprintf(stderr, "bench_peers: FAILURES above (RECALL FAILURE or FAILED)\n");
    return 3;
  }
  return 0;
}
