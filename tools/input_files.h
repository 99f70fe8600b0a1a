// The files of a batch run: `--input` may be given many times, and each may
// name a file, '-' (standard input), a directory (every regular file below
// it, recursively, hidden names skipped) or a glob pattern. The list is in a
// deterministic order (the arguments' order; inside a directory or a pattern,
// by path bytes), so a run's output does not depend on the file system's
// listing order. Included by the commands that read many inputs.
#ifndef NEARDUP_TOOLS_INPUT_FILES_H_
#define NEARDUP_TOOLS_INPUT_FILES_H_

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "neardup/util/status.h"

namespace neardup::cli {

struct InputFile {
  std::string path;   // as opened ('-' for standard input)
  uint64_t size = 0;  // bytes on disk (compressed if it is); 0 if unknown
};

// True for an input that can be read only once: standard input, a pipe
// (also one named by path: /dev/stdin, <(zcat ...), a FIFO), a character
// device. Opening one to check it consumes what it reads, and a second open
// reads on from there (or waits for a writer).
inline bool ReadableOnce(const std::string& path) {
  struct stat st {};
  return path == "-" || (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode));
}

namespace input_files_internal {

inline bool IsPattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

inline Status AddDirectory(const std::string& dir, std::vector<std::string>* out) {
  std::error_code ec;
  std::vector<std::string> found;
  auto it = std::filesystem::recursive_directory_iterator(dir, ec);
  if (ec) return Status::IOError("cannot list " + dir + ": " + ec.message());
  for (; it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return Status::IOError("cannot list " + dir + ": " + ec.message());
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) found.push_back(it->path().string());
  }
  if (found.empty()) return Status::InvalidArgument("directory " + dir + " holds no input file");
  std::sort(found.begin(), found.end());
  out->insert(out->end(), found.begin(), found.end());
  return Status::OK();
}

inline Status AddPattern(const std::string& pattern, std::vector<std::string>* out) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  if (rc == GLOB_NOMATCH) {
    globfree(&g);
    return Status::InvalidArgument("no file matches " + pattern);
  }
  if (rc != 0) {
    globfree(&g);
    return Status::IOError("cannot expand " + pattern);
  }
  const std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  globfree(&g);
  std::vector<std::string> found;
  for (const std::string& m : matches) {
    if (std::filesystem::is_directory(m)) {
      NEARDUP_RETURN_IF_ERROR(AddDirectory(m, &found));
    } else {
      found.push_back(m);
    }
  }
  // All the files sorted together, directories' too: `-i d` and `-i 'd/*'`
  // read the same files in the same order (d/a/z sorts after d/a-b).
  std::sort(found.begin(), found.end());
  out->insert(out->end(), found.begin(), found.end());
  return Status::OK();
}

}  // namespace input_files_internal

// The files named by `args`, in order. kInvalidArgument for a pattern or
// directory that names no file, and for a file named twice (reading it again
// would report every document of the second reading as a duplicate).
inline Result<std::vector<InputFile>> ExpandInputs(const std::vector<std::string>& args) {
  using namespace input_files_internal;
  std::vector<std::string> paths;
  for (const std::string& a : args) {
    struct stat st {};
    const bool exists = a != "-" && ::stat(a.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
      NEARDUP_RETURN_IF_ERROR(AddDirectory(a, &paths));
    } else if (!exists && a != "-" && IsPattern(a)) {
      NEARDUP_RETURN_IF_ERROR(AddPattern(a, &paths));
    } else {
      paths.push_back(a);  // a missing file is reported when it is opened
    }
  }
  std::vector<InputFile> out;
  std::set<std::pair<uint64_t, uint64_t>> seen;  // (device, inode)
  bool stdin_seen = false;
  for (const std::string& p : paths) {
    InputFile f{p, 0};
    struct stat st {};
    if (p == "-") {
      if (stdin_seen) return Status::InvalidArgument("standard input ('-') is given twice");
      stdin_seen = true;
    } else if (::stat(p.c_str(), &st) == 0) {
      if (!seen.emplace(st.st_dev, st.st_ino).second) {
        return Status::InvalidArgument(p + " is given twice (directly, through a directory or a pattern)");
      }
      f.size = static_cast<uint64_t>(st.st_size);
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace neardup::cli

#endif  // NEARDUP_TOOLS_INPUT_FILES_H_
