// Outputs that appear under their names only once complete (docs/cli.md,
// "Outputs"): each file is written under a hidden temporary name in the same
// directory, ".neardup-PID-NAME" (the name's end kept, so .gz and .zst still
// choose the compression), and Commit() fsyncs and renames them all into
// place. A run
// that fails or is killed leaves no partial file under an output's name, and
// the previous run's file there stays until a complete one replaces it (a
// file a SIGKILL left is removed by the next run writing that output). The
// replacement keeps the old file's permission bits.
//
// Written in place instead, as before: standard output ("-"), devices and
// pipes (they cannot be renamed into), a symbolic link (the user meant its
// target: /dev/stdout is one), a file this process may not write (it fails
// as before), and a file whose directory does not let this process create
// the temporary one. These are not removed when the run fails.
//
// Errors: kInvalidArgument for a directory (at once, not after the run);
// kIOError as OpenOutput, and from Commit when a rename fails.
//
// Thread-safety: one thread. temporary() may be read by a signal handler
// once published (its strings do not move after the last Open).
#ifndef NEARDUP_TOOLS_PENDING_OUTPUTS_H_
#define NEARDUP_TOOLS_PENDING_OUTPUTS_H_

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "commands.h"
#include "dedup_checkpoint.h"
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

  // Opens `path` for writing: its temporary name, or itself (above).
  Result<FilePtr> Open(const std::string& path) {
    if (path == "-" || IsSpecialFile(path)) return OpenOutput(path);
    struct stat st {};
    const bool exists = ::lstat(path.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) return Status::InvalidArgument("output " + path + " is a directory");
    // A link is written through; a file this process may not write fails as
    // it did in place (a rename would replace a read-only file).
    if (exists && (S_ISLNK(st.st_mode) || ::access(path.c_str(), W_OK) != 0)) return OpenOutput(path);
    const std::filesystem::path p(path);
    RemoveDead(p);
    const std::string temporary = TemporaryName(p, ::getpid());
    files_.push_back({temporary, path});
    if (announce_) announce_(this->temporary());
    auto opened = OpenOutput(temporary);
    if (!opened.ok()) {  // e.g. a file one may write in a directory one may not
      files_.pop_back();
      return OpenOutput(path);
    }
    if (exists) (void)::chmod(temporary.c_str(), st.st_mode & 0777);  // not set-user-ID
    return opened;
  }

  // Called with every temporary name before Open creates the newest: a
  // signal handler that removes them (cmd_stage.cc's PublishedOutputs) must
  // know a name before its file exists, or a signal in between leaves the
  // file (a CI run on a loaded machine, 2026-12-02).
  void OnTemporaryNames(std::function<void(const std::vector<std::string>&)> announce) {
    announce_ = std::move(announce);
  }

  // The temporary names, for a caller that must remove them from a signal
  // handler.
  std::vector<std::string> temporary() const {
    std::vector<std::string> names;
    for (const File& f : files_) names.push_back(f.temporary);
    return names;
  }

  // Renames every file into place, once the caller closed them all: each
  // fsynced first, and its directory after, so that after a power loss a
  // name holds the whole file or the old one. On an error the files not yet
  // renamed are removed (kIOError).
  Status Commit() {
    committed_ = true;
    Status st;
    for (size_t i = 0; i < files_.size() && st.ok(); ++i) st = CheckpointFiles::SyncPath(files_[i].temporary);
    for (size_t i = 0; i < files_.size() && st.ok(); ++i) {
      if (std::rename(files_[i].temporary.c_str(), files_[i].path.c_str()) != 0) {
        st = Status::IOError("cannot rename " + files_[i].temporary + " to " + files_[i].path + ": " +
                             std::strerror(errno));
      }
      const std::filesystem::path dir = std::filesystem::path(files_[i].path).parent_path();
      if (st.ok()) st = CheckpointFiles::SyncPath(dir.string());  // "" is "."
    }
    if (!st.ok()) RemoveTemporary();
    return st;
  }

  void RemoveTemporary() const {
    for (const File& f : files_) std::remove(f.temporary.c_str());
  }

 private:
  // ".neardup-PID-NAME" beside `p`. Of a long NAME only its end, so that the
  // name fits a file system's 255 bytes and still ends as NAME does, after
  // the XXH3 of the whole NAME: two long names that end alike (once the same
  // temporary file, the second output written over the first) stay apart.
  static std::string TemporaryName(const std::filesystem::path& p, long pid) {
    constexpr size_t kMaxName = 255;
    std::string prefix = ".neardup-" + std::to_string(pid) + "-";
    const std::string name = p.filename().string();
    if (prefix.size() + name.size() > kMaxName) {
      char tag[20];
      std::snprintf(tag, sizeof tag, "%016llx-", static_cast<unsigned long long>(XXH3_64bits(name.data(), name.size())));
      prefix += tag;
    }
    const size_t keep = std::min(name.size(), kMaxName - prefix.size());
    return (p.parent_path() / (prefix + name.substr(name.size() - keep))).string();
  }

  // Removes what a run killed by SIGKILL (nothing ran then) left for this
  // output: its temporary name for a PID that no longer lives on this host.
  // On a disk shared by hosts a live run elsewhere may look dead here: two
  // runs writing one output at once is a mistake either way.
  static void RemoveDead(const std::filesystem::path& p) {
    std::error_code ec;
    const std::filesystem::path dir = p.parent_path().empty() ? "." : p.parent_path();
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (!name.starts_with(".neardup-")) continue;
      const size_t dash = name.find('-', 9);
      const std::string pid = name.substr(9, dash == std::string::npos ? 0 : dash - 9);
      if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
      if (std::filesystem::path(TemporaryName(p, std::stol(pid))).filename() != name) continue;
      if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) std::filesystem::remove(e.path(), ec);
    }
  }

  struct File {
    std::string temporary, path;
  };
  std::vector<File> files_;
  bool committed_ = false;
  std::function<void(const std::vector<std::string>&)> announce_;
};

}  // namespace neardup::cli

#endif  // NEARDUP_TOOLS_PENDING_OUTPUTS_H_
