// The files of `neardup dedup --checkpoint DIR` (docs/cli.md, "Resuming an
// interrupted run"): after every completed input file the run makes its
// outputs durable and writes, in DIR,
//   kept-NNNNN.ndk      the documents kept while reading input NNNNN
//                       (a kept-document file, dedup/kept_file.h)
//   clusters-NNNNN.jsonl  its --clusters members, {"kept": seq, "id": <id>}
//   state.log           the command line, then per finished input its
//                       size and time and its clusters' checksum
//                       (CheckpointLog: appended, never rewritten)
//   state.json          last: how many inputs are done, the counters,
//                       every output's size, the log's mark
// A restart with the same command line truncates the outputs to those
// sizes and continues with the next input; a crash between two checkpoints
// only loses the work since the last one. Included by cmd_dedup.cc.
#ifndef NEARDUP_TOOLS_DEDUP_CHECKPOINT_H_
#define NEARDUP_TOOLS_DEDUP_CHECKPOINT_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint_log.h"
#include "commands.h"
#include "dir_lock.h"
#include "input_files.h"

namespace neardup::cli {

class CheckpointFiles {
 public:
  explicit CheckpointFiles(std::string dir) : dir_(std::move(dir)) {}

  // Holds DIR/lock while the run lives: a second run on the same DIR would
  // cut back and overwrite the first's files. kInvalidArgument when another
  // run holds it.
  Status Lock() {
    NEARDUP_ASSIGN_OR_RETURN(lock_, LockCheckpoint(dir_));
    return Status::OK();
  }

  const std::string& dir() const { return dir_; }
  std::string Kept(size_t file) const { return Name("kept-", file, ".ndk"); }
  std::string Clusters(size_t file) const { return Name("clusters-", file, ".jsonl"); }
  std::string State() const { return dir_ + "/state.json"; }
  std::string Log() const { return dir_ + "/state.log"; }
  // Where a --memory-limit run records its rounds (RoundCheckpoint).
  std::string RoundsState() const { return dir_ + "/rounds/rounds.json"; }
  std::string RoundsLog() const { return dir_ + "/rounds/rounds.log"; }

  // The command a resumed run must repeat: every option given, with its
  // values in order, but those that change nothing in the outputs (-q,
  // --progress, --threads), so a restart may watch progress or use another
  // machine's cores. Taken from the parsed options, so the spelling does not
  // count: `-t2`, `-qt1` and `--threads=2` are `-t 2` (they were refused when
  // the key was the raw command line, which a checkpoint may still hold:
  // SameRun).
  static std::vector<std::string> ResumeKey() {
    const CLI::App* cmd = RunningCommand();
    if (cmd == nullptr) return LegacyResumeKey();
    std::vector<std::string> key = {"v2", cmd->get_name()};
    for (const CLI::Option* opt : cmd->get_options()) {
      const std::string name = opt->get_name();
      if (opt->count() == 0 || name == "--quiet" || name == "--progress" || name == "--threads") continue;
      key.push_back(name);
      for (const std::string& value : opt->results()) key.push_back(value);
    }
    return key;
  }

  // Whether a checkpoint's recorded key is this run's, in either form.
  static bool SameRun(const nlohmann::json& recorded) {
    return recorded == ResumeKey() || recorded == LegacyResumeKey();
  }

  // The inputs as a checkpoint records them: a resumed run must read the
  // same files, and the done ones unchanged.
  static nlohmann::json Inputs(const std::vector<InputFile>& inputs) {
    nlohmann::json a = nlohmann::json::array();
    for (const InputFile& in : inputs) {
      struct stat st {};
      ::stat(in.path.c_str(), &st);
      a.push_back({{"path", in.path},
                   {"size", static_cast<uint64_t>(st.st_size)},
                   {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec}});
    }
    return a;
  }

