// IdfTable: build, query, and the versioned binary file (docs/fingerprint.md,
// "IDF table file").
#include "neardup/text/idf.h"

#include "util/coding.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include <xxhash.h>

namespace neardup {
namespace {

constexpr char kMagic[8] = {'N', 'D', 'U', 'P', 'I', 'D', 'F', '\0'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 32;  // magic, version, flags, N, count
constexpr size_t kEntrySize = 16;   // hash, df
constexpr size_t kChecksumSize = 8;


// The exact idf arithmetic of docs/fingerprint.md (IEEE-754 double).
double IdfFormula(uint64_t n, uint64_t df) {
  return std::log(static_cast<double>(n + 1) / static_cast<double>(df + 1)) + 1.0;
}

}  // namespace

// ---- Builder ----------------------------------------------------------------

void IdfTable::Builder::AddDocument(const std::vector<Feature>& features) {
  ++num_documents_;
  scratch_.clear();
  scratch_.reserve(features.size());
  for (const Feature& f : features) scratch_.push_back(f.hash);
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  for (uint64_t h : scratch_) ++df_[h];
}

std::shared_ptr<const IdfTable> IdfTable::Builder::Build(uint32_t min_df) const {
  std::vector<std::pair<uint64_t, uint64_t>> entries;
  entries.reserve(df_.size());
  for (const auto& [h, df] : df_) {
    if (df >= min_df) entries.emplace_back(h, df);
  }
  std::sort(entries.begin(), entries.end());
  return std::shared_ptr<const IdfTable>(new IdfTable(num_documents_, std::move(entries)));
}

// ---- IdfTable -----------------------------------------------------------------

IdfTable::IdfTable(uint64_t num_documents, std::vector<std::pair<uint64_t, uint64_t>> entries)
    : num_documents_(num_documents), entries_(std::move(entries)) {
  idf_.reserve(entries_.size());
  for (const auto& e : entries_) idf_.push_back(IdfFormula(num_documents_, e.second));
  default_idf_ = IdfFormula(num_documents_, 0);
  const std::string bytes = Serialize();
  content_hash_ = XXH3_64bits(bytes.data(), bytes.size());
}

double IdfTable::Idf(uint64_t token_hash) const {
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), token_hash,
      [](const std::pair<uint64_t, uint64_t>& e, uint64_t h) { return e.first < h; });
  if (it != entries_.end() && it->first == token_hash) return idf_[it - entries_.begin()];
  return default_idf_;
}

std::string IdfTable::Serialize() const {
  std::string s;
  s.reserve(kHeaderSize + entries_.size() * kEntrySize + kChecksumSize);
  s.append(kMagic, sizeof(kMagic));
  PutFixed32(&s, kFormatVersion);
  PutFixed32(&s, 0);  // flags
  PutFixed64(&s, num_documents_);
  PutFixed64(&s, entries_.size());
  for (const auto& [h, df] : entries_) {
    PutFixed64(&s, h);
    PutFixed64(&s, df);
  }
  return s;
}

Status IdfTable::Save(const std::string& path) const {
  std::string bytes = Serialize();
  PutFixed64(&bytes, content_hash_);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return Status::IOError("cannot create " + tmp + ": " + std::strerror(errno));
  }
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = (std::fflush(f) == 0) && ok;
  ok = ok && ::fsync(::fileno(f)) == 0;
  const int saved_errno = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return Status::IOError("cannot write " + tmp + ": " + std::strerror(saved_errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return Status::IOError("cannot rename " + tmp + " to " + path + ": " + std::strerror(e));
  }
  return Status::OK();
}

Result<std::shared_ptr<const IdfTable>> IdfTable::Load(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  }
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
  const bool read_error = std::ferror(f) != 0;
  const int saved_errno = errno;
  std::fclose(f);
  if (read_error) {
    return Status::IOError("cannot read " + path + ": " + std::strerror(saved_errno));
  }

  const std::string where = "idf table " + path + ": ";
  if (bytes.size() < kHeaderSize + kChecksumSize) {
    return Status::Corruption(where + "file too short (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Status::Corruption(where + "bad magic (not an idf table)");
  }
  const char* p = bytes.data();
  const uint64_t count = DecodeFixed64(p + 24);
  const size_t max_count = (bytes.size() - kHeaderSize - kChecksumSize) / kEntrySize;
  if (count > max_count || kHeaderSize + count * kEntrySize + kChecksumSize != bytes.size()) {
    return Status::Corruption(where + "size does not match entry count (truncated?)");
  }
  const size_t body = bytes.size() - kChecksumSize;
  const uint64_t stored = DecodeFixed64(p + body);
  const uint64_t actual = XXH3_64bits(p, body);
  if (stored != actual) return Status::Corruption(where + "checksum mismatch");
  const uint32_t version = DecodeFixed32(p + 8);
  if (version != kFormatVersion) {
    return Status::Corruption(where + "unsupported format version " + std::to_string(version));
  }
  if (DecodeFixed32(p + 12) != 0) return Status::Corruption(where + "unknown flags");
  const uint64_t num_documents = DecodeFixed64(p + 16);

  std::vector<std::pair<uint64_t, uint64_t>> entries;
  entries.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const char* e = p + kHeaderSize + i * kEntrySize;
    const uint64_t h = DecodeFixed64(e);
    const uint64_t df = DecodeFixed64(e + 8);
    if (!entries.empty() && h <= entries.back().first) {
      return Status::Corruption(where + "hashes not strictly ascending");
    }
    if (df == 0 || df > num_documents) {
      return Status::Corruption(where + "document frequency out of range");
    }
    entries.emplace_back(h, df);
  }
  std::shared_ptr<const IdfTable> table(new IdfTable(num_documents, std::move(entries)));
  if (table->content_hash() != stored) {  // cannot happen: same bytes
    return Status::Corruption(where + "content hash mismatch");
  }
  return table;
}

}  // namespace neardup
