#include "http/auth.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace neardup {
namespace {

constexpr size_t kMinTokenBytes = 16;
constexpr size_t kMaxTokenBytes = 512;

bool IsToken68Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~' || c == '+' || c == '/' || c == '=';
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

Result<ApiKey> ParseLine(std::string_view line, int number) {
  const std::vector<std::string_view> f = Fields(line);
  if (f.size() < 2 || f.size() > 3) {
    return Status::InvalidArgument("expected \"TOKEN ROLE [SCOPE]\", got " + std::to_string(f.size()) + " fields");
  }
  ApiKey key;
  key.line = number;
  if (f[0].size() < kMinTokenBytes || f[0].size() > kMaxTokenBytes) {
    return Status::InvalidArgument("the token has " + std::to_string(f[0].size()) + " characters; " +
                                   std::to_string(kMinTokenBytes) + ".." + std::to_string(kMaxTokenBytes) +
                                   " are allowed (e.g. openssl rand -hex 32)");
  }
  for (char c : f[0]) {
    if (!IsToken68Char(c)) {
      return Status::InvalidArgument("the token holds a character outside A-Z a-z 0-9 - . _ ~ + / =");
    }
  }
  key.token = std::string(f[0]);
  if (f[1] == "read") key.role = ApiRole::kRead;
  else if (f[1] == "write") key.role = ApiRole::kWrite;
  else if (f[1] == "admin") key.role = ApiRole::kAdmin;
  else return Status::InvalidArgument("unknown role \"" + std::string(f[1].substr(0, 32)) + "\" (read, write or admin)");
  if (f.size() == 3 && f[2] != "*") {
    std::string_view scope = f[2];
    key.scoped = true;
    if (scope.back() == '*') {
      key.prefix = true;
      scope.remove_suffix(1);
    }
    if (scope.find('*') != std::string_view::npos) {
      return Status::InvalidArgument("scope \"" + std::string(f[2].substr(0, 64)) +
                                     "\": '*' is allowed only at the end (a prefix)");
    }
    key.scope = std::string(scope);
  }
  return key;
}

}  // namespace

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Walks all of `a` whatever `b` holds: the time depends on a.size() only
  // (the presented token's length), not on the first differing byte.
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i) {
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(a[i]) ^ y;
  }
  return diff == 0;
}

const char* ApiRoleName(ApiRole role) {
  switch (role) {
    case ApiRole::kRead: return "read";
    case ApiRole::kWrite: return "write";
    case ApiRole::kAdmin: return "admin";
  }
  return "?";
}

bool ApiKey::Covers(std::string_view ns) const {
  if (!scoped) return true;
  return prefix ? ns.starts_with(scope) : ns == scope;
}

Result<ApiKeys> ApiKeys::Parse(std::string_view text, const std::string& source) {
  ApiKeys keys;
  std::set<std::string> seen;
  int number = 0;
  while (!text.empty()) {
    ++number;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::vector<std::string_view> f = Fields(line);
    if (f.empty() || f[0].front() == '#') continue;
    auto key = ParseLine(line, number);
    if (!key.ok()) return Status::InvalidArgument(source + ":" + std::to_string(number) + ": " + key.status().message());
    if (!seen.insert(key->token).second) {
      return Status::InvalidArgument(source + ":" + std::to_string(number) + ": this token was already given");
    }
    keys.keys_.push_back(std::move(key).value());
  }
  if (keys.keys_.empty()) {
    return Status::InvalidArgument(source + ": no keys (an empty key file would lock every client out)");
  }
  return keys;
}

Result<ApiKeys> ApiKeys::Load(const std::string& path, std::string* warning) {
  warning->clear();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::InvalidArgument("cannot read the API key file " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("the API key file " + path + " is not a regular file");
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    *warning = "the API key file " + path + " may be read by group or others (mode " +
               std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
               std::to_string(st.st_mode & 7) + "); its tokens are secrets: chmod 600 " + path;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read the API key file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return Parse(ss.str(), path);
}

const ApiKey* ApiKeys::Find(std::string_view token) const {
  const ApiKey* found = nullptr;
  for (const ApiKey& k : keys_) {  // no early exit: every key costs the same
    if (ConstantTimeEquals(token, k.token)) found = &k;
  }
  return found;
}

Status ApiKeys::Authorize(std::string_view authorization_header, const Access& access) const {
  if (access.open) return Status::OK();
  constexpr std::string_view kScheme = "bearer ";
  std::string_view h = authorization_header;
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  // The scheme is case-insensitive (RFC 9110 11.1).
  const bool bearer = h.size() > kScheme.size() &&
                      std::equal(kScheme.begin(), kScheme.end(), h.begin(),
                                 [&](char a, char b) { return a == lower(b); });
  if (!bearer) {
    return Status::Unauthenticated("this service requires an API key: send \"Authorization: Bearer TOKEN\"");
  }
  h.remove_prefix(kScheme.size());
  while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
  const ApiKey* key = Find(h);
  if (key == nullptr) return Status::Unauthenticated("unknown API key");
  const std::string who = "the API key of line " + std::to_string(key->line);
  if (key->role < access.role) {
    return Status::PermissionDenied(who + " has role " + ApiRoleName(key->role) + "; this request needs " +
                                    ApiRoleName(access.role));
  }
  if (access.global && key->scoped) {
    return Status::PermissionDenied(who + " is limited to namespaces \"" + key->scope + (key->prefix ? "*" : "") +
                                    "\"; this request concerns the whole service");
  }
  if (!access.global && !key->Covers(access.ns)) {
    return Status::PermissionDenied(who + " may not access namespace \"" + access.ns.substr(0, 200) + "\"");
  }
  return Status::OK();
}

}  // namespace neardup
