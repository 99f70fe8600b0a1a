// Kept-document file format v1 (docs/index-format.md):
//   offset 0  8 bytes magic "NDUPKEPT"
//          8  u32     format version (1)
//         12  u32     shingle size
//         16  u64     fingerprint scheme id
//         24  u64     flags: bit 63 set = bits 0..62 hold the --max-text-bytes the
//                     signatures were made with (0 in files before 2026-11-30)
//         32  records: u64 sequence, u64 content_hash, u64 fingerprint, u8 has_features,
//                      u32 id length, id bytes,
//                      u32 extra length, EncodeSignatureExtra bytes
//   end - 16  u64     number of records N
//   end - 8   u64     XXH3-64 (seed 0) of every preceding byte
// All integers little-endian.
#include "neardup/dedup/kept_file.h"

#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "util/append_file.h"
#include "util/coding.h"
#include "util/temp_file.h"

namespace neardup {
namespace {

constexpr char kMagic[8] = {'N', 'D', 'U', 'P', 'K', 'E', 'P', 'T'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderSize = 32;
constexpr size_t kTrailerSize = 16;
constexpr uint64_t kHasMaxTextBytes = uint64_t{1} << 63;
// A signature's extra bytes: 11 + 4 * kSketchSize; anything longer is damage.
constexpr size_t kMaxExtraBytes = 64 * 1024;

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

}  // namespace

struct KeptFileWriter::Hash {
  XXH3_state_t* state = XXH3_createState();
  Hash() { XXH3_64bits_reset(state); }
  ~Hash() { XXH3_freeState(state); }
};

Result<std::unique_ptr<KeptFileWriter>> KeptFileWriter::Create(const std::string& path,
                                                               const KeptFileScheme& scheme) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::IOError("cannot create " + tmp + ": " + std::strerror(errno));
  std::unique_ptr<KeptFileWriter> w(new KeptFileWriter(path, f));
  char header[kHeaderSize] = {};
  std::memcpy(header, kMagic, 8);
  EncodeFixed32(header + 8, kVersion);
  EncodeFixed32(header + 12, scheme.shingle_size);
  EncodeFixed64(header + 16, scheme.scheme_id);
  EncodeFixed64(header + 24, scheme.max_text_bytes ? kHasMaxTextBytes | *scheme.max_text_bytes : 0);
  NEARDUP_RETURN_IF_ERROR(w->Write(header, kHeaderSize));
  return w;
}

KeptFileWriter::KeptFileWriter(std::string path, std::FILE* file)
    : path_(std::move(path)), file_(file), hash_(std::make_unique<Hash>()) {}

KeptFileWriter::~KeptFileWriter() {
  if (!file_) return;
  std::fclose(file_);
  if (!keep_unfinished_) std::remove((path_ + ".tmp").c_str());
}

Status KeptFileWriter::Write(const char* data, size_t n) {
  if (failed_) return Status::IOError("an earlier write to " + path_ + ".tmp failed");
  XXH3_64bits_update(hash_->state, data, n);
  bytes_ += n;
  if (std::fwrite(data, 1, n, file_) != n) {
    failed_ = true;
    return FileWriteError("cannot write " + path_ + ".tmp", errno);
  }
  return Status::OK();
}

Status KeptFileWriter::Sync() {
  if (failed_) return Status::IOError("an earlier write to " + path_ + ".tmp failed");
  return SyncStream(file_, path_ + ".tmp");
}

uint64_t KeptFileWriter::digest() const { return XXH3_64bits_digest(hash_->state); }

Result<std::unique_ptr<KeptFileWriter>> KeptFileWriter::Resume(const std::string& path, uint64_t bytes,
                                                               uint64_t documents, uint64_t digest) {
  auto hash = std::make_unique<Hash>();
  NEARDUP_ASSIGN_OR_RETURN(std::FILE* f, ReopenForAppend(path + ".tmp", path, bytes, digest, hash->state));
  std::unique_ptr<KeptFileWriter> w(new KeptFileWriter(path, f));
  w->hash_ = std::move(hash);
  w->bytes_ = bytes, w->documents_ = documents;
  return w;
}

Status KeptFileWriter::Add(uint64_t sequence, std::string_view id, const DocSignature& sig) {
  if (id.size() > kMaxIdBytes) return Status::InvalidArgument("a kept document's id is longer than 1 MiB");
  const std::string extra = EncodeSignatureExtra(sig);
  std::string rec;
  rec.reserve(37 + id.size() + extra.size());
  PutFixed64(&rec, sequence);
  PutFixed64(&rec, sig.content_hash);
  PutFixed64(&rec, sig.fingerprint);
  rec.push_back(sig.has_features ? 1 : 0);
  PutFixed32(&rec, static_cast<uint32_t>(id.size()));
  rec.append(id);
  PutFixed32(&rec, static_cast<uint32_t>(extra.size()));
  rec.append(extra);
  NEARDUP_RETURN_IF_ERROR(Write(rec.data(), rec.size()));
  ++documents_;
  return Status::OK();
}

Status KeptFileWriter::Finish() {
  char n[8];
  EncodeFixed64(n, documents_);
  NEARDUP_RETURN_IF_ERROR(Write(n, 8));
  char digest[8];
  EncodeFixed64(digest, XXH3_64bits_digest(hash_->state));
  const std::string tmp = path_ + ".tmp";
  bool ok = std::fwrite(digest, 1, 8, file_) == 8 && std::fflush(file_) == 0;
  if (ok && ::fsync(fileno(file_)) != 0) ok = false;
  const int err = errno;
  std::FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0) ok = false;
  if (!ok) {
    std::remove(tmp.c_str());
    return FileWriteError("cannot write " + tmp, err);
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::IOError("cannot rename " + tmp + " to " + path_ + ": " + why);
  }
  return Status::OK();
}

