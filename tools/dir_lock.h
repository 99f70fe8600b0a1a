// The lock a run holds on a directory it writes (a --checkpoint DIR, the
// scratch directory of --memory-limit): an exclusive flock(2) on a file in
// it, held while the descriptor is open, so released however the process
// ends, SIGKILL included. Two runs on one checkpoint would mix their files;
// a scratch directory whose lock is free was left by a run that was killed.
// flock does not reach across hosts on every network file system: callers
// that act on a free lock record the host (HostName) and act only on their
// own. Not thread-safe; one owner.
#ifndef NEARDUP_TOOLS_DIR_LOCK_H_
#define NEARDUP_TOOLS_DIR_LOCK_H_

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "neardup/util/status.h"

namespace neardup::cli {

class FileLock {
 public:
  FileLock() = default;
  FileLock(FileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  FileLock& operator=(FileLock&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }

  // Locks `path` (opened with `open_flags` besides O_RDWR, e.g. O_CREAT).
  // Not held (held() false, errno set) when another process holds it or it
  // cannot be opened.
  static FileLock Take(const std::string& path, int open_flags) {
    FileLock l;
    l.fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC | open_flags, 0644);
    if (l.fd_ >= 0 && ::flock(l.fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(std::exchange(l.fd_, -1));
      errno = err;
    }
    return l;
  }

  bool held() const { return fd_ >= 0; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// DIR/lock of a --checkpoint DIR, held: one run at a time on a checkpoint.
// kInvalidArgument when another run holds it.
inline Result<FileLock> LockCheckpoint(const std::string& dir) {
  FileLock lock = FileLock::Take(dir + "/lock", O_CREAT);
  if (lock.held()) return lock;
  return Status::InvalidArgument("--checkpoint " + dir + " is in use by another run (or its lock cannot be taken: " +
                                 std::strerror(errno) + ")");
}

inline std::string HostName() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace neardup::cli

#endif  // NEARDUP_TOOLS_DIR_LOCK_H_
