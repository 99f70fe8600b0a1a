// libFuzzer target for the HTTP API (src/http_api.h): any method, target and
// body must be answered — without a crash, a sanitizer report, a hang or an
// exception — by a well-formed response, against a real local engine
// (RocksDB in a temporary directory, reopened empty every few thousand inputs
// so memory stays bounded).
//
// Input: METHOD '\n' TARGET '\n' BODY (missing parts are empty). A leading
// byte < 0x20 picks one of a few well-formed requests to steer the fuzzer
// toward the engine instead of the router; the rest of the input is then the body.
//
// Build (clang, with the library instrumented for coverage: scripts/build.sh asan):
//   ./build-asan/http_request_fuzzer -max_total_time=60 -max_len=4096 fuzz/corpus/http_request
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "http/http_api.h"
#include "neardup/engine/engine.h"
#include "neardup/engine/local_engine.h"
#include "neardup/store/rocks_store.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "http_request_fuzzer: invariant failed: %s\n", what);
    std::abort();
  }
}

constexpr int kInputsPerEngine = 4000;

struct State {
  std::string dir;
  std::unique_ptr<neardup::Engine> engine;
  int inputs = 0;

  void Reopen() {
    if (engine) {
      (void)engine->Shutdown();
      engine.reset();
    }
    if (!dir.empty()) std::system(("rm -rf '" + dir + "'").c_str());
    char tmpl[] = "/tmp/neardup_http_fuzz.XXXXXX";
    Check(::mkdtemp(tmpl) != nullptr, "mkdtemp");
    dir = tmpl;
    neardup::LocalEngineOptions o;
    o.data_dir = dir + "/data";
    o.sync = false;
    o.default_settings.retention_seconds = 0;
    o.default_settings.max_matches = 5;
    auto e = neardup::OpenLocalEngine(o);
    Check(e.ok(), "OpenLocalEngine");
    engine = std::move(e).value();
    inputs = 0;
  }
  ~State() {
    if (engine) (void)engine->Shutdown();
    engine.reset();
    if (!dir.empty()) std::system(("rm -rf '" + dir + "'").c_str());
  }
};

State& GetState() {
  static State* state = [] {
    auto* s = new State;  // lives for the process; destroyed at exit below
    s->Reopen();
    std::atexit([] { delete &GetState(); });
    return s;
  }();
  return *state;
}

bool KnownStatus(int s) {
  switch (s) {
    case 200: case 201: case 204: case 400: case 404: case 405: case 409: case 413: case 500: case 501: case 503:
      return true;
    default:
      return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  State& state = GetState();
  if (++state.inputs > kInputsPerEngine) state.Reopen();

  std::string_view in(reinterpret_cast<const char*>(data), size);
  neardup::HttpRequest req;
  static constexpr const char* kSteer[][2] = {
      {"POST", "/v1/namespaces/fz/check"},          {"POST", "/v1/namespaces/fz/query"},
      {"POST", "/v1/namespaces/fz/insert"},         {"POST", "/v1/namespaces/fz/batch?mode=check"},
      {"PUT", "/v1/namespaces/fz"},                 {"POST", "/v1/namespaces/fz/batch?mode=insert"},
      {"GET", "/v1/namespaces/fz/documents/a"},     {"DELETE", "/v1/namespaces/fz/documents/a"},
  };
  constexpr size_t kSteerCount = sizeof(kSteer) / sizeof(kSteer[0]);
  if (!in.empty() && static_cast<unsigned char>(in[0]) < kSteerCount) {
    const auto& s = kSteer[static_cast<unsigned char>(in[0])];
    req = neardup::HttpRequest::FromTarget(s[0], s[1], std::string(in.substr(1)));
  } else {
    const size_t a = in.find('\n');
    const std::string_view method = in.substr(0, a);
    std::string_view rest = a == std::string_view::npos ? std::string_view{} : in.substr(a + 1);
    const size_t b = rest.find('\n');
    const std::string_view target = rest.substr(0, b);
    const std::string_view body = b == std::string_view::npos ? std::string_view{} : rest.substr(b + 1);
    req = neardup::HttpRequest::FromTarget(std::string(method), target, std::string(body));
  }

  neardup::HttpApiOptions options;
  options.max_batch_documents = 64;
  options.max_body_bytes = 1 << 16;
  const neardup::HttpResponse r = neardup::HandleRequest(*state.engine, req, options);

  Check(KnownStatus(r.status), "status is one of the documented ones");
  Check(!r.route.empty(), "route label");
  if (r.status == 204) {
    Check(r.body.empty(), "204 has no body");
    return 0;
  }
  if (r.content_type != "application/json") {
    Check(r.content_type.starts_with("text/plain") && r.status == 200, "only /metrics is text");
    return 0;
  }
  const auto j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  Check(!j.is_discarded() && j.is_object(), "answer is a JSON object");
  if (r.status >= 400) {
    Check(j.contains("error") && j["error"].is_object(), "error body");
    Check(j["error"].contains("code") && j["error"]["code"].is_string(), "error code");
    Check(j["error"].contains("message") && j["error"]["message"].is_string(), "error message");
  } else if (j.contains("results")) {
    Check(j["results"].is_array(), "results is an array");
  }
  return 0;
}
