// ImportIntoPg: see include/neardup/pg/pg_import.h for the contract and
// docs/postgresql.md ("Bulk import") for why its rows are the service's.
//
// How: each document goes through the check's own steps (pg_rule.h:
// CheckRun, ChooseAnchors, Judge, KeptRowValues), but the postings and the
// candidate rows come from an in-memory copy of the namespace (Mirror)
// instead of SELECTs: the copy answers the same questions the check's two
// queries ask, over the same rows, since nothing else writes to the
// namespace while the import holds its lock.
#include "neardup/pg/pg_import.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "pg/pg_conn.h"
#include "pg/pg_rule.h"

namespace neardup {
namespace {

using namespace pg_internal;

// The kept documents of the namespace so far, indexed as the check's
// queries read them (nd_G_docs' indexes on ch, id and the blocks; the
// postings' (anchor, ts) B-tree).
class Mirror {
 public:
  Mirror(const NsInfo& n, int64_t first_no) : n_(n), first_no_(first_no), blocks_(static_cast<size_t>(n.blocks())) {
    for (int t = 0; t < n.blocks(); ++t) {
      const int bits = 64 * (t + 1) / n.blocks() - 64 * t / n.blocks();
      blocks_[static_cast<size_t>(t)].resize(size_t{1} << bits);
    }
  }

  // The check's first query: the live postings of each of its anchors
  // (at most cap + 1, enough to tell a stop key).
  std::vector<std::vector<Posting>> Postings(const CheckRun& run) const {
    const auto limit = static_cast<size_t>(run.policy.recheck.anchor_max_postings) + 1;
    std::vector<std::vector<Posting>> out(run.anchors.size());
    for (size_t a = 0; a < run.anchors.size(); ++a) {
      auto it = postings_.find(run.anchors[a]);
      if (it == postings_.end()) continue;
      for (uint32_t i : it->second) {
        if (out[a].size() >= limit) break;
        if (docs_[i].ts >= run.cutoff) out[a].push_back({No(i), docs_[i].shingles});
      }
    }
    return out;
  }

  // The check's second query: the live rows with its content hash or id,
  // the probed ones, and those sharing a block whose fingerprint is within
  // the radius; ordered by number.
  std::vector<Row> Candidates(const CheckRun& run) const {
    std::vector<uint32_t> hits;
    auto range = by_ch_.equal_range(run.sig.content_hash);
    for (auto it = range.first; it != range.second; ++it) hits.push_back(it->second);
    range = by_id_.equal_range(IdHash(run.doc.id));
    for (auto it = range.first; it != range.second; ++it) {
      if (docs_[it->second].id == run.doc.id) hits.push_back(it->second);
    }
    for (int64_t no : run.probed) hits.push_back(static_cast<uint32_t>(no - first_no_));
    if (run.sig.has_features) {
      for (int t = 0; t < n_.blocks(); ++t) {
        for (const auto& [fp, i] : Bucket(t, run.sig.fingerprint)) {
          if (std::popcount(fp ^ run.sig.fingerprint) <= run.radius) hits.push_back(i);
        }
      }
    }
    std::sort(hits.begin(), hits.end());
    hits.erase(std::unique(hits.begin(), hits.end()), hits.end());
    std::vector<Row> rows;
    for (uint32_t i : hits) {
      const Kept& k = docs_[i];
      if (k.ts < run.cutoff) continue;
      Row row;
      row.no = No(i);
      row.id = k.id;
      row.ts = k.ts;
      row.fp = k.fp;
      row.ch = k.ch;
      row.hf = k.hf;
      row.sig.content_hash = k.ch;
      row.sig.fingerprint = k.fp;
      row.sig.has_features = k.hf;
      if (k.extra_len > 0) (void)DecodeSignatureExtra(Extra(k), &row.sig);  // as the check reads its bytea
      rows.push_back(std::move(row));
    }
    return rows;
  }

  // Keeps run's document (number No(size())), filed under run.filed.
  void Keep(const CheckRun& run) {
    const auto i = static_cast<uint32_t>(docs_.size());
    Kept k;
    k.id = run.doc.id;
    k.ts = run.ts;
    k.fp = run.sig.fingerprint;
    k.ch = run.sig.content_hash;
    k.hf = run.sig.has_features;
    k.shingles = run.sig.sketch.num_shingles;
    if (run.sketched) {
      const std::string extra = EncodeSignatureExtra(run.sig);
      k.extra_at = extras_.size();
      k.extra_len = static_cast<uint32_t>(extra.size());
      extras_.insert(extras_.end(), extra.begin(), extra.end());
      for (uint32_t a : run.filed) postings_[a].push_back(i);
      postings_count_ += run.filed.size();
    }
    docs_.push_back(std::move(k));
    by_ch_.emplace(run.sig.content_hash, i);
    by_id_.emplace(IdHash(run.doc.id), i);
    if (run.sig.has_features) {
      for (int t = 0; t < n_.blocks(); ++t) Bucket(t, run.sig.fingerprint).emplace_back(run.sig.fingerprint, i);
    }
  }

