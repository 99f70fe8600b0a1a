// Index file format v1 (docs/index-format.md):
//   offset 0   8 bytes  magic "NDUPIDX\0"
//          8   u32      format version (1)
//         12   u32      flags (0)
//         16   u64      fingerprint scheme id
//         24   u64      number of entries N
//         32   N x { u64 fingerprint, u64 id }
//   32 + 16N   u64      XXH3-64 (seed 0) of every preceding byte
// All integers little-endian.
#include "neardup/index/index_io.h"

#include "util/coding.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <memory>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace neardup {
namespace {

constexpr char kMagic[8] = {'N', 'D', 'U', 'P', 'I', 'D', 'X', '\0'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 32;
constexpr size_t kChunkEntries = 1 << 16;

static_assert(std::endian::native == std::endian::little, "index files are little-endian; add byte swapping");


std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

struct FileCloser {
  void operator()(FILE* f) const { if (f) std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

Result<IndexFileInfo> ParseHeader(const char* h, const std::string& path) {
  if (std::memcmp(h, kMagic, 8) != 0) return Status::Corruption(path + ": not a neardup index file (bad magic)");
  IndexFileInfo info;
  info.format_version = DecodeFixed32(h + 8);
  if (info.format_version != kFormatVersion) {
    return Status::Corruption(path + ": unsupported index format version " + std::to_string(info.format_version));
  }
  info.scheme_id = DecodeFixed64(h + 16);
  info.num_entries = DecodeFixed64(h + 24);
  return info;
}

}  // namespace

Status SaveIndex(const HammingIndex& index, uint64_t scheme_id, const std::string& path) {
  const std::string tmp = path + ".tmp";
  File f(std::fopen(tmp.c_str(), "wb"));
  if (!f) return Status::IOError(Errno("cannot create", tmp));
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  bool ok = true;
  auto write = [&](const char* data, size_t n) {
    if (!ok) return;
    XXH3_64bits_update(state, data, n);
    ok = std::fwrite(data, 1, n, f.get()) == n;
  };
  char header[kHeaderSize] = {};
  std::memcpy(header, kMagic, 8);
  EncodeFixed32(header + 8, kFormatVersion);
  EncodeFixed32(header + 12, 0);
  EncodeFixed64(header + 16, scheme_id);
  EncodeFixed64(header + 24, index.size());
  write(header, kHeaderSize);
  std::vector<char> buf;
  buf.reserve(kChunkEntries * 16);
  uint64_t written = 0;
  index.ForEach([&](const Entry& e) {
    char rec[16];
    EncodeFixed64(rec, e.fingerprint);
    EncodeFixed64(rec + 8, e.id);
    buf.insert(buf.end(), rec, rec + 16);
    ++written;
    if (buf.size() >= kChunkEntries * 16) {
      write(buf.data(), buf.size());
      buf.clear();
    }
  });
  write(buf.data(), buf.size());
  char trailer[8];
  EncodeFixed64(trailer, XXH3_64bits_digest(state));
  XXH3_freeState(state);
  if (ok) ok = std::fwrite(trailer, 1, 8, f.get()) == 8;
  if (ok) ok = std::fflush(f.get()) == 0 && ::fsync(fileno(f.get())) == 0;
  if (!ok || written != index.size()) {
    std::remove(tmp.c_str());
    return Status::IOError(Errno("cannot write", tmp));
  }
  f.reset();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::IOError(Errno("cannot rename to", path));
  }
  return Status::OK();
}

Result<IndexFileInfo> ReadIndexFileInfo(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return Status::IOError(Errno("cannot open", path));
  char header[kHeaderSize];
  if (std::fread(header, 1, kHeaderSize, f.get()) != kHeaderSize) {
    return Status::Corruption(path + ": truncated header");
  }
  return ParseHeader(header, path);
}

Result<std::unique_ptr<HammingIndex>> LoadIndex(const std::string& path, uint64_t expected_scheme_id,
                                                const MultiIndexOptions& options) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return Status::IOError(Errno("cannot open", path));
  char header[kHeaderSize];
  if (std::fread(header, 1, kHeaderSize, f.get()) != kHeaderSize) {
    return Status::Corruption(path + ": truncated header");
  }
  Result<IndexFileInfo> info = ParseHeader(header, path);
  if (!info.ok()) return info.status();
  if (expected_scheme_id != 0 && info->scheme_id != expected_scheme_id) {
    char msg[160];
    std::snprintf(msg, sizeof msg, ": fingerprint scheme %016llx differs from the expected %016llx",
                  static_cast<unsigned long long>(info->scheme_id),
                  static_cast<unsigned long long>(expected_scheme_id));
    return Status::FailedPrecondition(path + msg);
  }
  // Check the size before allocating N entries: a corrupt count must not
  // turn into a huge allocation.
  if (std::fseek(f.get(), 0, SEEK_END) != 0) return Status::IOError(Errno("cannot seek", path));
  const long file_size = std::ftell(f.get());
  const uint64_t n = info->num_entries;
  if (file_size < 0 || n > (static_cast<uint64_t>(file_size) / 16) ||
      static_cast<uint64_t>(file_size) != kHeaderSize + 16 * n + 8) {
    return Status::Corruption(path + ": file size does not match its entry count (truncated or corrupt)");
  }
  std::fseek(f.get(), kHeaderSize, SEEK_SET);

  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, header, kHeaderSize);
  std::vector<Entry> entries;
  entries.reserve(n);
  std::vector<char> buf(kChunkEntries * 16);
  for (uint64_t done = 0; done < n;) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(kChunkEntries, n - done));
    if (std::fread(buf.data(), 1, chunk * 16, f.get()) != chunk * 16) {
      XXH3_freeState(state);
      return Status::Corruption(path + ": truncated body");
    }
    XXH3_64bits_update(state, buf.data(), chunk * 16);
    for (size_t i = 0; i < chunk; ++i) entries.push_back(Entry{DecodeFixed64(&buf[i * 16]), DecodeFixed64(&buf[i * 16 + 8])});
    done += chunk;
  }
  const uint64_t digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  char trailer[8];
  if (std::fread(trailer, 1, 8, f.get()) != 8) return Status::Corruption(path + ": missing checksum");
  if (DecodeFixed64(trailer) != digest) return Status::Corruption(path + ": checksum mismatch");

  MultiIndexOptions opts = options;
  if (opts.expected_size < n) opts.expected_size = n;
  Result<std::unique_ptr<HammingIndex>> index = NewMultiIndex(opts);
  if (!index.ok()) return index.status();
  Status s = (*index)->AddBatch(entries);
  if (!s.ok()) return Status::Corruption(path + ": " + s.message());
  return index;
}

}  // namespace neardup
