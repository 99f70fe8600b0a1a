#include "util/append_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "util/temp_file.h"

namespace neardup {

Result<std::FILE*> ReopenForAppend(const std::string& tmp, const std::string& finished, uint64_t bytes,
                                   uint64_t digest, XXH3_state_t* hash) {
  struct stat st {};
  if (::stat(tmp.c_str(), &st) != 0 && errno == ENOENT && ::stat(finished.c_str(), &st) == 0 &&
      std::rename(finished.c_str(), tmp.c_str()) != 0) {
    return Status::IOError("cannot rename " + finished + " to " + tmp + ": " + std::strerror(errno));
  }
  std::FILE* f = std::fopen(tmp.c_str(), "r+b");
  if (f == nullptr) return Status::IOError("cannot reopen " + tmp + ": " + std::strerror(errno));
  auto fail = [f](Status s) {
    std::fclose(f);
    return s;
  };
  if (::fstat(fileno(f), &st) != 0) return fail(Status::IOError("cannot stat " + tmp + ": " + std::strerror(errno)));
  if (static_cast<uint64_t>(st.st_size) < bytes) {
    return fail(Status::Corruption(tmp + " has " + std::to_string(st.st_size) + " bytes; the checkpoint recorded " +
                                   std::to_string(bytes)));
  }
  if (::ftruncate(fileno(f), static_cast<off_t>(bytes)) != 0) {
    return fail(Status::IOError("cannot cut " + tmp + " back to the checkpoint: " + std::strerror(errno)));
  }
  XXH3_64bits_reset(hash);
  std::vector<char> buf(1 << 20);
  for (uint64_t left = bytes; left > 0;) {
    const size_t n = std::fread(buf.data(), 1, static_cast<size_t>(std::min<uint64_t>(left, buf.size())), f);
    if (n == 0) return fail(Status::IOError("cannot read " + tmp + ": " + std::strerror(errno)));
    XXH3_64bits_update(hash, buf.data(), n);
    left -= n;
  }
  if (XXH3_64bits_digest(hash) != digest) {
    return fail(Status::Corruption(tmp + " differs from what the checkpoint recorded (damaged since)"));
  }
  if (std::fseek(f, static_cast<long>(bytes), SEEK_SET) != 0) {
    return fail(Status::IOError("cannot seek in " + tmp + ": " + std::strerror(errno)));
  }
  return f;
}

Status SyncStream(std::FILE* f, const std::string& name) {
  if (std::fflush(f) != 0 || ::fsync(fileno(f)) != 0) {
    return FileWriteError("cannot write " + name, errno);
  }
  return Status::OK();
}

}  // namespace neardup
