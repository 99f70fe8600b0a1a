// RocksDB implementation of DocumentStore. Layout and rationale: docs/storage.md.
//
// Note: no namespace-scope objects with dynamic initialization here, so the
// store is usable from other translation units' static initializers.
#include "neardup/store/rocks_store.h"

#include "store/store_files.h"
#include "util/coding.h"

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/table.h>
#include <rocksdb/transaction_log.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

namespace neardup {
namespace {

// ---- key layout -------------------------------------------------------------
// "\x00meta/format"            -> store format version ("1")
// "\x01" ns                    -> namespace settings
// "\x02" ns "\x00" id          -> document record (EncodeRecord)
constexpr char kMetaTag = '\x00';
constexpr char kNamespaceTag = '\x01';
constexpr char kDocTag = '\x02';
constexpr std::string_view kFormatKey{"\x00meta/format", 12};
constexpr std::string_view kFormatVersion{"1"};

std::string NamespaceKey(std::string_view ns) {
  std::string k;
  k.reserve(1 + ns.size());
  k += kNamespaceTag;
  k += ns;
  return k;
}

// Every document key of `ns` starts with DocPrefix(ns) and is below DocLimit(ns):
// ns has no \0, so "\x02" ns "\x00" is a prefix of no other namespace's keys,
// and any other namespace that starts with ns continues with a byte >= 0x01.
std::string DocPrefix(std::string_view ns) {
  std::string k;
  k.reserve(2 + ns.size());
  k += kDocTag;
  k += ns;
  k += '\x00';
  return k;
}

std::string DocLimit(std::string_view ns) {
  std::string k = DocPrefix(ns);
  k.back() = '\x01';
  return k;
}

std::string DocKey(std::string_view ns, std::string_view id) {
  std::string k = DocPrefix(ns);
  k += id;
  return k;
}

// Printable form of binary names for error messages (bounded length).
std::string Printable(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  constexpr size_t kMax = 200;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > kMax) out += "...";
  return out;
}

// "ns/id" of a document key for messages; the raw key if it is malformed.
std::string DescribeDocKey(std::string_view key) {
  if (key.empty() || key[0] != kDocTag) return "key '" + Printable(key) + "'";
  const size_t sep = key.find('\x00', 1);
  if (sep == std::string_view::npos) return "key '" + Printable(key) + "'";
  return "document '" + Printable(key.substr(sep + 1)) + "' of namespace '" +
         Printable(key.substr(1, sep - 1)) + "'";
}

Status CheckNamespace(std::string_view ns) {
  if (ns.find('\x00') != std::string_view::npos) {
    return Status::InvalidArgument("namespace name contains a \\0 byte: '" + Printable(ns) + "'");
  }
  return Status::OK();
}

// The one mapping from RocksDB's status to ours.
Status FromRocks(const rocksdb::Status& s, std::string_view context) {
  if (s.ok()) return Status::OK();
  std::string msg = "rocksdb ";
  msg += context;
  msg += ": ";
  msg += s.ToString();
  switch (s.code()) {
    case rocksdb::Status::kOk: return Status::OK();
    case rocksdb::Status::kNotFound: return Status::NotFound(std::move(msg));
    case rocksdb::Status::kCorruption: return Status::Corruption(std::move(msg));
    case rocksdb::Status::kNotSupported: return Status::NotSupported(std::move(msg));
    case rocksdb::Status::kInvalidArgument: return Status::InvalidArgument(std::move(msg));
    case rocksdb::Status::kIOError: return Status::IOError(std::move(msg));
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTimedOut:
    case rocksdb::Status::kTryAgain:
    case rocksdb::Status::kIncomplete:
    case rocksdb::Status::kShutdownInProgress:
      return Status::Unavailable(std::move(msg));
    default:
      return Status::Internal(std::move(msg));
  }
}

// ---- record encoding -------------------------------------------------------
// version u8 (=1) | number u64 | content_hash u64 | fingerprint u64 |
// has_features u8 (0/1) | timestamp_ms i64 | varint len | extra bytes
// Fixed-width integers little-endian; varint is LEB128 (7 bits a byte, low first).
constexpr uint8_t kRecordVersion = 1;
constexpr size_t kFixedRecordBytes = 1 + 8 + 8 + 8 + 1 + 8;





std::string EncodeRecord(const StoredDocument& doc) {
  std::string out;
  out.reserve(kFixedRecordBytes + 10 + doc.extra.size());
  out.push_back(static_cast<char>(kRecordVersion));
  PutFixed64(&out, doc.number);
  PutFixed64(&out, doc.signature.content_hash);
  PutFixed64(&out, doc.signature.fingerprint);
  out.push_back(doc.signature.has_features ? 1 : 0);
  PutFixed64(&out, static_cast<uint64_t>(doc.timestamp_ms));
  PutVarint64(&out, doc.extra.size());
  out += doc.extra;
  return out;
}

// Decodes everything but the id (which is in the key). Never reads past
// `value`; any inconsistency is kCorruption naming the key.
Status DecodeRecord(std::string_view key, std::string_view value, StoredDocument* doc) {
  auto bad = [&](std::string_view why) {
    return Status::Corruption("bad record for " + DescribeDocKey(key) + ": " + std::string(why) + " (" +
                              std::to_string(value.size()) + " bytes)");
  };
  if (value.empty()) return bad("empty value");
  if (static_cast<uint8_t>(value[0]) != kRecordVersion) {
    return bad("unknown record version " + std::to_string(static_cast<uint8_t>(value[0])));
  }
  if (value.size() < kFixedRecordBytes + 1) return bad("truncated");
  const char* p = value.data() + 1;
  doc->number = DecodeFixed64(p);
  doc->signature.content_hash = DecodeFixed64(p + 8);
  doc->signature.fingerprint = DecodeFixed64(p + 16);
  const auto has_features = static_cast<uint8_t>(p[24]);
  if (has_features > 1) return bad("has_features byte is not 0 or 1");
  doc->signature.has_features = has_features == 1;
  doc->timestamp_ms = static_cast<int64_t>(DecodeFixed64(p + 25));
  size_t pos = kFixedRecordBytes;
  uint64_t extra_len = 0;
  if (!GetVarint64(value, &pos, &extra_len)) return bad("bad extra length");
  if (extra_len != value.size() - pos) return bad("extra length does not match the record size");
  doc->extra.assign(value.data() + pos, value.size() - pos);
  return Status::OK();
}

// ---- options ---------------------------------------------------------------
rocksdb::Options MakeRocksOptions(const RocksStoreOptions& options) {
  rocksdb::Options o;
  o.create_if_missing = options.create_if_missing;
  // Checksums of every file RocksDB reads at open (MANIFEST, WAL, table
  // footers and index blocks) fail the open instead of being skipped; table
  // file sizes are checked against the MANIFEST (a missing or truncated .sst
  // is refused). Data blocks are checked when read: the engine's start-up
  // scan reads every document's block (docs/storage.md "Damaged files").
  o.paranoid_checks = true;
  o.skip_checking_sst_file_sizes_on_db_open = false;
  o.IncreaseParallelism(2);  // background flush + compaction threads
  o.compaction_style = rocksdb::kCompactionStyleLevel;
  o.level_compaction_dynamic_level_bytes = true;  // bounds space amplification
  o.max_open_files = 512;                         // leave descriptors for sockets
  o.keep_log_file_num = 5;                        // RocksDB's own text LOG files
  o.max_log_file_size = 16 << 20;
  // A crash (kill -9, power cut) can only tear the LAST record of the WAL:
  // records are appended and a synced write returns after its fdatasync.
  // kTolerateCorruptedTailRecords drops such a torn tail and fails the open on
  // any other damage (a bad checksum in the middle), where point-in-time
  // recovery would stop replaying at the damage and open without a word,
  // losing every acknowledged write after it (issue 15). accept_wal_loss is
  // the operator's explicit choice of that loss.
  o.wal_recovery_mode = options.accept_wal_loss ? rocksdb::WALRecoveryMode::kPointInTimeRecovery
                                                : rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  // Deletes by age leave runs of tombstones; compact an SST file that is
  // mostly tombstones without waiting for it to be picked by size.
  o.table_properties_collector_factories.push_back(
      rocksdb::NewCompactOnDeletionCollectorFactory(/*sliding_window_size=*/16384,
                                                    /*deletion_trigger=*/8192,
                                                    /*deletion_ratio=*/0.5));

  // No block compression: a record is mostly hash values (fingerprint,
  // content hash, sketch), and LZ4 and ZSTD both measured 1.05x on the
  // service's files, while compressing them was ~5% of the server's CPU under
  // load (ZSTD at the bottommost level). docs/storage.md.
  o.compression = rocksdb::kNoCompression;
  o.bottommost_compression = rocksdb::kNoCompression;

  rocksdb::BlockBasedTableOptions t;
  if (options.block_cache_bytes > 0) {
    t.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
    t.cache_index_and_filter_blocks = true;  // memory bounded by the cache
    t.pin_l0_filter_and_index_blocks_in_cache = true;
  } else {
    t.no_block_cache = true;
  }
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));  // ~1% false positives for Get
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

