// PgEngine: see include/neardup/pg/pg_engine.h for the contract and
// docs/postgresql.md for the schema and why exactly one of concurrent
// near-duplicates is kept.
#include "neardup/pg/pg_engine.h"

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "neardup/dedup/near_dup_set.h"
#include "neardup/engine/namespace_record.h"
#include "neardup/text/fingerprint.h"
#include "neardup/text/similarity.h"
#include "pg/pg_conn.h"
#include "pg/pg_rule.h"
#include "engine/shared_store_engine.h"

namespace neardup {
namespace {


constexpr int64_t kNoRetentionWindowMs = 7LL * 24 * 3600 * 1000;
// The table layout a namespace is created with (its record's "layout").
// 3: each block index carries (bN, ts) INCLUDE (fp, no), so that the radius
// test is an index-only scan. 2 (before 2026-11-24): block indexes (bN)
// alone; still served, by the same queries, with the radius test on heap
// rows. 1 (anchors in an int[] with a GIN index) is refused.
constexpr int kLayout = 3;
constexpr int kOldestServedLayout = 2;

// The shared tables and functions (docs/postgresql.md). Created once per
// database, under an advisory lock so that instances starting together do
// not race on CREATE OR REPLACE.
constexpr const char* kSchemaSql = R"SQL(
SELECT pg_advisory_xact_lock(7236784512390871);
CREATE TABLE IF NOT EXISTS neardup_namespaces (
  name text PRIMARY KEY,
  gen bigint NOT NULL UNIQUE,
  record text NOT NULL,
  version bigint NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now());
CREATE SEQUENCE IF NOT EXISTS neardup_gen_seq;
CREATE TABLE IF NOT EXISTS neardup_counters (
  gen bigint NOT NULL, slot int NOT NULL,
  checks bigint NOT NULL DEFAULT 0, duplicates bigint NOT NULL DEFAULT 0,
  inserted bigint NOT NULL DEFAULT 0, deleted bigint NOT NULL DEFAULT 0, expired bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (gen, slot));
CREATE OR REPLACE FUNCTION neardup_lock(ns_key bigint, keys bigint[], ns text, OUT gen bigint, OUT version bigint)
LANGUAGE plpgsql AS $f$
DECLARE k bigint;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(ns_key);
  FOREACH k IN ARRAY keys LOOP PERFORM pg_advisory_xact_lock(k); END LOOP;
  SELECT n.gen, n.version INTO gen, version FROM neardup_namespaces n WHERE n.name = ns;
END $f$;
CREATE OR REPLACE FUNCTION neardup_documents(ns text)
RETURNS TABLE (id text, ts timestamptz, fingerprint text, kept boolean, duplicate_of text, distance int,
               similarity real)
LANGUAGE plpgsql STABLE AS $f$
DECLARE g bigint;
BEGIN
  SELECT n.gen INTO g FROM neardup_namespaces n WHERE n.name = ns;
  IF g IS NULL THEN RAISE EXCEPTION 'namespace "%" does not exist', ns; END IF;
  RETURN QUERY EXECUTE format(
    'SELECT d.id, to_timestamp(d.ts / 1000.0), lpad(to_hex(d.fp), 16, ''0''), true, NULL::text, NULL::int, NULL::real
       FROM %I d
     UNION ALL
     SELECT x.id, to_timestamp(x.ts / 1000.0), NULL, false, d.id, x.distance, x.similarity
       FROM %I x JOIN %I d ON d.no = x.kept_no',
    'nd_' || g || '_docs', 'nd_' || g || '_dups', 'nd_' || g || '_docs');
END $f$;
)SQL";

}  // namespace

namespace pg_internal {

std::string EncodeNs(const NamespaceSettings& s, const Fingerprinter& fp, int64_t window_ms, int design_k,
                     int layout) {
  return EncodeNamespaceRecord(
      s, fp, nlohmann::json{{"window_ms", window_ms}, {"design_k", design_k}, {"layout", layout}}.dump());
}

Result<std::shared_ptr<NsInfo>> DecodeNs(const std::string& name, const std::string& raw, int64_t gen,
                                         int64_t version) {
  auto record = DecodeNamespaceRecord(name, raw, "postgresql");
  if (!record.ok()) return record.status();
  NEARDUP_RETURN_IF_ERROR(RequireAnchorScheme(name, *record));
  const nlohmann::json j = nlohmann::json::parse(raw, nullptr, false);
  auto info = std::make_shared<NsInfo>();
  info->name = name;
  info->raw = raw;
  info->gen = gen;
  info->version = version;
  info->settings = record->settings;
  info->fp = record->fingerprinter;
  info->window_ms = j.value("window_ms", int64_t{0});
  info->design_k = j.value("design_k", 0);
  if (info->window_ms <= 0 || info->design_k < 1 || info->design_k > 15) {
    return Status::Corruption("namespace \"" + name + "\": unreadable record in postgresql");
  }
  info->layout = j.value("layout", 1);
  if (info->layout < kOldestServedLayout) {
    return Status::FailedPrecondition("namespace \"" + name +
                                      "\" was created by an earlier build (anchors in a GIN index); recreate it "
                                      "(docs/postgresql.md)");
  }
  if (info->layout > kLayout) {
    return Status::FailedPrecondition("namespace \"" + name + "\" has table layout " +
                                      std::to_string(info->layout) + ", newer than this build's " +
                                      std::to_string(kLayout) + "; serve it with a newer build");
  }
  return info;
}
}  // namespace pg_internal

