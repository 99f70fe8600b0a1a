// SharedStoreEngine: what an Engine over a store shared by many `neardup
// serve` instances (the Redis Cluster store, redis_engine.h; the PostgreSQL
// store, pg_engine.h) does the same way whatever the store: the shutdown
// gate and argument checks around every call, PutNamespace and
// UpdateNamespace as one settings merge, batches decided one document after
// another, the metrics summed over namespaces, and a short-lived cache of
// namespace records. The store's own work is in the pure virtual methods.
//
// Thread-safety: as Engine; the cache is internally locked.
#ifndef NEARDUP_SRC_ENGINE_SHARED_STORE_ENGINE_H_
#define NEARDUP_SRC_ENGINE_SHARED_STORE_ENGINE_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/dedup/signature.h"
#include "neardup/engine/engine.h"
#include "neardup/text/fingerprint.h"
#include "util/call_gate.h"

namespace neardup {

inline int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// The embedded store's anchor choice (NearDupSet): a document probes its
// first `anchors` anchors that are not stop keys and is filed under its first
// max(anchors, 16) of them. stop(i) says whether anchor i is a stop key: 1
// yes, 0 no, -1 not known yet (the caller has not read that anchor's
// postings); false when the choice needs such an anchor.
inline bool ChooseAnchors(const RecheckOptions& r, size_t count, const std::function<int(size_t)>& stop,
                          std::vector<size_t>* probe, std::vector<size_t>* filed) {
  const auto want_probe = static_cast<size_t>(r.anchors);
  const auto want_filed = static_cast<size_t>(std::max(r.anchors, RecheckOptions{}.anchors));
  probe->clear();
  filed->clear();
  for (size_t a = 0; a < count; ++a) {
    if (probe->size() >= want_probe && filed->size() >= want_filed) break;
    const int s = stop(a);
    if (s < 0) return false;
    if (s > 0) continue;
    if (probe->size() < want_probe) probe->push_back(a);
    if (filed->size() < want_filed) filed->push_back(a);
  }
  return true;
}

// What every check of a shared store derives first from its document and
// namespace: the signature the embedded store decides on (near_dup_set.h),
// the namespace's policy, retention cutoff and the document's time.
struct CheckBasis {
  CheckBasis(const Fingerprinter& fingerprinter, const NearDupOptions& p, const DocumentInput& d, CheckMode m,
             int64_t retention_cutoff, int64_t now)
      : doc(d), mode(m), policy(p), cutoff(retention_cutoff), ts(d.timestamp_ms.value_or(now)) {
    TextAnalysis analysis;
    fingerprinter.Analyze(doc.text, &analysis);
    sig = MakeSignature(analysis, doc.text, policy.recheck.shingle_size);
    // With the re-check off nothing of it is written or read: the store then
    // costs and decides exactly as the plain rule always did.
    sketched = policy.recheck.enabled && sig.has_sketch();
    out.fingerprint = sig.fingerprint;
    out.has_features = sig.has_features;
  }
  const RecheckOptions& rc() const { return policy.recheck; }

  const DocumentInput& doc;
  const CheckMode mode;
  const NearDupOptions policy;
  DocSignature sig;
  int64_t cutoff = 0;  // documents older than this never match
  int64_t ts = 0;      // the document's event time
  bool sketched = false;
  CheckOutcome out;  // the answer being built
};

class SharedStoreEngine : public Engine {
 public:
  Status PutNamespace(const std::string& name, const NamespaceSettings& settings, bool* created) final {
    return ModifyNamespace(name, [&](const NamespaceSettings*) -> Result<NamespaceSettings> { return settings; },
                           created);
  }

  Status UpdateNamespace(const std::string& name, std::string_view patch, const NamespaceSettings& defaults,
                         bool* created) final {
    return ModifyNamespace(
        name,
        [&](const NamespaceSettings* current) { return NamespaceSettings::FromJson(patch, current ? *current : defaults); },
        created);
  }