namespace {

// Reads a file front to back, hashing every byte it hands out and refusing
// to read into the trailer.
class CheckedReader {
 public:
  CheckedReader(std::FILE* f, std::string path, uint64_t body_end)
      : f_(f), path_(std::move(path)), body_end_(body_end) {
    XXH3_64bits_reset(state_);
  }
  ~CheckedReader() { XXH3_freeState(state_); }

  Status Read(char* out, size_t n) {
    if (n > body_end_ - pos_) return Status::Corruption(path_ + ": truncated or damaged (a record runs past the end)");
    if (std::fread(out, 1, n, f_) != n) return Status::IOError(path_ + ": read failed");
    XXH3_64bits_update(state_, out, n);
    pos_ += n;
    return Status::OK();
  }
  Status ReadString(size_t max, std::string* out) {
    char len[4];
    NEARDUP_RETURN_IF_ERROR(Read(len, 4));
    const uint32_t n = DecodeFixed32(len);
    if (n > max) return Status::Corruption(path_ + ": a record field of " + std::to_string(n) + " bytes");
    out->resize(n);
    return Read(out->data(), n);
  }
  uint64_t position() const { return pos_; }
  uint64_t Digest() const { return XXH3_64bits_digest(state_); }
  // Reads the rest of the body and the digest after it: true if they match.
  Result<bool> DigestMatches() {
    std::vector<char> chunk(1 << 16);
    while (pos_ < body_end_) NEARDUP_RETURN_IF_ERROR(Read(chunk.data(), std::min<uint64_t>(chunk.size(), body_end_ - pos_)));
    char digest[8];
    if (std::fread(digest, 1, 8, f_) != 8) return Status::IOError(path_ + ": read failed");
    return DecodeFixed64(digest) == Digest();
  }

