// RocksDB implementation of DocumentStore. Layout and rationale: docs/storage.md.
//
// Note: no namespace-scope objects with dynamic initialization here, so the
// store is usable from other translation units' static initializers.
#include "neardup/store/rocks_store.h"

#include "store/acked_sequence.h"
#include "store/store_files.h"
#include "util/coding.h"

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/listener.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/table.h>
#include <rocksdb/transaction_log.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <rocksdb/write_batch.h>

#include <fcntl.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
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
    case rocksdb::Status::kIOError:
      // ENOSPC: a state that clears when space is freed (HTTP 507), not a fault.
      if (s.IsNoSpace()) return Status::StorageFull(std::move(msg));
      return Status::IOError(std::move(msg));
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

// ---- RocksDB's text log -------------------------------------------------------
// RocksDB's own info log (the LOG file) writes through a WritableFileWriter,
// and on a full disk that was the abort of issue 15: one log line fails with
// ENOSPC, the writer remembers the error, and the next line trips
// assert(sync_without_flush_called_) in
// WritableFileWriter::AssertFalseAndGetStatusForPrevError (Debian's
// librocksdb has assertions on) — under load, and at start on a full disk,
// since opening logs a dozen lines. This one writes each line with write(2)
// and drops it when the disk is full: a lost log line costs nothing.
// Rolled at max_bytes to LOG.old (one old file kept).
class InfoLogFile final : public rocksdb::Logger {
 public:
  InfoLogFile(std::string dir, size_t max_bytes)
      : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL), path_(std::move(dir) + "/LOG"), max_bytes_(max_bytes) {}
  ~InfoLogFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[2048];
    struct timeval now;
    ::gettimeofday(&now, nullptr);
    struct tm t;
    ::localtime_r(&now.tv_sec, &t);
    int n = std::snprintf(line, sizeof(line), "%04d/%02d/%02d-%02d:%02d:%02d.%06ld ", t.tm_year + 1900, t.tm_mon + 1,
                          t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, static_cast<long>(now.tv_usec));
    va_list copy;
    va_copy(copy, ap);
    const int body = std::vsnprintf(line + n, sizeof(line) - n - 1, format, copy);
    va_end(copy);
    n = std::min<int>(n + std::max(body, 0), static_cast<int>(sizeof(line)) - 2);
    if (line[n - 1] != '\n') line[n++] = '\n';
    std::lock_guard lk(mu_);
    if (fd_ < 0 || bytes_ >= max_bytes_) Reopen();
    if (fd_ < 0) return;
    const ssize_t w = ::write(fd_, line, static_cast<size_t>(n));  // ENOSPC: the line is lost
    if (w > 0) bytes_ += static_cast<size_t>(w);
  }

 private:
  void Reopen() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
      if (bytes_ >= max_bytes_) (void)std::rename(path_.c_str(), (path_ + ".old").c_str());
    }
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    bytes_ = fd_ >= 0 ? static_cast<size_t>(std::max<off_t>(::lseek(fd_, 0, SEEK_END), 0)) : 0;
  }

  const std::string path_;
  const size_t max_bytes_;
  std::mutex mu_;
  int fd_ = -1;
  size_t bytes_ = 0;
};

// ---- options ---------------------------------------------------------------
// RocksDB's own recovery from a background error is off: for a full disk it
// waits for free space of a whole write buffer (64 MB) and retries every 5 s,
// so on a small disk writes never came back (issue 15); and while it runs a
// DB::Resume() is refused. The store recovers on its own terms instead
// (RocksStore::Recover).
class NoAutoRecovery final : public rocksdb::EventListener {
 public:
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason, rocksdb::Status, bool* auto_recovery) override {
    *auto_recovery = false;
  }
};