  // The state of an interrupted run to resume, or nullopt when DIR holds
  // none. kInvalidArgument when it is another run's (other command line or
  // inputs), kCorruption when it cannot be parsed.
  Result<std::optional<nlohmann::json>> Load(const std::vector<InputFile>& inputs) const {
    // A --memory-limit run's rounds (tools/cmd_stage.cc, RoundCheckpoint)
    // are another run: resuming this one over them, or starting afresh and
    // leaving them, would let a later run cut back outputs it did not write.
    if (std::filesystem::exists(RoundsState())) {
      return Status::InvalidArgument("--checkpoint " + dir_ +
                                     " holds another run (one with --memory-limit); remove it to start afresh");
    }
    std::ifstream in(State());
    if (!in) return std::optional<nlohmann::json>();
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json state = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    // Version 1 (before 2026-11-30) has no checksum; versions 1 and 2
    // (before 2026-12-01) no log.
    const int version = state.is_object() ? state.value("version", 0) : 0;
    if (state.is_discarded() || version < 1 || version > 3) {
      return Status::Corruption(State() + ": not a checkpoint this version can read");
    }
    NEARDUP_RETURN_IF_ERROR(Unseal(&state, version >= 2, State()));
    if (version >= 3) NEARDUP_RETURN_IF_ERROR(ReadLog(&state));
    if (!SameRun(state["command_line"])) {
      return Status::InvalidArgument("--checkpoint " + dir_ +
                                     " holds another run (other arguments); remove it to start afresh");
    }
    const nlohmann::json now = Inputs(inputs);
    const size_t done = state["files_done"].get<size_t>();
    for (size_t i = 0; i < done; ++i) {
      const nlohmann::json& was = state["inputs"][i];
      if (i < now.size() && was == now[i]) continue;
      // Another file in its place: one added to (or removed from) an input
      // directory or pattern, which names a file other than the changed one.
      const nlohmann::json path = was.is_object() ? was.value("path", nlohmann::json()) : nlohmann::json();
      const std::string what = i < now.size() && path != now[i]["path"]
                                   ? "the inputs are not the files the run read: input " + std::to_string(i + 1) +
                                         " was " + path.dump() + ", now " + now[i]["path"].dump()
                               : i < now.size() ? "input " + path.dump() + " changed since it was read"
                                                : "input " + path.dump() + " is no longer given";
      return Status::InvalidArgument("--checkpoint " + dir_ + ": " + what + "; remove the checkpoint to start afresh");
    }
    return std::optional<nlohmann::json>(std::move(state));
  }

  // state.json, atomically and durably, after its log: the log gets the
  // run's identity when it is new, then a line for each input finished
  // since (`clusters_checksums` has one per finished input), and state.json
  // records its mark. `resumed`: the state this process resumed, or null.
  Status Save(nlohmann::json state, const nlohmann::json* resumed, const std::vector<InputFile>& inputs,
              const std::vector<uint64_t>& clusters_checksums, const nlohmann::json& load_index) {
    if (!log_) {
      const nlohmann::json identity = {{"command_line", ResumeKey()}, {"load_index", load_index}};
      NEARDUP_ASSIGN_OR_RETURN(log_, CheckpointLog::ForRun(Log(), resumed, State(), identity.dump()));
    }
    for (size_t i = log_->lines() - 1; i < clusters_checksums.size(); ++i) {
      const nlohmann::json line = {{"input", Inputs({inputs[i]})[0]}, {"clusters", clusters_checksums[i]}};
      NEARDUP_RETURN_IF_ERROR(log_->Append(line.dump()));
    }
    NEARDUP_ASSIGN_OR_RETURN(const CheckpointLog::Mark mark, log_->Sync());
    state["log"] = mark.ToJson<nlohmann::json>();
    return WriteDurably(State(), Sealed(state));
  }

  // `state` as a checkpoint file holds it: with "checksum", the XXH3-64 of
  // its compact text without that field. Without it, a file damaged so that
  // it still parses (one changed digit) resumed another run, exit 0, with
  // other outputs (an adversarial test, 2026-11-30).
  // (Either JSON type: with ordered_json the fields keep their order, which
  // the file keeps too.)
  template <typename Json>
  static std::string Sealed(Json state) {
    state.erase("checksum");
    const std::string compact = state.dump();
    state["checksum"] = XXH3_64bits(compact.data(), compact.size());
    return state.dump(1) + "\n";
  }

  // Checks and removes the checksum Sealed added (`required`: the file's
  // version has one). kCorruption naming `path` when it is missing or
  // differs.
  template <typename Json>
  static Status Unseal(Json* state, bool required, const std::string& path) {
    if (!state->contains("checksum") && !required) return Status::OK();
    const Json recorded = state->contains("checksum") ? (*state)["checksum"] : Json();
    state->erase("checksum");
    const std::string compact = state->dump();
    if (!recorded.is_number_unsigned() || recorded.template get<uint64_t>() != XXH3_64bits(compact.data(), compact.size())) {
      return Status::Corruption(path + ": damaged (its checksum differs); remove the checkpoint to start afresh");
    }
    return Status::OK();
  }

