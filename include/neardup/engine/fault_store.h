// FaultStore: a DocumentStore (store.h) that wraps another and fails, or
// holds, its calls on command, so tests can reach the engine's error paths
// (a group commit that fails, a store that hangs mid-request) the way
// leveldb's fault-injection Env does for its files.
//
// Every call is counted. A call that is made to fail returns the given
// Status without reaching the wrapped store (Apply is all-or-none, so a
// failed Apply wrote nothing). A held operation blocks its callers until
// Release(); what they then do (pass or fail) is decided after the hold.
//
// Typical use:
//   auto fault = std::make_unique<FaultStore>(std::move(rocks));
//   FaultStore* f = fault.get();          // valid while the engine lives
//   auto engine = OpenLocalEngine(options, std::move(fault));
//   f->FailNext(StoreOp::kApply, 1, Status::IOError("disk full"));
//
// Thread-safety: every method may be called concurrently from any thread.
#ifndef NEARDUP_FAULT_STORE_H_
#define NEARDUP_FAULT_STORE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "neardup/engine/store.h"
#include "neardup/util/status.h"

namespace neardup {

enum class StoreOp : int {
  kPutNamespace = 0,
  kDeleteNamespace,
  kListNamespaces,
  kApply,
  kGet,
  kScan,
  kCompact,
};
inline constexpr int kStoreOpCount = 7;

class FaultStore final : public DocumentStore {
 public:
  explicit FaultStore(std::unique_ptr<DocumentStore> base);
  ~FaultStore() override;

  // The next `n` calls of `op` return `status` (not OK) instead of running.
  // Adds to failures already pending for `op`.
  void FailNext(StoreOp op, int n, Status status);
  // Every call of every operation returns `status` until Heal().
  void FailAll(Status status);
  // Clears every pending failure and FailAll, and releases every hold.
  void Heal();

  // Calls of `op` block from now on until Release(op) (or Heal()).
  void Hold(StoreOp op);
  void Release(StoreOp op);
  // Waits until at least `n` calls of `op` are blocked by a hold; false if
  // that did not happen within `timeout` (a generous bound, not a sleep).
  bool WaitUntilHeld(StoreOp op, int n, std::chrono::milliseconds timeout = std::chrono::seconds(30));

  uint64_t calls(StoreOp op) const;     // calls made (failed ones included)
  uint64_t failures(StoreOp op) const;  // calls that returned an injected failure

  DocumentStore* base() { return base_.get(); }

  // DocumentStore.
  Status PutNamespace(const std::string& ns, const std::string& settings) override;
  Status DeleteNamespace(const std::string& ns) override;
  Status ListNamespaces(std::vector<std::pair<std::string, std::string>>* out) override;
  Status Apply(const std::vector<StoreWrite>& writes) override;
  Status Get(const std::string& ns, const std::string& id, StoredDocument* out) override;
  Status Scan(const std::string& ns, const std::function<Status(StoredDocument&&)>& fn) override;
  Status Compact(const std::string& ns) override;
  uint64_t ApproximateDiskBytes() override;
  std::string Describe() const override;

 private:
  // Counts the call, waits out a hold, and returns the injected failure if any.
  Status Enter(StoreOp op);

  std::unique_ptr<DocumentStore> base_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct PerOp {
    std::vector<Status> pending;  // failures to return, front first
    bool held = false;
    int blocked = 0;
    uint64_t calls = 0;
    uint64_t failures = 0;
  };
  PerOp ops_[kStoreOpCount];
  std::optional<Status> fail_all_;
};

}  // namespace neardup

#endif  // NEARDUP_FAULT_STORE_H_
