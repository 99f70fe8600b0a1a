// HttpRequestParser: framing, limits and errors, and the same result however
// the bytes are split across reads.
#include "http/http_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace neardup {
namespace {

struct Outcome {
  std::vector<ParsedHttpRequest> requests;
  int error_status = 0;
  std::string error_message;
  bool saw_headers = false;
  size_t leftover = 0;  // bytes not consumed after the last complete request
};

// Feeds `bytes` in pieces of the given sizes (cycled), the way a server
// would: keep the unconsumed tail, append the next read.
Outcome Parse(const std::string& bytes, std::vector<size_t> pieces = {}, HttpParseLimits limits = {}) {
  if (pieces.empty()) pieces = {bytes.size() + 1};
  HttpRequestParser p(limits);
  Outcome out;
  std::string buf;
  size_t next = 0, piece = 0;
  while (true) {
    if (next < bytes.size()) {
      const size_t n = std::min(pieces[piece++ % pieces.size()], bytes.size() - next);
      buf.append(bytes, next, n);
      next += n;
    }
    bool progressed = true;
    while (progressed && !buf.empty()) {
      size_t used = 0;
      const auto r = p.Feed(buf, &used);
      buf.erase(0, used);
      progressed = used > 0;
      if (r == HttpRequestParser::Result::kHeaders) {
        out.saw_headers = true;
        progressed = true;
      } else if (r == HttpRequestParser::Result::kDone) {
        out.requests.push_back(p.request());
        p.Reset();
        progressed = true;
      } else if (r == HttpRequestParser::Result::kError) {
        out.error_status = p.error_status();
        out.error_message = p.error_message();
        return out;
      }
    }
    if (next >= bytes.size()) break;
  }
  out.leftover = buf.size();
  return out;
}

TEST(HttpParserTest, SimpleGetAndPostWithContentLength) {
  const Outcome o = Parse(
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /v1/namespaces/a/check?x=1 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_EQ(o.error_status, 0) << o.error_message;
  ASSERT_EQ(o.requests.size(), 2u);
  EXPECT_EQ(o.requests[0].method, "GET");
  EXPECT_EQ(o.requests[0].target, "/healthz");
  EXPECT_TRUE(o.requests[0].keep_alive);
  EXPECT_EQ(o.requests[0].body, "");
  EXPECT_EQ(o.requests[1].method, "POST");
  EXPECT_EQ(o.requests[1].target, "/v1/namespaces/a/check?x=1");
  EXPECT_EQ(o.requests[1].body, "hello");
  EXPECT_EQ(o.leftover, 0u);
}

TEST(HttpParserTest, EverySplitGivesTheSameRequests) {
  const std::string bytes =
      "POST /a HTTP/1.1\r\nContent-Length: 11\r\nConnection: keep-alive\r\n\r\nhello world"
      "PUT /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"
      "\r\nGET /c HTTP/1.0\r\n\r\n";
  const Outcome whole = Parse(bytes);
  ASSERT_EQ(whole.error_status, 0) << whole.error_message;
  ASSERT_EQ(whole.requests.size(), 3u);
  EXPECT_EQ(whole.requests[1].body, "hello world");
  EXPECT_FALSE(whole.requests[2].keep_alive);  // HTTP/1.0 without keep-alive
  for (size_t piece : {1u, 2u, 3u, 7u, 13u}) {
    const Outcome split = Parse(bytes, {piece});
    ASSERT_EQ(split.error_status, 0) << piece << ": " << split.error_message;
    ASSERT_EQ(split.requests.size(), 3u) << piece;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(split.requests[i].method, whole.requests[i].method);
      EXPECT_EQ(split.requests[i].target, whole.requests[i].target);
      EXPECT_EQ(split.requests[i].body, whole.requests[i].body);
      EXPECT_EQ(split.requests[i].keep_alive, whole.requests[i].keep_alive);
    }
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> pieces;
    for (int i = 0; i < 8; ++i) pieces.push_back(1 + rng() % 40);
    const Outcome split = Parse(bytes, pieces);
    ASSERT_EQ(split.requests.size(), 3u);
    EXPECT_EQ(split.requests[1].body, "hello world");
  }
}

TEST(HttpParserTest, KeepAliveRules) {
  EXPECT_FALSE(Parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").requests.at(0).keep_alive);
  EXPECT_FALSE(Parse("GET / HTTP/1.1\r\nConnection: foo, Close\r\n\r\n").requests.at(0).keep_alive);
  EXPECT_TRUE(Parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").requests.at(0).keep_alive);
  EXPECT_FALSE(Parse("GET / HTTP/1.0\r\n\r\n").requests.at(0).keep_alive);
}

TEST(HttpParserTest, ExpectContinueReportsHeadersOnceBeforeTheBody) {
  const std::string head = "POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
  HttpRequestParser p;
  size_t used = 0;
  EXPECT_EQ(p.Feed(head, &used), HttpRequestParser::Result::kHeaders);
  EXPECT_EQ(used, head.size());
  EXPECT_TRUE(p.request().expect_continue);
  EXPECT_EQ(p.Feed("ab", &used), HttpRequestParser::Result::kNeedMore);
  EXPECT_EQ(p.Feed("c", &used), HttpRequestParser::Result::kDone);
  EXPECT_EQ(p.request().body, "abc");
  // Without Expect, no kHeaders.
  EXPECT_FALSE(Parse("POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", {40}).saw_headers);
}

// The Authorization field reaches the API key check (src/http/auth.h); two
// of them are ambiguous and refused; each request of a connection has its own.
TEST(HttpParserTest, AuthorizationFieldIsKeptOncePerRequest) {
  Outcome o = Parse(
      "GET /v1/namespaces HTTP/1.1\r\nauthorization:  Bearer abc \r\n\r\n"
      "GET /v1/namespaces HTTP/1.1\r\n\r\n");
  ASSERT_EQ(o.error_status, 0) << o.error_message;
  ASSERT_EQ(o.requests.size(), 2u);
  EXPECT_EQ(o.requests[0].authorization, "Bearer abc");
  EXPECT_EQ(o.requests[1].authorization, "");
  o = Parse("GET / HTTP/1.1\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n");
  EXPECT_EQ(o.error_status, 400);
  EXPECT_NE(o.error_message.find("Authorization"), std::string::npos) << o.error_message;
}

TEST(HttpParserTest, ErrorsCarryTheirStatus) {
  struct Case {
    std::string bytes;
    int status;
  };
  HttpParseLimits small;
  small.max_body_bytes = 10;
  small.max_target_bytes = 20;
  small.max_header_bytes = 200;
  const std::vector<Case> cases = {
      {"GARBAGE\r\n\r\n", 400},
      {"GET  / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTX/1.1\r\n\r\n", 400},
      {"GE(T / HTTP/1.1\r\n\r\n", 400},
      {"GET /" + std::string(30, 'a') + " HTTP/1.1\r\n\r\n", 414},
      {"GET /" + std::string(300, 'a'), 414},  // no CRLF yet, already too long
      {"GET / HTTP/1.1\r\nX: " + std::string(300, 'b') + "\r\n\r\n", 431},
      {"GET / HTTP/1.1\r\n folded\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 413},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      // Two chunked codings: malformed, not an unsupported coding (regression, a tester, 2026-12-02).
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n12345678\r\n", 413},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", 400},
  };
  for (const Case& c : cases) {
    for (size_t piece : {c.bytes.size() + 1, size_t{1}, size_t{5}}) {
      const Outcome o = Parse(c.bytes, {piece}, small);
      EXPECT_EQ(o.error_status, c.status) << "piece " << piece << ": " << c.bytes.substr(0, 60);
      if (o.error_status != 0) {
        EXPECT_FALSE(o.error_message.empty());
      }
    }
  }
}

// Regression (found by fuzz/http_parser_fuzzer): a CR at the end of a read
// was counted into the request target, so a target exactly at the limit was
// 414 when split before its CRLF and 400 (no HTTP version) when whole.
TEST(HttpParserTest, PartialCrlfDoesNotCountIntoTheTarget) {
  HttpParseLimits l;
  l.max_target_bytes = 4;
  const std::string bytes = "GET /abc\r\n\r\n";
  EXPECT_EQ(Parse(bytes, {}, l).error_status, 400);
  EXPECT_EQ(Parse(bytes, {1}, l).error_status, 400);
  EXPECT_EQ(Parse(bytes, {9}, l).error_status, 400);
  // Regression (same fuzzer, in CI): the fix above must not drop a CR that
  // belongs to the line. Here the line is "GET /abc\r" (its CRLF is the
  // start of the CRLFCRLF), so the target "/abc\r" is over the limit,
  // however the bytes arrive.
  const std::string cr_in_line = "GET /abc\r\r\n\r\n";
  for (size_t piece : {cr_in_line.size() + 1, size_t{1}, size_t{2}, size_t{9}, size_t{10}}) {
    EXPECT_EQ(Parse(cr_in_line, {piece}, l).error_status, 414) << piece;
  }
}

TEST(HttpParserTest, IncompleteRequestIsInProgress) {
  HttpRequestParser p;
  size_t used = 0;
  EXPECT_FALSE(p.in_progress());
  EXPECT_EQ(p.Feed("\r\n", &used), HttpRequestParser::Result::kNeedMore);  // a stray CRLF is no request
  EXPECT_FALSE(p.in_progress());
  EXPECT_EQ(p.Feed("GET / HT", &used), HttpRequestParser::Result::kNeedMore);
  EXPECT_TRUE(p.in_progress());
}

}  // namespace
}  // namespace neardup
