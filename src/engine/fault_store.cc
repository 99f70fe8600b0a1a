// FaultStore: see include/neardup/engine/fault_store.h.
#include "neardup/engine/fault_store.h"

namespace neardup {

FaultStore::FaultStore(std::unique_ptr<DocumentStore> base) : base_(std::move(base)) {}

FaultStore::~FaultStore() { Heal(); }

void FaultStore::FailNext(StoreOp op, int n, Status status) {
  std::lock_guard lk(mu_);
  for (int i = 0; i < n; ++i) ops_[static_cast<int>(op)].pending.push_back(status);
}

void FaultStore::FailAll(Status status) {
  std::lock_guard lk(mu_);
  fail_all_ = std::move(status);
}

void FaultStore::Heal() {
  {
    std::lock_guard lk(mu_);
    fail_all_.reset();
    for (PerOp& o : ops_) {
      o.pending.clear();
      o.held = false;
    }
  }
  cv_.notify_all();
}

void FaultStore::Hold(StoreOp op) {
  std::lock_guard lk(mu_);
  ops_[static_cast<int>(op)].held = true;
}

void FaultStore::Release(StoreOp op) {
  {
    std::lock_guard lk(mu_);
    ops_[static_cast<int>(op)].held = false;
  }
  cv_.notify_all();
}

bool FaultStore::WaitUntilHeld(StoreOp op, int n, std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  return cv_.wait_for(lk, timeout, [&] { return ops_[static_cast<int>(op)].blocked >= n; });
}

uint64_t FaultStore::calls(StoreOp op) const {
  std::lock_guard lk(mu_);
  return ops_[static_cast<int>(op)].calls;
}

uint64_t FaultStore::failures(StoreOp op) const {
  std::lock_guard lk(mu_);
  return ops_[static_cast<int>(op)].failures;
}

Status FaultStore::Enter(StoreOp op) {
  std::unique_lock lk(mu_);
  PerOp& o = ops_[static_cast<int>(op)];
  ++o.calls;
  if (o.held) {
    ++o.blocked;
    cv_.notify_all();  // WaitUntilHeld
    cv_.wait(lk, [&] { return !o.held; });
    --o.blocked;
  }
  if (fail_all_) {
    ++o.failures;
    return *fail_all_;
  }
  if (!o.pending.empty()) {
    Status s = std::move(o.pending.front());
    o.pending.erase(o.pending.begin());
    ++o.failures;
    return s;
  }
  return Status::OK();
}

Status FaultStore::PutNamespace(const std::string& ns, const std::string& settings) {
  NEARDUP_RETURN_IF_ERROR(Enter(StoreOp::kPutNamespace));
  return base_->PutNamespace(ns, settings);
}

Status FaultStore::DeleteNamespace(const std::string& ns) {
  NEARDUP_RETURN_IF_ERROR(Enter(StoreOp::kDeleteNamespace));
  return base_->DeleteNamespace(ns);
}

Status FaultStore::ListNamespaces(std::vector<std::pair<std::string, std::string>>* out) {
  NEARDUP_RETURN_IF_ERROR(Enter(StoreOp::kListNamespaces));
  return base_->ListNamespaces(out);
}

Status FaultStore::Apply(const std::vector<StoreWrite>& writes) {
  NEARDUP_RETURN_IF_ERROR(Enter(StoreOp::kApply));
  return base_->Apply(writes);
}

Status FaultStore::Get(const std::string& ns, const std::string& id, StoredDocument* out) {
  NEARDUP_RETURN_IF_ERROR(Enter(StoreOp::kGet));
  return base_->Get(ns, id, out);
}

Status FaultStore::Scan(const std::string& ns, const std::function<Status(StoredDocument&&)>& fn) {
  NEARDUP_RETURN_IF_ERROR(Enter(StoreOp::kScan));
  return base_->Scan(ns, fn);
}

Status FaultStore::Compact(const std::string& ns) {
  NEARDUP_RETURN_IF_ERROR(Enter(StoreOp::kCompact));
  return base_->Compact(ns);
}

uint64_t FaultStore::ApproximateDiskBytes() { return base_->ApproximateDiskBytes(); }

std::string FaultStore::Describe() const { return "fault(" + base_->Describe() + ")"; }

}  // namespace neardup