 private:
  std::FILE* f_;
  std::string path_;
  uint64_t body_end_;
  uint64_t pos_ = 0;
  XXH3_state_t* state_ = XXH3_createState();
};

Status CheckHeader(const char* h, const std::string& path, const KeptFileScheme& expected) {
  if (std::memcmp(h, kMagic, 8) != 0) return Status::Corruption(path + ": not a neardup kept-document file");
  if (DecodeFixed32(h + 8) != kVersion) {
    return Status::Corruption(path + ": unsupported kept-document file version " + std::to_string(DecodeFixed32(h + 8)));
  }
  const KeptFileScheme found{DecodeFixed64(h + 16), DecodeFixed32(h + 12)};
  if (found.scheme_id != expected.scheme_id) {
    // In hex, as the manifest and --stats-json print scheme ids.
    char ids[64];
    std::snprintf(ids, sizeof ids, "scheme %016llx, this run %016llx", static_cast<unsigned long long>(found.scheme_id),
                  static_cast<unsigned long long>(expected.scheme_id));
    return Status::FailedPrecondition(path + ": saved with other fingerprint settings (" + ids + ")");
  }
  if (found.shingle_size != expected.shingle_size) {
    return Status::FailedPrecondition(path + ": saved with --shingle-size " + std::to_string(found.shingle_size) +
                                      ", this run uses " + std::to_string(expected.shingle_size));
  }
  // A long text's signature covers its first --max-text-bytes: with another
  // cut, an exact repeat of a saved text gets another signature and is missed.
  const uint64_t flags = DecodeFixed64(h + 24);
  if ((flags & kHasMaxTextBytes) && expected.max_text_bytes && (flags & ~kHasMaxTextBytes) != *expected.max_text_bytes) {
    return Status::FailedPrecondition(path + ": saved with --max-text-bytes " +
                                      std::to_string(flags & ~kHasMaxTextBytes) + ", this run uses " +
                                      std::to_string(*expected.max_text_bytes));
  }
  return Status::OK();
}

}  // namespace

Result<uint64_t> ReadKeptFile(const std::string& path, const KeptFileScheme& expected,
                              const std::function<Status(uint64_t, std::string_view, const DocSignature&)>& each) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fileno(f.get()), &st) != 0) return Status::IOError("cannot stat " + path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderSize + kTrailerSize) return Status::Corruption(path + ": truncated (" + std::to_string(size) + " bytes)");
  // Records end where the trailer's count starts; the reader may read the
  // count but never the digest.
  CheckedReader in(f.get(), path, size - 8);
  char header[kHeaderSize];
  NEARDUP_RETURN_IF_ERROR(in.Read(header, kHeaderSize));
  if (Status st = CheckHeader(header, path, expected); !st.ok()) {
    // A flipped byte in the header must not pass for other settings.
    if (st.code() != Status::Code::kFailedPrecondition) return st;
    NEARDUP_ASSIGN_OR_RETURN(const bool intact, in.DigestMatches());
    return intact ? st : Status::Corruption(path + ": checksum mismatch (damaged file)");
  }
  uint64_t n = 0;
  std::string id, extra;
  while (in.position() < size - kTrailerSize) {
    char fixed[25];
    NEARDUP_RETURN_IF_ERROR(in.Read(fixed, 25));
    const uint64_t sequence = DecodeFixed64(fixed);
    DocSignature sig;
    sig.content_hash = DecodeFixed64(fixed + 8);
    sig.fingerprint = DecodeFixed64(fixed + 16);
    sig.has_features = fixed[24] != 0;
    NEARDUP_RETURN_IF_ERROR(in.ReadString(KeptFileWriter::kMaxIdBytes, &id));
    NEARDUP_RETURN_IF_ERROR(in.ReadString(kMaxExtraBytes, &extra));
    if (Status s = DecodeSignatureExtra(extra, &sig); !s.ok()) {
      return Status::Corruption(path + ": record " + std::to_string(n) + ": " + s.message());
    }
    NEARDUP_RETURN_IF_ERROR(each(sequence, id, sig));
    ++n;
  }
  char count[8];
  NEARDUP_RETURN_IF_ERROR(in.Read(count, 8));  // hashed: the count is covered by the checksum
  char digest[8];
  if (std::fread(digest, 1, 8, f.get()) != 8) return Status::IOError(path + ": read failed");
  if (DecodeFixed64(digest) != in.Digest()) return Status::Corruption(path + ": checksum mismatch (damaged file)");
  if (DecodeFixed64(count) != n) return Status::Corruption(path + ": record count mismatch (damaged file)");
  return n;
}

}  // namespace neardup
