// The one UTF-8 validator and decoder. Well-formed means RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF.
#ifndef NEARDUP_UTIL_UTF8_H_
#define NEARDUP_UTIL_UTF8_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace neardup {

// Whether s is well-formed UTF-8 (SIMD; an empty string is valid).
bool IsValidUtf8(std::string_view s);

// Replaces *out with the code points of s; every ill-formed byte becomes one
// U+FFFD.
void DecodeUtf8(std::string_view s, std::vector<uint32_t>* out);

// s with each byte that is not part of a well-formed character written as
// \xHH (upper-case hex): valid UTF-8 that still shows the bytes, for a
// message about a name that is not text.
std::string EscapeInvalidUtf8(std::string_view s);

}  // namespace neardup

#endif  // NEARDUP_UTIL_UTF8_H_
