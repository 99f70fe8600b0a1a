#include "util/utf8.h"

#include <simdjson.h>

#include <cstdio>

namespace neardup {

bool IsValidUtf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

void DecodeUtf8(std::string_view s, std::vector<uint32_t>* out) {
  out->clear();
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      out->push_back(c);
      ++i;
      continue;
    }
    int len = 0;
    uint32_t cp = 0, min = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4, cp = c & 0x07, min = 0x10000;
    }
    bool ok = len > 0 && i + static_cast<size_t>(len) <= n;
    for (int k = 1; ok && k < len; ++k) {
      const unsigned cc = p[i + static_cast<size_t>(k)];
      if ((cc & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (ok && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    if (ok) {
      out->push_back(cp);
      i += static_cast<size_t>(len);
    } else {
      out->push_back(0xFFFD);
      ++i;
    }
  }
}

std::string EscapeInvalidUtf8(std::string_view s) {
  std::string shown;
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const size_t len = lead < 0x80 ? 1 : lead >> 5 == 6 ? 2 : lead >> 4 == 14 ? 3 : lead >> 3 == 30 ? 4 : 0;
    if (len > 0 && i + len <= s.size() && IsValidUtf8(s.substr(i, len))) {
      shown.append(s, i, len);
      i += len;
      continue;
    }
    char hex[5];
    std::snprintf(hex, sizeof(hex), "\\x%02X", lead);
    shown += hex;
    ++i;
  }
  return shown;
}

}  // namespace neardup
