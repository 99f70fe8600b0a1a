// What the batch commands do with bad input lines (docs/cli.md, "Bad
// lines"): count them, show the first few on stderr, write every one to
// --rejects, and decide when there are too many for the run to count as a
// success. Included by commands.h.
#ifndef NEARDUP_TOOLS_BAD_LINES_H_
#define NEARDUP_TOOLS_BAD_LINES_H_

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"

namespace neardup::cli {

class BadLines {
 public:
  // Messages on stderr beyond this many become one summary line: a file in
  // the wrong format would otherwise flood the terminal.
  static constexpr uint64_t kShown = 10;

  // Opens --rejects (an output: call after the input was opened); with
  // `append`, adds to it (a resumed run).
  Status Open(const InputFlags& flags, bool quiet, bool append = false) {
    flags_ = flags;
    quiet_ = quiet;
    if (flags.rejects.empty()) return Status::OK();
    auto r = OpenOutput(flags.rejects, append);
    if (!r.ok()) return r.status();
    rejects_ = std::move(r).value();
    return Status::OK();
  }

  // The input file the next lines come from, named in messages and rejects
  // (a run over many inputs); empty: not named.
  void SetSource(std::string name) { source_ = std::move(name); }

  // Records one bad line. False when the run must stop here (--strict, or
  // more than --max-bad-lines).
  bool Add(const InputRecord& r) {
    ++count_;
    if (!quiet_ && count_ <= kShown) {
      std::fprintf(stderr, "neardup: %s%sline %llu: %s\n", source_.c_str(), source_.empty() ? "" : ": ",
                   static_cast<unsigned long long>(r.line_number), r.error.c_str());
    }
    if (rejects_) WriteReject(r);
    if (StopsAt(flags_, count_)) stop_ = flags_.strict ? Stop::kStrict : Stop::kLimit;
    if (stop_ != Stop::kNone) last_line_ = (source_.empty() ? "" : source_ + " ") + "line " + std::to_string(r.line_number);
    return stop_ == Stop::kNone;
  }

  // Whether the run stops at its `count`-th bad line (Add's rule): a pass
  // that reads everything before deciding (--keep longest) decides only the
  // documents before that line.
  static bool StopsAt(const InputFlags& flags, uint64_t count) {
    return flags.strict || (flags.max_bad_lines > 0 && count > flags.max_bad_lines);
  }

  uint64_t count() const { return count_; }
  // A resumed run's count so far (--max-bad-lines counts across the run).
  void RestoreCount(uint64_t n) { count_ = n; }
  // The open --rejects file (null without one), for a checkpoint.
  FilePtr& rejects_file() { return rejects_; }

  // Ends the run's bad-line bookkeeping: the stderr summary, closing
  // --rejects, and the verdict given `documents` usable documents. Returns
  // the exit code (printing why when it is not 0).
  int Finish(uint64_t documents) {
    if (!quiet_ && count_ > kShown) {
      std::fprintf(stderr, "neardup: %llu more bad lines not shown%s\n",
                   static_cast<unsigned long long>(count_ - kShown),
                   rejects_ ? (" (all are in " + flags_.rejects + ")").c_str() : "");
    }
    Status closed = FinishOutput(std::move(rejects_), flags_.rejects);
    if (!closed.ok()) return Fail(closed);
    if (stop_ == Stop::kStrict) {
      // Its place even under -q (a tester, 2026-12-02): the line's own
      // message is one of those -q leaves out.
      return Fail(Status::InvalidArgument("stopped at the first bad input line (--strict): " + last_line_),
                  ErrorSource::kInputData);
    }
    if (stop_ == Stop::kLimit) {
      return Fail(Status::InvalidArgument("more than " + std::to_string(flags_.max_bad_lines) +
                                          " bad lines (--max-bad-lines); stopped at " + last_line_),
                  ErrorSource::kBadLines);
    }
    if (count_ > 0 && documents == 0) {
      return Fail(Status::InvalidArgument("every line was bad (" + std::to_string(count_) +
                                          "): is --format or --text-field right?"),
                  ErrorSource::kBadLines);
    }
    return kExitOk;
  }

 private:
  enum class Stop { kNone, kStrict, kLimit };

  // {"line": N, "error": "...", "text": "<raw line>"}; invalid UTF-8 in the
  // line is replaced by U+FFFD so the rejects file is valid JSON.
  void WriteReject(const InputRecord& r) {
    nlohmann::ordered_json j;
    if (!source_.empty()) j["file"] = source_;
    j["line"] = r.line_number;
    j["error"] = r.error;
    j["text"] = r.line;
    const std::string s = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    std::fwrite(s.data(), 1, s.size(), rejects_.get());
    std::fputc('\n', rejects_.get());
  }

  InputFlags flags_;
  bool quiet_ = false;
  FilePtr rejects_;
  uint64_t count_ = 0;
  std::string last_line_;  // where the run stopped
  std::string source_;
  Stop stop_ = Stop::kNone;
};

}  // namespace neardup::cli

#endif  // NEARDUP_TOOLS_BAD_LINES_H_
