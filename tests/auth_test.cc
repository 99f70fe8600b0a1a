// API keys (src/http/auth.h): the key file's format and errors, the
// constant-time compare, and every access decision at the HTTP level
// (HandleRequest over a real local engine): 401 missing / unknown, 403 wrong
// role / other namespace, 200 for what each role may do; the namespace cap
// and auto-create off.
#include "http/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "http/http_api.h"
#include "neardup/engine/local_engine.h"
#include "neardup/store/rocks_store.h"

namespace neardup {
namespace {

using json = nlohmann::json;

// Tokens of the key file below (16+ characters each).
constexpr const char* kAdmin = "admin-token-0123456789";
constexpr const char* kWriter = "write-token-0123456789";
constexpr const char* kReader = "read-token-0123456789a";
constexpr const char* kNewsWriter = "news-write-0123456789a";
constexpr const char* kTeamReader = "team-read-0123456789ab";
constexpr const char* kNewsAdmin = "news-admin-0123456789a";

constexpr const char* kKeyFile =
    "# neardup API keys\n"
    "admin-token-0123456789 admin\n"
    "write-token-0123456789 write *\n"
    "\n"
    "read-token-0123456789a read\n"
    "news-write-0123456789a write news\r\n"  // CRLF is fine
    "team-read-0123456789ab\tread\tteam-*\n"
    "news-admin-0123456789a admin news\n";

std::string ParseError(const std::string& text) {
  auto r = ApiKeys::Parse(text, "keys.txt");
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  return r.status().message();
}

TEST(ApiKeysTest, ParsesEveryForm) {
  auto keys = ApiKeys::Parse(kKeyFile, "keys.txt");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys->size(), 6u);
  const ApiKey* admin = keys->Find(kAdmin);
  ASSERT_NE(admin, nullptr);
  EXPECT_EQ(admin->role, ApiRole::kAdmin);
  EXPECT_FALSE(admin->scoped);
  EXPECT_FALSE(keys->Find(kWriter)->scoped);  // "*" is every namespace
  const ApiKey* news = keys->Find(kNewsWriter);
  ASSERT_NE(news, nullptr);
  EXPECT_TRUE(news->Covers("news"));
  EXPECT_FALSE(news->Covers("news2"));
  EXPECT_EQ(news->line, 6);
  const ApiKey* team = keys->Find(kTeamReader);
  ASSERT_NE(team, nullptr);
  EXPECT_TRUE(team->Covers("team-a"));
  EXPECT_TRUE(team->Covers("team-"));
  EXPECT_FALSE(team->Covers("teams"));
  EXPECT_EQ(keys->Find("no-such-token-0123456789"), nullptr);
  EXPECT_EQ(keys->Find(std::string(kAdmin) + "x"), nullptr);
  EXPECT_EQ(keys->Find(std::string(kAdmin).substr(1)), nullptr);
  EXPECT_EQ(keys->Find(""), nullptr);
}

TEST(ApiKeysTest, ErrorsNameTheLineAndNeverTheToken) {
  std::string m = ParseError("# c\nadmin-token-0123456789 admin\nsecret-token-0123456789 reader\n");
  EXPECT_NE(m.find("keys.txt:3:"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown role \"reader\""), std::string::npos) << m;
  EXPECT_EQ(m.find("secret-token"), std::string::npos) << m;
  m = ParseError("\n\nshort admin\n");
  EXPECT_NE(m.find("keys.txt:3:"), std::string::npos) << m;
  EXPECT_NE(m.find("16..512"), std::string::npos) << m;
  m = ParseError("admin-token-0123456789\n");
  EXPECT_NE(m.find("keys.txt:1:"), std::string::npos) << m;
  EXPECT_NE(m.find("TOKEN ROLE [SCOPE]"), std::string::npos) << m;
  m = ParseError("admin-token-0123456789 admin ns extra\n");
  EXPECT_NE(m.find("keys.txt:1:"), std::string::npos) << m;
  m = ParseError("admin-token-012345678\" admin\n");
  EXPECT_NE(m.find("outside"), std::string::npos) << m;
  m = ParseError("admin-token-0123456789 admin\nadmin-token-0123456789 read\n");
  EXPECT_NE(m.find("keys.txt:2: this token was already given"), std::string::npos) << m;
  m = ParseError("admin-token-0123456789 read a*b\n");
  EXPECT_NE(m.find("only at the end"), std::string::npos) << m;
  m = ParseError("# only comments\n\n");
  EXPECT_NE(m.find("no keys"), std::string::npos) << m;
}

TEST(ApiKeysTest, ConstantTimeEqualsIsEquality) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abcdefgh", "abcdefgh"));
  EXPECT_FALSE(ConstantTimeEquals("abcdefgh", "abcdefgx"));
  EXPECT_FALSE(ConstantTimeEquals("xbcdefgh", "abcdefgh"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("abcd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_FALSE(ConstantTimeEquals("a", ""));
  // A presented token padded with the \0 bytes the loop uses past the
  // stored token's end is still not equal.
  EXPECT_FALSE(ConstantTimeEquals(std::string("abc\0", 4), "abc"));
}

TEST(ApiKeysTest, LoadWarnsAboutAFileOthersMayRead) {
  char tmpl[] = "/tmp/neardup_auth_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/keys";
  {
    std::ofstream f(path);
    f << kKeyFile;
  }
  std::string warning;
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto keys = ApiKeys::Load(path, &warning);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_NE(warning.find("chmod 600"), std::string::npos) << warning;
  EXPECT_NE(warning.find("644"), std::string::npos) << warning;
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  keys = ApiKeys::Load(path, &warning);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(warning, "");
  auto missing = ApiKeys::Load(path + ".nope", &warning);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("No such file"), std::string::npos) << missing.status().message();
  auto directory = ApiKeys::Load(tmpl, &warning);
  EXPECT_FALSE(directory.ok());
  EXPECT_NE(directory.status().message().find("not a regular file"), std::string::npos);
  std::system(("rm -rf '" + std::string(tmpl) + "'").c_str());
}

// ---- at the HTTP level ---------------------------------------------------------

class AuthHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/neardup_auth_http_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Open(/*auto_create=*/false, /*max_namespaces=*/0);
    auto keys = ApiKeys::Parse(kKeyFile, "keys.txt");
    ASSERT_TRUE(keys.ok());
    options_.api_keys = std::make_shared<const ApiKeys>(std::move(keys).value());
    // Namespaces the tests use, made by the admin.
    for (const char* ns : {"news", "sports", "team-a"}) ASSERT_EQ(Call(kAdmin, "PUT", ns, "").status, 201);
  }
  void TearDown() override {
    if (engine_) (void)engine_->Shutdown();
    engine_.reset();
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  void Open(bool auto_create, size_t max_namespaces) {
    if (engine_) (void)engine_->Shutdown();
    engine_.reset();
    LocalEngineOptions o;
    o.data_dir = dir_ + "/data";
    o.sync = false;
    o.auto_create = auto_create;
    o.max_namespaces = max_namespaces;
    o.default_settings.retention_seconds = 0;
    auto e = OpenLocalEngine(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
  }

  // `path` is relative to /v1/namespaces/ unless it starts with '/'.
  HttpResponse Call(const char* token, const std::string& method, const std::string& path,
                    const std::string& body = R"({"id": "a", "text": "the quick brown fox jumps"})") {
    const std::string target = path.starts_with("/") ? path : "/v1/namespaces/" + path;
    HttpRequest r = HttpRequest::FromTarget(method, target, body);
    if (token != nullptr) r.authorization = std::string("Bearer ") + token;
    return HandleRequest(*engine_, r, options_);
  }

  static std::string Header(const HttpResponse& r, const std::string& name) {
    for (const auto& [k, v] : r.headers) {
      if (k == name) return v;
    }
    return "";
  }

  static void ExpectError(const HttpResponse& r, int status, const std::string& code) {
    EXPECT_EQ(r.status, status) << r.body;
    const json j = json::parse(r.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.body;
    EXPECT_EQ(j["error"]["code"], code) << r.body;
  }

  std::string dir_;
  std::unique_ptr<Engine> engine_;
  HttpApiOptions options_;
};

TEST_F(AuthHttpTest, MissingCredentialsAre401WithBearerChallenge) {
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "news/check"}, {"GET", "news"}, {"GET", "/v1/namespaces"}, {"GET", "/metrics"},
           {"PUT", "x"}, {"OPTIONS", "news"}, {"GET", "news/documents/a"}}) {
    const HttpResponse r = Call(nullptr, method, path);
    ExpectError(r, 401, "unauthenticated");
    EXPECT_EQ(Header(r, "WWW-Authenticate").rfind("Bearer", 0), 0u) << method << " " << path;
  }
  // Another scheme is no credential either.
  HttpRequest basic = HttpRequest::FromTarget("GET", "/v1/namespaces/news", "");
  basic.authorization = "Basic YWRtaW46YWRtaW4=";
  ExpectError(HandleRequest(*engine_, basic, options_), 401, "unauthenticated");
}