  int64_t No(uint32_t i) const { return first_no_ + i; }
  size_t size() const { return docs_.size(); }
  uint64_t postings_count() const { return postings_count_; }

  // Every posting as the anchor table's COPY rows, in index order
  // (anchor as stored, then number): the B-tree is filled from the left.
  template <typename Emit>
  void ForEachPosting(const Emit& emit) const {
    std::vector<std::pair<int32_t, uint32_t>> keys;
    keys.reserve(postings_.size());
    for (const auto& [a, list] : postings_) keys.emplace_back(static_cast<int32_t>(a), a);
    std::sort(keys.begin(), keys.end());
    for (const auto& [stored, a] : keys) {
      for (uint32_t i : postings_.at(a)) emit(stored, docs_[i].shingles, docs_[i].ts, No(i));
    }
  }

 private:
  struct Kept {
    std::string id;
    int64_t ts = 0;
    uint64_t fp = 0, ch = 0;
    uint64_t extra_at = 0;
    uint32_t extra_len = 0;  // 0: NULL (not sketched)
    uint32_t shingles = 0;
    bool hf = false;
  };
  using BucketList = std::vector<std::pair<uint64_t, uint32_t>>;  // (fingerprint, index)

  static uint64_t IdHash(std::string_view id) { return XXH3_64bits(id.data(), id.size()); }
  std::string_view Extra(const Kept& k) const { return {extras_.data() + k.extra_at, k.extra_len}; }
  BucketList& Bucket(int t, uint64_t fp) {
    return blocks_[static_cast<size_t>(t)][static_cast<size_t>(n_.BlockKey(fp, t))];
  }
  const BucketList& Bucket(int t, uint64_t fp) const {
    return blocks_[static_cast<size_t>(t)][static_cast<size_t>(n_.BlockKey(fp, t))];
  }

  const NsInfo& n_;
  const int64_t first_no_;
  std::vector<Kept> docs_;  // index i holds number first_no_ + i
  std::vector<char> extras_;
  std::unordered_multimap<uint64_t, uint32_t> by_ch_, by_id_;
  std::vector<std::vector<BucketList>> blocks_;  // [table][block key]
  std::unordered_map<uint32_t, std::vector<uint32_t>> postings_;  // anchor -> indexes, in number order
  uint64_t postings_count_ = 0;
};

// Rows for one COPY, sent to the server in chunks of about 1 MB.
class CopyWriter {
 public:
  explicit CopyWriter(PgConn& c) : c_(c) {}
  Status Row(const PgParams& fields) {
    for (size_t f = 0; f < fields.size(); ++f) {
      if (f) buf_.push_back('\t');
      PgCopyField(fields[f], &buf_);
    }
    buf_.push_back('\n');
    return buf_.size() >= (1 << 20) ? Flush() : Status::OK();
  }
  Status Flush() {
    if (buf_.empty()) return Status::OK();
    Status s = c_.CopyPut(buf_);
    buf_.clear();
    return s;
  }

 private:
  PgConn& c_;
  std::string buf_;
};

// One import: the transaction, its COPY of the documents (interrupted to
// create a time window's partitions when a document first needs them), and
// the rows kept for the later COPYs.
class Importer {
 public:
  Importer(const PgImportOptions& o, PgConn& c) : o_(o), c_(c), docs_copy_(c) {}

  // BEGIN, the namespace's lock, its record and the emptiness test.
  Status Begin() {
    NEARDUP_RETURN_IF_ERROR(c_.ExecMulti("BEGIN; SET LOCAL idle_in_transaction_session_timeout = 0; SELECT "
                                         "pg_advisory_xact_lock(" +
                                         std::to_string(NamespaceLockKey(o_.ns)) + ")")
                                .status());
    auto r = c_.Exec("SELECT record, gen, version FROM neardup_namespaces WHERE name = $1", {o_.ns});
    if (!r.ok()) return r.status();
    if (r->size() == 0) return Status::NotFound("namespace \"" + o_.ns + "\" does not exist");
    auto info = DecodeNs(o_.ns, std::string(r->text(0, 0)), r->i64(0, 1), r->i64(0, 2));
    if (!info.ok()) return info.status();
    n_ = info.value();
    NEARDUP_RETURN_IF_ERROR(c_.ExecMulti(PartitionDdlLockSql(*n_)).status());
    auto any = c_.Exec("SELECT (SELECT count(*) FROM (SELECT 1 FROM " + n_->Table("docs") +
                       " LIMIT 1) d) + (SELECT count(*) FROM (SELECT 1 FROM " + n_->Table("dups") + " LIMIT 1) x)");
    if (!any.ok()) return any.status();
    if (any->i64(0, 0) != 0) {
      return Status::FailedPrecondition("namespace \"" + o_.ns +
                                        "\" already holds documents; pg-import fills an empty namespace (check "
                                        "the rest through the service, or delete and recreate it)");
    }
    auto first = c_.Exec("SELECT nextval('" + n_->Table("no") + "')");
    if (!first.ok()) return first.status();
    mirror_ = std::make_unique<Mirror>(*n_, first->i64(0, 0));
    return StartDocsCopy();
  }

