#include "io/output_file.h"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace neardup {

namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() > n && s.compare(s.size() - n, n, suffix) == 0;
}

// One compressor between the cookie stream and the real file.
class Sink {
 public:
  virtual ~Sink() = default;
  // Compresses n bytes (flushing what is ready to the file); false on error.
  virtual bool Write(const char* data, size_t n) = 0;
  // Ends the compressed stream.
  virtual bool Finish() = 0;

  std::FILE* file = nullptr;

 protected:
  bool Put(const char* data, size_t n) { return n == 0 || std::fwrite(data, 1, n, file) == n; }
};

class GzipSink final : public Sink {
 public:
  GzipSink() { ok_ = deflateInit2(&z_, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK; }
  ~GzipSink() override { deflateEnd(&z_); }
  bool Write(const char* data, size_t n) override { return Run(data, n, Z_NO_FLUSH); }
  bool Finish() override { return Run(nullptr, 0, Z_FINISH); }

 private:
  bool Run(const char* data, size_t n, int flush) {
    if (!ok_) return false;
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    z_.avail_in = static_cast<uInt>(n);
    int rc = Z_OK;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(out_);
      z_.avail_out = sizeof out_;
      rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR || !Put(out_, sizeof out_ - z_.avail_out)) return ok_ = false;
    } while (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    return true;
  }
  z_stream z_{};
  char out_[1 << 16];
  bool ok_ = false;
};

class ZstdSink final : public Sink {
 public:
  ZstdSink() : z_(ZSTD_createCStream()) { ok_ = z_ != nullptr && !ZSTD_isError(ZSTD_initCStream(z_, 3)); }
  ~ZstdSink() override { ZSTD_freeCStream(z_); }
  bool Write(const char* data, size_t n) override { return Run(data, n, ZSTD_e_continue); }
  bool Finish() override { return Run(nullptr, 0, ZSTD_e_end); }

 private:
  bool Run(const char* data, size_t n, ZSTD_EndDirective mode) {
    if (!ok_) return false;
    ZSTD_inBuffer in{data, n, 0};
    size_t left = 0;
    do {
      ZSTD_outBuffer out{out_, sizeof out_, 0};
      left = ZSTD_compressStream2(z_, &out, &in, mode);
      if (ZSTD_isError(left) || !Put(out_, out.pos)) return ok_ = false;
    } while (in.pos < in.size || (mode == ZSTD_e_end && left != 0));
    return true;
  }
  ZSTD_CStream* z_;
  char out_[1 << 16];
  bool ok_ = false;
};

ssize_t CookieWrite(void* cookie, const char* data, size_t n) {
  if (!static_cast<Sink*>(cookie)->Write(data, n)) {
    errno = EIO;
    return -1;
  }
  return static_cast<ssize_t>(n);
}

int CookieClose(void* cookie) {
  std::unique_ptr<Sink> sink(static_cast<Sink*>(cookie));
  bool ok = sink->Finish();
  ok = std::fflush(sink->file) == 0 && std::ferror(sink->file) == 0 && ok;
  ok = std::fclose(sink->file) == 0 && ok;
  if (!ok && errno == 0) errno = EIO;
  return ok ? 0 : -1;
}

}  // namespace

OutputCompression OutputCompressionOf(const std::string& path) {
  if (EndsWith(path, ".gz")) return OutputCompression::kGzip;
  if (EndsWith(path, ".zst")) return OutputCompression::kZstd;
  return OutputCompression::kNone;
}

Result<std::FILE*> OpenOutputFile(const std::string& path, bool append) {
  std::FILE* raw = std::fopen(path.c_str(), append ? "ab" : "wb");
  if (raw == nullptr) return Status::IOError("cannot create " + path + ": " + std::strerror(errno));
  const OutputCompression c = OutputCompressionOf(path);
  if (c == OutputCompression::kNone) return raw;
  std::unique_ptr<Sink> sink;
  if (c == OutputCompression::kGzip) {
    sink = std::make_unique<GzipSink>();
  } else {
    sink = std::make_unique<ZstdSink>();
  }
  sink->file = raw;
  std::FILE* f = fopencookie(sink.get(), "w", cookie_io_functions_t{nullptr, CookieWrite, nullptr, CookieClose});
  if (f == nullptr) {
    std::fclose(raw);
    return Status::IOError("cannot create " + path + ": " + std::strerror(errno));
  }
  sink.release();
  return f;
}

}  // namespace neardup