namespace fs = std::filesystem;
using store_internal::CheckStoreDirectory;
using store_internal::ClassifyDamage;
using store_internal::DamagedFile;
using store_internal::TableFiles;
using store_internal::WithDamageCost;

// RocksDB deletes, at open, table files its MANIFEST does not list: the
// unfinished output of a flush or compaction cut off by a crash (harmless:
// their data is still in the WAL or the inputs), or the tables of a MANIFEST
// that lost records at a record boundary, which no check can tell apart. Not
// silent: each is named on stderr.
void ReportDroppedTables(rocksdb::DB& db, const std::string& dir, const std::set<std::string>& before) {
  std::vector<rocksdb::LiveFileMetaData> live;
  db.GetLiveFilesMetaData(&live);
  std::set<std::string> live_names;
  for (const auto& f : live) live_names.insert(fs::path(f.name).filename().string());
  for (const std::string& name : before) {
    if (live_names.count(name) == 0) {
      std::cerr << "warning: " << dir << "/" << name
                << " is not listed in the MANIFEST, so RocksDB ignores it (and deletes it as obsolete): the leftover "
                   "of a flush or compaction cut off by a crash (harmless), or, if the MANIFEST was damaged, documents "
                   "lost\n";
    }
  }
}

// True if `dir` holds a write-ahead log file (NNNNNN.log).
bool HasWalFile(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".log") return true;
  }
  return false;
}

