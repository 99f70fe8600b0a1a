// libFuzzer target for the HTTP/1.x request parser (src/http_parser.h): any
// byte stream must be parsed without a crash, a sanitizer report or a hang,
// and the outcome must not depend on how the stream is split into reads
// (the same requests, bodies and error status whether fed whole or in
// pieces).
//
// Input: the first byte picks the piece size (1..32) and the limits; the
// rest is the stream.
//
// Build (clang, with the library instrumented for coverage: scripts/build.sh asan):
//   ./build-asan/http_parser_fuzzer -max_total_time=60 fuzz/corpus/http_parser
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_parser.h"

namespace {

struct Seen {
  std::vector<std::string> requests;  // method, target, body, flags per request
  int error = 0;
};

Seen Run(std::string_view stream, size_t piece, const neardup::HttpParseLimits& limits) {
  neardup::HttpRequestParser p(limits);
  Seen seen;
  std::string buf;
  size_t next = 0;
  while (true) {
    if (next < stream.size()) {
      const size_t n = std::min(piece, stream.size() - next);
      buf.append(stream.substr(next, n));
      next += n;
    }
    while (!buf.empty()) {
      size_t used = 0;
      const auto r = p.Feed(buf, &used);
      if (used > buf.size()) __builtin_trap();
      buf.erase(0, used);
      if (r == neardup::HttpRequestParser::Result::kError) {
        if (p.error_status() < 400 || p.error_status() > 599 || p.error_message().empty()) __builtin_trap();
        seen.error = p.error_status();
        return seen;
      }
      if (r == neardup::HttpRequestParser::Result::kDone) {
        const auto& q = p.request();
        if (limits.max_body_bytes != 0 && q.body.size() > limits.max_body_bytes) __builtin_trap();
        seen.requests.push_back(q.method + '\n' + q.target + '\n' + q.body + (q.keep_alive ? "K" : "C"));
        p.Reset();
        continue;
      }
      if (r == neardup::HttpRequestParser::Result::kNeedMore && used == 0 && !buf.empty()) __builtin_trap();
      if (r == neardup::HttpRequestParser::Result::kNeedMore) break;
    }
    if (next >= stream.size()) return seen;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + (data[0] & 31);
  neardup::HttpParseLimits limits;
  if (data[0] & 0x80) {  // small limits reach the 413/414/431 paths
    limits.max_body_bytes = 16;
    limits.max_target_bytes = 16;
    limits.max_header_bytes = 64;
  }
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Seen whole = Run(stream, stream.size() + 1, limits);
  const Seen split = Run(stream, piece, limits);
  if (whole.requests != split.requests || whole.error != split.error) __builtin_trap();
  return 0;
}
