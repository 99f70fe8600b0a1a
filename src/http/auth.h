// API keys of `neardup serve --api-keys FILE`: bearer tokens with a role and
// an optional namespace scope, and the one decision of what a request needs.
// docs/service.md "Access control" is the operator's description.
//
// The file: one key per line, "TOKEN ROLE [SCOPE]", fields separated by
// spaces or tabs; blank lines and lines starting with '#' are ignored.
//   TOKEN  16..512 characters of the RFC 6750 token68 set
//          (A-Z a-z 0-9 - . _ ~ + / =); each token at most once.
//   ROLE   read   query, get documents, namespace settings and stats
//          write  read + check, insert, batch, delete documents
//          admin  write + create/change/delete namespaces; unscoped admin
//                 also lists namespaces and reads /metrics
//   SCOPE  "*" or absent: every namespace; "NAME": that namespace only;
//          "PREFIX*": the namespaces whose names start with PREFIX.
// Errors name the file and line ("keys.txt:3: unknown role \"reader\"") and
// never echo a token.
//
// Thread-safety: an ApiKeys is immutable after Parse/Load; Find and
// Authorize may be called from any thread.
#ifndef NEARDUP_HTTP_AUTH_H_
#define NEARDUP_HTTP_AUTH_H_

#include <string>
#include <string_view>
#include <vector>

#include "neardup/util/status.h"

namespace neardup {

enum class ApiRole { kRead = 1, kWrite = 2, kAdmin = 3 };  // each includes the ones below

struct ApiKey {
  std::string token;
  ApiRole role = ApiRole::kRead;
  std::string scope;        // namespace name or prefix; empty with !scoped
  bool scoped = false;      // false: every namespace
  bool prefix = false;      // scope is a prefix ("PREFIX*")
  int line = 0;             // in the file, for messages

  bool Covers(std::string_view ns) const;
};

// What a request needs: a role, on one namespace or on the whole service.
struct Access {
  bool open = false;            // no credentials needed (GET /healthz)
  ApiRole role = ApiRole::kAdmin;
  bool global = true;           // the whole service (list, metrics): unscoped keys only
  std::string ns;               // else this namespace (decoded)
};

class ApiKeys {
 public:
  // Parses the file's text; `source` names it in messages.
  static Result<ApiKeys> Parse(std::string_view text, const std::string& source);
  // Reads and parses `path`. A file that group or others may read is loaded,
  // and *warning says so (tokens are secrets); empty *warning otherwise.
  static Result<ApiKeys> Load(const std::string& path, std::string* warning);

  // The key whose token equals `token`, or nullptr. Every key is compared,
  // each in time that depends on the lengths only (ConstantTimeEquals), so
  // the answer's timing does not tell how much of a token was right.
  const ApiKey* Find(std::string_view token) const;
  // OK, kUnauthenticated (no "Authorization: Bearer" or an unknown token) or
  // kPermissionDenied (a known token without the role or the namespace).
  Status Authorize(std::string_view authorization_header, const Access& access) const;

  size_t size() const { return keys_.size(); }

 private:
  std::vector<ApiKey> keys_;
};

// a == b in time that depends only on the sizes, never on where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

const char* ApiRoleName(ApiRole role);

}  // namespace neardup

#endif  // NEARDUP_HTTP_AUTH_H_
