// Unnamed temporary files: scratch space on disk that nothing can leave
// behind (a crash, a kill -9), for data the process can always rebuild.
#ifndef NEARDUP_UTIL_TEMP_FILE_H_
#define NEARDUP_UTIL_TEMP_FILE_H_

#include <string>

#include "neardup/util/status.h"

namespace neardup {

// A read-write descriptor of a new, empty file in `dir` with no name:
// O_TMPFILE where the file system has it, else a named file unlinked at
// once. Either way it vanishes with its last descriptor. -1 and errno set on
// failure.
int OpenUnnamedFile(const std::string& dir);

// The status of a failed write to such a file: kStorageFull when the file
// system (or the process's file size limit) has no room, kIOError otherwise.
Status FileWriteError(const std::string& what, int err);

}  // namespace neardup

#endif  // NEARDUP_UTIL_TEMP_FILE_H_
