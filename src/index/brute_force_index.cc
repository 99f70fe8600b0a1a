#include "neardup/index/brute_force_index.h"

#include <algorithm>
#include <bit>
#include <unordered_map>
#include <unordered_set>

namespace neardup {
namespace {

// Deliberately the simplest correct thing: it is the oracle.
class BruteForceIndex final : public HammingIndex {
 public:
  Status Add(uint64_t fingerprint, DocId id) override {
    if (pos_.count(id)) return Status::AlreadyExists("id " + std::to_string(id) + " already indexed");
    pos_.emplace(id, fps_.size());
    fps_.push_back(fingerprint);
    ids_.push_back(id);
    return Status::OK();
  }

  Status AddBatch(std::span<const Entry> entries) override {
    std::unordered_set<DocId> seen;
    for (const Entry& e : entries) {
      if (pos_.count(e.id) || !seen.insert(e.id).second) {
        return Status::AlreadyExists("id " + std::to_string(e.id) + " already indexed");
      }
    }
    for (const Entry& e : entries) (void)Add(e.fingerprint, e.id);
    return Status::OK();
  }

  bool Remove(DocId id) override {
    auto it = pos_.find(id);
    if (it == pos_.end()) return false;
    const size_t i = it->second, last = fps_.size() - 1;
    pos_.erase(it);
    if (i != last) {
      fps_[i] = fps_[last];
      ids_[i] = ids_[last];
      pos_[ids_[i]] = i;
    }
    fps_.pop_back();
    ids_.pop_back();
    return true;
  }

  void Clear() override {
    fps_.clear();
    ids_.clear();
    pos_.clear();
  }

  Status Search(uint64_t query, int k, std::vector<Match>* out) const override {
    out->clear();
    if (k < 0 || k > max_k()) return Status::InvalidArgument("k must be in [0, 8]");
    for (size_t i = 0; i < fps_.size(); ++i) {
      const int d = std::popcount(fps_[i] ^ query);
      if (d <= k) out->push_back(Match{ids_[i], fps_[i], d});
    }
    std::sort(out->begin(), out->end(), [](const Match& a, const Match& b) {
      return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
    });
    return Status::OK();
  }

  bool AnyWithin(uint64_t query, int k, Match* first) const override {
    if (k < 0 || k > max_k()) return false;
    for (size_t i = 0; i < fps_.size(); ++i) {
      const int d = std::popcount(fps_[i] ^ query);
      if (d <= k) {
        if (first) *first = Match{ids_[i], fps_[i], d};
        return true;
      }
    }
    return false;
  }

  Result<uint64_t> Get(DocId id) const override {
    auto it = pos_.find(id);
    if (it == pos_.end()) return Status::NotFound("id " + std::to_string(id) + " not indexed");
    return fps_[it->second];
  }

  void ForEach(const std::function<void(const Entry&)>& fn) const override {
    for (size_t i = 0; i < fps_.size(); ++i) fn(Entry{fps_[i], ids_[i]});
  }

  size_t size() const override { return fps_.size(); }
  int max_k() const override { return kMaxSupportedK; }
  size_t MemoryBytes() const override {
    // unordered_map: one node (key, value, next, cached hash) + one bucket pointer per entry.
    return fps_.capacity() * 8 + ids_.capacity() * 8 + pos_.size() * 32 + pos_.bucket_count() * 8;
  }
  std::string Describe() const override { return "brute-force"; }

 private:
  std::vector<uint64_t> fps_;
  std::vector<DocId> ids_;
  std::unordered_map<DocId, size_t> pos_;
};

}  // namespace

std::unique_ptr<HammingIndex> NewBruteForceIndex() { return std::make_unique<BruteForceIndex>(); }

}  // namespace neardup