  // Decides one document as a check-and-insert would, and writes its rows.
  Status Add(const DocumentInput& doc) {
    ++stats_.documents;
    if (Status s = ValidateDocumentId(doc.id); !s.ok()) return Bad(s);
    if (doc.text.empty()) return Bad(Status::InvalidArgument("field \"text\" must be a non-empty string"));
    const int64_t now = o_.clock_ms();
    CheckRun run(*n_, doc, CheckMode::kCheckAndInsert, now);
    const bool may_store = run.ts >= run.cutoff;
    // The service creates the window's partitions before deciding, too.
    if (may_store) NEARDUP_RETURN_IF_ERROR(NeedWindow(run.ts));
    if (!run.anchors.empty()) ChooseAnchors(run, mirror_->Postings(run));
    const std::vector<Row> rows = mirror_->Candidates(run);
    const Judgement j = Judge(run, rows, n_->settings.max_matches, may_store);
    if (j.replay != nullptr) {
      ++stats_.replays;
      return Status::OK();
    }
    stats_.duplicates += run.out.duplicate ? 1 : 0;
    stats_.not_stored += may_store ? 0 : 1;
    if (j.dup_row) {
      dups_.push_back(DuplicateRowValues(run, j.accepted.front()));
    }
    if (!j.store) return Status::OK();
    PgParams row = KeptRowValues(*n_, run);
    row.insert(row.begin(), std::to_string(mirror_->No(static_cast<uint32_t>(mirror_->size()))));
    mirror_->Keep(run);
    ++stats_.kept;
    return docs_copy_.Row(row);
  }

  // The postings and duplicates, the counters and the sequence; COMMIT.
  Status Finish() {
    NEARDUP_RETURN_IF_ERROR(EndDocsCopy());
    NEARDUP_RETURN_IF_ERROR(c_.CopyBegin("COPY " + n_->Table("anchors") + " (anchor, shingles, ts, no) FROM STDIN"));
    CopyWriter postings(c_);
    Status st;
    mirror_->ForEachPosting([&](int32_t anchor, uint32_t shingles, int64_t ts, int64_t no) {
      if (st.ok()) {
        st = postings.Row({std::to_string(anchor), std::to_string(static_cast<int32_t>(shingles)), std::to_string(ts),
                           std::to_string(no)});
      }
    });
    if (st.ok()) st = postings.Flush();
    Status end = c_.CopyEnd();
    NEARDUP_RETURN_IF_ERROR(st);
    NEARDUP_RETURN_IF_ERROR(end);
    stats_.postings = mirror_->postings_count();
    NEARDUP_RETURN_IF_ERROR(
        c_.CopyBegin("COPY " + n_->Table("dups") + " (id, ts, kept_no, distance, similarity) FROM STDIN"));
    CopyWriter dups(c_);
    for (const PgParams& d : dups_) {
      if (st.ok()) st = dups.Row(d);
    }
    if (st.ok()) st = dups.Flush();
    end = c_.CopyEnd();
    NEARDUP_RETURN_IF_ERROR(st);
    NEARDUP_RETURN_IF_ERROR(end);
    // The counters on a slot of their own (the service's are 0..4095, the
    // expired count's -1); the sequence continues after the last number.
    const std::string seq = "'" + n_->Table("no") + "'";
    const std::string last = mirror_->size() > 0 ? "setval(" + seq + ", " +
                                                       std::to_string(mirror_->No(static_cast<uint32_t>(mirror_->size() - 1))) + ")"
                                                 : "setval(" + seq + ", " + std::to_string(mirror_->No(0)) + ", false)";
    return c_.ExecMulti("INSERT INTO neardup_counters AS c (gen, slot, checks, duplicates, inserted) VALUES (" +
                        std::to_string(n_->gen) + ", -2, " + std::to_string(stats_.documents) + ", " +
                        std::to_string(stats_.duplicates) + ", " + std::to_string(stats_.kept) +
                        ") ON CONFLICT (gen, slot) DO UPDATE SET checks = c.checks + EXCLUDED.checks, duplicates = "
                        "c.duplicates + EXCLUDED.duplicates, inserted = c.inserted + EXCLUDED.inserted; SELECT " +
                        last + "; COMMIT")
        .status();
  }

