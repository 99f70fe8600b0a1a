// An in-memory DocumentStore: see include/neardup/engine/memory_store.h.
#include "neardup/engine/memory_store.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace neardup {
namespace {

class MemoryStore final : public DocumentStore {
 public:
  Status PutNamespace(const std::string& ns, const std::string& settings) override {
    NEARDUP_RETURN_IF_ERROR(CheckName(ns));
    std::lock_guard lk(mu_);
    Ns& n = namespaces_[ns];
    n.settings = settings;
    n.has_record = true;
    return Status::OK();
  }
  Status DeleteNamespace(const std::string& ns) override {
    NEARDUP_RETURN_IF_ERROR(CheckName(ns));
    std::lock_guard lk(mu_);
    namespaces_.erase(ns);
    return Status::OK();
  }
  Status ListNamespaces(std::vector<std::pair<std::string, std::string>>* out) override {
    std::lock_guard lk(mu_);
    out->clear();
    for (const auto& [name, n] : namespaces_) {
      if (n.has_record) out->emplace_back(name, n.settings);
    }
    return Status::OK();
  }
  Status Apply(const std::vector<StoreWrite>& writes) override {
    for (const StoreWrite& w : writes) NEARDUP_RETURN_IF_ERROR(CheckName(w.ns));  // all or none
    std::lock_guard lk(mu_);
    for (const StoreWrite& w : writes) {
      // Like the RocksDB store, documents may be written to a namespace whose
      // settings record is not (yet) there; they live under the name.
      auto& docs = namespaces_[w.ns].docs;
      if (w.op == StoreWrite::Op::kPut) {
        docs[w.doc.id] = w.doc;
      } else {
        docs.erase(w.doc.id);
      }
    }
    return Status::OK();
  }
  Status Get(const std::string& ns, const std::string& id, StoredDocument* out) override {
    std::lock_guard lk(mu_);
    auto n = namespaces_.find(ns);
    if (n == namespaces_.end()) return Status::NotFound("no document \"" + id + "\"");
    auto d = n->second.docs.find(id);
    if (d == n->second.docs.end()) return Status::NotFound("no document \"" + id + "\"");
    *out = d->second;
    return Status::OK();
  }
  Status Scan(const std::string& ns, const std::function<Status(StoredDocument&&)>& fn) override {
    std::vector<StoredDocument> copy;
    {
      std::lock_guard lk(mu_);
      auto n = namespaces_.find(ns);
      if (n == namespaces_.end()) return Status::OK();
      for (const auto& [id, d] : n->second.docs) copy.push_back(d);
    }
    for (StoredDocument& d : copy) NEARDUP_RETURN_IF_ERROR(fn(std::move(d)));
    return Status::OK();
  }
  Status Compact(const std::string&) override { return Status::OK(); }
  uint64_t ApproximateDiskBytes() override { return 0; }
  std::string Describe() const override { return "memory"; }

 private:
  static Status CheckName(const std::string& ns) {
    if (ns.find('\0') != std::string::npos) return Status::InvalidArgument("namespace name contains \\0");
    return Status::OK();
  }
  struct Ns {
    std::string settings;
    bool has_record = false;  // PutNamespace was called (ListNamespaces shows it)
    std::map<std::string, StoredDocument> docs;
  };
  std::mutex mu_;
  std::map<std::string, Ns> namespaces_;
};

}  // namespace

std::unique_ptr<DocumentStore> NewMemoryStore() { return std::make_unique<MemoryStore>(); }

}  // namespace neardup
