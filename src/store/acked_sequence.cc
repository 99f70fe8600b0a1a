#include "store/acked_sequence.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/coding.h"

namespace neardup::store_internal {
namespace {

constexpr char kMagic[8] = {'N', 'D', 'A', 'C', 'K', '0', '0', '1'};
constexpr size_t kFileBytes = 16;  // magic, then the sequence number (little-endian)

std::string Encode(uint64_t sequence) {
  std::string b(kMagic, sizeof(kMagic));
  PutFixed64(&b, sequence);
  return b;
}

}  // namespace

AckedSequence::AckedSequence(const std::string& dir) : path_(dir + "/ACKED") {}

AckedSequence::~AckedSequence() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::optional<uint64_t>> AckedSequence::Read() const {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<uint64_t>();
    return Status::IOError("cannot read " + path_ + ": " + std::strerror(errno));
  }
  char b[kFileBytes];
  const ssize_t n = ::pread(fd, b, sizeof(b), 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(kFileBytes) || std::memcmp(b, kMagic, sizeof(kMagic)) != 0) {
    return Status::Corruption(path_ + " (the store's last acknowledged write) is damaged; remove it to open the "
                              "store without checking its write-ahead log for lost writes");
  }
  return std::optional<uint64_t>(DecodeFixed64(b + sizeof(kMagic)));
}

Status AckedSequence::Start(uint64_t sequence) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::IOError("cannot write " + path_ + ": " + std::strerror(errno));
  const std::string b = Encode(sequence);
  if (::pwrite(fd_, b.data(), b.size(), 0) != static_cast<ssize_t>(b.size()) || ::fdatasync(fd_) != 0) {
    return Status::IOError("cannot write " + path_ + ": " + std::strerror(errno));
  }
  recorded_.store(sequence);
  return Status::OK();
}

void AckedSequence::Record(uint64_t sequence) {
  if (fd_ < 0) return;
  uint64_t seen = recorded_.load(std::memory_order_relaxed);
  while (sequence > seen) {
    if (recorded_.compare_exchange_weak(seen, sequence, std::memory_order_relaxed)) {
      // Another writer may store a smaller value after this one: the file
      // then lags, which only weakens the check.
      const std::string b = Encode(sequence);
      (void)!::pwrite(fd_, b.data(), b.size(), 0);
      return;
    }
  }
}

Status AckedSequence::Remove() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  if (ec) return Status::IOError("cannot remove " + path_ + ": " + ec.message());
  return Status::OK();
}

}  // namespace neardup::store_internal