  // After COMMIT (VACUUM runs outside a transaction): the imported pages
  // marked all-visible, so that the lookups' block and anchor scans are
  // index-only from the start instead of after autovacuum's turn; and the
  // planner's statistics for the new rows.
  Status Vacuum() {
    return c_.ExecMulti("VACUUM (ANALYZE) " + n_->Table("docs") + ", " + n_->Table("anchors") + ", " +
                        n_->Table("dups"))
        .status();
  }

  const PgImportStats& stats() const { return stats_; }

 private:
  Status Bad(const Status& s) const {
    return Status::InvalidArgument("document " + std::to_string(stats_.documents) + ": " + s.message());
  }
  Status StartDocsCopy() {
    return c_.CopyBegin("COPY " + n_->Table("docs") + " (no, " + KeptRowColumns(*n_) + ") FROM STDIN");
  }
  Status EndDocsCopy() {
    Status s = docs_copy_.Flush();
    Status end = c_.CopyEnd();
    return s.ok() ? end : s;
  }
  // The partitions of ts's window, created in this transaction the first
  // time a row needs them (the documents' COPY is ended and started again).
  Status NeedWindow(int64_t ts) {
    const int64_t w = n_->Window(ts);
    if (windows_.count(w)) return Status::OK();
    NEARDUP_RETURN_IF_ERROR(EndDocsCopy());
    NEARDUP_RETURN_IF_ERROR(c_.ExecMulti(PartitionsSql(*n_, w)).status());
    windows_.insert(w);
    return StartDocsCopy();
  }

  const PgImportOptions& o_;
  PgConn& c_;
  std::shared_ptr<NsInfo> n_;
  std::unique_ptr<Mirror> mirror_;
  CopyWriter docs_copy_;
  std::vector<PgParams> dups_;
  std::unordered_set<int64_t> windows_;
  PgImportStats stats_;
};

// The namespace exists (created with create_settings if missing and given).
Result<bool> EnsureNamespace(const PgImportOptions& o) {
  PgEngineOptions eo;
  eo.uri = o.uri;
  eo.pool_size = 1;
  eo.auto_create = false;
  eo.clock_ms = o.clock_ms;
  auto engine = OpenPgEngine(eo);
  if (!engine.ok()) return engine.status();
  auto got = engine.value()->GetNamespace(o.ns);
  if (got.ok()) return false;
  if (got.status().code() != Status::Code::kNotFound || !o.create_settings) return got.status();
  bool created = false;
  NEARDUP_RETURN_IF_ERROR(engine.value()->PutNamespace(o.ns, *o.create_settings, &created));
  return created;
}

}  // namespace

Result<PgImportStats> ImportIntoPg(const PgImportOptions& given, const PgDocumentSource& next) {
  PgImportOptions o = given;
  if (!o.clock_ms) o.clock_ms = SystemNowMs;
  NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(o.ns));
  auto created = EnsureNamespace(o);
  if (!created.ok()) return created.status();
  PgEngineOptions eo;
  eo.uri = o.uri;
  std::string conninfo;
  NEARDUP_RETURN_IF_ERROR(TakeUriOptions(&eo, &conninfo));
  PgConn c(conninfo);
  Importer imp(o, c);
  Status st = imp.Begin();
  DocumentInput doc;
  while (st.ok()) {
    auto more = next(&doc);
    if (!more.ok()) {
      st = more.status();
      break;
    }
    if (!more.value()) break;
    st = imp.Add(doc);
    if (o.progress && o.progress_every > 0 && imp.stats().documents % o.progress_every == 0) {
      o.progress(imp.stats().documents);
    }
  }
  const uint64_t read = imp.stats().documents;
  if (st.ok() && o.progress && (o.progress_every == 0 || read % o.progress_every != 0)) o.progress(read);
  if (st.ok()) st = imp.Finish();
  if (!st.ok()) {
    c.Close();  // whatever state the COPY left: the server rolls the transaction back
    return st;
  }
  PgImportStats stats = imp.stats();
  stats.created = created.value();
  if (Status v = imp.Vacuum(); !v.ok()) stats.vacuum_error = v.ToString();
  return stats;
}

}  // namespace neardup
