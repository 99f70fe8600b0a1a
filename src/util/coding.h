// The one little-endian codec. Every persisted format of neardup (the store's
// records, the sketch bytes, the IDF and index files, the Redis bucket
// records) writes its fixed-width integers through these functions, so the
// byte order is decided in one place and holds on any host.
#ifndef NEARDUP_UTIL_CODING_H_
#define NEARDUP_UTIL_CODING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace neardup {

// Writes the low `bytes` (1..8) bytes of v at p, least significant first.
inline void EncodeFixed(char* p, uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) p[b] = static_cast<char>(v >> (8 * b));
}
// Reads `bytes` (1..8) bytes at p, least significant first.
inline uint64_t DecodeFixed(const char* p, int bytes) {
  uint64_t v = 0;
  for (int b = 0; b < bytes; ++b) v |= uint64_t{static_cast<unsigned char>(p[b])} << (8 * b);
  return v;
}

inline void EncodeFixed32(char* p, uint32_t v) { EncodeFixed(p, v, 4); }
inline void EncodeFixed64(char* p, uint64_t v) { EncodeFixed(p, v, 8); }
inline uint32_t DecodeFixed32(const char* p) { return static_cast<uint32_t>(DecodeFixed(p, 4)); }
inline uint64_t DecodeFixed64(const char* p) { return DecodeFixed(p, 8); }

inline void PutFixed32(std::string* out, uint32_t v) {
  char b[4];
  EncodeFixed32(b, v);
  out->append(b, 4);
}
inline void PutFixed64(std::string* out, uint64_t v) {
  char b[8];
  EncodeFixed64(b, v);
  out->append(b, 8);
}

// LEB128: 7 bits a byte, low group first.
inline void PutVarint64(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads a varint from data[*pos..] and advances *pos; false if it is
// truncated or does not fit 64 bits.
inline bool GetVarint64(std::string_view data, size_t* pos, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift <= 63; shift += 7) {
    if (*pos >= data.size()) return false;
    const auto byte = static_cast<unsigned char>(data[(*pos)++]);
    if (shift == 63 && byte > 1) return false;
    result |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

}  // namespace neardup

#endif  // NEARDUP_UTIL_CODING_H_
