#include "engine/number_order.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <queue>
#include <string_view>
#include <utility>

#include "util/coding.h"
#include "util/temp_file.h"

namespace neardup {

namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

bool ByNumber(const StoredDocument& a, const StoredDocument& b) { return a.number < b.number; }

// [len u32][number u64][timestamp u64][content_hash u64][fingerprint u64]
// [has_features u8][id varint-prefixed][extra varint-prefixed]
void Encode(const StoredDocument& d, std::string* out) {
  std::string body;
  PutFixed64(&body, d.number);
  PutFixed64(&body, static_cast<uint64_t>(d.timestamp_ms));
  PutFixed64(&body, d.signature.content_hash);
  PutFixed64(&body, d.signature.fingerprint);
  body.push_back(d.signature.has_features ? 1 : 0);
  PutVarint64(&body, d.id.size());
  body += d.id;
  PutVarint64(&body, d.extra.size());
  body += d.extra;
  PutFixed32(out, static_cast<uint32_t>(body.size()));
  *out += body;
}

bool Decode(std::string_view body, StoredDocument* d) {
  if (body.size() < 33) return false;
  d->number = DecodeFixed64(body.data());
  d->timestamp_ms = static_cast<int64_t>(DecodeFixed64(body.data() + 8));
  d->signature.content_hash = DecodeFixed64(body.data() + 16);
  d->signature.fingerprint = DecodeFixed64(body.data() + 24);
  d->signature.has_features = body[32] != 0;
  size_t pos = 33;
  uint64_t n = 0;
  if (!GetVarint64(body, &pos, &n) || n > body.size() - pos) return false;
  d->id.assign(body.substr(pos, n));
  pos += n;
  if (!GetVarint64(body, &pos, &n) || n != body.size() - pos) return false;
  d->extra.assign(body.substr(pos, n));
  return true;
}

Status IoError(const char* what, int err) { return FileWriteError(std::string("rebuild spill file: ") + what, err); }

}  // namespace

// One sorted run in an unnamed file, written once, then read back in order.
class NumberOrder::Run {
 public:
  explicit Run(int fd) : fd_(fd) {}
  ~Run() { ::close(fd_); }

  Status Write(const std::vector<StoredDocument>& docs) {
    std::string buf;
    for (const StoredDocument& d : docs) {
      Encode(d, &buf);
      if (buf.size() >= kBufferBytes) NEARDUP_RETURN_IF_ERROR(Flush(&buf));
    }
    return Flush(&buf);
  }

  // The next document, or false at the end.
  Result<bool> Next(StoredDocument* d) {
    if (!Fill(4)) return ReadFailure();
    if (buf_.size() - pos_ < 4) return false;
    const uint32_t n = DecodeFixed32(buf_.data() + pos_);
    if (!Fill(4 + size_t{n})) return ReadFailure();
    if (buf_.size() - pos_ < 4 + size_t{n} ||
        !Decode(std::string_view(buf_).substr(pos_ + 4, n), d)) {
      return Status::Corruption("rebuild spill file: a record is damaged");
    }
    pos_ += 4 + n;
    return true;
  }

 private:
  Status Flush(std::string* buf) {
    for (size_t done = 0; done < buf->size();) {
      const ssize_t w = ::pwrite(fd_, buf->data() + done, buf->size() - done, static_cast<off_t>(size_ + done));
      if (w <= 0) return IoError("write", w < 0 ? errno : ENOSPC);
      done += static_cast<size_t>(w);
    }
    size_ += buf->size();
    buf->clear();
    return Status::OK();
  }
  // At least `want` unread bytes buffered, or all the rest; false on error.
  bool Fill(size_t want) {
    if (buf_.size() - pos_ >= want) return true;
    buf_.erase(0, pos_);
    pos_ = 0;
    while (buf_.size() < want && read_ < size_) {
      const size_t old = buf_.size();
      buf_.resize(old + std::max(kBufferBytes, want));
      const ssize_t r = ::pread(fd_, buf_.data() + old, buf_.size() - old, static_cast<off_t>(read_));
      if (r < 0) {
        error_ = errno;
        return false;
      }
      buf_.resize(old + static_cast<size_t>(r));
      read_ += static_cast<uint64_t>(r);
      if (r == 0) break;
    }
    return true;
  }
  Status ReadFailure() const { return IoError("read", error_); }

  int fd_;
  uint64_t size_ = 0;  // bytes written
  uint64_t read_ = 0;  // bytes read into buf_
  std::string buf_;
  size_t pos_ = 0;
  int error_ = 0;
};

NumberOrder::NumberOrder(std::string dir, size_t run_docs) : dir_(std::move(dir)), run_docs_(run_docs) {}
NumberOrder::~NumberOrder() = default;

Status NumberOrder::Add(StoredDocument&& d) {
  current_.push_back(std::move(d));
  if (!dir_.empty() && current_.size() >= run_docs_) return Spill();
  return Status::OK();
}

Status NumberOrder::Spill() {
  std::sort(current_.begin(), current_.end(), ByNumber);
  const int fd = OpenUnnamedFile(dir_);
  if (fd < 0) return IoError(("create in " + dir_).c_str(), errno);
  auto run = std::make_unique<Run>(fd);
  NEARDUP_RETURN_IF_ERROR(run->Write(current_));
  runs_.push_back(std::move(run));
  std::vector<StoredDocument>().swap(current_);
  return Status::OK();
}

Status NumberOrder::Drain(const std::function<Status(StoredDocument&&)>& fn) {
  if (runs_.empty()) {
    std::sort(current_.begin(), current_.end(), ByNumber);
    for (StoredDocument& d : current_) {
      NEARDUP_RETURN_IF_ERROR(fn(std::move(d)));
      d = StoredDocument{};  // give back its memory as the rebuild goes
    }
    std::vector<StoredDocument>().swap(current_);
    return Status::OK();
  }
  if (!current_.empty()) NEARDUP_RETURN_IF_ERROR(Spill());
  // A k-way merge: the head document of every run, smallest number first.
  std::vector<StoredDocument> heads(runs_.size());
  using Entry = std::pair<uint64_t, size_t>;  // (number, run)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  for (size_t r = 0; r < runs_.size(); ++r) {
    NEARDUP_ASSIGN_OR_RETURN(const bool more, runs_[r]->Next(&heads[r]));
    if (more) queue.emplace(heads[r].number, r);
  }
  while (!queue.empty()) {
    const size_t r = queue.top().second;
    queue.pop();
    NEARDUP_RETURN_IF_ERROR(fn(std::move(heads[r])));
    heads[r] = StoredDocument{};
    NEARDUP_ASSIGN_OR_RETURN(const bool more, runs_[r]->Next(&heads[r]));
    if (more) queue.emplace(heads[r].number, r);
  }
  runs_.clear();
  return Status::OK();
}

}  // namespace neardup