namespace {
using namespace pg_internal;


class PgEngine final : public SharedStoreEngine {
 public:
  PgEngine(const PgEngineOptions& options, std::string conninfo)
      : options_(options), pool_(conninfo, options.pool_size) {
    if (!options_.clock_ms) options_.clock_ms = SystemNowMs;
    std::random_device rd;
    slot_base_ = static_cast<int>(rd() % 4096);
  }
  ~PgEngine() override { (void)Shutdown(); }

  Status Init() {
    auto c = pool_.Acquire();
    auto r = c->ExecMulti(std::string("BEGIN;") + kSchemaSql + "COMMIT;");
    return r.status();
  }

  // ---- namespaces -------------------------------------------------------

  Result<NamespaceStats> GetNamespace(const std::string& name) override {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(name));
    auto info = Load(name, /*fresh=*/true);
    if (!info.ok()) return info.status();
    NamespaceStats s{name, info.value()->settings};
    Status st = Retrying([&](PgConn& c) -> Status {
      auto r = c.Exec(
          "SELECT coalesce(sum(checks),0), coalesce(sum(duplicates),0), coalesce(sum(inserted),0), "
          "coalesce(sum(deleted),0), coalesce(sum(expired),0) FROM neardup_counters WHERE gen = $1",
          {std::to_string(info.value()->gen)});
      if (!r.ok()) return r.status();
      s.checks = static_cast<uint64_t>(r->i64(0, 0));
      s.duplicates = static_cast<uint64_t>(r->i64(0, 1));
      s.inserted = static_cast<uint64_t>(r->i64(0, 2));
      s.deleted = static_cast<uint64_t>(r->i64(0, 3));
      s.expired = static_cast<uint64_t>(r->i64(0, 4));
      return Status::OK();
    });
    if (!st.ok()) return st;
    const uint64_t gone = s.deleted + s.expired;
    s.documents = s.inserted > gone ? s.inserted - gone : 0;
    return s;
  }