TEST_F(AuthHttpTest, UnknownTokenIs401) {
  const HttpResponse r = Call("admin-token-0123456780", "GET", "news");  // one character off
  ExpectError(r, 401, "unauthenticated");
  EXPECT_FALSE(Header(r, "WWW-Authenticate").empty());
  ExpectError(Call("", "GET", "news"), 401, "unauthenticated");
}

TEST_F(AuthHttpTest, SchemeIsCaseInsensitive) {
  HttpRequest r = HttpRequest::FromTarget("GET", "/v1/namespaces/news", "");
  r.authorization = std::string("bearer ") + kReader;
  EXPECT_EQ(HandleRequest(*engine_, r, options_).status, 200);
}

TEST_F(AuthHttpTest, HealthzIsOpen) { EXPECT_EQ(Call(nullptr, "GET", "/healthz").status, 200); }

TEST_F(AuthHttpTest, WrongRoleIs403) {
  ExpectError(Call(kReader, "POST", "news/check"), 403, "permission_denied");
  ExpectError(Call(kReader, "POST", "news/insert"), 403, "permission_denied");
  ExpectError(Call(kReader, "POST", "news/batch", R"({"documents": []})"), 403, "permission_denied");
  ExpectError(Call(kReader, "POST", "news/batch?mode=query&mode=check", R"({"documents": []})"), 403,
              "permission_denied");
  ExpectError(Call(kReader, "DELETE", "news/documents/a"), 403, "permission_denied");
  ExpectError(Call(kWriter, "PUT", "news", R"({"retention_seconds": 1})"), 403, "permission_denied");
  ExpectError(Call(kWriter, "DELETE", "news"), 403, "permission_denied");
  ExpectError(Call(kWriter, "GET", "/v1/namespaces"), 403, "permission_denied");
  ExpectError(Call(kWriter, "GET", "/metrics"), 403, "permission_denied");
  const HttpResponse r = Call(kReader, "POST", "news/check");
  EXPECT_NE(r.body.find("needs write"), std::string::npos) << r.body;
  // The namespace's admin is not the service's admin.
  ExpectError(Call(kNewsAdmin, "GET", "/v1/namespaces"), 403, "permission_denied");
  ExpectError(Call(kNewsAdmin, "GET", "/metrics"), 403, "permission_denied");
}