// The open's failure in words an operator can act on, keeping RocksDB's
// message (it names the file). Damage is kCorruption and never "not a
// neardup store".
Status OpenFailure(const std::string& dir, const rocksdb::Status& s, bool accept_wal_loss) {
  const std::string rocks = s.ToString();
  const DamagedFile damage = ClassifyDamage(rocks);
  // RocksDB reports a missing table file as Corruption wrapping the IO error.
  const bool missing = (s.IsIOError() || s.IsCorruption()) && rocks.find("No such file") != std::string::npos;
  if (s.IsCorruption() && !accept_wal_loss && HasWalFile(dir) &&
      (damage.kind.empty() || damage.kind.starts_with("write-ahead"))) {
    // With kTolerateCorruptedTailRecords, damage inside a WAL is reported
    // here; RocksDB's message names the log ("... log #N ..." / "... .log").
    return Status::Corruption(
        "cannot open the store in " + dir + ": RocksDB reports corruption (" + rocks +
        "). If this is the write-ahead log (*.log), it is damaged beyond a torn last record, and acknowledged "
        "documents written after the damage could be lost. To open anyway, keeping what precedes the damage "
        "and dropping the rest, restart with --accept-wal-loss (RocksStoreOptions::accept_wal_loss); copy the "
        "directory first to keep the damaged log");
  }
  if ((s.IsCorruption() || missing) && !damage.kind.empty()) {
    return Status::Corruption("cannot open the store in " + dir + ": its " + damage.kind + " is " +
                              (missing ? "missing" : "damaged") + " (RocksDB: " + rocks + "); " + damage.loss +
                              ". neardup does not open a store in this state: restore the directory from a "
                              "backup (keep a copy of the damaged one)");
  }
  // "rocksdb could not open ...": not to be confused with the directory
  // holding a database that is not a neardup store.
  return FromRocks(s, "could not open the database in " + dir);
}

// ---- the store -------------------------------------------------------------
class RocksStore final : public DocumentStore {
 public:
  RocksStore(std::string dir, const RocksStoreOptions& options, std::unique_ptr<rocksdb::DB> db)
      : dir_(std::move(dir)), db_(std::move(db)) {
    write_options_.sync = options.sync;
  }

  ~RocksStore() override {
    // With sync=false, a clean shutdown still leaves everything on disk.
    if (!write_options_.sync) (void)db_->SyncWAL();
    (void)db_->Close();
  }

  Status PutNamespace(const std::string& ns, const std::string& settings) override {
    NEARDUP_RETURN_IF_ERROR(CheckNamespace(ns));
    return FromRocks(db_->Put(write_options_, NamespaceKey(ns), settings), "put namespace in " + dir_);
  }

