// Engine-independent pieces of the service contract: names and ids
// (settings: settings.cc).
#include "neardup/engine/engine.h"

#include "util/utf8.h"

namespace neardup {

Status ValidateNamespaceName(std::string_view name) {
  if (name.empty() || name.size() > 64) return Status::InvalidArgument("namespace name must be 1..64 characters");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return Status::InvalidArgument("namespace name may contain only [A-Za-z0-9_.-]");
  }
  // "." and ".." are path segments with a meaning of their own: clients and
  // proxies resolve /v1/namespaces/.. to /v1, so such a namespace could be
  // reached only percent-encoded. Any name of dots alone is refused.
  if (name.find_first_not_of('.') == std::string_view::npos) {
    return Status::InvalidArgument("namespace name may not consist of dots only (\".\" and \"..\" are path segments)");
  }
  return Status::OK();
}

Status ValidateDocumentId(std::string_view id) {
  if (id.empty() || id.size() > 512) return Status::InvalidArgument("document id must be 1..512 bytes");
  // Valid UTF-8: ids are echoed in JSON answers.
  if (!IsValidUtf8(id)) return Status::InvalidArgument("document id is not valid UTF-8");
  return Status::OK();
}

}  // namespace neardup

namespace neardup {

void Engine::CheckBatchAsync(const std::string& ns, std::span<const DocumentInput> docs, CheckMode mode,
                             CheckDone done) {
  std::vector<Result<CheckOutcome>> out;
  Status s = CheckBatch(ns, docs, mode, &out);
  done(std::move(s), std::move(out));
}

}  // namespace neardup