  Status DeleteNamespace(const std::string& name) override {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(name));
    return Retrying([&](PgConn& c) -> Status {
      auto r = c.ExecMulti("BEGIN; SELECT pg_advisory_xact_lock(" + std::to_string(NamespaceLockKey(name)) +
                           "); DELETE FROM neardup_namespaces WHERE name = " + c.Literal(name) + " RETURNING gen");
      if (!r.ok()) return r.status();
      if (r->size() == 0) {
        (void)c.ExecMulti("ROLLBACK");
        Forget(name);
        return Status::NotFound("namespace \"" + name + "\" does not exist");
      }
      const std::string g = std::to_string(r->i64(0, 0));
      auto d = c.ExecMulti("DROP TABLE IF EXISTS nd_" + g + "_docs, nd_" + g + "_dups, nd_" + g +
                           "_anchors; DROP SEQUENCE IF EXISTS nd_" +
                           g + "_no; DELETE FROM neardup_counters WHERE gen = " + g + "; COMMIT");
      Forget(name);
      return d.status();
    });
  }

  std::vector<std::string> ListNamespaces() override {
    std::vector<std::string> out;
    (void)Retrying([&](PgConn& c) -> Status {
      auto r = c.Exec("SELECT name FROM neardup_namespaces ORDER BY name");
      if (!r.ok()) return r.status();
      out.clear();
      for (int i = 0; i < r->size(); ++i) out.emplace_back(r->text(i, 0));
      return Status::OK();
    });
    return out;
  }

  // ---- documents --------------------------------------------------------

  Result<DocumentInfo> GetDocument(const std::string& ns, const std::string& id) override {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(ns));
    NEARDUP_RETURN_IF_ERROR(ValidateDocumentId(id));
    DocumentInfo info;
    Status st = Retrying([&](PgConn& c) -> Status {
      auto n = Load(ns);
      if (!n.ok()) return n.status();
      auto r = c.Exec("SELECT fp, hf, ts FROM " + n.value()->Table("docs") +
                          " WHERE id = $1 AND ts >= $2 ORDER BY no DESC LIMIT 1",
                      {id, std::to_string(n.value()->Cutoff(options_.clock_ms()))});
      if (!r.ok()) return StaleOr(ns, c, r.status());
      if (r->size() == 0) return Status::NotFound("document \"" + id + "\" not found in namespace \"" + ns + "\"");
      info = DocumentInfo{id, static_cast<uint64_t>(r->i64(0, 0)), r->boolean(0, 1), r->i64(0, 2)};
      return Status::OK();
    });
    if (!st.ok()) return st;
    return info;
  }

  Status DeleteDocument(const std::string& ns, const std::string& id) override {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(ns));
    NEARDUP_RETURN_IF_ERROR(ValidateDocumentId(id));
    return Retrying([&](PgConn& c) -> Status {
      auto info = Load(ns);
      if (!info.ok()) return info.status();
      const NsInfo& n = *info.value();
      // The id's lock: a concurrent check of the same id waits (its replay
      // test and our delete are ordered).
      const std::vector<int64_t> keys = {LockKey('i', n.gen, id)};
      auto locked = c.ExecMulti("BEGIN; SELECT * FROM neardup_lock(" + std::to_string(NamespaceLockKey(ns)) + ", '" +
                                PgArray(keys) + "', " + c.Literal(ns) + ")");
      if (!locked.ok()) return StaleOr(ns, c, locked.status());
      if (locked->null(0, 0) || locked->i64(0, 0) != n.gen) {
        (void)c.ExecMulti("ROLLBACK");
        Forget(ns);
        return Status::Unavailable("namespace changed");
      }
      // Its postings go in the same statement (found by the anchors its row lists).
      auto r = c.Exec("WITH d AS (DELETE FROM " + n.Table("docs") +
                          " WHERE id = $1 AND ts >= $2 RETURNING no, ts, anchors), a AS (DELETE FROM " +
                          n.Table("anchors") +
                          " p USING d WHERE p.anchor = ANY(d.anchors) AND p.ts = d.ts AND p.no = d.no) "
                          "SELECT no FROM d",
                      {id, std::to_string(n.Cutoff(options_.clock_ms()))});
      if (!r.ok()) return StaleOr(ns, c, r.status());
      if (r->size() == 0) {
        (void)c.ExecMulti("ROLLBACK");
        return Status::NotFound("document \"" + id + "\" not found in namespace \"" + ns + "\"");
      }
      return c.Run({CounterStmt(n, ConnSlot(c), 0, 0, r->size(), 0), {"COMMIT", {}}}).status();
    });
  }

  EngineMetrics Metrics() override {
    EngineMetrics m = SharedStoreEngine::Metrics();
    auto c = pool_.Acquire();
    auto r = c->Exec("SELECT pg_database_size(current_database())");
    if (r.ok() && r->size() == 1) m.disk_bytes = static_cast<uint64_t>(r->i64(0, 0));
    m.store_commits = commits_.load();
    m.store_commit_docs = commits_.load();
    return m;
  }

 private:
  static Status Unavailable() { return ShuttingDown(); }

  // Runs fn on a pooled connection; retries it while it fails with a
  // retryable error (lost connection, deadlock, stale namespace), within
  // the retry budget, with a growing pause.
  Status Retrying(const std::function<Status(PgConn&)>& fn) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.retry_budget_ms);
    int pause_ms = 5;
    for (;;) {
      Status st;
      bool retry = false;
      {
        auto c = pool_.Acquire();
        st = fn(*c);
        retry = !st.ok() && st.code() == Status::Code::kUnavailable && (c->Retryable() || stale_retry_);
        stale_retry_ = false;
      }
      if (!retry || std::chrono::steady_clock::now() >= deadline) return st;
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      pause_ms = std::min(pause_ms * 2, 200);
    }
  }

  // A statement failed: an undefined table means the namespace changed under
  // the cached view (dropped or re-created): forget it, so the retry reloads.
  Status StaleOr(const std::string& ns, PgConn& c, Status st) {
    if (c.sqlstate() == "42P01") Forget(ns);
    return st;
  }

  // ---- namespace records ------------------------------------------------

  Result<std::shared_ptr<const NsInfo>> Load(const std::string& name, bool fresh = false) {
    const int64_t now = SystemNowMs();
    if (!fresh) {
      if (auto hit = cache_.Fresh(name, now, 1000)) return std::shared_ptr<const NsInfo>(hit);
    }
    std::shared_ptr<NsInfo> info;
    Status st = Retrying([&](PgConn& c) -> Status {
      auto r = c.Exec("SELECT record, gen, version FROM neardup_namespaces WHERE name = $1", {name});
      if (!r.ok()) return r.status();
      if (r->size() == 0) {
        Forget(name);
        return Status::NotFound("namespace \"" + name + "\" does not exist");
      }
      auto decoded = DecodeNs(name, std::string(r->text(0, 0)), r->i64(0, 1), r->i64(0, 2));
      if (!decoded.ok()) return decoded.status();
      info = decoded.value();
      return Status::OK();
    });
    if (!st.ok()) return st;
    info->loaded_ms = now;
    cache_.Put(name, info);
    return std::shared_ptr<const NsInfo>(info);
  }

  void Forget(const std::string& name) { cache_.Forget(name); }

  // Read, merge and write under the namespace's advisory lock (exclusive):
  // checks hold it shared, so a change waits for the checks in flight and
  // later checks see the new record (their version test).
  Status ModifyNamespace(const std::string& name, const SettingsMerge& merge, bool* created) override {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(name));
    Status st = Retrying([&](PgConn& c) -> Status {
      auto r = c.ExecMulti("BEGIN; SELECT pg_advisory_xact_lock(" + std::to_string(NamespaceLockKey(name)) +
                           "); SELECT record, gen, version FROM neardup_namespaces WHERE name = " + c.Literal(name));
      if (!r.ok()) return r.status();
      std::shared_ptr<NsInfo> current;
      if (r->size() == 1) {
        auto d = DecodeNs(name, std::string(r->text(0, 0)), r->i64(0, 1), r->i64(0, 2));
        if (!d.ok()) {
          (void)c.ExecMulti("ROLLBACK");
          return d.status();
        }
        current = d.value();
      }
      auto settings = merge(current ? &current->settings : nullptr);
      Status valid = settings.ok() ? settings->Validate() : settings.status();
      if (valid.ok()) valid = current ? Replace(c, *current, settings.value()) : Create(c, name, settings.value());
      if (!valid.ok()) {
        (void)c.ExecMulti("ROLLBACK");
        return valid;
      }
      auto done = c.ExecMulti("COMMIT");
      if (!done.ok()) return done.status();
      if (created) *created = current == nullptr;
      return Status::OK();
    });
    Forget(name);
    return st;
  }

  Status Replace(PgConn& c, const NsInfo& n, const NamespaceSettings& settings) {
    if (Status s = CheckDecisionSettingsUnchanged(n.name, n.settings, settings); !s.ok()) {
      auto any = c.Exec("SELECT 1 FROM " + n.Table("docs") + " WHERE ts >= $1 LIMIT 1",
                        {std::to_string(n.Cutoff(options_.clock_ms()))});
      if (!any.ok()) return any.status();
      if (any->size() > 0) return s;
    }
    if (settings.k > n.design_k || settings.recheck.short_k > n.design_k) {
      return Status::FailedPrecondition("namespace \"" + n.name + "\" was created with fingerprint blocks for radii <= " +
                                        std::to_string(n.design_k) +
                                        " (docs/postgresql.md); recreate it to raise k or recheck.short_k");
    }
    auto fp = MakeNamespaceFingerprinter(settings);
    if (!fp.ok()) return fp.status();
    // The tables keep the layout they were created with: so does the record.
    const std::string raw = EncodeNs(settings, *fp.value(), n.window_ms, n.design_k, n.layout);
    return c.Exec("UPDATE neardup_namespaces SET record = $2, version = version + 1 WHERE name = $1", {n.name, raw})
        .status();
  }

  Status Create(PgConn& c, const std::string& name, const NamespaceSettings& settings) {
    auto fp = MakeNamespaceFingerprinter(settings);
    if (!fp.ok()) return fp.status();
    const int design_k = std::max({settings.k, settings.recheck.short_k, 3});
    const int64_t window_ms =
        settings.retention_seconds > 0
            ? std::max<int64_t>(settings.retention_seconds * 1000 / std::max(options_.windows_per_retention, 1), 60000)
            : kNoRetentionWindowMs;
    auto g = c.Exec("SELECT nextval('neardup_gen_seq')");
    if (!g.ok()) return g.status();
    NsInfo n;
    n.gen = g->i64(0, 0);
    n.design_k = design_k;
    const std::string docs = n.Table("docs"), dups = n.Table("dups");
    std::string ddl = "CREATE TABLE " + docs + " (no bigint NOT NULL, id text NOT NULL, ts bigint NOT NULL, " +
                      "fp bigint NOT NULL, ch bigint NOT NULL, hf boolean NOT NULL, ";
    for (int t = 0; t < n.blocks(); ++t) ddl.append("b").append(std::to_string(t)).append(" int, ");
    ddl += "anchors int[], extra bytea) PARTITION BY RANGE (ts); ";
    // The radius test reads fp from the block index, the retention filter ts,
    // and no names the candidate: an index-only scan, the heap row read only
    // for a fingerprint within the radius.
    for (int t = 0; t < n.blocks(); ++t) {
      ddl += "CREATE INDEX ON " + docs + " (b" + std::to_string(t) + ", ts) INCLUDE (fp, no); ";
    }
    ddl += "CREATE INDEX ON " + docs + " (ch); CREATE INDEX ON " + docs + " (id); CREATE INDEX ON " + docs + " (no); ";
    // One row per (anchor, kept document): a stop key's count and the
    // candidates' n-gram counts come from an index-only scan.
    ddl += "CREATE TABLE " + n.Table("anchors") +
           " (anchor int NOT NULL, shingles int NOT NULL, ts bigint NOT NULL, no bigint NOT NULL) "
           "PARTITION BY RANGE (ts); CREATE INDEX ON " +
           n.Table("anchors") + " (anchor, ts) INCLUDE (no, shingles); ";
    ddl += "CREATE TABLE " + dups + " (id text NOT NULL, ts bigint NOT NULL, kept_no bigint NOT NULL, " +
           "distance int NOT NULL, similarity real NOT NULL) PARTITION BY RANGE (ts); CREATE INDEX ON " + dups +
           " (kept_no); CREATE SEQUENCE " + n.Table("no") + ";";
    NEARDUP_RETURN_IF_ERROR(c.ExecMulti(ddl).status());
    const std::string raw = EncodeNs(settings, *fp.value(), window_ms, design_k, kLayout);
    auto inserted = c.Exec("INSERT INTO neardup_namespaces (name, gen, record) VALUES ($1, $2, $3)",
                           {name, std::to_string(n.gen), raw});
    if (!inserted.ok() && c.sqlstate() == "23505") {
      // A peer's record appeared although the namespace's advisory lock was
      // ours (seen once in CI under ASan, in ExactlyOneKeptWhenChecksDieMidTransaction;
      // cause not found): roll back and retry, and the retry merges into it.
      stale_retry_ = true;
      return Status::Unavailable("namespace \"" + name + "\" was created by a peer meanwhile; retry");
    }
    return inserted.status();
  }

  Status EnsureNamespace(const std::string& ns) override { return GetOrCreate(ns).status(); }

  Result<std::shared_ptr<const NsInfo>> GetOrCreate(const std::string& name) {
    // Created unless a peer created it first (then the merge keeps its settings).
    auto keep_or_default = [&](const NamespaceSettings* current) -> Result<NamespaceSettings> {
      return current ? *current : options_.default_settings;
    };
    return LoadOrCreate(
        name, options_.auto_create, [&] { return Load(name); },
        [&] { return ModifyNamespace(name, keep_or_default, nullptr); });
  }


  // ---- partitions -------------------------------------------------------

  // The partitions of window w exist (created here or by a peer); old ones
  // past retention are dropped now and then.
  Status EnsurePartition(PgConn& c, const NsInfo& n, int64_t w) {
    const std::string key = std::to_string(n.gen) + ":" + std::to_string(w);
    {
      std::lock_guard lk(part_mu_);
      if (parts_.count(key)) return Status::OK();
    }
    const std::string sql = "BEGIN; " + PartitionDdlLockSql(n) + PartitionsSql(n, w) + "COMMIT";
    NEARDUP_RETURN_IF_ERROR(c.ExecMulti(sql).status());
    std::lock_guard lk(part_mu_);
    parts_.insert(key);
    return Status::OK();
  }

  // Drops the partitions whose every document is past retention (at most
  // once a minute per namespace and instance), counting their documents as
  // expired.
  void DropExpired(PgConn& c, const NsInfo& n, int64_t now) {
    if (n.settings.retention_seconds <= 0) return;
    {
      std::lock_guard lk(part_mu_);
      int64_t& last = last_drop_[n.gen];
      if (now - last < 60000 && last != 0) return;
      last = now;
    }
    const int64_t cutoff = n.Cutoff(now);
    auto r = c.Exec("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                    "WHERE i.inhparent = $1::regclass",
                    {n.Table("docs")});
    if (!r.ok()) return;
    for (int i = 0; i < r->size(); ++i) {
      const std::string name(r->text(i, 0));
      const size_t at = name.rfind("_w");
      if (at == std::string::npos) continue;
      std::string ws = name.substr(at + 2);
      const bool neg = !ws.empty() && ws[0] == 'n';
      const int64_t w = (neg ? -1 : 1) * std::atoll(ws.c_str() + (neg ? 1 : 0));
      if ((w + 1) * n.window_ms > cutoff) continue;
      auto dropped = c.ExecMulti("BEGIN; " + PartitionDdlLockSql(n) + CounterSqlExpired(n, n.Partition("docs", w)) + "; DROP TABLE IF EXISTS " +
                                 n.Partition("docs", w) + ", " + n.Partition("dups", w) + ", " +
                                 n.Partition("anchors", w) + "; COMMIT");
      if (!dropped.ok()) continue;  // a peer dropped it, or a lock wait: next time
      std::lock_guard lk(part_mu_);
      parts_.erase(std::to_string(n.gen) + ":" + std::to_string(w));
    }
  }

  // ---- counters ---------------------------------------------------------

  // Counters are spread over slots (one per connection of each instance) so
  // that concurrent checks do not queue on one row.
  PgStmt CounterStmt(const NsInfo& n, int conn, int checks, int duplicates, int deleted, int inserted) const {
    return {"INSERT INTO neardup_counters AS c (gen, slot, checks, duplicates, inserted, deleted) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (gen, slot) DO UPDATE SET checks = c.checks + EXCLUDED.checks, "
            "duplicates = c.duplicates + EXCLUDED.duplicates, inserted = c.inserted + EXCLUDED.inserted, "
            "deleted = c.deleted + EXCLUDED.deleted",
            {std::to_string(n.gen), std::to_string((slot_base_ + conn) % 4096), std::to_string(checks),
             std::to_string(duplicates), std::to_string(inserted), std::to_string(deleted)}};
  }
  std::string CounterSqlExpired(const NsInfo& n, const std::string& partition) const {
    return "INSERT INTO neardup_counters AS c (gen, slot, expired) SELECT " + std::to_string(n.gen) +
           ", -1, count(*) FROM " + partition +
           " ON CONFLICT (gen, slot) DO UPDATE SET expired = c.expired + EXCLUDED.expired";
  }

  // ---- checks -----------------------------------------------------------

  Result<CheckOutcome> CheckOne(const std::string& ns, const DocumentInput& doc, CheckMode mode) override {
    NEARDUP_RETURN_IF_ERROR(ValidateDocumentId(doc.id));
    if (doc.text.empty()) return Status::InvalidArgument("field \"text\" must be a non-empty string");
    CheckOutcome out;
    Status st = Retrying([&](PgConn& c) -> Status {
      auto info = GetOrCreate(ns);
      if (!info.ok()) return info.status();
      auto r = CheckWith(c, *info.value(), doc, mode);
      if (!r.ok()) return r.status();
      out = std::move(r).value();
      return Status::OK();
    });
    if (!st.ok()) return st;
    return out;
  }

  // The check's transaction (docs/postgresql.md): lock, read, decide, write,
  // commit; the answer only once COMMIT returned. Three round trips, each a
  // pipeline of prepared statements: (BEGIN, locks, anchor postings), the
  // candidate rows, (writes, counters, COMMIT).
  Result<CheckOutcome> CheckWith(PgConn& c, const NsInfo& n, const DocumentInput& doc, CheckMode mode) {
    const int64_t now = options_.clock_ms();
    CheckRun run(n, doc, mode, now);
    const bool query = mode == CheckMode::kQueryOnly;
    const bool may_store = !query && run.ts >= run.cutoff;
    if (!Step("started")) return Abandon(c);
    if (may_store) {
      NEARDUP_RETURN_IF_ERROR(EnsurePartition(c, n, n.Window(run.ts)));
      DropExpired(c, n, now);
    }
    const std::string cut = std::to_string(run.cutoff);
    // 1. Lock (not for a query): every key the rule can reach a conflicting
    // document through, sorted. Then the anchor postings.
    std::vector<PgStmt> first;
    if (!query) {
      std::vector<int64_t> keys = {LockKey('i', n.gen, doc.id), LockKey('e', n.gen, run.sig.content_hash)};
      if (run.sig.has_features) {
        for (int t = 0; t < n.blocks(); ++t) {
          keys.push_back(LockKey('b', n.gen, (static_cast<uint64_t>(t) << 32) ^
                                                 static_cast<uint64_t>(n.BlockKey(run.sig.fingerprint, t))));
        }
      }
      for (uint32_t a : run.anchors) keys.push_back(LockKey('a', n.gen, uint64_t{a}));
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      first.push_back({"BEGIN", {}});
      first.push_back({"SELECT * FROM neardup_lock($1, $2::bigint[], $3)",
                       {std::to_string(NamespaceLockKey(n.name)), PgArray(keys), n.name}});
    }
    if (!run.anchors.empty()) {
      std::vector<int32_t> a32;
      for (uint32_t a : run.anchors) a32.push_back(static_cast<int32_t>(a));
      first.push_back({"SELECT u.ord, x.no, x.shingles FROM unnest($1::int[]) WITH ORDINALITY u(anchor, ord) "
                       "CROSS JOIN LATERAL (SELECT p.no, p.shingles FROM " + n.Table("anchors") +
                           " p WHERE p.anchor = u.anchor AND p.ts >= $2 LIMIT $3) x",
                       {PgArray(a32), cut, std::to_string(run.policy.recheck.anchor_max_postings + 1)}});
    }
    if (!first.empty()) {
      auto r = c.Run(first);
      if (!r.ok()) return StaleOr(n.name, c, r.status());
      if (!query) {
        const PgRows& locked = (*r)[1];
        if (locked.size() != 1 || locked.null(0, 0) || locked.i64(0, 0) != n.gen || locked.i64(0, 1) != n.version) {
          (void)c.ExecMulti("ROLLBACK");
          Forget(n.name);
          stale_retry_ = true;
          return Status::Unavailable("namespace \"" + n.name + "\" changed during the check; retry");
        }
        if (!Step("locked")) return Abandon(c);
      }
      if (!run.anchors.empty()) {
        const PgRows& rows = r->back();
        std::vector<std::vector<Posting>> postings(run.anchors.size());
        for (int i = 0; i < rows.size(); ++i) {
          const int64_t ord = rows.i64(i, 0);
          if (ord < 1 || ord > static_cast<int64_t>(postings.size())) continue;
          postings[ord - 1].push_back({rows.i64(i, 1), static_cast<uint32_t>(rows.i64(i, 2))});
        }
        ChooseAnchors(run, postings);
      }
    }
    // 2. Read every row the rule can reach (index-only up to the candidates
    // within the radius: CandidatesStmt).
    auto read = c.Run({CandidatesStmt(n, run, cut)});
    if (!read.ok()) return StaleOr(n.name, c, read.status());
    const PgRows& rr = read->front();
    std::vector<Row> rows;
    rows.reserve(static_cast<size_t>(rr.size()));
    for (int i = 0; i < rr.size(); ++i) {
      Row row;
      row.no = rr.i64(i, 0);
      row.id = std::string(rr.text(i, 1));
      row.ts = rr.i64(i, 2);
      row.fp = static_cast<uint64_t>(rr.i64(i, 3));
      row.ch = static_cast<uint64_t>(rr.i64(i, 4));
      row.hf = rr.boolean(i, 5);
      row.sig.content_hash = row.ch;
      row.sig.fingerprint = row.fp;
      row.sig.has_features = row.hf;
      if (!rr.null(i, 6)) (void)DecodeSignatureExtra(rr.bytes(i, 6), &row.sig);  // undecodable: no sketch
      rows.push_back(std::move(row));
    }
    // 3. Decide (NearDupSet's rule), or a replay.
    const Judgement j = Judge(run, rows, n.settings.max_matches, may_store);
    CheckOutcome& out = run.out;
    if (query) return std::move(out);
    std::vector<PgStmt> writes;
    if (j.replay != nullptr) {
      // Idempotent re-send: the earlier answer stored it; nothing changes.
      writes.push_back(CounterStmt(n, ConnSlot(c), 1, 0, 0, 0));
      writes.push_back({"COMMIT", {}});
      auto done = c.Run(writes);
      if (!done.ok()) return done.status();
      return std::move(out);
    }
    const bool store = j.store;
    // 4. Write and commit.
    if (store) writes.push_back(InsertStmt(n, run));
    if (j.dup_row) {
      writes.push_back({"INSERT INTO " + n.Table("dups") +
                            " (id, ts, kept_no, distance, similarity) VALUES ($1, $2, $3, $4, $5)",
                        DuplicateRowValues(run, j.accepted.front())});
    }
    writes.push_back(CounterStmt(n, ConnSlot(c), 1, out.duplicate ? 1 : 0, 0, store ? 1 : 0));
    writes.push_back({"COMMIT", {}});
    if (!Step("writing")) return Abandon(c);
    auto done = c.Run(writes);
    if (!done.ok()) return StaleOr(n.name, c, done.status());
    if (store) {
      out.stored = true;
      commits_.fetch_add(1);
    }
    return std::move(out);
  }

  // The kept document's row (KeptRowValues) and, in the same statement, its
  // postings: one row per anchor it is filed under.
  static PgStmt InsertStmt(const NsInfo& n, const CheckRun& run) {
    PgStmt st;
    st.params = KeptRowValues(n, run);
    std::string values = "nextval('" + n.Table("no") + "')";
    for (size_t i = 1; i <= st.params.size(); ++i) values += ", $" + std::to_string(i);
    st.sql = "INSERT INTO " + n.Table("docs") + " (no, " + KeptRowColumns(n) + ") VALUES (" + values + ")";
    if (run.sketched && !run.filed.empty()) {
      st.params.push_back(PostingShingles(run));
      st.sql = "WITH d AS (" + st.sql + " RETURNING no, ts, anchors) INSERT INTO " + n.Table("anchors") +
               " (anchor, shingles, ts, no) SELECT a, $" + std::to_string(st.params.size()) +
               "::int, d.ts, d.no FROM d, unnest(d.anchors) a";
    }
    return st;
  }

  bool Step(std::string_view step) const { return !options_.step_hook || options_.step_hook(step); }
  Status Abandon(PgConn& c) {
    c.Close();  // as if the process died: the server rolls the transaction back
    return Status::Unavailable("check abandoned (simulated crash)");
  }

  int ConnSlot(PgConn& c) const {
    // The slot of a connection: its address, stable for the engine's life.
    return static_cast<int>((reinterpret_cast<uintptr_t>(&c) >> 4) % 1024);
  }

  PgEngineOptions options_;
  PgPool pool_;
  NamespaceCache<NsInfo> cache_;
  std::mutex part_mu_;
  std::set<std::string> parts_;
  std::unordered_map<int64_t, int64_t> last_drop_;
  int slot_base_ = 0;
  std::atomic<uint64_t> commits_{0};
  static thread_local bool stale_retry_;
};