rocksdb::Options MakeRocksOptions(const RocksStoreOptions& options, rocksdb::Env* env,
                                  std::shared_ptr<rocksdb::Logger> info_log) {
  rocksdb::Options o;
  if (env != nullptr) o.env = env;
  o.info_log = std::move(info_log);
  o.listeners.push_back(std::make_shared<NoAutoRecovery>());
  o.max_bgerror_resume_count = 0;  // no automatic resume after retryable I/O errors either
  // No fallocate: RocksDB reserves 1.1 write buffers (70 MB) ahead for every
  // WAL file (FALLOC_FL_KEEP_SIZE), and keeps it after a kill. On a small disk
  // that reservation alone filled it, and a recovery or an open, which
  // briefly has two logs, could not find room (issue 15; docs/storage.md).
  o.allow_fallocate = false;
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

// Collects the keys a write batch touches.
class BatchKeys final : public rocksdb::WriteBatch::Handler {
 public:
  rocksdb::Status PutCF(uint32_t, const rocksdb::Slice& key, const rocksdb::Slice&) override {
    keys.push_back(key.ToString());
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t, const rocksdb::Slice& key) override {
    keys.push_back(key.ToString());
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteRangeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    ++ranges;
    return rocksdb::Status::OK();
  }
  std::vector<std::string> keys;
  int ranges = 0;
};

// How often a write may try to bring a failed store back: each try probes
// the disk (and may flush), so a full disk is not hammered, while a client
// retrying after Retry-After: 1 finds it recovered.
constexpr std::chrono::milliseconds kRecoverInterval{100};
// Free space a recovery needs beyond the unflushed data it writes out.
constexpr uint64_t kRecoverHeadroomBytes = 1 << 20;
// Keys whose earlier values are kept for undoing failed writes (below).
constexpr size_t kMaxUndoKeys = 1 << 20;
// RocksDB's text LOG: at most this much in LOG and as much in LOG.old.
constexpr size_t kInfoLogBytes = 16 << 20;

class RocksStore final : public DocumentStore {
 public:
  RocksStore(std::string dir, const RocksStoreOptions& options)
      : dir_(std::move(dir)),
        options_(options),
        fs_(options.file_system ? options.file_system : rocksdb::FileSystem::Default()),
        env_(options.file_system ? rocksdb::NewCompositeEnv(options.file_system) : nullptr),
        info_log_(std::make_shared<InfoLogFile>(dir_, kInfoLogBytes)) {
    write_options_.sync = options.sync;
  }

  ~RocksStore() override {
    if (!db_) return;
    // With sync=false, a clean shutdown still leaves everything on disk. Not
    // after a failed write: SyncWAL on a log whose writer saw an error trips
    // an assertion in RocksDB (WritableFileWriter::SyncWithoutFlush).
    if (!write_options_.sync && !failed_.load()) (void)db_->SyncWAL();
    (void)db_->Close();
  }

  // DB::Open with the store's options; db_ must be null.
  rocksdb::Status OpenDb() {
    std::error_code ec;
    if (options_.create_if_missing) std::filesystem::create_directories(dir_, ec);  // for the LOG file
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status rs = rocksdb::DB::Open(MakeRocksOptions(options_, env_.get(), info_log_), dir_, &raw);
    if (rs.ok()) db_.reset(raw);
    return rs;
  }

  rocksdb::DB* db() { return db_.get(); }

  // Start-up: did the write-ahead log keep every acknowledged write?
  // (acked_sequence.h: RocksDB cannot tell a log cut at a record boundary,
  // or a deleted live log, from one that ends there.) Then records from
  // the current sequence number on.
  Status CheckAckedWrites() {
    if (!options_.sync) return acked_.Remove();
    NEARDUP_ASSIGN_OR_RETURN(const std::optional<uint64_t> acked, acked_.Read());
    const uint64_t now = db_->GetLatestSequenceNumber();
    if (acked && *acked > now) {
      const std::string lost = std::to_string(*acked - now);
      if (!options_.accept_wal_loss) {
        return Status::Corruption(
            "cannot open the store in " + dir_ + ": its write-ahead log (*.log) was cut short or deleted: it ends at "
            "write " + std::to_string(now) + " but writes up to " + std::to_string(*acked) + " were acknowledged, so " +
            lost + " acknowledged writes would be lost (acknowledged documents, deletes or namespace changes). Restore the "
            "directory from a backup, or restart with --accept-wal-loss to open it without them (copy the directory "
            "first)");
      }
      std::cerr << "warning: " << dir_ << ": opened with --accept-wal-loss; " << lost
                << " acknowledged writes were lost with the write-ahead log\n";
    }
    return acked_.Start(now);
  }

  // Writes the format record of a new store (synced whatever options.sync:
  // the store exists once this is durable).
  Status PutFormat() {
    rocksdb::WriteBatch batch;
    NEARDUP_RETURN_IF_ERROR(FromRocks(batch.Put(rocksdb::Slice(kFormatKey.data(), kFormatKey.size()),
                                                rocksdb::Slice(kFormatVersion.data(), kFormatVersion.size())),
                                      "initialize"));
    return Write(&batch, "initialize " + dir_, /*force_sync=*/true);
  }

  Status PutNamespace(const std::string& ns, const std::string& settings) override {
    NEARDUP_RETURN_IF_ERROR(CheckNamespace(ns));
    rocksdb::WriteBatch batch;
    NEARDUP_RETURN_IF_ERROR(FromRocks(batch.Put(NamespaceKey(ns), settings), "put namespace"));
    return Write(&batch, "put namespace in " + dir_);
  }

  Status DeleteNamespace(const std::string& ns) override {
    NEARDUP_RETURN_IF_ERROR(CheckNamespace(ns));
    const std::string begin = DocPrefix(ns);
    const std::string limit = DocLimit(ns);
    rocksdb::WriteBatch batch;
    NEARDUP_RETURN_IF_ERROR(FromRocks(batch.Delete(NamespaceKey(ns)), "delete namespace"));
    NEARDUP_RETURN_IF_ERROR(FromRocks(batch.DeleteRange(begin, limit), "delete namespace"));
    NEARDUP_RETURN_IF_ERROR(Write(&batch, "delete namespace in " + dir_));
    // Best effort: the delete is done; reclaiming the space can fail or wait.
    (void)CompactRangeOf(begin, limit);
    return Status::OK();
  }

  Status ListNamespaces(std::vector<std::pair<std::string, std::string>>* out) override {
    out->clear();
    ReopenIfClosed();
    std::shared_lock lk(db_mu_);
    NEARDUP_RETURN_IF_ERROR(CheckOpen());
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
    return Write(&batch, "write to " + dir_);
  }

  Status Get(const std::string& ns, const std::string& id, StoredDocument* out) override {
    NEARDUP_RETURN_IF_ERROR(CheckNamespace(ns));
    const std::string key = DocKey(ns, id);
    rocksdb::PinnableSlice value;
    ReopenIfClosed();
    std::shared_lock lk(db_mu_);
    NEARDUP_RETURN_IF_ERROR(CheckOpen());
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
    ReopenIfClosed();
    std::shared_lock lk(db_mu_);
    NEARDUP_RETURN_IF_ERROR(CheckOpen());
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
    std::shared_lock lk(db_mu_);
    if (!db_) return 0;
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
  // ---- writes and recovery from failed ones ----------------------------------
  //
  // After a failed write RocksDB stops taking writes (a "background error")
  // and must be told to go on (DB::Resume). Two of its ways on lead to an
  // abort (assertions are on in Debian's librocksdb): the log writer that
  // failed refuses any further use with assert(sync_without_flush_called_)
  // in WritableFileWriter::AssertFalseAndGetStatusForPrevError. Resume()
  // switches to a new log only when the memtable holds data; with an empty
  // memtable (just after an open or a flush) it clears the error and keeps
  // the failed log, and the next write aborts. So: no write reaches RocksDB
  // while the store is failed (Write checks first); a recovery runs with
  // every writer excluded (db_mu_), and when Resume did not move to a new
  // log, or refused (an I/O error is fatal to RocksDB 7.8), the database is
  // closed and opened again instead.
  //
  // A reopen replays the log, where a failed write can lie whole (its append
  // went through and its fsync failed). The client heard that it failed and
  // the engine forgot it, so the store puts back what the failed batches'
  // keys held before (undo_, read when the failure was seen) before any new
  // write. Resume does not need that: it flushes the memtable, which never
  // got the failed write, and drops the old log.

  Status Write(rocksdb::WriteBatch* batch, const std::string& what, bool force_sync = false) {
    NEARDUP_RETURN_IF_ERROR(Recover());
    std::shared_lock lk(db_mu_);
    NEARDUP_RETURN_IF_ERROR(CheckOpen());
    rocksdb::WriteOptions wo = write_options_;
    if (force_sync) wo.sync = true;
    const rocksdb::Status rs = db_->Write(wo, batch);
    if (rs.ok()) {
      if (wo.sync) acked_.Record(db_->GetLatestSequenceNumber());
      return Status::OK();
    }
    Status st = FromRocks(rs, what);
    if (rs.IsIOError()) NoteFailureLocked(*batch, st);  // NoSpace is an IOError too
    return st;
  }

  // A write failed on disk: the store refuses writes until Recover() brings
  // it back. Called with db_mu_ held (shared), so db_ is open.
  void NoteFailureLocked(const rocksdb::WriteBatch& batch, const Status& st) {
    BatchKeys keys;
    (void)batch.Iterate(&keys);
    std::lock_guard lk(failure_mu_);
    if (!failed_.load()) {
      failure_ = st;
      wal_at_failure_ = CurrentWal();
      failed_.store(true);
      std::cerr << "neardup: store " << dir_ << ": a write failed (" << st.ToString()
                << "); reads go on, writes fail until the disk takes writes again\n";
    }
    if (keys.ranges > 0) {
      std::cerr << "neardup: store " << dir_ << ": a failed namespace deletion may still take effect if the "
                << "store has to be reopened\n";
    }
    if (undo_.size() + keys.keys.size() > kMaxUndoKeys) {
      std::cerr << "neardup: store " << dir_ << ": more than " << kMaxUndoKeys << " keys of failed writes; the "
                << "rest may reappear if the store has to be reopened\n";
    }
    for (std::string& key : keys.keys) {
      if (undo_.size() >= kMaxUndoKeys || undo_.count(key) != 0) continue;
      std::string value;
      const rocksdb::Status rs = db_->Get(rocksdb::ReadOptions(), key, &value);
      if (rs.ok()) {
        undo_.emplace(std::move(key), std::move(value));
      } else if (rs.IsNotFound()) {
        undo_.emplace(std::move(key), std::nullopt);
      }
    }
  }

  // OK if writes may go on: the store is healthy, or it was failed and is
  // back now. Else the failure (kStorageFull or kIOError), at once.
  Status Recover() {
    if (!failed_.load(std::memory_order_acquire)) return Status::OK();
    std::lock_guard rl(recover_mu_);
    if (!failed_.load()) return Status::OK();
    const auto now = std::chrono::steady_clock::now();
    if (now < next_attempt_) return CurrentFailure();
    next_attempt_ = now + kRecoverInterval;
    Status s = ProbeDisk();
    if (s.ok()) {
      std::unique_lock lk(db_mu_);  // no write in flight while RocksDB recovers
      s = TryRecoverLocked();
    }
    std::lock_guard fl(failure_mu_);
    if (!s.ok()) {
      failure_ = s;
      return s;
    }
    failed_.store(false, std::memory_order_release);
    std::cerr << "neardup: store " << dir_ << ": writes resumed\n";
    return Status::OK();
  }

  Status CurrentFailure() {
    std::lock_guard lk(failure_mu_);
    return failure_;
  }

  // Reads need the database open: after a reopen failed (db_ null), a read
  // tries to recover too (at most every 100 ms, as writes do), or reads
  // would wait for a write that may never come.
  void ReopenIfClosed() {
    if (closed_.load(std::memory_order_acquire)) (void)Recover();
  }

  // With db_mu_ held exclusively.
  Status TryRecoverLocked() {
    if (db_) {
      const rocksdb::Status rs = db_->Resume();
      const uint64_t wal = rs.ok() ? CurrentWal() : 0;
      uint64_t failed_wal;
      {
        std::lock_guard lk(failure_mu_);
        failed_wal = wal_at_failure_;
      }
      if (rs.ok() && wal != 0 && wal != failed_wal) return replayed_ ? ApplyUndoLocked() : ClearUndo();
      // Resume refused, or kept the failed log (see above): start over.
      (void)db_->Close();
      db_.reset();
      closed_.store(true, std::memory_order_release);
    }
    const rocksdb::Status rs = OpenDb();
    if (!rs.ok()) return FromRocks(rs, "reopen the database in " + dir_ + " after a failed write");
    closed_.store(false, std::memory_order_release);
    replayed_ = true;
    return ApplyUndoLocked();
  }

  // The disk takes writes again: room for the unflushed data that a
  // recovery writes out, and a small file written, synced and removed.
  // Reads do not wait for it: it holds db_mu_ only to read the memtable size.
  Status ProbeDisk() {
    uint64_t unflushed = 0;
    {
      std::shared_lock lk(db_mu_);
      if (db_) (void)db_->GetIntProperty(rocksdb::DB::Properties::kSizeAllMemTables, &unflushed);
    }
    uint64_t free = 0;
    if (fs_->GetFreeSpace(dir_, rocksdb::IOOptions(), &free, nullptr).ok() &&
        free < unflushed + kRecoverHeadroomBytes) {
      return Status::StorageFull("the disk of " + dir_ + " is still full: " + std::to_string(free) +
                                 " bytes free, recovery needs " + std::to_string(unflushed + kRecoverHeadroomBytes));
    }
    const std::string path = dir_ + "/NEARDUP-WRITE-PROBE";
    std::unique_ptr<rocksdb::FSWritableFile> f;
    rocksdb::IOStatus s = fs_->NewWritableFile(path, rocksdb::FileOptions(), &f, nullptr);
    if (s.ok()) {
      const std::string page(4096, '\0');
      s = f->Append(page, rocksdb::IOOptions(), nullptr);
      if (s.ok()) s = f->Sync(rocksdb::IOOptions(), nullptr);
      const rocksdb::IOStatus closed = f->Close(rocksdb::IOOptions(), nullptr);
      if (s.ok()) s = closed;
    }
    (void)fs_->DeleteFile(path, rocksdb::IOOptions(), nullptr);
    return FromRocks(s, "probe the disk of " + dir_);
  }

  // Puts back what the keys of failed writes held before them (synced).
  Status ApplyUndoLocked() {
    std::lock_guard lk(failure_mu_);
    if (!undo_.empty()) {
      rocksdb::WriteBatch batch;
      for (const auto& [key, value] : undo_) {
        NEARDUP_RETURN_IF_ERROR(FromRocks(value ? batch.Put(key, *value) : batch.Delete(key), "build undo batch"));
      }
      rocksdb::WriteOptions wo;
      wo.sync = true;
      const rocksdb::Status rs = db_->Write(wo, &batch);
      if (!rs.ok()) {
        wal_at_failure_ = CurrentWal();  // this log failed now
        return FromRocks(rs, "undo failed writes in " + dir_);
      }
    }
    undo_.clear();
    replayed_ = false;
    return Status::OK();
  }

  Status ClearUndo() {
    std::lock_guard lk(failure_mu_);
    undo_.clear();
    return Status::OK();
  }

  // Number of the live write-ahead log; 0 if unknown.
  uint64_t CurrentWal() {
    std::unique_ptr<rocksdb::LogFile> wal;
    if (!db_ || !db_->GetCurrentWalFile(&wal).ok() || !wal) return 0;
    return wal->LogNumber();
  }

  // With db_mu_ held: db_ is null only after a reopen failed.
  Status CheckOpen() const {
    if (db_) return Status::OK();
    return Status::Unavailable("the store in " + dir_ + " is closed after a failed write; it reopens once the disk "
                               "takes writes again");
  }

  Status CompactRangeOf(const std::string& begin, const std::string& limit) {
    std::shared_lock lk(db_mu_);
    NEARDUP_RETURN_IF_ERROR(CheckOpen());
    rocksdb::CompactRangeOptions cro;
    cro.exclusive_manual_compaction = false;  // let automatic compactions proceed
    const rocksdb::Slice b(begin), e(limit);
    return FromRocks(db_->CompactRange(cro, &b, &e), "compact " + dir_);
  }

  const std::string dir_;
  const RocksStoreOptions options_;
  store_internal::AckedSequence acked_{dir_};
  const std::shared_ptr<rocksdb::FileSystem> fs_;
  const std::unique_ptr<rocksdb::Env> env_;  // over options_.file_system; null: the default Env
  const std::shared_ptr<rocksdb::Logger> info_log_;  // RocksDB's text LOG (InfoLogFile)
  rocksdb::WriteOptions write_options_;

  // Lock order: recover_mu_, db_mu_, failure_mu_.
  std::mutex recover_mu_;  // one recovery at a time
  std::chrono::steady_clock::time_point next_attempt_;  // under recover_mu_
  std::shared_mutex db_mu_;  // shared: any use of db_; exclusive: recovery (Resume, reopen)
  std::unique_ptr<rocksdb::DB> db_;
  bool replayed_ = false;  // reopened since the failure: undo_ must be applied (under db_mu_)
  std::atomic<bool> failed_{false};  // a write failed; writes refused until Recover()
  std::atomic<bool> closed_{false};  // db_ is null: a reopen failed (reads recover too)
  std::mutex failure_mu_;
  Status failure_;                 // what refused writes answer
  uint64_t wal_at_failure_ = 0;    // the log that a write failed on
  std::map<std::string, std::optional<std::string>> undo_;  // key -> value before the failed writes
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
  auto store = std::make_unique<RocksStore>(dir, options);
  const rocksdb::Status open_status = store->OpenDb();
  if (open_status.IsNoSpace()) {
    // Opening writes a new MANIFEST and log (and flushes what the old log
    // holds): it cannot on a full disk. Nothing was changed.
    return Status::StorageFull("cannot open the store in " + dir + ": the disk is full (" + open_status.ToString() +
                               "). Free some space on it and start again");
  }
  if (!open_status.ok()) return OpenFailure(dir, open_status, options.accept_wal_loss);
  rocksdb::DB* db = store->db();
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
    it.reset();  // before the store can be destroyed (an iterator must not outlive its database)
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
    NEARDUP_RETURN_IF_ERROR(store->PutFormat());
  } else if (!rs.ok()) {
    return FromRocks(rs, "open " + dir);
  } else if (version != kFormatVersion) {
    return Status::FailedPrecondition("store in " + dir + " has format version '" + Printable(version) +
                                      "'; this build reads version " + std::string(kFormatVersion));
  }
  static_assert(kFormatKey[0] == kMetaTag);
  NEARDUP_RETURN_IF_ERROR(store->CheckAckedWrites());
  return std::unique_ptr<DocumentStore>(std::move(store));
}

}  // namespace neardup
