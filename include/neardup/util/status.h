// Status and Result<T>: how every library boundary in neardup reports errors.
//
// Errors are values, not exceptions: a function that can fail returns a Status
// (or a Result<T> holding either a T or a non-OK Status). The CLI maps a Status
// to an exit code and the HTTP layer maps it to a status code, each in exactly
// one place, so the codes below are chosen to translate cleanly:
//   kInvalidArgument  -> 400 / exit 2   (the caller's input is malformed)
//   kNotFound         -> 404
//   kAlreadyExists    -> 409
//   kFailedPrecondition -> 409 / exit 1 (e.g. fingerprint scheme mismatch)
//   kCorruption       -> 500 / exit 1   (stored data failed a checksum)
//   kIOError          -> 500 / exit 1
//   kResourceExhausted-> 413 / 429
//   kUnavailable      -> 503
//   kUnauthenticated  -> 401 (no or unknown credentials)
//   kPermissionDenied -> 403 (known credentials without the right)
//   kStorageFull      -> 507          (the disk is full: writes fail, reads work)
//
// Thread-safety: Status and Result are plain values; distinct objects may be
// used from distinct threads freely.
#ifndef NEARDUP_STATUS_H_
#define NEARDUP_STATUS_H_

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace neardup {

class [[nodiscard]] Status {
 public:
  enum class Code : int {
    kOk = 0,
    kInvalidArgument,
    kNotFound,
    kAlreadyExists,
    kFailedPrecondition,
    kCorruption,
    kIOError,
    kNotSupported,
    kResourceExhausted,
    kUnavailable,
    kInternal,
    kUnauthenticated,
    kPermissionDenied,
    kStorageFull,  // no space left for a write; clears by itself when space returns
  };

  Status() = default;  // OK
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {Code::kFailedPrecondition, std::move(m)}; }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {Code::kIOError, std::move(m)}; }
  static Status NotSupported(std::string m) { return {Code::kNotSupported, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status Unauthenticated(std::string m) { return {Code::kUnauthenticated, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
  static Status StorageFull(std::string m) { return {Code::kStorageFull, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;
  static std::string_view CodeName(Code code);

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Holds a T on success or a non-OK Status on failure. Accessing value() of a
// failed Result is a programming error (asserts in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {       // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Result constructed from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }

  T& value() & { assert(ok()); return std::get<T>(v_); }
  const T& value() const& { assert(ok()); return std::get<T>(v_); }
  T&& value() && { assert(ok()); return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace neardup

// Propagates a non-OK Status to the caller.
#define NEARDUP_RETURN_IF_ERROR(expr)              \
  do {                                             \
    ::neardup::Status _nd_status = (expr);         \
    if (!_nd_status.ok()) return _nd_status;       \
  } while (0)

// `NEARDUP_ASSIGN_OR_RETURN(auto x, MakeX());`: declares/assigns the value of
// a Result, or propagates its Status to the caller.
#define NEARDUP_ASSIGN_OR_RETURN(lhs, expr) \
  NEARDUP_ASSIGN_OR_RETURN_IMPL_(NEARDUP_CONCAT_(_nd_result_, __LINE__), lhs, expr)
#define NEARDUP_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
#define NEARDUP_CONCAT_(a, b) NEARDUP_CONCAT_INNER_(a, b)
#define NEARDUP_CONCAT_INNER_(a, b) a##b

#endif  // NEARDUP_STATUS_H_