  Result<CheckOutcome> Check(const std::string& ns, const DocumentInput& doc, CheckMode mode) final {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return ShuttingDown();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(ns));
    return CheckOne(ns, doc, mode);
  }

  Status CheckBatch(const std::string& ns, std::span<const DocumentInput> docs, CheckMode mode,
                    std::vector<Result<CheckOutcome>>* out) final {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return ShuttingDown();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(ns));
    NEARDUP_RETURN_IF_ERROR(EnsureNamespace(ns));
    out->clear();
    // In order, each as if sent alone: a later document sees the earlier ones.
    for (const DocumentInput& d : docs) out->push_back(CheckOne(ns, d, mode));
    return Status::OK();
  }

  // Namespaces and documents summed over ListNamespaces().
  EngineMetrics Metrics() override {
    EngineMetrics m;
    for (const std::string& name : ListNamespaces()) {
      ++m.namespaces;
      auto s = GetNamespace(name);
      if (s.ok()) m.documents += s->documents;
    }
    return m;
  }

  Status Shutdown() override {
    (void)gate_.CloseAndDrain();
    return Status::OK();
  }

 protected:
  // The new settings from the current ones (nullptr: no such namespace).
  using SettingsMerge = std::function<Result<NamespaceSettings>(const NamespaceSettings* current)>;

  // Creates the namespace or replaces its settings with merge()'s, as one
  // atomic step against concurrent changes from any instance.
  virtual Status ModifyNamespace(const std::string& name, const SettingsMerge& merge, bool* created) = 0;
  // The namespace exists (auto-created if the engine may): a batch's check
  // before its documents.
  virtual Status EnsureNamespace(const std::string& ns) = 0;
  // One document (the namespace name is valid; the call holds the gate).
  virtual Result<CheckOutcome> CheckOne(const std::string& ns, const DocumentInput& doc, CheckMode mode) = 0;

  static Status ShuttingDown() { return Status::Unavailable("the engine is shutting down"); }

  // load()'s namespace; when it is kNotFound and auto_create, create() and
  // load() again (a peer may create or delete it meanwhile: a few rounds).
  template <typename Load, typename Create>
  static auto LoadOrCreate(const std::string& name, bool auto_create, Load load, Create create) -> decltype(load()) {
    for (int attempt = 0; attempt < 4; ++attempt) {
      auto info = load();
      if (info.ok() || info.status().code() != Status::Code::kNotFound) return info;
      if (!auto_create) return info.status();
      NEARDUP_RETURN_IF_ERROR(create());
    }
    return Status::Unavailable("namespace \"" + name + "\" keeps changing; retry");
  }

  // A call that holds `pass` while it runs: new calls are kUnavailable once
  // Shutdown began, and Shutdown waits for the ones in flight.
  CallGate gate_;
};

// Namespace records by name, each remembered with the time it was loaded.
template <typename Info>
class NamespaceCache {
 public:
  // The record loaded less than max_age_ms before now, or nullptr.
  std::shared_ptr<Info> Fresh(const std::string& name, int64_t now, int64_t max_age_ms) {
    std::lock_guard lk(mu_);
    auto it = map_.find(name);
    if (it == map_.end() || now - it->second->loaded_ms >= max_age_ms) return nullptr;
    return it->second;
  }
  std::shared_ptr<Info> Find(const std::string& name) {
    std::lock_guard lk(mu_);
    auto it = map_.find(name);
    return it == map_.end() ? nullptr : it->second;
  }
  void Put(const std::string& name, std::shared_ptr<Info> info) {
    std::lock_guard lk(mu_);
    map_[name] = std::move(info);
  }
  void Forget(const std::string& name) {
    std::lock_guard lk(mu_);
    map_.erase(name);
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Info>> map_;
};

}  // namespace neardup

#endif  // NEARDUP_SRC_ENGINE_SHARED_STORE_ENGINE_H_
