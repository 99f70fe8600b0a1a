#include "neardup/dedup/staged_files.h"

#include <unistd.h>
#include <xxhash.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "util/append_file.h"
#include "util/coding.h"
#include "util/special_file.h"
#include "util/temp_file.h"

namespace neardup {
namespace {

constexpr char kMagic[8] = {'N', 'D', 'S', 'T', 'A', 'G', 'E', '\0'};
constexpr size_t kMaxHeaderBytes = size_t{1} << 24;
constexpr size_t kMaxRecordBytes = size_t{1} << 30;

static_assert(std::endian::native == std::endian::little, "stage files are little-endian; add byte swapping");

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// Appends varint(s.size()) then s.
void PutBytes(std::string* out, std::string_view s) {
  PutVarint64(out, s.size());
  out->append(s);
}

bool GetBytes(std::string_view data, size_t* pos, std::string* s) {
  uint64_t n = 0;
  if (!GetVarint64(data, pos, &n) || n > data.size() - *pos) return false;
  s->assign(data.substr(*pos, n));
  *pos += n;
  return true;
}

bool GetFixed64(std::string_view data, size_t* pos, uint64_t* v) {
  if (data.size() - *pos < 8) return false;
  *v = DecodeFixed64(data.data() + *pos);
  *pos += 8;
  return true;
}

bool GetByte(std::string_view data, size_t* pos, uint8_t* v) {
  if (*pos >= data.size()) return false;
  *v = static_cast<uint8_t>(data[(*pos)++]);
  return true;
}

}  // namespace

namespace staged_internal {
struct Xxh3 {
  XXH3_state_t* state = XXH3_createState();
  Xxh3() { XXH3_64bits_reset(state); }
  ~Xxh3() { XXH3_freeState(state); }
  Xxh3(const Xxh3&) = delete;
  Xxh3& operator=(const Xxh3&) = delete;
};
}  // namespace staged_internal

// ---- writer ----------------------------------------------------------------

StageFileWriter::StageFileWriter(std::string path, std::FILE* file)
    : path_(std::move(path)), file_(file), hash_(std::make_unique<staged_internal::Xxh3>()) {}

StageFileWriter::~StageFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_ && !keep_unfinished_ && !direct_) std::remove((path_ + ".tmp").c_str());
}

Result<std::unique_ptr<StageFileWriter>> StageFileWriter::Create(const std::string& path, StageFileKind kind,
                                                                 std::string_view header) {
  if (header.size() > kMaxHeaderBytes) return Status::InvalidArgument("stage file header too large");
  const bool direct = IsSpecialFile(path);
  const std::string tmp = direct ? path : path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Status::IOError(Errno("cannot create", tmp));
  std::setvbuf(f, nullptr, _IOFBF, size_t{1} << 20);
  std::unique_ptr<StageFileWriter> w(new StageFileWriter(path, f));
  w->direct_ = direct;
  char h[20];
  std::memcpy(h, kMagic, 8);
  EncodeFixed32(h + 8, kStageFileVersion);
  EncodeFixed32(h + 12, static_cast<uint32_t>(kind));
  EncodeFixed32(h + 16, static_cast<uint32_t>(header.size()));
  w->Write(h, sizeof h);
  w->Write(header.data(), header.size());
  if (w->failed_) return FileWriteError("cannot write " + tmp, errno);
  return w;
}

Status StageFileWriter::Sync() {
  if (failed_) return FileWriteError("cannot write " + WritingPath(), errno);
  if (direct_) return std::fflush(file_) == 0 ? Status::OK() : FileWriteError("cannot write " + path_, errno);
  return SyncStream(file_, path_ + ".tmp");
}

uint64_t StageFileWriter::digest() const { return XXH3_64bits_digest(hash_->state); }

Result<std::unique_ptr<StageFileWriter>> StageFileWriter::Resume(const std::string& path, uint64_t bytes,
                                                                 uint64_t records, uint64_t digest) {
  auto hash = std::make_unique<staged_internal::Xxh3>();
  NEARDUP_ASSIGN_OR_RETURN(std::FILE* f, ReopenForAppend(path + ".tmp", path, bytes, digest, hash->state));
  std::setvbuf(f, nullptr, _IOFBF, size_t{1} << 20);
  std::unique_ptr<StageFileWriter> w(new StageFileWriter(path, f));
  w->hash_ = std::move(hash);
  w->bytes_ = bytes, w->records_ = records;
  return w;
}

void StageFileWriter::Write(const void* data, size_t n) {
  if (failed_ || n == 0) return;
  XXH3_64bits_update(hash_->state, data, n);
  failed_ = std::fwrite(data, 1, n, file_) != n;
  bytes_ += n;
}

