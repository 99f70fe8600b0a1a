// HttpRequestParser: see http_parser.h.
#include "http/http_parser.h"

#include <algorithm>
#include <utility>

namespace neardup {
namespace {

bool IsTokenChar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~': return true;
    default: return false;
  }
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    unsigned char x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (x >= 'A' && x <= 'Z') x |= 0x20;
    if (y >= 'A' && y <= 'Z') y |= 0x20;
    if (x != y) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// True if the comma-separated list holds `token` (case-insensitive).
bool ListHas(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (EqualsNoCase(Trim(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

constexpr size_t kMaxChunkLine = 4096;
constexpr size_t kMaxMethod = 32;

// The request line's length errors, judged from what has arrived so far:
// `head` is the whole header section (its final CRLFCRLF removed) when
// `complete`, else a prefix of it. Checked in the same order either way, so
// the answer does not depend on how the bytes were split across reads: 0 if
// none (yet).
int RequestLineLengthError(std::string_view head, size_t max_target, bool complete) {
  const size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  // Incomplete: a final CR may be the first half of the line's CRLF. (In a
  // complete head every CR before the first CRLF belongs to the line.)
  if (!complete && eol == std::string_view::npos && !line.empty() && line.back() == '\r') line.remove_suffix(1);
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return line.size() > kMaxMethod ? 400 : 0;
  if (sp1 > kMaxMethod) return 400;
  const size_t sp2 = line.find(' ', sp1 + 1);
  const size_t target = (sp2 == std::string_view::npos ? line.size() : sp2) - sp1 - 1;
  return target > max_target ? 414 : 0;
}

}  // namespace

void HttpRequestParser::Reset() {
  stage_ = Stage::kHeaders;
  req_ = ParsedHttpRequest{};
  head_.clear();
  line_.clear();
  remaining_ = 0;
  trailer_bytes_ = 0;
  headers_reported_ = false;
}

HttpRequestParser::Result HttpRequestParser::Fail(int status, std::string message) {
  stage_ = Stage::kError;
  error_status_ = status;
  error_message_ = std::move(message);
  return Result::kError;
}

HttpRequestParser::Line HttpRequestParser::TakeLine(std::string_view data, size_t* pos, size_t max_line) {
  const size_t nl = data.find('\n', *pos);
  const size_t end = nl == std::string_view::npos ? data.size() : nl + 1;
  line_.append(data.substr(*pos, end - *pos));
  *pos = end;
  if (line_.size() > max_line + 2) return Line::kTooLong;
  if (nl == std::string_view::npos) return Line::kMore;
  if (line_.size() < 2 || line_[line_.size() - 2] != '\r') return Line::kNoCr;
  line_.resize(line_.size() - 2);
  return Line::kReady;
}

uint64_t HttpRequestParser::TakeBody(std::string_view data, size_t* pos) {
  const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size() - *pos));
  req_.body.append(data.substr(*pos, n));
  *pos += n;
  remaining_ -= n;
  return remaining_;
}

bool HttpRequestParser::ParseHead() {
  std::string_view head = head_;
  if (const int e = RequestLineLengthError(head, limits_.max_target_bytes, /*complete=*/true); e != 0) {
    Fail(e, e == 414 ? "request target is over the limit of " + std::to_string(limits_.max_target_bytes) + " bytes"
                     : std::string("malformed request method"));
    return false;
  }
  const size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  std::string_view fields = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 2);

  // Request line.
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    Fail(400, "malformed request line");
    return false;
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method) || method.size() > kMaxMethod) {
    Fail(400, "malformed request method");
    return false;
  }
  if (target.size() > limits_.max_target_bytes) {
    Fail(414, "request target is over the limit of " + std::to_string(limits_.max_target_bytes) + " bytes");
    return false;
  }
  if (target.empty()) {
    Fail(400, "empty request target");
    return false;
  }
  for (unsigned char c : target) {
    if (c <= 0x20 || c == 0x7f) {
      Fail(400, "request target holds a control character or space");
      return false;
    }
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    Fail(400, "malformed HTTP version");
    return false;
  }
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1')) {
    Fail(505, "HTTP version " + std::string(version.substr(5)) + " is not supported (HTTP/1.0 and 1.1 are)");
    return false;
  }
  req_.method.assign(method);
  req_.target.assign(target);
  req_.minor_version = version[7] - '0';

  // Header fields.
  bool has_length = false, chunked = false, conn_close = false, conn_keep_alive = false, has_authorization = false;
  uint64_t length = 0;
  while (!fields.empty()) {
    const size_t end = fields.find("\r\n");
    const std::string_view field = fields.substr(0, end);
    fields = end == std::string_view::npos ? std::string_view() : fields.substr(end + 2);
    if (field.empty()) continue;
    if (field.front() == ' ' || field.front() == '\t') {
      Fail(400, "obsolete header line folding is not accepted");
      return false;
    }
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || !IsToken(field.substr(0, colon))) {
      Fail(400, "malformed header field");
      return false;
    }
    const std::string_view name = field.substr(0, colon);
    const std::string_view value = Trim(field.substr(colon + 1));
    for (unsigned char c : value) {
      if ((c < 0x20 && c != '\t') || c == 0x7f) {
        Fail(400, "header field value holds a control character");
        return false;
      }
    }
    if (EqualsNoCase(name, "content-length")) {
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        Fail(400, "malformed Content-Length");
        return false;
      }
      uint64_t v = 0;
      for (char c : value) v = v * 10 + static_cast<uint64_t>(c - '0');
      if (has_length && v != length) {
        Fail(400, "conflicting Content-Length fields");
        return false;
      }
      has_length = true;
      length = v;
    } else if (EqualsNoCase(name, "transfer-encoding")) {
      // chunked twice is malformed (RFC 9112 6.1: applied once), not an
      // unsupported coding: the message said "chunked ... is not supported".
      if (chunked) {
        Fail(400, "Transfer-Encoding chunked is given twice");
        return false;
      }
      if (!EqualsNoCase(value, "chunked")) {
        Fail(501, "Transfer-Encoding \"" + std::string(value.substr(0, 64)) + "\" is not supported (only chunked)");
        return false;
      }
      chunked = true;
    } else if (EqualsNoCase(name, "connection")) {
      conn_close = conn_close || ListHas(value, "close");
      conn_keep_alive = conn_keep_alive || ListHas(value, "keep-alive");
    } else if (EqualsNoCase(name, "expect")) {
      req_.expect_continue = EqualsNoCase(value, "100-continue");
    } else if (EqualsNoCase(name, "authorization")) {
      // Two credentials are ambiguous: which one a proxy checked and which
      // one we would is exactly how such tricks work.
      if (has_authorization) {
        Fail(400, "repeated Authorization field");
        return false;
      }
      has_authorization = true;
      req_.authorization = std::string(value);
    }
  }
  if (has_length && chunked) {
    Fail(400, "both Content-Length and Transfer-Encoding were given");
    return false;
  }
  req_.keep_alive = req_.minor_version == 1 ? !conn_close : (conn_keep_alive && !conn_close);
  req_.has_body_framing = has_length || chunked;
  if (has_length && limits_.max_body_bytes != 0 && length > limits_.max_body_bytes) {
    Fail(413, "request body is over the limit of " + std::to_string(limits_.max_body_bytes) + " bytes");
    return false;
  }
  if (chunked) {
    stage_ = Stage::kChunkSize;
  } else if (has_length && length > 0) {
    stage_ = Stage::kLengthBody;
    remaining_ = length;
    req_.body.reserve(length);
  } else {
    stage_ = Stage::kDone;
  }
  return true;
}

