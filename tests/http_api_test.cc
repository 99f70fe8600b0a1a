// Tests of the transport-independent HTTP API (src/http_api.h) against a real
// local engine in a temporary directory.
#include "http/http_api.h"
#include "util/utf8.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "neardup/engine/engine.h"
#include "neardup/engine/local_engine.h"
#include "neardup/store/rocks_store.h"

namespace neardup {
namespace {

using json = nlohmann::json;

constexpr const char* kFox = "The quick brown fox jumps over the lazy dog";
constexpr const char* kFox2 = "the quick brown fox jumps over the lazy dog!";
constexpr const char* kOther = "Completely different words about databases and indexes";

std::string Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

class HttpApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/neardup_http_api_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Open(/*auto_create=*/true);
  }
  void TearDown() override {
    if (engine_) (void)engine_->Shutdown();
    engine_.reset();
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  void Open(bool auto_create) {
    if (engine_) {
      (void)engine_->Shutdown();
      engine_.reset();
    }
    LocalEngineOptions o;
    o.data_dir = dir_ + "/data";
    o.sync = false;  // tests do not need fsync
    o.auto_create = auto_create;
    // Keep documents forever: the tests use fixed timestamps from 2023.
    o.default_settings.retention_seconds = 0;
    options_.default_settings = o.default_settings;
    auto e = OpenLocalEngine(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
  }

  HttpResponse Call(const std::string& method, const std::string& target, const std::string& body = "") {
    return HandleRequest(*engine_, HttpRequest::FromTarget(method, target, body), options_);
  }

  // Calls and parses the JSON answer (an empty object if it is not JSON).
  json CallJson(const std::string& method, const std::string& target, const std::string& body, int* status) {
    const HttpResponse r = Call(method, target, body);
    *status = r.status;
    last_ = r;
    json j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json::object() : j;
  }

  // Expects an error answer with `status` and `code`; returns its message.
  std::string ExpectError(const std::string& method, const std::string& target, const std::string& body,
                          int status, const std::string& code) {
    const HttpResponse r = Call(method, target, body);
    last_ = r;
    EXPECT_EQ(r.status, status) << method << " " << target << " " << body << " -> " << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    const json j = json::parse(r.body, nullptr, false);
    if (j.is_discarded() || !j.contains("error")) {
      ADD_FAILURE() << "not an error body: " << r.body;
      return "";
    }
    EXPECT_EQ(j["error"]["code"], code) << r.body;
    return j["error"]["message"].get<std::string>();
  }

  json Check(const std::string& ns, const json& doc, const std::string& action = "check") {
    int status = 0;
    json j = CallJson("POST", "/v1/namespaces/" + ns + "/" + action, doc.dump(), &status);
    EXPECT_EQ(status, 200) << last_.body;
    return j;
  }

  uint64_t Documents(const std::string& ns) {
    int status = 0;
    json j = CallJson("GET", "/v1/namespaces/" + ns, "", &status);
    EXPECT_EQ(status, 200) << last_.body;
    return j["stats"]["documents"].get<uint64_t>();
  }

  std::string dir_;
  std::unique_ptr<Engine> engine_;
  HttpApiOptions options_;
  HttpResponse last_;
};

// ---- pieces ------------------------------------------------------------------

TEST(HttpApiUnit, StatusMappingIsTheDocumentedOne) {
  EXPECT_EQ(HttpStatusFor(Status::Code::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(Status::Code::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(Status::Code::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusFor(Status::Code::kFailedPrecondition), 409);
  EXPECT_EQ(HttpStatusFor(Status::Code::kResourceExhausted), 413);
  EXPECT_EQ(HttpStatusFor(Status::Code::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(Status::Code::kStorageFull), 507);
  EXPECT_EQ(HttpStatusFor(Status::Code::kIOError), 500);
  EXPECT_EQ(HttpStatusFor(Status::Code::kCorruption), 500);
  EXPECT_EQ(HttpStatusFor(Status::Code::kInternal), 500);
  EXPECT_EQ(HttpStatusFor(Status::Code::kNotSupported), 501);
  EXPECT_EQ(ErrorCodeFor(Status::Code::kFailedPrecondition), "failed_precondition");
  const HttpResponse r = ErrorResponse(Status::Unavailable("bye"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Header(r, "Retry-After"), "1");
  EXPECT_EQ(json::parse(r.body)["error"]["message"], "bye");
}

TEST(HttpApiUnit, Utf8Validation) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii text, longer than eight bytes"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe4\xbb\x8a\xe5\xa4\xa9 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("abc\xc3"));                 // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));                // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));            // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));        // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("12345678\x80rest-of-it"));  // after the fast path
}

TEST(HttpApiUnit, PercentDecoding) {
  EXPECT_EQ(PercentDecode("a%2Fb%20c+d").value(), "a/b c+d");
  EXPECT_EQ(PercentDecode("%e4%bb%8a").value(), "\xe4\xbb\x8a");
  EXPECT_FALSE(PercentDecode("%").ok());
  EXPECT_FALSE(PercentDecode("%2").ok());
  EXPECT_FALSE(PercentDecode("%zz").ok());
  const HttpRequest r = HttpRequest::FromTarget("POST", "/v1/x?mode=query&a=b%20c+d&&flag", "");
  EXPECT_EQ(r.path, "/v1/x");
  ASSERT_EQ(r.query.size(), 3u);
  EXPECT_EQ(r.query[0], (std::pair<std::string, std::string>("mode", "query")));
  EXPECT_EQ(r.query[1].second, "b c d");
  EXPECT_EQ(r.query[2].first, "flag");
}

TEST(HttpApiUnit, RoutesForMetrics) {
  EXPECT_EQ(RouteFor("/v1/namespaces/a/check"), "/v1/namespaces/{ns}/check");
  EXPECT_EQ(RouteFor("/v1/namespaces/a/documents/x?y=1"), "/v1/namespaces/{ns}/documents/{id}");
  EXPECT_EQ(RouteFor("/v1/namespaces"), "/v1/namespaces");
  EXPECT_EQ(RouteFor("/nope"), "unmatched");
}

// ---- routing -----------------------------------------------------------------

TEST_F(HttpApiTest, Healthz) {
  int status = 0;
  EXPECT_EQ(CallJson("GET", "/healthz", "", &status), json({{"status", "ok"}}));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(Call("HEAD", "/healthz").status, 200);
}

TEST_F(HttpApiTest, UnknownRoutesAre404) {
  for (const char* path : {"/", "", "/v2/namespaces", "/v1", "/v1/namespaces/", "/v1/namespaces//check",
                           "/v1/namespaces/a/checks", "/v1/namespaces/a/check/", "/v1/namespaces/a/documents",
                           "/v1/namespaces/a/documents/", "/v1/namespaces/a/documents/x/y", "/v1/namespacesX",
                           "/healthz/", "/metrics2"}) {
    const std::string msg = ExpectError("GET", path, "", 404, "not_found");
    EXPECT_NE(msg.find("no route"), std::string::npos) << msg;
    EXPECT_EQ(last_.route, "unmatched");
  }
}

TEST_F(HttpApiTest, WrongMethodIs405WithAllow) {
  struct Case {
    const char* method;
    const char* path;
    const char* allow;
  };
  for (const Case& c : {Case{"GET", "/v1/namespaces/a/check", "POST, OPTIONS"},
                        Case{"PUT", "/v1/namespaces/a/batch", "POST, OPTIONS"},
                        Case{"POST", "/v1/namespaces/a", "GET, HEAD, PUT, DELETE, OPTIONS"},
                        Case{"PUT", "/v1/namespaces/a/documents/x", "GET, HEAD, DELETE, OPTIONS"},
                        Case{"DELETE", "/v1/namespaces", "GET, HEAD, OPTIONS"},
                        Case{"POST", "/healthz", "GET, HEAD, OPTIONS"},
                        Case{"PATCH", "/metrics", "GET, HEAD, OPTIONS"},
                        Case{"BREW", "/v1/namespaces/a", "GET, HEAD, PUT, DELETE, OPTIONS"}}) {
    const std::string msg = ExpectError(c.method, c.path, "{}", 405, "method_not_allowed");
    EXPECT_EQ(Header(last_, "Allow"), c.allow) << c.method << " " << c.path;
    EXPECT_NE(msg.find(c.allow), std::string::npos) << msg;
  }
}

TEST_F(HttpApiTest, OptionsListsMethods) {
  const HttpResponse r = Call("OPTIONS", "/v1/namespaces/a/documents/x");
  EXPECT_EQ(r.status, 204);
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(Header(r, "Allow"), "GET, HEAD, DELETE, OPTIONS");
}

// ---- 400s ----------------------------------------------------------------------

TEST_F(HttpApiTest, InvalidJsonIs400) {
  std::string msg = ExpectError("POST", "/v1/namespaces/a/check", "{\"id\": \"x\", \"text\": tru}", 400,
                                "invalid_argument");
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 1, column"), std::string::npos) << msg;
  msg = ExpectError("POST", "/v1/namespaces/a/check", "{\"id\": \"x\", \"text\": \"a\"} trailing", 400,
                    "invalid_argument");
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  msg = ExpectError("POST", "/v1/namespaces/a/check", "", 400, "invalid_argument");
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
  // A lone surrogate escape is valid UTF-8 on the wire but not valid JSON text.
  msg = ExpectError("POST", "/v1/namespaces/a/check", R"({"id": "x", "text": "\ud800"})", 400, "invalid_argument");
  EXPECT_NE(msg.find("surrogate"), std::string::npos) << msg;
  for (const char* body : {"[]", "\"text\"", "42", "null"}) {
    msg = ExpectError("POST", "/v1/namespaces/a/check", body, 400, "invalid_argument");
    EXPECT_NE(msg.find("must be a JSON object"), std::string::npos) << msg;
  }
}

// Regression (a tester, 2026-12-02): 75,000 levels of "[" in a 150 KB body
// overflowed the server's stack (SIGSEGV); bytes after a NUL were ignored,
// so a body that is not JSON was stored (200) or applied as settings.
TEST_F(HttpApiTest, DeepNestingAndNulBytesAre400) {
  for (const size_t levels : {size_t{513}, size_t{75000}}) {
    for (const auto& [method, path] : {std::pair{"POST", "/v1/namespaces/a/check"}, std::pair{"PUT", "/v1/namespaces/a"}}) {
      const std::string body = R"({"id": "x", "text": "t", "m": )" + std::string(levels, '[') + std::string(levels, ']') + "}";
      const std::string msg = ExpectError(method, path, body, 400, "invalid_argument");
      EXPECT_NE(msg.find("nested deeper than 512 levels"), std::string::npos) << msg;
    }
  }
  // 512 levels are fine as far as nesting goes (the field is then unknown).
  const std::string ok = R"({"id": "x", "text": "t", "m": )" + std::string(511, '[') + std::string(511, ']') + "}";
  EXPECT_EQ(ExpectError("POST", "/v1/namespaces/a/check", ok, 400, "invalid_argument").find("nested"), std::string::npos);
  // Brackets inside strings, escaped quotes included, are not nesting.
  int status = 0;
  CallJson("POST", "/v1/namespaces/a/check", R"({"id": "y", "text": "\")" + std::string(600, '[') + "\"}", &status);
  EXPECT_EQ(status, 200) << last_.body;
  for (const auto& [method, path, body] : std::vector<std::tuple<const char*, const char*, std::string>>{
           {"POST", "/v1/namespaces/a/check", std::string("{\"id\": \"z\", \"text\": \"t\"}\0{\"junk\"", 33)},
           {"PUT", "/v1/namespaces/a", std::string("{\"max_matches\": 5}\0junk", 23)}}) {
    const std::string msg = ExpectError(method, path, body, 400, "invalid_argument");
    EXPECT_NE(msg.find("a NUL byte at offset"), std::string::npos) << msg;
  }
  CallJson("GET", "/v1/namespaces/a/documents/z", "", &status);
  EXPECT_EQ(status, 404) << last_.body;
}

TEST_F(HttpApiTest, InvalidUtf8Is400AndSaysSo) {
  for (const std::string& body : {std::string("{\"id\": \"x\", \"text\": \"caf\xe9\"}"),
                                 std::string("{\"id\": \"\xc0\xaf\", \"text\": \"a\"}"),
                                 std::string("{\"id\": \"x\", \"text\": \"a\"}\xff")}) {
    const std::string msg = ExpectError("POST", "/v1/namespaces/a/check", body, 400, "invalid_argument");
    EXPECT_NE(msg.find("UTF-8"), std::string::npos) << msg;
  }
  // Ids in the path are checked too.
  const std::string msg = ExpectError("GET", "/v1/namespaces/a/documents/%FF", "", 400, "invalid_argument");
  EXPECT_NE(msg.find("UTF-8"), std::string::npos) << msg;
}

TEST_F(HttpApiTest, MissingOrMistypedFieldsAre400) {
  struct Case {
    json doc;
    const char* message_part;
  };
  const std::string long_id(513, 'x');
  const std::vector<Case> cases = {
      {{{"text", kFox}}, "missing field \"id\""},
      {{{"id", true}, {"text", kFox}}, "\"id\" must be a string or an integer"},
      {{{"id", 1.5}, {"text", kFox}}, "\"id\" must be a string or an integer"},
      {{{"id", nullptr}, {"text", kFox}}, "\"id\" must be a string or an integer"},
      {{{"id", ""}, {"text", kFox}}, "1..512 bytes"},
      {{{"id", long_id}, {"text", kFox}}, "1..512 bytes"},
      {{{"id", "a"}}, "field \"text\" must be a non-empty string"},
      {{{"id", "a"}, {"text", ""}}, "field \"text\" must be a non-empty string"},
      {{{"id", "a"}, {"text", 7}}, "field \"text\" must be a non-empty string"},
      {{{"id", "a"}, {"text", json::array({"x"})}}, "field \"text\" must be a non-empty string"},
      {{{"id", "a"}, {"text", kFox}, {"timestamp", 1.5}}, "\"timestamp\" must be an integer"},
      {{{"id", "a"}, {"text", kFox}, {"timestamp", "1700000000000"}}, "\"timestamp\" must be an integer"},
      {{{"id", "a"}, {"text", kFox}, {"timestamp", -1}}, "\"timestamp\" must be an integer"},
      {{{"id", "a"}, {"text", kFox}, {"timestamp", 253402300800000}}, "\"timestamp\" must be an integer"},
      {{{"id", "a"}, {"text", kFox}, {"txt", "typo"}}, "unknown field \"txt\""},
  };
  for (const Case& c : cases) {
    const std::string msg = ExpectError("POST", "/v1/namespaces/a/check", c.doc.dump(), 400, "invalid_argument");
    EXPECT_NE(msg.find(c.message_part), std::string::npos) << c.doc.dump() << " -> " << msg;
  }
  // Nothing was stored by any of them.
  int status = 0;
  CallJson("GET", "/v1/namespaces/a/documents/a", "", &status);
  EXPECT_EQ(status, 404);
}

TEST_F(HttpApiTest, BadNamespaceNamesAre400) {
  const std::string too_long(65, 'n');
  for (const std::string& ns : {std::string("bad%20name"), std::string("caf%C3%A9"), too_long,
                                std::string("a%2Fb"), std::string("a:b")}) {
    const std::string msg = ExpectError("POST", "/v1/namespaces/" + ns + "/check",
                                        json({{"id", "x"}, {"text", kFox}}).dump(), 400, "invalid_argument");
    EXPECT_NE(msg.find("namespace name"), std::string::npos) << ns << " -> " << msg;
    ExpectError("PUT", "/v1/namespaces/" + ns, "{}", 400, "invalid_argument");
  }
  const std::string msg = ExpectError("GET", "/v1/namespaces/a%zz", "", 400, "invalid_argument");
  EXPECT_NE(msg.find("percent-encoding"), std::string::npos) << msg;
  EXPECT_TRUE(engine_->ListNamespaces().empty());
}

TEST_F(HttpApiTest, BadSettingsAre400) {
  struct Case {
    const char* body;
    const char* message_part;
  };
  for (const Case& c : {Case{R"({"k": 9})", "k must be"}, Case{R"({"k": -1})", "k must be"},
                        Case{R"({"k": "3"})", "\"k\" must be an integer"}, Case{R"({"k": 2.5})", "integer"},
                        Case{R"({"tokenizer": "words"})", "tokenizer"}, Case{R"({"cjk_ngram": 5})", "cjk_ngram"},
                        Case{R"({"max_matches": 0})", "max_matches"},
                        Case{R"({"retention_seconds": -5})", "retention_seconds"},
                        Case{R"({"shards": 4})", "unknown settings field"}, Case{R"([1])", "JSON object"},
                        Case{"{\"k\": 3", "not valid JSON"}}) {
    const std::string msg = ExpectError("PUT", "/v1/namespaces/news", c.body, 400, "invalid_argument");
    EXPECT_NE(msg.find(c.message_part), std::string::npos) << c.body << " -> " << msg;
  }
  EXPECT_TRUE(engine_->ListNamespaces().empty());
}

TEST_F(HttpApiTest, DuplicateKeysAre400) {
  struct Case {
    const char* method;
    const char* path;
    const char* body;
    const char* key;
  };
  for (const Case& c : {Case{"POST", "/v1/namespaces/a/check", R"({"id": "a", "id": "b", "text": "x"})", "id"},
                        Case{"POST", "/v1/namespaces/a/insert", R"({"id": "a", "text": "x", "text": "y"})", "text"},
                        Case{"POST", "/v1/namespaces/a/batch",
                             R"({"documents": [{"id": "a", "text": "x", "timestamp": 1, "timestamp": 2}]})",
                             "timestamp"},
                        Case{"POST", "/v1/namespaces/a/batch", R"({"documents": [], "documents": []})", "documents"},
                        Case{"PUT", "/v1/namespaces/a", R"({"k": 2, "k": 4})", "k"},
                        Case{"PUT", "/v1/namespaces/a", R"({"recheck": {"anchors": 1, "anchors": 2}})", "anchors"}}) {
    const std::string msg = ExpectError(c.method, c.path, c.body, 400, "invalid_argument");
    EXPECT_NE(msg.find("repeats the key \"" + std::string(c.key) + "\""), std::string::npos) << c.body << " -> " << msg;
  }
  EXPECT_TRUE(engine_->ListNamespaces().empty());
  // The same key in different objects is no repeat.
  int status = 0;
  CallJson("POST", "/v1/namespaces/a/batch", R"({"documents": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]})",
           &status);
  EXPECT_EQ(status, 200) << last_.body;
}

TEST_F(HttpApiTest, DotNamespacesAre400) {
  for (const std::string& ns : {std::string("."), std::string(".."), std::string("..."), std::string("%2E"),
                                std::string("%2e%2E"), std::string(".%2E")}) {
    const std::string msg = ExpectError("PUT", "/v1/namespaces/" + ns, "{}", 400, "invalid_argument");
    EXPECT_NE(msg.find("dots only"), std::string::npos) << ns << " -> " << msg;
    ExpectError("POST", "/v1/namespaces/" + ns + "/check", json({{"id", "x"}, {"text", kFox}}).dump(), 400,
                "invalid_argument");
  }
  EXPECT_TRUE(engine_->ListNamespaces().empty());
  // Dots among other characters are fine.
  int status = 0;
  CallJson("PUT", "/v1/namespaces/.hidden..x.", "{}", &status);
  EXPECT_EQ(status, 201) << last_.body;
}

TEST_F(HttpApiTest, HugeRetentionsAndTimestampsAre400) {
  // 2^62 and 2^63-1 s: in milliseconds they overflow int64 (issue 15).
  for (const char* body : {R"({"retention_seconds": 4611686018427387904})",
                           R"({"retention_seconds": 9223372036854775807})",
                           R"({"retention_seconds": 9223372036854775808})",
                           R"({"retention_seconds": 1099511627777})"}) {
    const std::string msg = ExpectError("PUT", "/v1/namespaces/news", body, 400, "invalid_argument");
    EXPECT_NE(msg.find("retention_seconds"), std::string::npos) << body << " -> " << msg;
  }
  int status = 0;
  CallJson("PUT", "/v1/namespaces/news", R"({"retention_seconds": 1099511627776})", &status);  // 2^40: the cap
  EXPECT_EQ(status, 201) << last_.body;
  for (const char* ts : {"9223372036854775807", "-9223372036854775808", "18446744073709551615", "-1",
                         "253402300800000", "1e300"}) {
    const std::string body = std::string(R"({"id": "t", "text": "some text", "timestamp": )") + ts + "}";
    const std::string msg = ExpectError("POST", "/v1/namespaces/news/check", body, 400, "invalid_argument");
    EXPECT_NE(msg.find("timestamp"), std::string::npos) << ts << " -> " << msg;
  }
  // At the cap, a document at the largest timestamp is stored and found: nothing overflowed.
  json r = Check("news", {{"id", "late"}, {"text", kFox}, {"timestamp", 253402300799999LL}});
  EXPECT_TRUE(r["stored"]) << r.dump();
  r = Check("news", {{"id", "q"}, {"text", kFox}}, "query");
  EXPECT_TRUE(r["duplicate"]) << r.dump();
}

TEST_F(HttpApiTest, UnknownQueryParametersAre400) {
  std::string msg = ExpectError("POST", "/v1/namespaces/a/check?mode=query",
                                json({{"id", "x"}, {"text", kFox}}).dump(), 400, "invalid_argument");
  EXPECT_NE(msg.find("unknown query parameter \"mode\""), std::string::npos) << msg;
  msg = ExpectError("POST", "/v1/namespaces/a/batch?mode=fast", R"({"documents": []})", 400, "invalid_argument");
  EXPECT_NE(msg.find("mode must be"), std::string::npos) << msg;
  msg = ExpectError("POST", "/v1/namespaces/a/batch?limit=3", R"({"documents": []})", 400, "invalid_argument");
  EXPECT_NE(msg.find("unknown query parameter \"limit\""), std::string::npos) << msg;
}

// ---- 404, 409, 413, 503 ------------------------------------------------------

TEST_F(HttpApiTest, UnknownNamespaceAndDocumentAre404) {
  ExpectError("GET", "/v1/namespaces/nope", "", 404, "not_found");
  ExpectError("DELETE", "/v1/namespaces/nope", "", 404, "not_found");
  ExpectError("GET", "/v1/namespaces/nope/documents/x", "", 404, "not_found");
  ExpectError("DELETE", "/v1/namespaces/nope/documents/x", "", 404, "not_found");
  Check("news", {{"id", "a"}, {"text", kFox}});
  const std::string msg = ExpectError("GET", "/v1/namespaces/news/documents/b", "", 404, "not_found");
  EXPECT_NE(msg.find("\"b\""), std::string::npos) << msg;
}

TEST_F(HttpApiTest, WithoutAutoCreateUnknownNamespacesAre404) {
  Open(/*auto_create=*/false);
  const std::string doc = json({{"id", "a"}, {"text", kFox}}).dump();
  ExpectError("POST", "/v1/namespaces/news/check", doc, 404, "not_found");
  ExpectError("POST", "/v1/namespaces/news/batch", R"({"documents": [{"id": "a", "text": "x"}]})", 404,
              "not_found");
  int status = 0;
  CallJson("PUT", "/v1/namespaces/news", "", &status);
  EXPECT_EQ(status, 201);
  Check("news", {{"id", "a"}, {"text", kFox}});
}

TEST_F(HttpApiTest, SchemeChangeOfNonEmptyNamespaceIs409) {
  int status = 0;
  CallJson("PUT", "/v1/namespaces/news", R"({"tokenizer": "mixed"})", &status);
  EXPECT_EQ(status, 201);
  // Empty: the scheme may still change.
  CallJson("PUT", "/v1/namespaces/news", R"({"cjk_ngram": 3})", &status);
  EXPECT_EQ(status, 200) << last_.body;
  Check("news", {{"id", "a"}, {"text", kFox}});
  std::string msg = ExpectError("PUT", "/v1/namespaces/news", R"({"tokenizer": "icu-words"})", 409,
                                "failed_precondition");
  EXPECT_NE(msg.find("holds documents: changing tokenizer would"), std::string::npos) << msg;
  ExpectError("PUT", "/v1/namespaces/news", R"({"cjk_ngram": 2})", 409, "failed_precondition");
  // Every setting that changes fingerprints, sketches or the duplicate rule is refused, named in the message.
  for (const char* body : {R"({"shingle_size": 4})", R"({"k": 5})", R"({"threshold": 0.8})",
                           R"({"recheck": {"enabled": false}})", R"({"recheck": {"short_k": 4}})",
                           R"({"recheck": {"short_max_chars": 10}})", R"({"recheck": {"anchors": 0}})",
                           R"({"recheck": {"anchor_max_postings": 5}})"}) {
    msg = ExpectError("PUT", "/v1/namespaces/news", body, 409, "failed_precondition");
    const std::string field = json::parse(body).flatten().begin().key().substr(1);
    std::string dotted = field;
    std::replace(dotted.begin(), dotted.end(), '/', '.');
    EXPECT_NE(msg.find("changing " + dotted + " would"), std::string::npos) << body << " -> " << msg;
  }
  // The same values again are no change; retention and max_matches may change at any time.
  json j = CallJson("PUT", "/v1/namespaces/news", R"({"k": 3, "max_matches": 3, "retention_seconds": 60})",
                    &status);
  EXPECT_EQ(status, 200) << last_.body;
  EXPECT_EQ(j["settings"]["k"], 3);
  EXPECT_EQ(j["settings"]["max_matches"], 3);
  EXPECT_EQ(j["settings"]["retention_seconds"], 60);
  EXPECT_EQ(j["settings"]["cjk_ngram"], 3);
  EXPECT_EQ(j["settings"]["shingle_size"], 3);
  EXPECT_EQ(j["stats"]["documents"], 1);
}

TEST_F(HttpApiTest, BodyOverTheLimitIs413) {
  options_.max_body_bytes = 100;
  const std::string doc = json({{"id", "a"}, {"text", std::string(200, 'x')}}).dump();
  const std::string msg = ExpectError("POST", "/v1/namespaces/a/check", doc, 413, "resource_exhausted");
  EXPECT_NE(msg.find("limit"), std::string::npos) << msg;
  // Routing errors still come first.
  ExpectError("POST", "/nope", doc, 404, "not_found");
}

TEST_F(HttpApiTest, BatchOverTheLimitIs413) {
  options_.max_batch_documents = 3;
  json docs = json::array();
  for (int i = 0; i < 4; ++i) docs.push_back({{"id", i}, {"text", "text " + std::to_string(i)}});
  const std::string msg =
      ExpectError("POST", "/v1/namespaces/a/batch", json({{"documents", docs}}).dump(), 413, "resource_exhausted");
  EXPECT_NE(msg.find("at most 3"), std::string::npos) << msg;
  docs.erase(docs.begin());
  int status = 0;
  json j = CallJson("POST", "/v1/namespaces/a/batch", json({{"documents", docs}}).dump(), &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(j["results"].size(), 3u);
}

TEST_F(HttpApiTest, ShuttingDownIs503) {
  Check("news", {{"id", "a"}, {"text", kFox}});
  ASSERT_TRUE(engine_->Shutdown().ok());
  ExpectError("POST", "/v1/namespaces/news/check", json({{"id", "b"}, {"text", kOther}}).dump(), 503,
              "unavailable");
  EXPECT_EQ(Header(last_, "Retry-After"), "1");
  ExpectError("PUT", "/v1/namespaces/other", "{}", 503, "unavailable");
  ExpectError("DELETE", "/v1/namespaces/news/documents/a", "", 503, "unavailable");
}

// ---- documents -------------------------------------------------------------

TEST_F(HttpApiTest, CheckStoresThenReportsDuplicates) {
  json a = Check("news", {{"id", "a1"}, {"text", kFox}, {"timestamp", 1700000000000}});
  EXPECT_EQ(a["id"], "a1");
  EXPECT_EQ(a["duplicate"], false);
  EXPECT_EQ(a["stored"], true);
  EXPECT_EQ(a["replay"], false);
  EXPECT_EQ(a["matches"], json::array());
  EXPECT_EQ(a["fingerprint"].get<std::string>().size(), 16u);
  EXPECT_EQ(a["has_features"], true);

  json b = Check("news", {{"id", "a2"}, {"text", kFox2}});
  EXPECT_EQ(b["duplicate"], true);
  EXPECT_EQ(b["stored"], false);
  ASSERT_EQ(b["matches"].size(), 1u);
  EXPECT_EQ(b["matches"][0]["id"], "a1");
  EXPECT_EQ(b["matches"][0]["exact"], true);  // differs only by case and punctuation
  EXPECT_EQ(b["matches"][0]["distance"], 0);
  // The defined similarity, exactly: case folds, the "!" counts (39 of 40
  // trigrams shared; shingles.h).
  EXPECT_DOUBLE_EQ(b["matches"][0]["similarity"].get<double>(), 39.0 / 40.0);
  EXPECT_EQ(b["matches"][0]["similarity_exact"], true);
  EXPECT_EQ(b["matches"][0]["timestamp"], 1700000000000);

  json c = Check("news", {{"id", "a3"}, {"text", kOther}});
  EXPECT_EQ(c["duplicate"], false);
  EXPECT_EQ(c["stored"], true);
  EXPECT_EQ(Documents("news"), 2u);
}

TEST_F(HttpApiTest, ResendingAnIdIsIdempotent) {
  json first = Check("news", {{"id", "a1"}, {"text", kFox}});
  EXPECT_EQ(first["stored"], true);
  EXPECT_EQ(first["replay"], false);
  for (int i = 0; i < 3; ++i) {
    json again = Check("news", {{"id", "a1"}, {"text", kFox}});
    EXPECT_EQ(again["replay"], true) << again.dump();
    EXPECT_EQ(again["stored"], true) << again.dump();
    EXPECT_EQ(again["fingerprint"], first["fingerprint"]);
  }
  EXPECT_EQ(Documents("news"), 1u);
  int status = 0;
  json ns = CallJson("GET", "/v1/namespaces/news", "", &status);
  EXPECT_EQ(ns["stats"]["inserted"], 1);
}

TEST_F(HttpApiTest, NamespacesAreIsolated) {
  EXPECT_EQ(Check("a", {{"id", "1"}, {"text", kFox}})["stored"], true);
  json b = Check("b", {{"id", "1"}, {"text", kFox}});
  EXPECT_EQ(b["duplicate"], false);
  EXPECT_EQ(b["stored"], true);
  EXPECT_EQ(b["replay"], false);
  EXPECT_EQ(Documents("a"), 1u);
  EXPECT_EQ(Documents("b"), 1u);
  int status = 0;
  CallJson("DELETE", "/v1/namespaces/a/documents/1", "", &status);
  EXPECT_EQ(status, 200);
  CallJson("GET", "/v1/namespaces/b/documents/1", "", &status);
  EXPECT_EQ(status, 200);
}

TEST_F(HttpApiTest, QueryNeverStoresAndInsertAlwaysStores) {
  json q = Check("news", {{"id", "q"}, {"text", kFox}}, "query");
  EXPECT_EQ(q["stored"], false);
  EXPECT_EQ(q["duplicate"], false);
  int status = 0;
  CallJson("GET", "/v1/namespaces/news/documents/q", "", &status);
  EXPECT_EQ(status, 404);

  Check("news", {{"id", "a"}, {"text", kFox}});
  q = Check("news", {{"id", "q"}, {"text", kFox2}}, "query");
  EXPECT_EQ(q["duplicate"], true);
  EXPECT_EQ(q["stored"], false);

  json ins = Check("news", {{"id", "b"}, {"text", kFox2}}, "insert");
  EXPECT_EQ(ins["duplicate"], true);
  EXPECT_EQ(ins["stored"], true);
  ASSERT_EQ(ins["matches"].size(), 1u);
  EXPECT_EQ(ins["matches"][0]["id"], "a");
  EXPECT_EQ(Documents("news"), 2u);
}

TEST_F(HttpApiTest, IntegerIdsBecomeDecimalStrings) {
  json a = Check("news", {{"id", 42}, {"text", kFox}});
  EXPECT_EQ(a["id"], "42");
  json b = Check("news", {{"id", "42"}, {"text", kFox}});
  EXPECT_EQ(b["replay"], true);  // 42 and "42" are the same id
  json c = Check("news", {{"id", -7}, {"text", kOther}});
  EXPECT_EQ(c["id"], "-7");
  int status = 0;
  json d = CallJson("GET", "/v1/namespaces/news/documents/42", "", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(d["id"], "42");
}

TEST_F(HttpApiTest, GetAndDeleteDocuments) {
  const std::string id = "doc/1 caf\xc3\xa9?#";
  const std::string encoded = "doc%2F1%20caf%C3%A9%3F%23";
  json a = Check("news", {{"id", id}, {"text", kFox}, {"timestamp", 1700000000123}});
  int status = 0;
  json got = CallJson("GET", "/v1/namespaces/news/documents/" + encoded, "", &status);
  ASSERT_EQ(status, 200) << last_.body;
  EXPECT_EQ(got["id"], id);
  EXPECT_EQ(got["fingerprint"], a["fingerprint"]);
  EXPECT_EQ(got["has_features"], true);
  EXPECT_EQ(got["timestamp"], 1700000000123);
  EXPECT_EQ(last_.route, "/v1/namespaces/{ns}/documents/{id}");

  json del = CallJson("DELETE", "/v1/namespaces/news/documents/" + encoded, "", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(del, json({{"deleted", true}, {"id", id}}));
  ExpectError("GET", "/v1/namespaces/news/documents/" + encoded, "", 404, "not_found");
  ExpectError("DELETE", "/v1/namespaces/news/documents/" + encoded, "", 404, "not_found");
  // After the delete the text is new again.
  EXPECT_EQ(Check("news", {{"id", "again"}, {"text", kFox}})["duplicate"], false);
}

TEST_F(HttpApiTest, TextsWithoutFeaturesAreAccepted) {
  json a = Check("news", {{"id", "p1"}, {"text", "!!! ???"}});
  EXPECT_EQ(a["has_features"], false);
  EXPECT_EQ(a["stored"], true);
  json b = Check("news", {{"id", "p2"}, {"text", "!!! ???"}});
  EXPECT_EQ(b["duplicate"], true);
  EXPECT_EQ(b["matches"][0]["exact"], true);
}

// ---- batch -------------------------------------------------------------------

TEST_F(HttpApiTest, BatchAnswersInOrderWithErrorsInPlace) {
  const json docs = json::array({
      {{"id", "a"}, {"text", kFox}},
      {{"id", "bad"}},                     // no text
      {{"id", "b"}, {"text", kFox2}},      // duplicate of a, same batch
      "not an object",                     // not a document
      {{"id", "c"}, {"text", kOther}},
      {{"id", "a"}, {"text", kFox}},       // replay
  });
  int status = 0;
  json j = CallJson("POST", "/v1/namespaces/news/batch", json({{"documents", docs}}).dump(), &status);
  ASSERT_EQ(status, 200) << last_.body;
  const json& r = j["results"];
  ASSERT_EQ(r.size(), docs.size());
  EXPECT_EQ(r[0]["id"], "a");
  EXPECT_EQ(r[0]["stored"], true);
  EXPECT_EQ(r[1]["error"]["code"], "invalid_argument");
  EXPECT_NE(r[1]["error"]["message"].get<std::string>().find("text"), std::string::npos);
  EXPECT_EQ(r[2]["id"], "b");
  EXPECT_EQ(r[2]["duplicate"], true);
  EXPECT_EQ(r[2]["matches"][0]["id"], "a");
  EXPECT_EQ(r[3]["error"]["code"], "invalid_argument");
  EXPECT_EQ(r[4]["id"], "c");
  EXPECT_EQ(r[4]["stored"], true);
  EXPECT_EQ(r[5]["replay"], true);
  EXPECT_EQ(Documents("news"), 2u);
}

TEST_F(HttpApiTest, BatchModes) {
  const json docs = json::array({{{"id", "a"}, {"text", kFox}}, {{"id", "b"}, {"text", kFox2}}});
  const std::string body = json({{"documents", docs}}).dump();
  int status = 0;
  json q = CallJson("POST", "/v1/namespaces/news/batch?mode=query", body, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(q["results"][0]["stored"], false);
  EXPECT_EQ(q["results"][1]["stored"], false);
  EXPECT_EQ(q["results"][1]["duplicate"], false);  // queries do not see each other
  json ins = CallJson("POST", "/v1/namespaces/news/batch?mode=insert", body, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(ins["results"][1]["duplicate"], true);
  EXPECT_EQ(ins["results"][1]["stored"], true);
  EXPECT_EQ(Documents("news"), 2u);
  json chk = CallJson("POST", "/v1/namespaces/other/batch?mode=check", body, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(chk["results"][1]["stored"], false);
  EXPECT_EQ(Documents("other"), 1u);
}

TEST_F(HttpApiTest, BatchBodyShape) {
  int status = 0;
  json j = CallJson("POST", "/v1/namespaces/news/batch", R"({"documents": []})", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(j, json({{"results", json::array()}}));
  ExpectError("POST", "/v1/namespaces/news/batch", R"({"docs": []})", 400, "invalid_argument");
  ExpectError("POST", "/v1/namespaces/news/batch", R"({"documents": {}})", 400, "invalid_argument");
  ExpectError("POST", "/v1/namespaces/news/batch", R"({})", 400, "invalid_argument");
  ExpectError("POST", "/v1/namespaces/news/batch", R"([{"id": "a", "text": "b"}])", 400, "invalid_argument");
}

// ---- namespaces ------------------------------------------------------------

TEST_F(HttpApiTest, NamespaceLifecycle) {
  options_.default_settings.retention_seconds = 3600;
  int status = 0;
  json created = CallJson("PUT", "/v1/namespaces/news", R"({"k": 4})", &status);
  EXPECT_EQ(status, 201) << last_.body;
  EXPECT_EQ(Header(last_, "Location"), "/v1/namespaces/news");
  EXPECT_EQ(created["name"], "news");
  EXPECT_EQ(created["settings"]["k"], 4);
  EXPECT_EQ(created["settings"]["retention_seconds"], 3600);  // from the defaults
  EXPECT_EQ(created["settings"]["tokenizer"], "mixed");
  EXPECT_EQ(created["stats"]["documents"], 0);

  json updated = CallJson("PUT", "/v1/namespaces/news", R"({"retention_seconds": 0})", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(updated["settings"]["k"], 4);  // kept
  EXPECT_EQ(updated["settings"]["retention_seconds"], 0);
  CallJson("PUT", "/v1/namespaces/blank", "", &status);  // empty body = all defaults
  EXPECT_EQ(status, 201);

  Check("news", {{"id", "a"}, {"text", kFox}});
  json got = CallJson("GET", "/v1/namespaces/news", "", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(got["stats"]["documents"], 1);
  EXPECT_EQ(got["stats"]["checks"], 1);
  EXPECT_EQ(got["stats"]["inserted"], 1);
  for (const char* key : {"memory_bytes", "duplicates", "expired", "deleted"}) EXPECT_TRUE(got["stats"].contains(key));

  json list = CallJson("GET", "/v1/namespaces", "", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(list, json({{"namespaces", {"blank", "news"}}}));

  json del = CallJson("DELETE", "/v1/namespaces/news", "", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(del, json({{"deleted", true}, {"name", "news"}}));
  ExpectError("GET", "/v1/namespaces/news", "", 404, "not_found");
  ExpectError("GET", "/v1/namespaces/news/documents/a", "", 404, "not_found");
  list = CallJson("GET", "/v1/namespaces", "", &status);
  EXPECT_EQ(list, json({{"namespaces", {"blank"}}}));
}

// ---- metrics -----------------------------------------------------------------

TEST_F(HttpApiTest, MetricsText) {
  HttpMetrics metrics;
  options_.metrics = &metrics;
  Check("news", {{"id", "a"}, {"text", kFox}});
  metrics.Record("/v1/namespaces/{ns}/check", "POST", 200, 0.003);
  metrics.Record("/v1/namespaces/{ns}/check", "POST", 400, 0.0001);
  metrics.Record("unmatched", "BREW", 404, 20.0);
  const HttpResponse r = Call("GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  for (const char* needle :
       {"# TYPE neardup_documents gauge", "neardup_documents 1\n", "neardup_namespaces 1\n",
        "neardup_engine_memory_bytes ", "neardup_process_resident_memory_bytes ", "neardup_store_commits_total ",
        "neardup_store_commit_documents_total ", "neardup_store_disk_bytes ",
        "neardup_namespace_documents{namespace=\"news\"} 1\n", "neardup_namespace_checks_total{namespace=\"news\"} 1\n",
        "# TYPE neardup_http_requests_total counter",
        "neardup_http_requests_total{route=\"/v1/namespaces/{ns}/check\",method=\"POST\",status=\"200\"} 1\n",
        "neardup_http_requests_total{route=\"unmatched\",method=\"other\",status=\"404\"} 1\n",
        "# TYPE neardup_http_request_duration_seconds histogram",
        "neardup_http_request_duration_seconds_bucket{route=\"/v1/namespaces/{ns}/check\",le=\"0.0025\"} 1\n",
        "neardup_http_request_duration_seconds_bucket{route=\"/v1/namespaces/{ns}/check\",le=\"0.005\"} 2\n",
        "neardup_http_request_duration_seconds_bucket{route=\"unmatched\",le=\"10\"} 0\n",
        "neardup_http_request_duration_seconds_bucket{route=\"unmatched\",le=\"+Inf\"} 1\n",
        "neardup_http_request_duration_seconds_count{route=\"/v1/namespaces/{ns}/check\"} 2\n",
        "neardup_http_requests_in_flight 0\n"}) {
    EXPECT_NE(r.body.find(needle), std::string::npos) << needle << "\n" << r.body;
  }
  EXPECT_GT(ProcessRssBytes(), 0u);
  EXPECT_EQ(metrics.TotalRequests(), 3u);
}

// Check answers are written without a JSON tree (http_api.cc); they must be
// exactly what nlohmann writes for the same object: parse + dump is the
// identity, for awkward ids, exact matches (similarity 1.0), near ones
// (fractional similarity) and batches with errors in place.
TEST_F(HttpApiTest, CheckAnswersAreCanonicalJson) {
  using ordered = nlohmann::ordered_json;
  auto canonical = [](const HttpResponse& r) {
    ASSERT_FALSE(r.body.empty());
    ASSERT_EQ(r.body.back(), '\n');
    const std::string text = r.body.substr(0, r.body.size() - 1);
    const ordered j = ordered::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << text;
    EXPECT_EQ(j.dump(), text);
  };
  const std::string odd_id = "q\"uo\\te\t\x01\x1f 文档 \u00e9\x7f";
  HttpResponse r = Call("POST", "/v1/namespaces/news/check", json({{"id", odd_id}, {"text", kFox}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  canonical(r);
  EXPECT_EQ(json::parse(r.body)["id"], odd_id);
  r = Call("POST", "/v1/namespaces/news/check", json({{"id", "same"}, {"text", kFox}}).dump());
  canonical(r);
  EXPECT_EQ(json::parse(r.body)["matches"][0]["id"], odd_id);
  EXPECT_NE(r.body.find("\"similarity\":1.0,"), std::string::npos) << r.body;
  r = Call("POST", "/v1/namespaces/news/query", json({{"id", "near"}, {"text", kFox2}}).dump());
  canonical(r);
  const json near = json::parse(r.body);
  ASSERT_TRUE(near["duplicate"].get<bool>()) << r.body;
  EXPECT_TRUE(near["matches"][0]["similarity"].is_number_float());
  const json docs = json::array({{{"id", "x"}, {"text", kOther}}, {{"id", "bad"}}, "nope", {{"id", odd_id}, {"text", kFox}}});
  r = Call("POST", "/v1/namespaces/news/batch", json({{"documents", docs}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  canonical(r);
  EXPECT_EQ(json::parse(r.body)["results"].size(), 4u);
  r = Call("POST", "/v1/namespaces/news/batch", R"({"documents": []})");
  canonical(r);
  EXPECT_EQ(r.body, "{\"results\":[]}\n");
}

TEST_F(HttpApiTest, AnswersAreJsonWithNewline) {
  const HttpResponse r = Call("POST", "/v1/namespaces/news/check", json({{"id", "a"}, {"text", kFox}}).dump());
  EXPECT_EQ(r.content_type, "application/json");
  ASSERT_FALSE(r.body.empty());
  EXPECT_EQ(r.body.back(), '\n');
  EXPECT_EQ(r.route, "/v1/namespaces/{ns}/check");
}

}  // namespace
}  // namespace neardup