Status StageFileWriter::Add(std::string_view record) {
  if (record.size() > kMaxRecordBytes) return Status::InvalidArgument("stage file record too large");
  std::string len;
  PutVarint64(&len, record.size() + 1);
  Write(len.data(), len.size());
  Write(record.data(), record.size());
  ++records_;
  if (failed_) return FileWriteError("cannot write " + WritingPath(), errno);
  return Status::OK();
}

Status StageFileWriter::Finish() {
  const std::string tmp = WritingPath();
  char end[9];
  end[0] = 0;
  EncodeFixed64(end + 1, records_);
  Write(end, sizeof end);
  char digest[8];
  EncodeFixed64(digest, XXH3_64bits_digest(hash_->state));
  if (!failed_) failed_ = std::fwrite(digest, 1, 8, file_) != 8;
  if (!failed_) failed_ = std::fflush(file_) != 0 || (!direct_ && ::fsync(fileno(file_)) != 0);
  const int err = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (failed_ || !closed) return FileWriteError("cannot write " + tmp, failed_ ? err : errno);
  if (!direct_ && std::rename(tmp.c_str(), path_.c_str()) != 0) {
    return Status::IOError(Errno("cannot rename to", path_));
  }
  finished_ = true;
  return Status::OK();
}

// ---- reader ----------------------------------------------------------------

StageFileReader::StageFileReader(std::string path, std::FILE* file)
    : path_(std::move(path)), file_(file), hash_(std::make_unique<staged_internal::Xxh3>()) {}

StageFileReader::~StageFileReader() {
  if (file_ != nullptr) std::fclose(file_);
}

bool StageFileReader::Read(void* data, size_t n) {
  if (n == 0) return true;
  if (std::fread(data, 1, n, file_) != n) {
    return Fail(std::ferror(file_) ? std::string("read error: ") + std::strerror(errno) : "truncated");
  }
  XXH3_64bits_update(hash_->state, data, n);
  return true;
}

bool StageFileReader::Fail(const std::string& what) {
  if (status_.ok()) status_ = Status::Corruption(path_ + ": " + what);
  done_ = true;
  return false;
}

Result<std::unique_ptr<StageFileReader>> StageFileReader::Open(const std::string& path, StageFileKind kind) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::IOError(Errno("cannot open", path));
  std::setvbuf(f, nullptr, _IOFBF, size_t{1} << 20);
  std::unique_ptr<StageFileReader> r(new StageFileReader(path, f));
  char h[20];
  if (!r->Read(h, sizeof h)) return r->status();
  if (std::memcmp(h, kMagic, 8) != 0) return Status::Corruption(path + ": not a neardup stage file (bad magic)");
  const uint32_t version = DecodeFixed32(h + 8);
  if (version != kStageFileVersion) {
    return Status::Corruption(path + ": unsupported stage file version " + std::to_string(version));
  }
  const uint32_t got = DecodeFixed32(h + 12);
  if (got != static_cast<uint32_t>(kind)) {
    return Status::Corruption(path + ": a stage file of kind " + std::to_string(got) + ", expected " +
                              std::to_string(static_cast<uint32_t>(kind)) +
                              (kind == StageFileKind::kSignatures ? " (signatures)" : " (decisions)"));
  }
  const uint32_t header_size = DecodeFixed32(h + 16);
  if (header_size > kMaxHeaderBytes) return Status::Corruption(path + ": header too large");
  r->header_.resize(header_size);
  if (!r->Read(r->header_.data(), header_size)) return r->status();
  return r;
}

bool StageFileReader::Next(std::string_view* record) {
  if (done_) return false;
  uint64_t len = 0;
  for (int shift = 0;; shift += 7) {
    unsigned char byte;
    if (shift > 63) return Fail("malformed record length");
    if (!Read(&byte, 1)) return false;
    len |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) break;
  }
  if (len == 0) {  // the end: count and checksum
    char count[8], digest[8];
    if (!Read(count, 8)) return false;
    const uint64_t expected = XXH3_64bits_digest(hash_->state);
    if (std::fread(digest, 1, 8, file_) != 8) return Fail("truncated (no checksum)");
    if (DecodeFixed64(count) != records_) return Fail("record count does not match");
    if (DecodeFixed64(digest) != expected) return Fail("checksum mismatch");
    if (std::fgetc(file_) != EOF) return Fail("bytes after the checksum");
    done_ = true;
    return false;
  }
  if (len - 1 > kMaxRecordBytes) return Fail("record too large");
  record_.resize(len - 1);
  if (!Read(record_.data(), record_.size())) return false;
  ++records_;
  *record = record_;
  return true;
}

