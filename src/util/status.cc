#include "neardup/util/status.h"

namespace neardup {

std::string_view Status::CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kAlreadyExists: return "AlreadyExists";
    case Code::kFailedPrecondition: return "FailedPrecondition";
    case Code::kCorruption: return "Corruption";
    case Code::kIOError: return "IOError";
    case Code::kNotSupported: return "NotSupported";
    case Code::kResourceExhausted: return "ResourceExhausted";
    case Code::kUnavailable: return "Unavailable";
    case Code::kInternal: return "Internal";
    case Code::kUnauthenticated: return "Unauthenticated";
    case Code::kPermissionDenied: return "PermissionDenied";
    case Code::kStorageFull: return "StorageFull";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(CodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

}  // namespace neardup