HttpRequestParser::Result HttpRequestParser::Feed(std::string_view data, size_t* consumed) {
  size_t pos = 0;
  auto need_more = [&]() {
    *consumed = pos;
    if (stage_ != Stage::kHeaders && req_.expect_continue && !headers_reported_) {
      headers_reported_ = true;
      return Result::kHeaders;
    }
    return Result::kNeedMore;
  };
  while (true) {
    switch (stage_) {
      case Stage::kError:
        *consumed = pos;
        return Result::kError;
      case Stage::kDone:
        *consumed = pos;
        return Result::kDone;
      case Stage::kHeaders: {
        if (head_.empty()) {
          // Empty lines before a request line are ignored (RFC 9112 2.2):
          // some clients send a CRLF after a body.
          while (pos < data.size() && (data[pos] == '\r' || data[pos] == '\n')) ++pos;
          if (pos == data.size()) return need_more();
        }
        const size_t cap = limits_.max_header_bytes + 4;
        const size_t old = head_.size();
        const size_t take = std::min(data.size() - pos, cap - std::min(old, cap));
        head_.append(data.substr(pos, take));
        const size_t end = head_.find("\r\n\r\n", old >= 3 ? old - 3 : 0);
        if (end == std::string::npos) {
          pos += take;
          if (const int e = RequestLineLengthError(head_, limits_.max_target_bytes, /*complete=*/false); e != 0) {
            return Fail(e, e == 414 ? "request target is over the limit of " +
                                          std::to_string(limits_.max_target_bytes) + " bytes"
                                    : std::string("malformed request method"));
          }
          if (head_.size() >= cap) {
            return Fail(431, "request header section is over the limit of " +
                                 std::to_string(limits_.max_header_bytes) + " bytes");
          }
          return need_more();
        }
        pos += end + 4 - old;
        head_.resize(end);
        if (!ParseHead()) {
          *consumed = pos;
          return Result::kError;
        }
        break;
      }
      case Stage::kLengthBody: {
        if (TakeBody(data, &pos) != 0) return need_more();
        stage_ = Stage::kDone;
        break;
      }
      case Stage::kChunkSize: {
        switch (TakeLine(data, &pos, kMaxChunkLine)) {
          case Line::kMore: return need_more();
          case Line::kTooLong: return Fail(400, "chunk size line is too long");
          case Line::kNoCr: return Fail(400, "chunk size line does not end in CRLF");
          case Line::kReady: break;
        }
        std::string_view l = line_;
        l = l.substr(0, l.find(';'));  // extensions are ignored
        l = Trim(l);
        if (l.empty() || l.size() > 15) return Fail(400, "malformed chunk size");
        uint64_t size = 0;
        for (char c : l) {
          int d;
          if (c >= '0' && c <= '9') d = c - '0';
          else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') d = (c | 0x20) - 'a' + 10;
          else return Fail(400, "malformed chunk size");
          size = size * 16 + static_cast<uint64_t>(d);
        }
        line_.clear();
        if (size == 0) {
          stage_ = Stage::kTrailers;
          break;
        }
        if (limits_.max_body_bytes != 0 && req_.body.size() + size > limits_.max_body_bytes) {
          return Fail(413, "request body is over the limit of " + std::to_string(limits_.max_body_bytes) + " bytes");
        }
        remaining_ = size;
        stage_ = Stage::kChunkData;
        break;
      }
      case Stage::kChunkData: {
        if (TakeBody(data, &pos) != 0) return need_more();
        stage_ = Stage::kChunkDataEnd;
        break;
      }
      case Stage::kChunkDataEnd: {
        // Exactly CRLF after the chunk's data; checked byte by byte so a
        // wrong byte fails at once rather than waiting for a newline.
        while (pos < data.size() && line_.size() < 2) {
          line_.push_back(data[pos++]);
          if (line_[0] != '\r' || (line_.size() == 2 && line_[1] != '\n')) {
            return Fail(400, "chunk data is not followed by CRLF");
          }
        }
        if (line_.size() < 2) return need_more();
        line_.clear();
        stage_ = Stage::kChunkSize;
        break;
      }
      case Stage::kTrailers: {
        switch (TakeLine(data, &pos, limits_.max_header_bytes)) {
          case Line::kMore: return need_more();
          case Line::kTooLong: return Fail(431, "trailer section is too large");
          case Line::kNoCr: return Fail(400, "trailer line does not end in CRLF");
          case Line::kReady: break;
        }
        trailer_bytes_ += line_.size() + 2;
        const bool last = line_.empty();
        line_.clear();
        if (trailer_bytes_ > limits_.max_header_bytes) return Fail(431, "trailer section is too large");
        if (last) stage_ = Stage::kDone;
        break;
      }
    }
  }
}

}  // namespace neardup
