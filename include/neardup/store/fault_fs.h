// FaultFileSystem: a rocksdb::FileSystem that forwards to another (the local
// disk by default) and makes its writes fail on command with ENOSPC ("no
// space left on device") or EIO, and then heals, so tests can drive the
// RocksDB store through a full disk and I/O errors at chosen moments
// (rocks_store.h: RocksStoreOptions::file_system).
//
// What can fail (a bit mask of DiskOp): appending to a file (WAL, SST,
// MANIFEST), syncing one (fsync, fdatasync, range sync), creating one
// (new, reopened or reused writable file) and renaming one (how RocksDB
// installs CURRENT). Reads never fail: a full disk does not stop reads.
// A failed call does nothing (the data is not appended, the file is not
// created), which is what a full disk does to a write of a whole page.
// While the disk is made full, GetFreeSpace() reports 0 bytes free.
//
// Typical use:
//   auto fs = std::make_shared<FaultFileSystem>();
//   RocksStoreOptions o; o.file_system = fs;
//   auto store = OpenRocksStore(dir, o);
//   fs->Fail(DiskFault::kNoSpace, kDiskAppend | kDiskSync);   // the disk is full
//   ...                                                        // writes fail
//   fs->Heal();                                                // space is back
//
// Thread-safety: every method may be called concurrently from any thread.
#ifndef NEARDUP_FAULT_FS_H_
#define NEARDUP_FAULT_FS_H_

#include <rocksdb/file_system.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace neardup {

enum class DiskFault : int { kNoSpace, kIOError };

// Calls that an injected fault makes fail (bit mask).
enum DiskOp : unsigned {
  kDiskAppend = 1u << 0,  // Append, PositionedAppend
  kDiskSync = 1u << 1,    // Sync, Fsync, RangeSync of a file
  kDiskCreate = 1u << 2,  // NewWritableFile, ReopenWritableFile, ReuseWritableFile
  kDiskRename = 1u << 3,  // RenameFile
  kDiskAllWrites = kDiskAppend | kDiskSync | kDiskCreate | kDiskRename,
};

class FaultFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  FaultFileSystem();  // over rocksdb::FileSystem::Default()
  explicit FaultFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base);

  // From now on every call in `ops` fails with `fault`, after `skip` more
  // such calls have succeeded (the moment within a write: skip 1 Append lets
  // a WAL record's header through and fails its payload), until Heal().
  // Replaces the previous fault.
  void Fail(DiskFault fault, unsigned ops, uint64_t skip = 0);
  // Every call succeeds again.
  void Heal();

  uint64_t injected() const { return injected_.load(); }  // failures returned so far
  bool failing() const { return ops_.load() != 0; }

  // The injected error for `op` (not OK), or OK. Used by the wrapped files.
  rocksdb::IOStatus Check(DiskOp op);

  static const char* kClassName() { return "NeardupFaultFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old, const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& target, const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus GetFreeSpace(const std::string& path, const rocksdb::IOOptions& o, uint64_t* free,
                                 rocksdb::IODebugContext* dbg) override;

 private:
  // Wraps a file opened for writing so that its writes can fail.
  rocksdb::IOStatus Wrap(rocksdb::IOStatus opened, std::unique_ptr<rocksdb::FSWritableFile>* r);

  std::atomic<unsigned> ops_{0};
  std::atomic<int> fault_{0};
  std::atomic<int64_t> skip_{0};
  std::atomic<uint64_t> injected_{0};
};

}  // namespace neardup

#endif  // NEARDUP_FAULT_FS_H_
