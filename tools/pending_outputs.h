// Outputs that appear under their names only once complete (docs/cli.md,
// "Outputs"): each file is written under a hidden temporary name in the same
// directory, ".neardup-PID-NAME" (the name's end kept, so .gz and .zst still
// choose the compression), and Commit() renames them all into place. A run
// that fails or is killed leaves no partial file under an output's name, and
// the previous run's file there stays until a complete one replaces it (a
// file a SIGKILL left is removed by the next run writing that output).
// Standard output ("-") and devices (/dev/null) are written directly: they
// cannot be renamed into. Included by cmd_stage.cc.
//
// Thread-safety: one thread. temporary() may be read by a signal handler
// once published (its strings do not move after the last Open).
#ifndef NEARDUP_TOOLS_PENDING_OUTPUTS_H_
#define NEARDUP_TOOLS_PENDING_OUTPUTS_H_

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.h"
#include "util/special_file.h"

namespace neardup::cli {

class PendingOutputs {
 public:
  PendingOutputs() = default;
  PendingOutputs(const PendingOutputs&) = delete;
  PendingOutputs& operator=(const PendingOutputs&) = delete;
  // Without Commit(): the temporary files go (the caller closed its streams).
  ~PendingOutputs() {
    if (!committed_) RemoveTemporary();
  }

  // Opens `path` for writing: its temporary name, or itself for "-" and
  // devices. kIOError as OpenOutput.
  Result<FilePtr> Open(const std::string& path) {
    std::string where = path;
    if (path != "-" && !IsSpecialFile(path)) {
      const std::filesystem::path p(path);
      RemoveDead(p);
      where = (p.parent_path() / (".neardup-" + std::to_string(::getpid()) + "-" + p.filename().string())).string();
      files_.push_back({where, path});
    }
    return OpenOutput(where);
  }

  // The temporary names, for a caller that must remove them from a signal
  // handler.
  std::vector<std::string> temporary() const {
    std::vector<std::string> names;
    for (const File& f : files_) names.push_back(f.temporary);
    return names;
  }

  // Renames every file into place, once the caller closed them all. On an
  // error the files not yet renamed are removed (kIOError).
  Status Commit() {
    committed_ = true;
    for (size_t i = 0; i < files_.size(); ++i) {
      if (std::rename(files_[i].temporary.c_str(), files_[i].path.c_str()) != 0) {
        const int err = errno;
        for (size_t j = i; j < files_.size(); ++j) std::remove(files_[j].temporary.c_str());
        return Status::IOError("cannot rename " + files_[i].temporary + " to " + files_[i].path + ": " +
                               std::strerror(err));
      }
    }
    return Status::OK();
  }

  // Removes what a run killed by SIGKILL (nothing ran then) left for this
  // output: ".neardup-PID-NAME" whose process no longer lives on this host.
  // On a disk shared by hosts a live run elsewhere may look dead here: two
  // runs writing one output at once is a mistake either way.
  static void RemoveDead(const std::filesystem::path& p) {
    std::error_code ec;
    const std::string suffix = "-" + p.filename().string();
    const std::filesystem::path dir = p.parent_path().empty() ? "." : p.parent_path();
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (!name.starts_with(".neardup-") || !name.ends_with(suffix) || name.size() <= 9 + suffix.size()) continue;
      const std::string pid = name.substr(9, name.size() - 9 - suffix.size());
      if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
      if (::kill(std::stoi(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove(e.path(), ec);
    }
  }

  void RemoveTemporary() const {
    for (const File& f : files_) std::remove(f.temporary.c_str());
  }

 private:
  struct File {
    std::string temporary, path;
  };
  std::vector<File> files_;
  bool committed_ = false;
};

}  // namespace neardup::cli

#endif  // NEARDUP_TOOLS_PENDING_OUTPUTS_H_
