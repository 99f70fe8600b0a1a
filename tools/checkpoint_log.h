// The append-only half of a checkpoint (dedup --checkpoint's state.log,
// --memory-limit's rounds/rounds.log): what identifies the run (its first
// line: the command line, the inputs) and what it learns once per input
// file (one line each: a summary, a checksum). The state file, rewritten at
// every input's end, records only the log's mark (lines, bytes, XXH3-64 of
// those bytes). Before, the state file held all of it, so each checkpoint
// wrote O(inputs) bytes and a run O(inputs^2): 1,000 small inputs took 23.6 s
// with --memory-limit --checkpoint against 1.9 s without, now 3.5 s
// (bench/results/checkpoint-many-inputs-2026-12-01.txt).
//
// Order of durability: lines are appended and fsynced (Sync) before the
// state file that records the mark is written, so a crash between the two
// leaves unrecorded lines, which Read ignores and Continue cuts off.
// Not thread-safe; one writer per log (the checkpoint directory's lock).
#ifndef NEARDUP_TOOLS_CHECKPOINT_LOG_H_
#define NEARDUP_TOOLS_CHECKPOINT_LOG_H_

#include <xxhash.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/util/status.h"
#include "util/append_file.h"
#include "util/temp_file.h"

namespace neardup::cli {

class CheckpointLog {
 public:
  // What the state file records of the log.
  struct Mark {
    uint64_t lines = 0, bytes = 0, digest = 0;
    template <typename Json>
    Json ToJson() const {
      return {{"lines", lines}, {"bytes", bytes}, {"digest", digest}};
    }
    // kCorruption naming `state` when `j` is not a mark.
    template <typename Json>
    static Result<Mark> Of(const Json& j, const std::string& state) {
      if (!j.is_object() || !j.contains("lines") || !j.contains("bytes") || !j.contains("digest") ||
          !j["lines"].is_number_unsigned() || !j["bytes"].is_number_unsigned() || !j["digest"].is_number_unsigned()) {
        return Status::Corruption(state + ": its log mark is missing or malformed; remove the checkpoint to start afresh");
      }
      return Mark{j["lines"].template get<uint64_t>(), j["bytes"].template get<uint64_t>(),
                  j["digest"].template get<uint64_t>()};
    }
  };

  ~CheckpointLog() {
    if (file_ != nullptr) std::fclose(file_);
  }
  CheckpointLog(const CheckpointLog&) = delete;
  CheckpointLog& operator=(const CheckpointLog&) = delete;

  // A new log at `path` (any earlier one is replaced) whose first line is `first`.
  static Result<std::unique_ptr<CheckpointLog>> Create(const std::string& path, std::string_view first) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return FileWriteError("cannot create " + path, errno);
    std::unique_ptr<CheckpointLog> log(new CheckpointLog(path, f));
    XXH3_64bits_reset(log->hash_.get());
    NEARDUP_RETURN_IF_ERROR(log->Append(first));
    return log;
  }

  // The lines the mark in `state_json`["log"] covers, each parsed (the
  // state file's path `state` for messages). kCorruption as Read, or when a
  // line is not JSON.
  template <typename Json>
  static Result<std::vector<Json>> ReadJson(const std::string& path, const Json& state_json, const std::string& state) {
    NEARDUP_ASSIGN_OR_RETURN(const Mark mark, Mark::Of(state_json.contains("log") ? state_json["log"] : Json(), state));
    NEARDUP_ASSIGN_OR_RETURN(const std::vector<std::string> lines, Read(path, mark));
    std::vector<Json> parsed;
    for (const std::string& line : lines) {
      parsed.push_back(Json::parse(line, nullptr, /*allow_exceptions=*/false));
      if (parsed.back().is_discarded()) return Damaged(path);
    }
    return parsed;
  }

  // The lines `mark` covers (without their newlines), read-only.
  // kCorruption when the log is shorter, its bytes hash otherwise, or they
  // hold another number of lines.
  static Result<std::vector<std::string>> Read(const std::string& path, const Mark& mark) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes(mark.bytes, '\0');
    if (!in || !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())) ||
        XXH3_64bits(bytes.data(), bytes.size()) != mark.digest) {
      return Damaged(path);
    }
    std::vector<std::string> lines;
    for (size_t at = 0; at < bytes.size();) {
      const size_t end = bytes.find('\n', at);
      if (end == std::string::npos) return Damaged(path);
      lines.emplace_back(bytes, at, end - at);
      at = end + 1;
    }
    if (lines.size() != mark.lines) return Damaged(path);
    return lines;
  }

  // The log this process appends to: the resumed run's, when the state it
  // resumed (`resumed`, or null) records a mark in "log" (its path `state`,
  // for messages), else a new one whose first line is `identity` (a new
  // run, or one resumed from a version without a log).
  template <typename Json>
  static Result<std::unique_ptr<CheckpointLog>> ForRun(const std::string& path, const Json* resumed,
                                                       const std::string& state, std::string_view identity) {
    if (resumed == nullptr || !resumed->contains("log")) return Create(path, identity);
    NEARDUP_ASSIGN_OR_RETURN(const Mark mark, Mark::Of((*resumed)["log"], state));
    return Continue(path, mark);
  }

  // The log an earlier process wrote, cut back to `mark` (it may have
  // appended lines the state file never recorded) and open for appending.
  static Result<std::unique_ptr<CheckpointLog>> Continue(const std::string& path, const Mark& mark) {
    auto hash = NewHash();
    NEARDUP_ASSIGN_OR_RETURN(std::FILE* f, ReopenForAppend(path, path, mark.bytes, mark.digest, hash.get()));
    std::unique_ptr<CheckpointLog> log(new CheckpointLog(path, f));
    log->hash_ = std::move(hash);
    log->mark_ = mark;
    return log;
  }

  // One more line (it must hold no newline), written at the next Sync at the latest.
  Status Append(std::string_view line) {
    if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fputc('\n', file_) == EOF) {
      return FileWriteError("cannot write " + path_, errno);
    }
    XXH3_64bits_update(hash_.get(), line.data(), line.size());
    XXH3_64bits_update(hash_.get(), "\n", 1);
    mark_.bytes += line.size() + 1;
    ++mark_.lines;
    return Status::OK();
  }

  // Every line appended so far made durable; returns what the state file
  // is then to record.
  Result<Mark> Sync() {
    NEARDUP_RETURN_IF_ERROR(SyncStream(file_, path_));
    mark_.digest = XXH3_64bits_digest(hash_.get());
    return mark_;
  }

  uint64_t lines() const { return mark_.lines; }

 private:
  using Hash = std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)>;
  static Hash NewHash() { return Hash(XXH3_createState(), XXH3_freeState); }
  static Status Damaged(const std::string& path) {
    return Status::Corruption(path + " differs from what the checkpoint recorded (damaged since); "
                              "remove the checkpoint to start afresh");
  }

  CheckpointLog(std::string path, std::FILE* f) : path_(std::move(path)), file_(f), hash_(NewHash()) {}

  std::string path_;
  std::FILE* file_;
  Hash hash_;
  Mark mark_;
};

}  // namespace neardup::cli

#endif  // NEARDUP_TOOLS_CHECKPOINT_LOG_H_
