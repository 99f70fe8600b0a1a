// HttpRequestParser: an incremental HTTP/1.x request parser for the event
// server (src/http/http_server.cc). It owns nothing but the parse state of one
// connection; the caller feeds the bytes it read and takes complete requests.
//
// What it accepts (RFC 9112, strict where leniency has caused request
// smuggling elsewhere):
//  * request line "METHOD SP target SP HTTP/1.0|HTTP/1.1" ending in CRLF;
//  * header fields "name: value" (no whitespace before the colon, no
//    obsolete line folding), the section ending in an empty line;
//  * a body framed by Content-Length (one value, digits only) or by
//    "Transfer-Encoding: chunked" (chunk extensions and trailers are read and
//    dropped), never both; no framing means no body;
//  * keep-alive: HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with
//    "Connection: keep-alive".
// Errors carry the HTTP status to answer (400 malformed, 413 body over the
// limit, 414 target too long, 431 header section too large, 501 unknown
// transfer coding, 505 other HTTP version) and a message; after an error the
// connection must be answered and closed, since its framing is lost.
//
// Thread-safety: none; one parser per connection.
#ifndef NEARDUP_SRC_HTTP_PARSER_H_
#define NEARDUP_SRC_HTTP_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace neardup {

struct ParsedHttpRequest {
  std::string method;
  std::string target;  // as sent: path and optional ?query, still percent-encoded
  int minor_version = 1;
  bool keep_alive = true;
  bool expect_continue = false;  // "Expect: 100-continue"
  bool has_body_framing = false; // Content-Length or chunked was given
  std::string authorization;     // the Authorization field's value ("" if none; twice is a 400)
  std::string body;
};

struct HttpParseLimits {
  size_t max_target_bytes = 8 * 1024;
  size_t max_header_bytes = 64 * 1024;  // request line + fields (and trailers)
  size_t max_body_bytes = size_t{1} << 20;  // 0: no limit
};

class HttpRequestParser {
 public:
  enum class Result {
    kNeedMore,  // every byte was consumed; feed more
    kHeaders,   // the header section is complete, the body is not (see request())
    kDone,      // a whole request is in request(); call Reset() before the next
    kError,     // error_status()/error_message(); the connection is done
  };

  explicit HttpRequestParser(HttpParseLimits limits = {}) : limits_(limits) {}

  // Parses from data; *consumed receives how many bytes were used (the rest
  // belongs to the next request, or is unread because of an error).
  // kHeaders is returned once per request, when the header section is
  // complete and the body still incomplete (the moment for "100 Continue").
  Result Feed(std::string_view data, size_t* consumed);

  // Forgets the finished request; keeps the limits.
  void Reset();

  const ParsedHttpRequest& request() const { return req_; }
  ParsedHttpRequest& mutable_request() { return req_; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  // True while some bytes of a request were seen but it is not complete.
  bool in_progress() const { return stage_ != Stage::kHeaders || !head_.empty(); }

 private:
  enum class Stage { kHeaders, kLengthBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kDone, kError };

  Result Fail(int status, std::string message);
  bool ParseHead();  // head_ holds the section without its final CRLFCRLF
  // A CRLF-terminated line (chunk size, trailer), possibly across reads.
  enum class Line { kMore, kReady, kTooLong, kNoCr };
  // Moves bytes up to and including '\n' into line_. kReady: line_ holds the
  // whole line without its CRLF; kNoCr: it ended in a bare LF; kTooLong: over
  // max_line bytes of content.
  Line TakeLine(std::string_view data, size_t* pos, size_t max_line);
  // Appends up to remaining_ body bytes from data; returns remaining_.
  uint64_t TakeBody(std::string_view data, size_t* pos);

  HttpParseLimits limits_;
  Stage stage_ = Stage::kHeaders;
  ParsedHttpRequest req_;
  std::string head_;   // header section bytes so far
  std::string line_;   // a chunk-size or trailer line so far
  uint64_t remaining_ = 0;  // body bytes still due (length body or current chunk)
  size_t trailer_bytes_ = 0;
  bool headers_reported_ = false;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace neardup

#endif  // NEARDUP_SRC_HTTP_PARSER_H_
