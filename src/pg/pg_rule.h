// What the PostgreSQL store's check-and-insert and its bulk import
// (pg_import.h) share, so that both decide and write a document the same
// way: the namespace record, the advisory lock keys, the decision over the
// rows read (NearDupSet's rule) and the values of a kept document's row.
// Internal to src/pg.
#ifndef NEARDUP_SRC_PG_PG_RULE_H_
#define NEARDUP_SRC_PG_PG_RULE_H_

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/shared_store_engine.h"
#include "neardup/dedup/near_dup_set.h"
#include "neardup/engine/namespace_record.h"
#include "neardup/text/fingerprint.h"
#include "neardup/pg/pg_engine.h"
#include "neardup/text/similarity.h"
#include "pg/pg_conn.h"

namespace neardup::pg_internal {

// A namespace as stored in neardup_namespaces.record (JSON) and cached.
struct NsInfo {
  std::string name;
  std::string raw;
  int64_t gen = 0;
  int64_t version = 0;
  NamespaceSettings settings;
  int64_t window_ms = 0;
  int design_k = 3;
  int layout = 3;  // the record's "layout" (pg_engine.cc, kLayout)
  std::shared_ptr<const Fingerprinter> fp;
  int64_t loaded_ms = 0;

  NearDupOptions Policy() const { return PolicyOf(settings); }
  int blocks() const { return design_k + 1; }
  // Table t's key: bits [64 t / n, 64 (t+1) / n) of the fingerprint. Two
  // fingerprints within design_k bits agree on at least one (pigeonhole).
  int64_t BlockKey(uint64_t fp_value, int t) const {
    const int n = blocks(), lo = 64 * t / n, hi = 64 * (t + 1) / n;
    return static_cast<int64_t>((fp_value >> lo) & ((uint64_t{1} << (hi - lo)) - 1));
  }
  int64_t Cutoff(int64_t now) const {
    return settings.retention_seconds > 0 ? now - settings.retention_seconds * 1000
                                          : std::numeric_limits<int64_t>::min();
  }
  int64_t Window(int64_t ts) const { return FloorDiv(ts, window_ms); }
  std::string Table(const char* what) const { return "nd_" + std::to_string(gen) + "_" + what; }
  std::string Partition(const char* what, int64_t w) const {
    return Table(what) + "_w" + (w < 0 ? "n" + std::to_string(-w) : std::to_string(w));
  }
};

// Advisory lock keys: a 64-bit hash of (what, namespace generation, value).
// A collision only makes two unrelated checks wait for each other.
inline int64_t LockKey(char kind, int64_t gen, std::string_view value) {
  std::string buf(1, kind);
  buf.append(reinterpret_cast<const char*>(&gen), sizeof gen);
  buf.append(value);
  return static_cast<int64_t>(XXH3_64bits(buf.data(), buf.size()));
}
inline int64_t LockKey(char kind, int64_t gen, uint64_t value) {
  return LockKey(kind, gen, std::string_view(reinterpret_cast<const char*>(&value), sizeof value));
}
inline int64_t NamespaceLockKey(std::string_view name) { return LockKey('n', 0, name); }

// Partitions are created and dropped under the namespace's DDL lock
// (transaction-scoped), so that instances never race on them.
inline std::string PartitionDdlLockSql(const NsInfo& n) {
  return "SELECT pg_advisory_xact_lock(" + std::to_string(LockKey('p', n.gen, "ddl")) + "); ";
}
// The partitions of time window w of the three tables, unless they exist.
// From layout 3 the documents' and postings' partitions are vacuumed after
// every 20,000 inserts (the default waits for 20% of the table: 2M rows at
// 10M): their lookups are index-only scans, which read the heap for every
// entry on a page the visibility map does not yet mark all-visible.
inline std::string PartitionsSql(const NsInfo& n, int64_t w) {
  const std::string lo = std::to_string(w * n.window_ms), hi = std::to_string((w + 1) * n.window_ms);
  std::string sql;
  for (const char* t : {"docs", "dups", "anchors"}) {
    sql += "CREATE TABLE IF NOT EXISTS " + n.Partition(t, w) + " PARTITION OF " + n.Table(t) + " FOR VALUES FROM (" +
           lo + ") TO (" + hi + ")";
    if (n.layout >= 3 && std::string_view(t) != "dups") {
      sql += " WITH (autovacuum_vacuum_insert_threshold = 20000, autovacuum_vacuum_insert_scale_factor = 0)";
    }
    sql += "; ";
  }
  return sql;
}

// A stored document read back as a candidate.
struct Row {
  int64_t no = 0;
  std::string id;
  int64_t ts = 0;
  uint64_t fp = 0;
  uint64_t ch = 0;
  bool hf = false;
  DocSignature sig;  // content_hash, fingerprint, has_features and (when stored) the sketch
};

// One check: what it derives from the document and the namespace.
struct CheckRun : CheckBasis {
  CheckRun(const NsInfo& ns, const DocumentInput& d, CheckMode m, int64_t now)
      : CheckBasis(*ns.fp, ns.Policy(), d, m, ns.Cutoff(now), now), n(ns) {
    if (sketched && policy.recheck.anchors > 0) anchors = sig.sketch.anchors;
    // NearDupSet::SearchRadius: short texts search max(k, short_k).
    radius = sketched && IsShortText(policy.recheck, sig.num_chars) ? std::max(policy.k, policy.recheck.short_k)
                                                                    : policy.k;
  }
  const NsInfo& n;
  int radius = 0;
  std::vector<uint32_t> anchors;   // all of the sketch's anchors (up to kAnchorCount)
  std::vector<int64_t> probed;     // documents filed under the anchors it probes
  std::vector<uint32_t> filed;     // stored: filed under these
};

// A kept document filed under an anchor, and its sketch's n-gram count.
struct Posting {
  int64_t no = 0;
  uint32_t shingles = 0;
};

// The embedded store's anchor choice (NearDupSet): probe the first
// `anchors` anchors that are not stop keys (more than anchor_max_postings
// kept documents filed), file under the first max(anchors, 16) of them.
// `postings[a]` = the documents filed under anchors[a] (at most cap + 1 read).
// A probed candidate whose n-gram count fails the pair rule's size test is
// not read: DecidePair would reject it (pair_rule.h, ShingleCountsRuleOut).
inline void ChooseAnchors(CheckRun& run, const std::vector<std::vector<Posting>>& postings) {
  const auto cap = static_cast<size_t>(run.policy.recheck.anchor_max_postings);
  std::vector<size_t> probe, filed;
  (void)ChooseAnchors(run.policy.recheck, run.anchors.size(), [&](size_t a) { return postings[a].size() > cap ? 1 : 0; },
                      &probe, &filed);
  const uint32_t mine = run.sig.sketch.num_shingles;
  const bool by_size = run.policy.recheck.enabled && mine != 0;
  for (size_t a : probe) {
    for (const Posting& p : postings[a]) {
      if (by_size && p.shingles != 0 && ShingleCountsRuleOut(run.policy.recheck.threshold, mine, p.shingles)) continue;
      run.probed.push_back(p.no);
    }
  }
  for (size_t a : filed) run.filed.push_back(run.anchors[a]);
  std::sort(run.probed.begin(), run.probed.end());
  run.probed.erase(std::unique(run.probed.begin(), run.probed.end()), run.probed.end());
}

// An accepted match and the row it names.
struct Accepted {
  DuplicateMatch m;
  const Row* row;
};

// NearDupSet::FindDuplicate's rule over the rows read: the first kept copy
// of the same text that passes the pair rule, then every fingerprint (within
// the radius) or anchor candidate that passes it, ranked by RanksBefore.
inline std::vector<Accepted> Decide(const CheckRun& run, const std::vector<Row>& rows) {
  std::vector<Accepted> out;
  const PairSide doc = PairSide::Of(run.sig);
  auto accept = [&](const Row& r, int distance, Accepted* a) {
    const PairDecision d = DecidePair(run.policy, doc, PairSide::Of(r.sig), distance);
    a->m.id = static_cast<DocId>(r.no);
    a->m.distance = distance;
    a->m.similarity = d.similarity;
    a->m.rechecked = d.rechecked;
    a->m.similarity_exact = d.exact;
    a->m.exact = r.ch == run.sig.content_hash;
    a->row = &r;
    return d.duplicate;
  };
  // Rows come ordered by number (the order documents were kept in).
  const Row* first_exact = nullptr;
  for (const Row& r : rows) {
    if (r.ch != run.sig.content_hash) continue;
    Accepted a;
    if (accept(r, 0, &a)) {
      out.push_back(a);
      first_exact = &r;
      break;
    }
  }
  if (!run.sig.has_features) return out;
  std::vector<Accepted> near;
  for (const Row& r : rows) {
    if (&r == first_exact || !r.hf) continue;
    const int distance = std::popcount(r.fp ^ run.sig.fingerprint);
    const bool by_anchor = std::binary_search(run.probed.begin(), run.probed.end(), r.no);
    if (distance > run.radius && !by_anchor) continue;
    Accepted a;
    if (accept(r, distance, &a)) near.push_back(a);
  }
  const bool by_similarity = run.policy.recheck.enabled;
  auto rank = [](const Accepted& a) { return MatchRank{false, a.m.similarity, a.m.distance, a.m.id}; };
  std::sort(near.begin(), near.end(),
            [&](const Accepted& a, const Accepted& b) { return RanksBefore(rank(a), rank(b), by_similarity); });
  out.insert(out.end(), near.begin(), near.end());
  return out;
}

// What a check does with the rows it read (under its locks): a replay when
// a stored row has its id (check-and-insert and insert), else NearDupSet's
// decision: run.out's matches (at most max_matches), whether it stores the
// document (store) and whether it files it as a duplicate of
// accepted.front() (dup_row). run.out.stored is set by the caller once the
// store committed.
struct Judgement {
  const Row* replay = nullptr;
  std::vector<Accepted> accepted;
  bool store = false;
  bool dup_row = false;
};
inline Judgement Judge(CheckRun& run, const std::vector<Row>& rows, int max_matches, bool may_store) {
  Judgement j;
  CheckOutcome& out = run.out;
  if (run.mode != CheckMode::kQueryOnly) {
    for (const Row& row : rows) {
      if (row.id != run.doc.id) continue;
      j.replay = &row;
      out.stored = true;
      out.replay = true;
      out.fingerprint = row.fp;
      out.has_features = row.hf;
      return j;
    }
  }
  j.accepted = Decide(run, rows);
  for (const Accepted& a : j.accepted) {
    if (static_cast<int>(out.matches.size()) >= max_matches) break;
    out.matches.push_back(
        MatchedDocument{a.row->id, a.m.distance, a.m.similarity, SimilarityIsExact(a.m), a.m.exact, a.row->ts});
  }
  out.duplicate = !out.matches.empty();
  if (run.mode == CheckMode::kQueryOnly) return j;
  j.store = may_store && (run.mode == CheckMode::kInsertAlways || !out.duplicate);
  j.dup_row = out.duplicate && !j.store && run.mode == CheckMode::kCheckAndInsert && may_store;
  return j;
}

// A kept document's row in nd_G_docs: the columns (after `no`) and their
// values in text format (nullopt is NULL): its blocks (NULL without
// features), the anchors it is filed under and its re-check data (NULL with
// the re-check off). The check's INSERT and the import's COPY both write
// these, so a row reads the same whichever wrote it.
inline std::string KeptRowColumns(const NsInfo& n) {
  std::string cols = "id, ts, fp, ch, hf, anchors, extra";
  for (int t = 0; t < n.blocks(); ++t) cols += ", b" + std::to_string(t);
  return cols;
}
inline PgParams KeptRowValues(const NsInfo& n, const CheckRun& run) {
  PgParams v = {run.doc.id, std::to_string(run.ts), std::to_string(static_cast<int64_t>(run.sig.fingerprint)),
                std::to_string(static_cast<int64_t>(run.sig.content_hash)), run.sig.has_features ? "t" : "f"};
  if (run.sketched) {
    std::vector<int32_t> filed;
    for (uint32_t a : run.filed) filed.push_back(static_cast<int32_t>(a));
    v.push_back(PgArray(filed));
    v.push_back(PgBytea(EncodeSignatureExtra(run.sig)));
  } else {
    v.push_back(std::nullopt);
    v.push_back(std::nullopt);
  }
  for (int t = 0; t < n.blocks(); ++t) {
    v.push_back(run.sig.has_features ? std::optional<std::string>(std::to_string(n.BlockKey(run.sig.fingerprint, t)))
                                     : std::nullopt);
  }
  return v;
}
// The n-gram count on each of its postings (nd_G_anchors.shingles).
inline std::string PostingShingles(const CheckRun& run) {
  return std::to_string(static_cast<int32_t>(run.sig.sketch.num_shingles));
}
// A duplicate's row in nd_G_dups after (id, ts): the best match's number,
// distance and similarity (as the check writes them).
inline PgParams DuplicateRowValues(const CheckRun& run, const Accepted& best) {
  return {run.doc.id, std::to_string(run.ts), std::to_string(best.row->no), std::to_string(best.m.distance),
          std::to_string(best.m.similarity)};
}

// The rows the rule can reach: the content hash, the id, the probed
// anchors' documents and the fingerprints within the radius. The radius
// test runs in a sub-select per block (an index-only scan of (bN, ts)
// INCLUDE (fp, no) on layout 3; a heap read per entry on layout 2); only
// the numbers it passes join the others, whose rows are then read by the
// (ch), (id) and (no) indexes. Written as one OR of the block columns the
// planner takes a BitmapOr, which must read the heap row of every entry.
inline PgStmt CandidatesStmt(const NsInfo& n, const CheckRun& run, const std::string& cut) {
  std::string nos = "$4::bigint[]";
  PgParams params = {cut, std::to_string(static_cast<int64_t>(run.sig.content_hash)), run.doc.id,
                     PgArray(run.probed)};
  if (run.sig.has_features) {
    nos += " || ARRAY(";
    for (int t = 0; t < n.blocks(); ++t) {
      if (t) nos += " UNION ALL ";
      nos += "SELECT no FROM " + n.Table("docs") + " WHERE b" + std::to_string(t) + " = $" + std::to_string(7 + t) +
             " AND ts >= $1 AND bit_count(int8send(fp # $5)) <= $6";
    }
    nos += ")";
    params.push_back(std::to_string(static_cast<int64_t>(run.sig.fingerprint)));
    params.push_back(std::to_string(run.radius));
    for (int t = 0; t < n.blocks(); ++t) params.push_back(std::to_string(n.BlockKey(run.sig.fingerprint, t)));
  }
  return {"SELECT no, id, ts, fp, ch, hf, extra FROM " + n.Table("docs") +
              " WHERE ts >= $1 AND (ch = $2 OR id = $3 OR no = ANY(" + nos + ")) ORDER BY no",
          std::move(params)};
}

// The namespace's record as stored in neardup_namespaces (pg_engine.cc):
// kFailedPrecondition for a record of an earlier table layout.
Result<std::shared_ptr<NsInfo>> DecodeNs(const std::string& name, const std::string& raw, int64_t gen,
                                         int64_t version);

// Takes our own parameters (pool_size, retry_budget_ms,
// windows_per_retention) off o->uri into *o; the rest is libpq's conninfo.
Status TakeUriOptions(PgEngineOptions* o, std::string* conninfo);

}  // namespace neardup::pg_internal

#endif  // NEARDUP_SRC_PG_PG_RULE_H_
