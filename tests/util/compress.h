// gzip and zstd encoders for tests (the product only decodes).
#ifndef NEARDUP_TESTS_UTIL_COMPRESS_H_
#define NEARDUP_TESTS_UTIL_COMPRESS_H_

#include <zlib.h>
#include <zstd.h>

#include <string>

namespace neardup::testing {

inline std::string Gzip(const std::string& data) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // 15 + 16: gzip wrapper
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline std::string Zstd(const std::string& data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3));
  return out;
}

}  // namespace neardup::testing

#endif  // NEARDUP_TESTS_UTIL_COMPRESS_H_