TEST_F(AuthHttpTest, OtherNamespaceIs403) {
  ExpectError(Call(kNewsWriter, "POST", "sports/check"), 403, "permission_denied");
  ExpectError(Call(kNewsWriter, "GET", "sports"), 403, "permission_denied");
  ExpectError(Call(kNewsWriter, "GET", "news2"), 403, "permission_denied");
  ExpectError(Call(kTeamReader, "GET", "news"), 403, "permission_denied");
  ExpectError(Call(kNewsAdmin, "DELETE", "sports"), 403, "permission_denied");
  // Percent-encoding does not get around the scope.
  ExpectError(Call(kNewsWriter, "POST", "sport%73/check"), 403, "permission_denied");
  const HttpResponse r = Call(kNewsWriter, "GET", "sports");
  EXPECT_NE(r.body.find(R"(\"sports\")"), std::string::npos) << r.body;
}

TEST_F(AuthHttpTest, EachRoleMayDoItsPart) {
  // write: check, insert, batch, get, delete documents of its namespaces.
  EXPECT_EQ(Call(kNewsWriter, "POST", "news/check").status, 200);
  EXPECT_EQ(Call(kNewsWriter, "POST", "news/insert", R"({"id": "b", "text": "x y z"})").status, 200);
  EXPECT_EQ(Call(kWriter, "POST", "sports/batch", R"({"documents": [{"id": "c", "text": "a b c"}]})").status, 200);
  EXPECT_EQ(Call(kNewsWriter, "GET", "news/documents/a", "").status, 200);
  EXPECT_EQ(Call(kNewsWriter, "DELETE", "news/documents/b", "").status, 200);
  EXPECT_EQ(Call(kNewsWriter, "GET", "news", "").status, 200);
  // read: query, batch?mode=query, get, stats.
  EXPECT_EQ(Call(kReader, "POST", "news/query").status, 200);
  EXPECT_EQ(Call(kReader, "POST", "news/batch?mode=query", R"({"documents": [{"id": "q", "text": "a b"}]})").status,
            200);
  EXPECT_EQ(Call(kReader, "GET", "news/documents/a", "").status, 200);
  EXPECT_EQ(Call(kReader, "GET", "news", "").status, 200);
  EXPECT_EQ(Call(kTeamReader, "GET", "team-a", "").status, 200);
  EXPECT_EQ(Call(kReader, "OPTIONS", "news", "").status, 204);
  // admin: everything, including namespaces and metrics.
  EXPECT_EQ(Call(kAdmin, "GET", "/v1/namespaces", "").status, 200);
  EXPECT_EQ(Call(kAdmin, "GET", "/metrics", "").status, 200);
  EXPECT_EQ(Call(kAdmin, "POST", "sports/check").status, 200);
  EXPECT_EQ(Call(kNewsAdmin, "PUT", "news", R"({"max_matches": 5})").status, 200);
  EXPECT_EQ(Call(kAdmin, "DELETE", "sports", "").status, 200);
  EXPECT_EQ(Call(kNewsAdmin, "DELETE", "news", "").status, 200);
}