  Status DeleteNamespace(const std::string& ns) override {
    NEARDUP_RETURN_IF_ERROR(CheckNamespace(ns));
    const std::string begin = DocPrefix(ns);
    const std::string limit = DocLimit(ns);
    rocksdb::WriteBatch batch;
    NEARDUP_RETURN_IF_ERROR(FromRocks(batch.Delete(NamespaceKey(ns)), "delete namespace"));
    NEARDUP_RETURN_IF_ERROR(FromRocks(batch.DeleteRange(begin, limit), "delete namespace"));
    NEARDUP_RETURN_IF_ERROR(FromRocks(db_->Write(write_options_, &batch), "delete namespace in " + dir_));
    // Best effort: the delete is done; reclaiming the space can fail or wait.
    (void)CompactRangeOf(begin, limit);
    return Status::OK();
  }

  Status ListNamespaces(std::vector<std::pair<std::string, std::string>>* out) override {
    out->clear();
    const std::string begin(1, kNamespaceTag);
    const std::string limit(1, kDocTag);
    const rocksdb::Slice upper(limit);
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    for (it->Seek(begin); it->Valid(); it->Next()) {
      const rocksdb::Slice key = it->key();
      out->emplace_back(std::string(key.data() + 1, key.size() - 1), it->value().ToString());
    }
    return FromRocks(it->status(), "list namespaces in " + dir_);
  }

  Status Apply(const std::vector<StoreWrite>& writes) override {
    if (writes.empty()) return Status::OK();
    rocksdb::WriteBatch batch;
    for (size_t i = 0; i < writes.size(); ++i) {
      const StoreWrite& w = writes[i];
      Status st = CheckNamespace(w.ns);
      if (!st.ok()) return Status::InvalidArgument("write " + std::to_string(i) + ": " + st.message());
      const std::string key = DocKey(w.ns, w.doc.id);
      rocksdb::Status rs = w.op == StoreWrite::Op::kPut ? batch.Put(key, EncodeRecord(w.doc)) : batch.Delete(key);
      NEARDUP_RETURN_IF_ERROR(FromRocks(rs, "build batch"));
    }
    return FromRocks(db_->Write(write_options_, &batch), "write to " + dir_);
  }

  Status Get(const std::string& ns, const std::string& id, StoredDocument* out) override {
    NEARDUP_RETURN_IF_ERROR(CheckNamespace(ns));
    const std::string key = DocKey(ns, id);
    rocksdb::PinnableSlice value;
    rocksdb::Status rs = db_->Get(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), key, &value);
    if (rs.IsNotFound()) return Status::NotFound(DescribeDocKey(key) + " not found");
    NEARDUP_RETURN_IF_ERROR(FromRocks(rs, "get from " + dir_));
    StoredDocument doc;
    NEARDUP_RETURN_IF_ERROR(DecodeRecord(key, std::string_view(value.data(), value.size()), &doc));
    doc.id = id;
    *out = std::move(doc);
    return Status::OK();
  }

  Status Scan(const std::string& ns, const std::function<Status(StoredDocument&&)>& fn) override {
    NEARDUP_RETURN_IF_ERROR(CheckNamespace(ns));
    const std::string begin = DocPrefix(ns);
    const std::string limit = DocLimit(ns);
    const rocksdb::Slice upper(limit);
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &upper;
    ro.fill_cache = false;  // a full scan (restart) would only evict the working set
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    for (it->Seek(begin); it->Valid(); it->Next()) {
      const std::string_view key(it->key().data(), it->key().size());
      if (key.size() < begin.size() || key.compare(0, begin.size(), begin) != 0) break;  // defensive
      StoredDocument doc;
      NEARDUP_RETURN_IF_ERROR(DecodeRecord(key, std::string_view(it->value().data(), it->value().size()), &doc));
      doc.id.assign(key.substr(begin.size()));
      NEARDUP_RETURN_IF_ERROR(fn(std::move(doc)));
    }
    return WithDamageCost(FromRocks(it->status(), "scan " + dir_));
  }

  Status Compact(const std::string& ns) override {
    NEARDUP_RETURN_IF_ERROR(CheckNamespace(ns));
    return CompactRangeOf(DocPrefix(ns), DocLimit(ns));
  }

  uint64_t ApproximateDiskBytes() override {
    uint64_t total = 0;
    uint64_t sst = 0;
    if (db_->GetIntProperty(rocksdb::DB::Properties::kTotalSstFilesSize, &sst)) total += sst;
    rocksdb::VectorLogPtr wals;
    if (db_->GetSortedWalFiles(wals).ok()) {
      for (const auto& wal : wals) total += wal->SizeFileBytes();
    } else {
      uint64_t mem = 0;  // unflushed data: about what the live WAL holds
      if (db_->GetIntProperty(rocksdb::DB::Properties::kSizeAllMemTables, &mem)) total += mem;
    }
    return total;
  }

  std::string Describe() const override { return "rocksdb:" + dir_; }

 private:
  Status CompactRangeOf(const std::string& begin, const std::string& limit) {
    rocksdb::CompactRangeOptions cro;
    cro.exclusive_manual_compaction = false;  // let automatic compactions proceed
    const rocksdb::Slice b(begin), e(limit);
    return FromRocks(db_->CompactRange(cro, &b, &e), "compact " + dir_);
  }

  const std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::WriteOptions write_options_;
};

}  // namespace