thread_local bool PgEngine::stale_retry_ = false;

}  // namespace

namespace pg_internal {

// Our own parameters on the URI (pool_size, retry_budget_ms,
// windows_per_retention) are taken out; the rest goes to libpq.
Status TakeUriOptions(PgEngineOptions* o, std::string* conninfo) {
  std::string uri = o->uri;
  const size_t q = uri.find('?');
  if (q == std::string::npos) {
    *conninfo = uri;
    return Status::OK();
  }
  std::string kept;
  std::string_view rest = std::string_view(uri).substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view kv = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const size_t eq = kv.find('=');
    const std::string_view key = kv.substr(0, eq);
    const std::string value(eq == std::string_view::npos ? std::string_view() : kv.substr(eq + 1));
    int* field = key == "pool_size"               ? &o->pool_size
                 : key == "retry_budget_ms"       ? &o->retry_budget_ms
                 : key == "windows_per_retention" ? &o->windows_per_retention
                                                  : nullptr;
    if (field == nullptr) {
      if (!kept.empty()) kept += '&';
      kept.append(kv);
      continue;
    }
    const long v = std::atol(value.c_str());
    if (v < 1 || v > 3600000 || std::to_string(v) != value) {
      return Status::InvalidArgument("store option " + std::string(kv) + ": expected a positive integer");
    }
    *field = static_cast<int>(v);
  }
  *conninfo = uri.substr(0, q) + (kept.empty() ? "" : "?" + kept);
  return Status::OK();
}

}  // namespace pg_internal

Result<std::unique_ptr<Engine>> OpenPgEngine(const PgEngineOptions& given) {
  PgEngineOptions options = given;
  std::string conninfo;
  NEARDUP_RETURN_IF_ERROR(TakeUriOptions(&options, &conninfo));
  NEARDUP_RETURN_IF_ERROR(options.default_settings.Validate());
  if (options.pool_size < 1 || options.pool_size > 1024) return Status::InvalidArgument("pool_size must be 1..1024");
  if (options.windows_per_retention < 1 || options.windows_per_retention > 64) {
    return Status::InvalidArgument("windows_per_retention must be 1..64");
  }
  auto engine = std::make_unique<PgEngine>(options, conninfo);
  NEARDUP_RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace neardup