TEST_F(AuthHttpTest, WithoutKeysEverythingIsServed) {
  options_.api_keys.reset();
  EXPECT_EQ(Call(nullptr, "GET", "/v1/namespaces", "").status, 200);
  EXPECT_EQ(Call(nullptr, "POST", "news/check").status, 200);
  EXPECT_EQ(Call("whatever-it-is-0123456", "DELETE", "news", "").status, 200);
}

// --auto-create-namespaces false (the serve default): a check on an unknown
// namespace is 404; PUT creates it.
TEST_F(AuthHttpTest, AutoCreateOffUnknownNamespaceIs404) {
  ExpectError(Call(kAdmin, "POST", "typo/check"), 404, "not_found");
  ExpectError(Call(kAdmin, "POST", "typo/query"), 404, "not_found");
  ExpectError(Call(kAdmin, "POST", "typo/batch", R"({"documents": [{"id": "a", "text": "x"}]})"), 404, "not_found");
  EXPECT_EQ(Call(kAdmin, "GET", "/v1/namespaces", "").body.find("typo"), std::string::npos);
  EXPECT_EQ(Call(kAdmin, "PUT", "typo", "").status, 201);
  EXPECT_EQ(Call(kAdmin, "POST", "typo/check").status, 200);
}

TEST_F(AuthHttpTest, NamespaceCapIs409ForPutAndAutoCreate) {
  Open(/*auto_create=*/true, /*max_namespaces=*/4);  // news, sports, team-a are there
  EXPECT_EQ(Call(kAdmin, "PUT", "fourth", "").status, 201);
  HttpResponse r = Call(kAdmin, "PUT", "fifth", "");
  ExpectError(r, 409, "failed_precondition");
  EXPECT_NE(r.body.find("--max-namespaces"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"(\"fifth\")"), std::string::npos) << r.body;
  ExpectError(Call(kAdmin, "POST", "fifth/check"), 409, "failed_precondition");
  // Existing namespaces still take changes and documents.
  EXPECT_EQ(Call(kAdmin, "PUT", "news", R"({"max_matches": 3})").status, 200);
  EXPECT_EQ(Call(kAdmin, "POST", "news/check").status, 200);
  // Deleting one makes room.
  EXPECT_EQ(Call(kAdmin, "DELETE", "sports", "").status, 200);
  EXPECT_EQ(Call(kAdmin, "POST", "fifth/check").status, 200);
  EXPECT_EQ(Call(kAdmin, "GET", "fifth", "").status, 200);
  // A limit lowered below what the store holds refuses new namespaces only:
  // every stored one is loaded and served.
  Open(/*auto_create=*/false, /*max_namespaces=*/1);
  const HttpResponse list = Call(kAdmin, "GET", "/v1/namespaces", "");
  EXPECT_EQ(json::parse(list.body)["namespaces"].size(), 4u) << list.body;
  EXPECT_EQ(Call(kAdmin, "POST", "fifth/check", R"({"id": "b", "text": "another text"})").status, 200);
  ExpectError(Call(kAdmin, "PUT", "sixth", ""), 409, "failed_precondition");
}

}  // namespace
}  // namespace neardup
