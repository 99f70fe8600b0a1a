// FaultFileSystem (fault_fs.h): the failing calls forward nothing, so a failed
// Append leaves the file as it was and a failed create leaves no file.
#include "neardup/store/fault_fs.h"

#include <utility>

namespace neardup {
namespace {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

class FaultWritableFile final : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultWritableFile(std::unique_ptr<rocksdb::FSWritableFile> file, FaultFileSystem* fs)
      : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs) {}

  IOStatus Append(const Slice& data, const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s = fs_->Check(kDiskAppend);
    return s.ok() ? target()->Append(data, o, dbg) : s;
  }
  IOStatus Append(const Slice& data, const IOOptions& o, const rocksdb::DataVerificationInfo& v,
                  IODebugContext* dbg) override {
    IOStatus s = fs_->Check(kDiskAppend);
    return s.ok() ? target()->Append(data, o, v, dbg) : s;
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s = fs_->Check(kDiskAppend);
    return s.ok() ? target()->PositionedAppend(data, offset, o, dbg) : s;
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& o,
                            const rocksdb::DataVerificationInfo& v, IODebugContext* dbg) override {
    IOStatus s = fs_->Check(kDiskAppend);
    return s.ok() ? target()->PositionedAppend(data, offset, o, v, dbg) : s;
  }
  IOStatus Sync(const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s = fs_->Check(kDiskSync);
    return s.ok() ? target()->Sync(o, dbg) : s;
  }
  IOStatus Fsync(const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s = fs_->Check(kDiskSync);
    return s.ok() ? target()->Fsync(o, dbg) : s;
  }
  IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s = fs_->Check(kDiskSync);
    return s.ok() ? target()->RangeSync(offset, nbytes, o, dbg) : s;
  }

 private:
  FaultFileSystem* fs_;  // outlives its files: RocksDB holds the file system while files are open
};

}  // namespace

FaultFileSystem::FaultFileSystem() : FaultFileSystem(rocksdb::FileSystem::Default()) {}

FaultFileSystem::FaultFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base) : FileSystemWrapper(base) {}

void FaultFileSystem::Fail(DiskFault fault, unsigned ops, uint64_t skip) {
  ops_.store(0);  // no half-set fault is ever seen
  fault_.store(static_cast<int>(fault));
  skip_.store(static_cast<int64_t>(skip));
  ops_.store(ops);
}

void FaultFileSystem::Heal() { ops_.store(0); }

IOStatus FaultFileSystem::Check(DiskOp op) {
  if ((ops_.load() & op) == 0) return IOStatus::OK();
  if (skip_.fetch_sub(1) > 0) return IOStatus::OK();
  injected_.fetch_add(1);
  if (static_cast<DiskFault>(fault_.load()) == DiskFault::kNoSpace) {
    return IOStatus::NoSpace("injected fault", "No space left on device");
  }
  return IOStatus::IOError("injected fault", "Input/output error");
}

IOStatus FaultFileSystem::Wrap(IOStatus opened, std::unique_ptr<rocksdb::FSWritableFile>* r) {
  if (opened.ok()) *r = std::make_unique<FaultWritableFile>(std::move(*r), this);
  return opened;
}

IOStatus FaultFileSystem::NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                          std::unique_ptr<rocksdb::FSWritableFile>* r, IODebugContext* dbg) {
  IOStatus s = Check(kDiskCreate);
  return s.ok() ? Wrap(target()->NewWritableFile(f, o, r, dbg), r) : s;
}

IOStatus FaultFileSystem::ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                             std::unique_ptr<rocksdb::FSWritableFile>* r, IODebugContext* dbg) {
  IOStatus s = Check(kDiskCreate);
  return s.ok() ? Wrap(target()->ReopenWritableFile(f, o, r, dbg), r) : s;
}

IOStatus FaultFileSystem::ReuseWritableFile(const std::string& f, const std::string& old, const rocksdb::FileOptions& o,
                                            std::unique_ptr<rocksdb::FSWritableFile>* r, IODebugContext* dbg) {
  IOStatus s = Check(kDiskCreate);
  return s.ok() ? Wrap(target()->ReuseWritableFile(f, old, o, r, dbg), r) : s;
}

IOStatus FaultFileSystem::RenameFile(const std::string& src, const std::string& dst, const IOOptions& o,
                                     IODebugContext* dbg) {
  IOStatus s = Check(kDiskRename);
  return s.ok() ? target()->RenameFile(src, dst, o, dbg) : s;
}

IOStatus FaultFileSystem::GetFreeSpace(const std::string& path, const IOOptions& o, uint64_t* free,
                                       IODebugContext* dbg) {
  if ((ops_.load() != 0) && static_cast<DiskFault>(fault_.load()) == DiskFault::kNoSpace) {
    *free = 0;
    return IOStatus::OK();
  }
  return target()->GetFreeSpace(path, o, free, dbg);
}

}  // namespace neardup