  // Deletes the checkpoint's files (the run finished), and DIR if it is
  // then empty.
  void Remove(size_t files) const {
    std::remove(State().c_str());
    std::remove(Log().c_str());
    for (size_t i = 0; i <= files; ++i) {
      std::remove(Kept(i).c_str());
      std::remove(Clusters(i).c_str());
    }
    std::remove(LockPath().c_str());
    std::error_code ec;
    std::filesystem::remove(dir_, ec);  // fails, harmlessly, when not empty
  }

  // Cuts an output of a resumed run back to the `recorded` bytes it had at
  // the checkpoint. A shorter one (cut or replaced since) is kCorruption:
  // truncate() would pad it with zero bytes.
  static Status CutBack(const std::string& path, off_t recorded) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && st.st_size < recorded) {
      return Status::Corruption(path + " is shorter (" + std::to_string(st.st_size) + " bytes) than the checkpoint recorded (" +
                                std::to_string(recorded) + "): changed since; remove the checkpoint to start afresh");
    }
    if (::truncate(path.c_str(), recorded) != 0) {
      return Status::IOError("cannot cut " + path + " back to the checkpoint: " + std::strerror(errno));
    }
    return Status::OK();
  }

  // `content` to `path` through `path`.tmp, fsynced, renamed, and the
  // directory fsynced: after a crash the file is either old or new.
  static Status WriteDurably(const std::string& path, const std::string& content) {
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Status::IOError("cannot create " + tmp + ": " + std::strerror(errno));
    bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
    ok = ok && ::fsync(fd) == 0;
    const int err = errno;
    ::close(fd);
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::remove(tmp.c_str());
      return Status::IOError("cannot write " + path + ": " + std::strerror(ok ? errno : err));
    }
    return SyncPath(std::filesystem::path(path).parent_path().string());
  }

  // fsync of a file or directory by name.
  static Status SyncPath(const std::string& path) {
    const int fd = ::open(path.empty() ? "." : path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
    const bool ok = ::fsync(fd) == 0;
    const int err = errno;
    ::close(fd);
    return ok ? Status::OK() : Status::IOError("cannot fsync " + path + ": " + std::strerror(err));
  }

 private:
  // Puts what version 3 keeps in state.log where version 2 had it in
  // state.json: the command line, --load-index, and per finished input its
  // stat and its clusters' checksum.
  Status ReadLog(nlohmann::json* state) const {
    NEARDUP_ASSIGN_OR_RETURN(const std::vector<nlohmann::json> lines, CheckpointLog::ReadJson(Log(), *state, State()));
    try {
      const nlohmann::json& identity = lines.at(0);
      (*state)["command_line"] = identity.at("command_line");
      (*state)["load_index"] = identity.at("load_index");
      nlohmann::json inputs = nlohmann::json::array(), checksums = nlohmann::json::array();
      for (size_t i = 1; i < lines.size(); ++i) {
        const nlohmann::json& line = lines[i];
        inputs.push_back(line.at("input"));
        checksums.push_back(line.at("clusters"));
      }
      if (lines.size() != state->at("files_done").get<size_t>() + 1) throw std::out_of_range("files_done");
      (*state)["inputs"] = std::move(inputs);
      (*state)["clusters_checksums"] = std::move(checksums);
    } catch (const std::exception& e) {
      return Status::Corruption(Log() + ": does not fit " + State() + " (" + e.what() +
                                "); remove the checkpoint to start afresh");
    }
    return Status::OK();
  }

  // The key of checkpoints written before 2026-11-30: the raw command line
  // without -q, --progress and --threads in their separate or `=` forms.
  static std::vector<std::string> LegacyResumeKey() {
    std::vector<std::string> key;
    const std::vector<std::string>& args = CommandLine();
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a == "-q" || a == "--quiet") continue;
      if (a == "--progress" || a == "-t" || a == "--threads") {
        ++i;  // and its value
        continue;
      }
      if (a.rfind("--progress=", 0) == 0 || a.rfind("--threads=", 0) == 0) continue;
      key.push_back(a);
    }
    return key;
  }

  std::string Name(const char* prefix, size_t file, const char* suffix) const {
    char n[16];
    std::snprintf(n, sizeof n, "%05zu", file);
    return dir_ + "/" + prefix + n + suffix;
  }

  std::string LockPath() const { return dir_ + "/lock"; }

  std::string dir_;
  FileLock lock_;
  std::unique_ptr<CheckpointLog> log_;  // once this process has saved
};

}  // namespace neardup::cli

#endif  // NEARDUP_TOOLS_DEDUP_CHECKPOINT_H_
