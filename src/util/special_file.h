// Outputs that are not regular files: a device (/dev/null, /dev/stdout), a
// pipe or a socket. Such an output is written in place: never made under
// another name and renamed over (that replaces the device with a file, for
// every program on the machine), never removed when a run fails.
#ifndef NEARDUP_UTIL_SPECIAL_FILE_H_
#define NEARDUP_UTIL_SPECIAL_FILE_H_

#include <sys/stat.h>

#include <string>

namespace neardup {

// True if `path` exists and is neither a regular file nor a directory.
inline bool IsSpecialFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

}  // namespace neardup

#endif  // NEARDUP_UTIL_SPECIAL_FILE_H_