Status StageFileReader::SkipToEnd() {
  std::string_view record;
  while (Next(&record)) {
  }
  return status_;
}

// ---- record codecs ---------------------------------------------------------

void EncodeStagedDoc(const StagedDoc& doc, std::string* out) {
  out->push_back(static_cast<char>(StageRecordType::kDocument));
  PutVarint64(out, doc.line_number);
  PutBytes(out, doc.id);
  PutFixed64(out, doc.sig.content_hash);
  PutFixed64(out, doc.sig.fingerprint);
  out->push_back(doc.sig.has_features ? 1 : 0);
  PutBytes(out, EncodeSignatureExtra(doc.sig));
}

Status DecodeStagedDoc(std::string_view data, StagedDoc* doc) {
  size_t pos = 1;
  uint8_t features = 0;
  std::string extra;
  StagedDoc d;
  if (data.empty() || data[0] != static_cast<char>(StageRecordType::kDocument) ||
      !GetVarint64(data, &pos, &d.line_number) || !GetBytes(data, &pos, &d.id) ||
      !GetFixed64(data, &pos, &d.sig.content_hash) || !GetFixed64(data, &pos, &d.sig.fingerprint) ||
      !GetByte(data, &pos, &features) || features > 1 || !GetBytes(data, &pos, &extra) || pos != data.size()) {
    return Status::Corruption("malformed document record");
  }
  d.sig.has_features = features == 1;
  NEARDUP_RETURN_IF_ERROR(DecodeSignatureExtra(extra, &d.sig));
  *doc = std::move(d);
  return Status::OK();
}

namespace {
enum DecisionFlags : uint8_t { kDuplicate = 1, kExact = 2, kSimilarityExact = 4, kHasFeatures = 8 };
}

void EncodeStagedDecision(const StagedDecision& s, std::string* out) {
  const DedupDecision& d = s.decision;
  out->push_back(static_cast<char>(StageRecordType::kDecision));
  PutVarint64(out, s.line_number);
  const uint8_t flags = (d.duplicate ? kDuplicate : 0) | (d.exact ? kExact : 0) |
                        (d.similarity_exact ? kSimilarityExact : 0) | (d.has_features ? kHasFeatures : 0);
  out->push_back(static_cast<char>(flags));
  if (!d.duplicate) return;
  PutVarint64(out, d.duplicate_of);
  PutVarint64(out, static_cast<uint64_t>(d.distance));
  PutFixed64(out, std::bit_cast<uint64_t>(d.similarity));
  PutBytes(out, s.id);
  PutBytes(out, s.duplicate_of_id);
}

Status DecodeStagedDecision(std::string_view data, StagedDecision* out) {
  size_t pos = 1;
  uint8_t flags = 0;
  StagedDecision s;
  DedupDecision& d = s.decision;
  auto bad = [] { return Status::Corruption("malformed decision record"); };
  if (data.empty() || data[0] != static_cast<char>(StageRecordType::kDecision) ||
      !GetVarint64(data, &pos, &s.line_number) || !GetByte(data, &pos, &flags) || flags > 15) {
    return bad();
  }
  d.duplicate = flags & kDuplicate;
  d.exact = flags & kExact;
  d.similarity_exact = flags & kSimilarityExact;
  d.has_features = flags & kHasFeatures;
  if (d.duplicate) {
    uint64_t distance = 0, similarity = 0;
    if (!GetVarint64(data, &pos, &d.duplicate_of) || !GetVarint64(data, &pos, &distance) || distance > 64 ||
        !GetFixed64(data, &pos, &similarity) || !GetBytes(data, &pos, &s.id) ||
        !GetBytes(data, &pos, &s.duplicate_of_id)) {
      return bad();
    }
    d.distance = static_cast<int>(distance);
    d.similarity = std::bit_cast<double>(similarity);
  }
  if (pos != data.size()) return bad();
  *out = std::move(s);
  return Status::OK();
}

// ---- line digest -----------------------------------------------------------

LineDigest::LineDigest() : state_(std::make_unique<staged_internal::Xxh3>()) {}
LineDigest::~LineDigest() = default;

void LineDigest::Add(std::string_view line) {
  XXH3_64bits_update(state_->state, line.data(), line.size());
  XXH3_64bits_update(state_->state, "\n", 1);
  ++lines_;
}

uint64_t LineDigest::digest() const { return XXH3_64bits_digest(state_->state); }

}  // namespace neardup
