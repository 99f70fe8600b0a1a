// RocksDB backend of DocumentStore: the embedded, durable default store of the
// online service. Key layout, record format, durability modes and option
// choices are described in docs/storage.md.
//
// Durability: with options.sync (the default) Apply(), PutNamespace() and
// DeleteNamespace() fsync the write-ahead log before returning, so every write
// they acknowledged survives a process kill and a power loss. Concurrent
// synced writers share one fsync (RocksDB group commit). With sync = false an
// acknowledged write survives a kill of the process but not an OS crash.
//
// Namespaces must not contain a \0 byte (kInvalidArgument); ids may hold any
// bytes. DeleteNamespace() of an absent namespace is OK (idempotent).
//
// A full disk or an I/O error (docs/storage.md "Disk full and I/O errors"):
// a write that fails for want of space is kStorageFull, one that fails with an
// I/O error kIOError, and nothing of it is applied. From then on writes fail at
// once with that status (nothing reaches the disk) while reads keep working,
// until a later write finds the disk healthy again (free space for the
// unflushed data and a probe file written and synced; tried at most every
// 100 ms): the store then recovers (RocksDB's Resume, or a reopen of the
// database when Resume cannot continue safely) and that write goes through.
// Only while a reopen has failed do reads fail too (kUnavailable); they then
// try to recover as writes do. No failed write is ever applied afterwards,
// also across a reopen. RocksDB's text LOG is written by the store and loses
// lines, not the process, on a full disk.
//
// Thread-safety: every method may be called concurrently from any thread.
// One process at a time may open a directory (RocksDB's LOCK file; a second
// open fails with kIOError).
#ifndef NEARDUP_ROCKS_STORE_H_
#define NEARDUP_ROCKS_STORE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "neardup/util/status.h"
#include "neardup/engine/local_engine.h"
#include "neardup/engine/store.h"

namespace rocksdb {
class FileSystem;
}

namespace neardup {

struct RocksStoreOptions {
  bool sync = true;              // fsync the WAL before a write returns (docs/storage.md)
  // true: a missing or empty directory becomes a new, empty store (`serve
  // --init`); an existing store is opened as with false. false: a missing or
  // empty directory is kNotFound. Either way a directory holding other files
  // is kFailedPrecondition and one holding store files but no CURRENT is
  // kCorruption (RocksDB would start over and delete them).
  bool create_if_missing = true;
  size_t block_cache_bytes = 64 << 20;  // LRU cache of data, index and filter blocks
  // A write-ahead log damaged anywhere but its last record (what kill -9 or a
  // power cut leaves) makes the open fail with kCorruption, because replaying
  // it only up to the damage would silently drop acknowledged writes. true:
  // open anyway, keeping the writes before the first damaged record and
  // dropping the rest (RocksDB's point-in-time recovery); a warning goes to
  // stderr. docs/storage.md "Recovery".
  bool accept_wal_loss = false;
  // The file system RocksDB writes through; null: the local disk. Tests pass
  // a FaultFileSystem (store/fault_fs.h) to make writes fail on command.
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

// Opens (or creates) the store in directory `dir`. Errors: kNotFound if the
// store is missing and !create_if_missing, kFailedPrecondition for a
// directory that is not a store (other files; a RocksDB database without the
// neardup format record; an unknown format version), kCorruption naming the
// directory for a damaged write-ahead log, or one cut short or deleted
// (it ends before the last acknowledged write, recorded beside it when
// options.sync; unless options.accept_wal_loss),
// kCorruption naming the file and what its loss costs for a damaged or
// missing MANIFEST, CURRENT or table file (never opened: no flag accepts
// that), kStorageFull when the disk is too full to open (the open writes a
// new MANIFEST and log), kIOError from RocksDB. A damaged data block of a table file is
// found when read (the engine's start-up scan reads them all): kCorruption
// naming the file. docs/storage.md "Damaged files".
Result<std::unique_ptr<DocumentStore>> OpenRocksStore(const std::string& dir,
                                                      const RocksStoreOptions& options = {});

// The embedded engine: opens (or creates) the RocksDB store in
// options.data_dir (sync = options.sync) and a LocalEngine over it
// (local_engine.h has its errors).
Result<std::unique_ptr<Engine>> OpenLocalEngine(const LocalEngineOptions& options);

}  // namespace neardup

#endif  // NEARDUP_ROCKS_STORE_H_