Result<std::unique_ptr<DocumentStore>> OpenRocksStore(const std::string& dir, const RocksStoreOptions& options) {
  if (dir.empty()) return Status::InvalidArgument("store directory is empty");
  NEARDUP_RETURN_IF_ERROR(CheckStoreDirectory(dir, options.create_if_missing));
  if (options.create_if_missing) {
    std::error_code ec;  // RocksDB makes only the last level; --init /var/lib/neardup/x makes them all
    fs::create_directories(dir, ec);
    if (ec) return Status::IOError("cannot create " + dir + ": " + ec.message());
  }
  if (options.accept_wal_loss) {
    std::cerr << "warning: opening " << dir
              << " with --accept-wal-loss: a damaged write-ahead log is replayed only up to the first damaged "
                 "record; acknowledged writes after it are dropped\n";
  }
  std::error_code ec;
  const bool existed = fs::exists(fs::path(dir) / "CURRENT", ec);
  const std::set<std::string> tables_before = TableFiles(dir);
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status open_status = rocksdb::DB::Open(MakeRocksOptions(options), dir, &raw);
  if (!open_status.ok()) return OpenFailure(dir, open_status, options.accept_wal_loss);
  std::unique_ptr<rocksdb::DB> db(raw);
  ReportDroppedTables(*db, dir, tables_before);

  std::string version;
  rocksdb::Status rs = db->Get(rocksdb::ReadOptions(), rocksdb::Slice(kFormatKey.data(), kFormatKey.size()), &version);
  if (rs.IsNotFound()) {
    // A new store, unless something else already lives in this database.
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    it->SeekToFirst();
    if (it->Valid()) {
      // Either another program's database or a neardup store that lost the
      // table file holding the record: say both, it is not ours to decide.
      return Status::FailedPrecondition(
          "RocksDB database in " + dir +
          " has no neardup format record but holds other keys: it is not a neardup store, or it is one that lost "
          "table files (damage); refusing to open it");
    }
    NEARDUP_RETURN_IF_ERROR(FromRocks(it->status(), "open " + dir));
    if (existed) {
      // A store is never empty: its first write is the format record. An
      // empty database behind an existing CURRENT lost everything (a
      // MANIFEST cut at a record boundary, or the write-ahead log of a store
      // never flushed cut or deleted); do not make it a new store.
      return Status::Corruption(
          "the store in " + dir + " opened empty: it has a CURRENT file and a MANIFEST but not even the neardup "
          "format record, so its MANIFEST, table files or write-ahead log (*.log) lost everything; every document "
          "would be lost. Restore the directory from a backup. (If this directory never held documents, e.g. its "
          "first start was interrupted, remove it and start with --init)");
    }
    rocksdb::WriteOptions wo;
    wo.sync = true;
    NEARDUP_RETURN_IF_ERROR(FromRocks(
        db->Put(wo, rocksdb::Slice(kFormatKey.data(), kFormatKey.size()),
                rocksdb::Slice(kFormatVersion.data(), kFormatVersion.size())),
        "initialize " + dir));
  } else if (!rs.ok()) {
    return FromRocks(rs, "open " + dir);
  } else if (version != kFormatVersion) {
    return Status::FailedPrecondition("store in " + dir + " has format version '" + Printable(version) +
                                      "'; this build reads version " + std::string(kFormatVersion));
  }
  static_assert(kFormatKey[0] == kMetaTag);
  return std::unique_ptr<DocumentStore>(std::make_unique<RocksStore>(dir, options, std::move(db)));
}

}  // namespace neardup
