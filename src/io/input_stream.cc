#include "io/input_stream.h"

#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace neardup {
namespace {

constexpr size_t kRawSize = size_t{1} << 16;

// A zstd frame (28 b5 2f fd) or a skippable frame (50..5f 2a 4d 18): pzstd
// and seekable zstd start with one. The decoder skips skippable frames itself.
bool IsZstdMagic(const unsigned char* b) {
  const bool frame = b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd;
  const bool skippable = (b[0] & 0xf0) == 0x50 && b[1] == 0x2a && b[2] == 0x4d && b[3] == 0x18;
  return frame || skippable;
}

}  // namespace

// One decompressor: consumes input bytes, produces output bytes.
struct InputStream::Decoder {
  virtual ~Decoder() = default;
  virtual Status Decode(const char* in, size_t in_size, size_t* consumed, char* out, size_t out_size,
                        size_t* produced) = 0;
  // Called at the end of the file: an error unless the data ended cleanly.
  virtual Status Finish() = 0;
  virtual Compression kind() const = 0;
};

namespace {

class GzipDecoder : public InputStream::Decoder {
 public:
  explicit GzipDecoder(std::string name) : name_(std::move(name)) {
    // 15 + 16: a gzip wrapper only (not raw deflate or zlib).
    ok_ = inflateInit2(&z_, 15 + 16) == Z_OK;
  }
  ~GzipDecoder() override { inflateEnd(&z_); }

  Status Decode(const char* in, size_t in_size, size_t* consumed, char* out, size_t out_size,
                size_t* produced) override {
    *consumed = *produced = 0;
    if (!ok_) return Status::Internal(name_ + ": cannot initialize zlib");
    if (member_ended_) {
      if (in_size == 0) return Status::OK();
      // Zero bytes after a member (a block device's or a tape's padding)
      // end the data, as gzip reads them; anything after them is not gzip.
      if (in[0] == 0 || padded_) {
        const size_t zeros = static_cast<size_t>(std::find_if(in, in + in_size, [](char c) { return c != 0; }) - in);
        if (zeros < in_size) {
          return Status::Corruption(name_ + ": corrupt gzip data (bytes after the zero padding that ends it)");
        }
        padded_ = true;
        *consumed = zeros;
        return Status::OK();
      }
      inflateReset(&z_);  // concatenated members (`cat a.gz b.gz`) are one stream
      member_ended_ = false;
    }
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in));
    z_.avail_in = static_cast<uInt>(std::min<size_t>(in_size, 1u << 30));
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(out_size, 1u << 30));
    const int ret = inflate(&z_, Z_NO_FLUSH);
    *consumed = static_cast<size_t>(reinterpret_cast<const char*>(z_.next_in) - in);
    *produced = static_cast<size_t>(reinterpret_cast<char*>(z_.next_out) - out);
    if (ret == Z_STREAM_END) member_ended_ = true;
    if (ret == Z_OK || ret == Z_STREAM_END || ret == Z_BUF_ERROR) return Status::OK();
    return Status::Corruption(name_ + ": corrupt gzip data (" + (z_.msg ? z_.msg : "zlib error") + ")");
  }
  Status Finish() override {
    if (member_ended_) return Status::OK();
    return Status::Corruption(name_ + ": truncated gzip stream (the file ends inside compressed data)");
  }
  Compression kind() const override { return Compression::kGzip; }

 private:
  std::string name_;
  z_stream z_{};
  bool ok_ = false;
  bool member_ended_ = false;
  bool padded_ = false;  // zero bytes came after the last member
};

class ZstdDecoder : public InputStream::Decoder {
 public:
  explicit ZstdDecoder(std::string name) : name_(std::move(name)), ctx_(ZSTD_createDCtx()) {}
  ~ZstdDecoder() override { ZSTD_freeDCtx(ctx_); }

  Status Decode(const char* in, size_t in_size, size_t* consumed, char* out, size_t out_size,
                size_t* produced) override {
    *consumed = *produced = 0;
    if (ctx_ == nullptr) return Status::Internal(name_ + ": cannot initialize libzstd");
    ZSTD_inBuffer input{in, in_size, 0};
    ZSTD_outBuffer output{out, out_size, 0};
    const size_t ret = ZSTD_decompressStream(ctx_, &output, &input);
    if (ZSTD_isError(ret)) {
      return Status::Corruption(name_ + ": corrupt zstd data (" + ZSTD_getErrorName(ret) + ")");
    }
    *consumed = input.pos;
    *produced = output.pos;
    if (input.pos > 0 || output.pos > 0) frame_open_ = ret != 0;  // 0: a frame is complete
    return Status::OK();
  }
  Status Finish() override {
    if (!frame_open_) return Status::OK();
    return Status::Corruption(name_ + ": truncated zstd stream (the file ends inside a frame)");
  }
  Compression kind() const override { return Compression::kZstd; }

