#include "util/temp_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace neardup {

int OpenUnnamedFile(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  std::string name = dir + "/.neardup-tmp-XXXXXX";
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd >= 0) ::unlink(name.c_str());
  return fd;
}

Status FileWriteError(const std::string& what, int err) {
  const std::string m = what + ": " + std::strerror(err);
  return err == ENOSPC || err == EDQUOT || err == EFBIG ? Status::StorageFull(m) : Status::IOError(m);
}

}  // namespace neardup