 private:
  std::string name_;
  ZSTD_DCtx* ctx_;
  bool frame_open_ = false;
};

}  // namespace

std::string InputDisplayName(const std::string& path) { return path == "-" ? "standard input" : path; }

InputStream::InputStream(std::FILE* file, bool owned, std::string name)
    : file_(file), owned_(owned), name_(std::move(name)), raw_(new char[kRawSize]) {}

InputStream::~InputStream() {
  if (owned_) std::fclose(file_);
}

Result<std::unique_ptr<InputStream>> InputStream::Open(const std::string& path, std::string name) {
  if (path == "-") return FromFile(stdin, InputDisplayName(path));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  std::unique_ptr<InputStream> stream(new InputStream(f, /*owned=*/true, name.empty() ? path : std::move(name)));
  // fopen() accepts a directory; reading it fails later. Say so now, before
  // any output is created.
  struct stat st;
  if (::fstat(::fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(path + " is a directory (the input must be a file or '-')");
  }
  NEARDUP_RETURN_IF_ERROR(stream->Detect());
  return stream;
}

std::unique_ptr<InputStream> InputStream::FromFile(std::FILE* file, std::string name) {
  return std::unique_ptr<InputStream>(new InputStream(file, /*owned=*/false, std::move(name)));
}

Compression InputStream::compression() const {
  return decoder_ ? decoder_->kind() : Compression::kNone;
}

Status InputStream::Fill() {
  if (raw_pos_ == raw_end_) raw_pos_ = raw_end_ = 0;
  const size_t n = std::fread(raw_.get() + raw_end_, 1, kRawSize - raw_end_, file_);
  raw_end_ += n;
  raw_bytes_ += n;
  if (n == 0) {
    raw_eof_ = true;
    if (std::ferror(file_)) return Status::IOError("cannot read " + name_ + ": " + std::strerror(errno));
  }
  return Status::OK();
}

// Reads the first bytes (without consuming them) and picks the decoder.
Status InputStream::Detect() {
  detected_ = true;
  while (raw_end_ < 4 && !raw_eof_) NEARDUP_RETURN_IF_ERROR(Fill());
  const auto* b = reinterpret_cast<const unsigned char*>(raw_.get());
  if (raw_end_ >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
    decoder_ = std::make_unique<GzipDecoder>(name_);
  } else if (raw_end_ >= 4 && IsZstdMagic(b)) {
    decoder_ = std::make_unique<ZstdDecoder>(name_);
  }
  return Status::OK();
}

Status InputStream::Read(char* buf, size_t capacity, size_t* got) {
  *got = 0;
  if (!status_.ok()) return status_;
  if (!detected_) status_ = Detect();
  while (status_.ok() && capacity > 0) {
    if (decoder_ == nullptr && raw_pos_ == raw_end_) {  // plain: straight into buf
      *got = std::fread(buf, 1, capacity, file_);
      raw_bytes_ += *got;  // the progress line's bytes (it stood still on plain files)
      if (*got == 0 && std::ferror(file_)) {
        status_ = Status::IOError("cannot read " + name_ + ": " + std::strerror(errno));
      }
      break;
    }
    if (decoder_ == nullptr) {  // plain: the bytes Detect() looked at
      *got = std::min(capacity, raw_end_ - raw_pos_);
      std::memcpy(buf, raw_.get() + raw_pos_, *got);
      raw_pos_ += *got;
      break;
    }
    size_t consumed = 0;
    status_ = decoder_->Decode(raw_.get() + raw_pos_, raw_end_ - raw_pos_, &consumed, buf, capacity, got);
    raw_pos_ += consumed;
    if (!status_.ok() || *got > 0) break;
    if (consumed > 0) continue;
    if (raw_eof_) {
      status_ = decoder_->Finish();
      break;
    }
    status_ = Fill();
  }
  if (!status_.ok()) *got = 0;
  return status_;
}

}  // namespace neardup
