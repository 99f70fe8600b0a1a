// LocalEngine: see include/neardup/engine/local_engine.h for the contract and
// docs/service.md for why it is correct under concurrency and crashes.
#include "neardup/engine/local_engine.h"
#include "neardup/engine/namespace_record.h"
#include "engine/shared_store_engine.h"

#include <nlohmann/json.hpp>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <xxhash.h>

#include "engine/number_order.h"
#include "util/call_gate.h"
#include "util/segmented_table.h"
#include "neardup/text/fingerprint.h"
#include "neardup/dedup/near_dup_set.h"

namespace neardup {
namespace {


// ---------------------------------------------------------------------------
// Group commit. Writes are queued in decision order (callers enqueue under
// their namespace lock) and applied by one thread in batches; every write has
// a sequence number and the batch's fsync makes all of them durable at once.
class Committer {
 public:
  using FailureHandler = std::function<void(const std::vector<StoreWrite>&)>;

  Committer(DocumentStore* store, size_t max_batch, std::chrono::microseconds delay, FailureHandler on_failure)
      : store_(store),
        max_batch_(max_batch),
        delay_(delay),
        on_failure_(std::move(on_failure)),
        thread_([this] { Run(); }) {}

  ~Committer() { Stop(); }

  uint64_t EnqueueWrite(StoreWrite write) { return Enqueue(Item{Item::kWrite, std::move(write), {}, {}}); }
  uint64_t EnqueuePutNamespace(const std::string& ns, std::string record) {
    return Enqueue(Item{Item::kPutNamespace, {}, ns, std::move(record)});
  }
  uint64_t EnqueueDeleteNamespace(const std::string& ns) {
    return Enqueue(Item{Item::kDeleteNamespace, {}, ns, {}});
  }

  // Blocks until write `seq` was applied; its status.
  Status Wait(uint64_t seq) {
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return durable_ >= seq; });
    return StatusLocked(seq);
  }

  // Calls fn() once every write up to `seq` was applied: at once on this
  // thread if they are, else on the commit thread after the batch's fsync
  // (so fn must be quick and must not call Wait). StatusOf() then answers
  // each of those writes without blocking. This is what
  // lets an event-driven server answer without a thread parked per request.
  void WhenDurable(uint64_t seq, std::function<void()> fn) {
    {
      std::lock_guard lk(mu_);
      if (durable_ < seq) {
        waiters_.emplace(seq, std::move(fn));
        return;
      }
    }
    fn();
  }

  // Status of an applied write (durable_ >= seq).
  Status StatusOf(uint64_t seq) {
    std::lock_guard lk(mu_);
    return StatusLocked(seq);
  }

  void Stop() {
    {
      std::lock_guard lk(mu_);
      if (stop_) return;
      stop_ = true;
    }
    work_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  uint64_t commits() const { return commits_.load(); }
  uint64_t committed_docs() const { return committed_docs_.load(); }

 private:
  struct Item {
    enum Kind { kWrite, kPutNamespace, kDeleteNamespace } kind;
    StoreWrite write;
    std::string ns;
    std::string record;
  };

  uint64_t Enqueue(Item item) {
    uint64_t seq;
    bool wake;
    {
      std::lock_guard lk(mu_);
      seq = ++last_enqueued_;
      queue_.push_back(std::move(item));
      // While the committer gathers a batch, only a full batch (or a write
      // that is not a document) is worth waking it early for.
      wake = !gathering_ || queue_.size() >= max_batch_ || queue_.back().kind != Item::kWrite;
    }
    if (wake) work_cv_.notify_one();
    return seq;
  }

  void Run() {
    std::vector<StoreWrite> batch;
    std::vector<std::function<void()>> ready;
    while (true) {
      std::unique_lock lk(mu_);
      work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      // Group-commit delay: under load (the last batch held more than one
      // write, so others are arriving) wait a little for more writes before
      // the fsync. Each commit costs an fsync and a wake-up of every waiter's
      // loop whatever its size, so fewer, larger commits leave more CPU for
      // decisions; an idle server (batches of one) never waits.
      if (delay_.count() > 0 && last_batch_ > 1 && queue_.size() < max_batch_ && !stop_) {
        gathering_ = true;
        work_cv_.wait_for(lk, delay_, [&] {
          return stop_ || queue_.size() >= max_batch_ || queue_.back().kind != Item::kWrite;
        });
        gathering_ = false;
      }
      const uint64_t first_seq = durable_ + 1;
      Item::Kind kind = queue_.front().kind;
      Item single;
      batch.clear();
      if (kind == Item::kWrite) {
        while (!queue_.empty() && queue_.front().kind == Item::kWrite && batch.size() < max_batch_) {
          batch.push_back(std::move(queue_.front().write));
          queue_.pop_front();
        }
      } else {
        single = std::move(queue_.front());
        queue_.pop_front();
      }
      lk.unlock();

      Status s;
      size_t count = 1;
      if (kind == Item::kWrite) {
        s = store_->Apply(batch);
        count = batch.size();
        last_batch_ = count;
        if (s.ok()) {
          commits_.fetch_add(1);
          committed_docs_.fetch_add(batch.size());
        }
      } else if (kind == Item::kPutNamespace) {
        s = store_->PutNamespace(single.ns, single.record);
      } else {
        s = store_->DeleteNamespace(single.ns);
      }
      if (!s.ok() && kind == Item::kWrite) on_failure_(batch);  // memory forgets what the disk lacks
      lk.lock();
      if (!s.ok()) {
        const Status answer = AnswerFor(s);
        for (uint64_t q = first_seq; q < first_seq + count; ++q) failed_.emplace(q, answer);
      }
      durable_ = first_seq + count - 1;
      ready.clear();
      while (!waiters_.empty() && waiters_.begin()->first <= durable_) {
        ready.push_back(std::move(waiters_.begin()->second));
        waiters_.erase(waiters_.begin());
      }
      lk.unlock();
      done_cv_.notify_all();
      for (auto& fn : ready) fn();
    }
  }

  // What a client hears about a failed store write: a full disk stays
  // kStorageFull (507: retry once space is freed); anything else is 503
  // (kUnavailable: the store cannot take writes now).
  static Status AnswerFor(const Status& s) {
    if (s.code() == Status::Code::kStorageFull) return Status::StorageFull("store write failed: " + s.message());
    return Status::Unavailable("store write failed: " + s.ToString());
  }

  Status StatusLocked(uint64_t seq) const {
    auto it = failed_.find(seq);
    return it == failed_.end() ? Status::OK() : it->second;
  }

  DocumentStore* store_;
  const size_t max_batch_;
  const std::chrono::microseconds delay_;
  FailureHandler on_failure_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Item> queue_;
  uint64_t last_enqueued_ = 0;
  uint64_t durable_ = 0;  // every seq <= durable_ has been applied (or failed)
  std::unordered_map<uint64_t, Status> failed_;
  std::multimap<uint64_t, std::function<void()>> waiters_;  // by the seq they wait for
  bool stop_ = false;
  bool gathering_ = false;  // the committer waits out the delay (under mu_)
  size_t last_batch_ = 0;   // writes in the last batch (committer thread only)
  std::atomic<uint64_t> commits_{0}, committed_docs_{0};
  std::thread thread_;  // last: starts after everything above exists
};

// A document id in 8 bytes: one block holding its length (ids are at most
// 512 bytes) and its bytes. A std::string is 32 bytes, plus a heap block past
// 15 bytes (UUIDs, URLs).
class IdString {
 public:
  IdString() = default;
  explicit IdString(std::string_view s) : p_(std::make_unique_for_overwrite<char[]>(2 + s.size())) {
    p_[0] = static_cast<char>(s.size() & 0xff);
    p_[1] = static_cast<char>(s.size() >> 8);
    std::memcpy(p_.get() + 2, s.data(), s.size());
  }
  std::string_view view() const {
    if (!p_) return {};
    const size_t n = static_cast<unsigned char>(p_[0]) | (size_t{static_cast<unsigned char>(p_[1])} << 8);
    return {p_.get() + 2, n};
  }
  std::string str() const { return std::string(view()); }
  bool operator==(std::string_view other) const { return view() == other; }

 private:
  std::unique_ptr<char[]> p_;
};

// ---------------------------------------------------------------------------
// Per stored document in memory. Only what removal and answers need: the
// re-check sketch lives once, inside NearDupSet, and in the store.
// 40 bytes besides the id's own (issue 14: 50M documents in 24 GiB; it was
// 80, with a std::string and padded flags).
struct DocMeta {
  static_assert(sizeof(IdString) == 8);
  IdString id;
  uint64_t content_hash = 0;
  uint64_t fingerprint = 0;
  int64_t timestamp_ms = 0;
  uint64_t commit_seq : 62 = 0;  // the write that stored it; Wait() on it before naming it
  uint64_t has_features : 1 = 0;
  uint64_t live : 1 = 0;

  DocMeta() = default;
  DocMeta(std::string_view doc_id, const DocSignature& sig, int64_t ts, uint64_t seq)
      : id(doc_id),
        content_hash(sig.content_hash),
        fingerprint(sig.fingerprint),
        timestamp_ms(ts),
        commit_seq(seq),
        has_features(sig.has_features),
        live(1) {}
  // What NearDupSet::Remove needs (the sketch is not).
  DocSignature KeySignature() const {
    DocSignature sig;
    sig.content_hash = content_hash;
    sig.fingerprint = fingerprint;
    sig.has_features = has_features;
    return sig;
  }
};

// Document id -> number of the live document with that id. A segmented
// flat table (segmented_table.h) of (hash of the id, number): 16 bytes per
// document, and no whole-table rehash under the namespace lock (a
// std::unordered_map<std::string, ...> of 10M ids paused every request of
// the namespace for up to a second when it doubled). The id itself lives in
// the document's DocMeta, which confirms a match.
class IdTable {
 public:
  // id_of(number): the id of that live document, or null.
  template <typename IdOf>
  std::optional<uint64_t> Find(std::string_view id, IdOf&& id_of) const {
    const uint64_t h = Hash(id);
    const internal::KeyValueSlot* s = table_.Find(h, [&](const internal::KeyValueSlot& x) {
      if (x.key != h) return false;
      const IdString* other = id_of(x.value);
      return other != nullptr && *other == id;
    });
    if (s == nullptr) return std::nullopt;
    return s->value;
  }
  // `id` must not be present.
  void Insert(std::string_view id, uint64_t number) {
    const uint64_t h = Hash(id);
    table_.Insert(h, internal::KeyValueSlot{h, number});
  }
  void Erase(std::string_view id, uint64_t number) {
    const uint64_t h = Hash(id);
    internal::KeyValueSlot* s =
        table_.Find(h, [&](const internal::KeyValueSlot& x) { return x.key == h && x.value == number; });
    if (s != nullptr) table_.Erase(s);
  }
  size_t size() const { return table_.size(); }
  size_t MemoryBytes() const { return table_.MemoryBytes(); }

 private:
  struct Ops {
    static uint64_t Hash(const internal::KeyValueSlot& s) { return s.key; }
    static bool Empty(const internal::KeyValueSlot& s) { return s.value == internal::KeyValueSlot::kEmptyValue; }
  };
  static uint64_t Hash(std::string_view id) { return XXH3_64bits(id.data(), id.size()); }
  internal::SegmentedTable<internal::KeyValueSlot, Ops> table_;
};

struct Namespace {
  explicit Namespace(std::string n) : name(std::move(n)) {}

  const std::string name;
  std::mutex mu;
  // Everything below is guarded by mu.
  NamespaceSettings settings;
  std::shared_ptr<const Fingerprinter> fingerprinter;
  std::unique_ptr<NearDupSet> set;  // DocId = document number
  IdTable by_id;
  std::deque<DocMeta> docs;  // docs[number - first_number]
  uint64_t first_number = 0;
  uint64_t next_number = 0;
  bool deleted = false;
  NamespaceStats counters;
  uint64_t expired_since_compact = 0;

  DocMeta* Find(uint64_t number) {
    if (number < first_number || number - first_number >= docs.size()) return nullptr;
    DocMeta& m = docs[number - first_number];
    return m.live ? &m : nullptr;
  }

  // The live document with this id: (number, meta), or (0, null).
  std::pair<uint64_t, DocMeta*> FindById(std::string_view id) {
    const auto number = by_id.Find(id, [this](uint64_t n) -> const IdString* {
      const DocMeta* m = Find(n);
      return m == nullptr ? nullptr : &m->id;
    });
    if (!number) return {0, nullptr};
    return {*number, Find(*number)};
  }

  int64_t Cutoff(int64_t now_ms) const {
    return settings.retention_seconds > 0 ? now_ms - settings.retention_seconds * 1000
                                          : std::numeric_limits<int64_t>::min();
  }

  // Places a document with a given number (numbers only grow).
  void Append(uint64_t number, DocMeta meta) {
    if (docs.empty()) first_number = number;
    while (first_number + docs.size() < number) docs.push_back(DocMeta{});  // hole left by a delete
    docs.push_back(std::move(meta));
    next_number = number + 1;
  }

  size_t MemoryBytes() const {
    size_t bytes = set->MemoryBytes() + docs.size() * sizeof(DocMeta) + by_id.MemoryBytes();
    return bytes;
  }
};

class LocalEngine final : public Engine {
 public:
  LocalEngine(const LocalEngineOptions& options, std::unique_ptr<DocumentStore> store)
      : options_(options), store_(std::move(store)) {
    if (!options_.clock_ms) options_.clock_ms = SystemNowMs;
  }

  ~LocalEngine() override { (void)Shutdown(); }

  Status Open() {
    std::vector<std::pair<std::string, std::string>> records;
    NEARDUP_RETURN_IF_ERROR(store_->ListNamespaces(&records));
    const int64_t now = options_.clock_ms();
    std::vector<StoreWrite> expired;
    for (auto& entry : records) {
      // Named references, not a structured binding: the scan callback below
      // captures them, which clang 14 refuses for bindings.
      const std::string& name = entry.first;
      const std::string& record = entry.second;
      auto decoded = DecodeNamespaceRecord(name, record, "the store");
      if (!decoded.ok()) return decoded.status();
      auto ns = NewNamespace(name, decoded->settings);
      if (!ns.ok()) return ns.status();
      Namespace& n = **ns;
      // The store yields documents in key (id) order; the index is rebuilt in
      // number (arrival) order, through runs on disk past rebuild_run_docs.
      NumberOrder order(options_.data_dir, options_.rebuild_run_docs);
      const int64_t cutoff = n.Cutoff(now);
      NEARDUP_RETURN_IF_ERROR(store_->Scan(name, [&](StoredDocument&& d) {
        n.next_number = std::max(n.next_number, d.number + 1);
        if (d.timestamp_ms < cutoff) {  // expired while we were down
          expired.push_back(StoreWrite{StoreWrite::Op::kDelete, name, StoredDocument{d.id}});
          return Status::OK();
        }
        return order.Add(std::move(d));
      }));
      NEARDUP_RETURN_IF_ERROR(order.Drain([&](StoredDocument&& d) {
        Status decoded = DecodeSignatureExtra(d.extra, &d.signature);
        if (!decoded.ok()) {
          return Status(decoded.code(), "namespace \"" + name + "\", document \"" + d.id + "\": " + decoded.message());
        }
        NEARDUP_RETURN_IF_ERROR(n.set->Insert(d.number, d.signature));
        n.by_id.Insert(d.id, d.number);
        n.Append(d.number, DocMeta(d.id, d.signature, d.timestamp_ms, 0));
        return Status::OK();
      }));
      namespaces_.emplace(name, std::move(ns).value());
    }
#ifdef __GLIBC__
    // The rebuild freed as much as it keeps (decoded records, the sort's
    // vector): hand the free pages back, or the process stays at its peak.
    malloc_trim(0);
#endif
    if (!expired.empty()) NEARDUP_RETURN_IF_ERROR(store_->Apply(expired));
    committer_ = std::make_unique<Committer>(store_.get(), options_.max_commit_batch,
                                             std::chrono::microseconds(options_.commit_delay_us),
                                             [this](const std::vector<StoreWrite>& w) { ForgetFailed(w); });
    if (options_.sweep_interval_ms > 0) sweeper_ = std::thread([this] { SweepLoop(); });
    return Status::OK();
  }

  // ---- namespaces -----------------------------------------------------------

  Status PutNamespace(const std::string& name, const NamespaceSettings& settings, bool* created) override {
    return Modify(name, [&](const NamespaceSettings*) -> Result<NamespaceSettings> { return settings; }, created);
  }

  Status UpdateNamespace(const std::string& name, std::string_view patch, const NamespaceSettings& defaults,
                         bool* created) override {
    auto merge = [&](const NamespaceSettings* current) {
      return NamespaceSettings::FromJson(patch, current ? *current : defaults);
    };
    return Modify(name, merge, created);
  }

  Result<NamespaceStats> GetNamespace(const std::string& name) override {
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(name));
    auto ns = Lookup(name);
    if (!ns) return Status::NotFound("namespace \"" + name + "\" does not exist");
    std::lock_guard lk(ns->mu);
    NamespaceStats s = ns->counters;
    s.name = name;
    s.settings = ns->settings;
    s.documents = ns->by_id.size();
    s.memory_bytes = ns->MemoryBytes();
    return s;
  }

  Status DeleteNamespace(const std::string& name) override {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(name));
    // Serialized with Modify, so that no namespace of this name is made while
    // the delete is in flight, and the namespace leaves memory only once the
    // store has deleted it. It left first: a delete refused for a full disk
    // (507) still dropped it from memory, a PUT then made it afresh over the
    // stored one, and the store no longer opened (a tester, 2026-12-02).
    std::lock_guard settings_lock(settings_mu_);
    std::shared_ptr<Namespace> ns = Lookup(name);
    if (!ns) return Status::NotFound("namespace \"" + name + "\" does not exist");
    uint64_t seq;
    {
      std::lock_guard nl(ns->mu);
      ns->deleted = true;  // writers see this under the lock: none decides for it any more
      // Queued after every write already decided for it, so the store deletes those too.
      seq = committer_->EnqueueDeleteNamespace(name);
    }
    if (Status st = committer_->Wait(seq); !st.ok()) {
      std::lock_guard nl(ns->mu);
      ns->deleted = false;  // the store's delete is one batch: it kept all of the namespace
      return st;
    }
    std::unique_lock lk(namespaces_mu_);
    if (auto it = namespaces_.find(name); it != namespaces_.end() && it->second == ns) namespaces_.erase(it);
    return Status::OK();
  }

  std::vector<std::string> ListNamespaces() override {
    std::shared_lock lk(namespaces_mu_);
    std::vector<std::string> out;
    for (const auto& [name, ns] : namespaces_) out.push_back(name);
    return out;
  }

  // ---- documents ------------------------------------------------------------

  Result<CheckOutcome> Check(const std::string& ns_name, const DocumentInput& doc, CheckMode mode) override {
    std::vector<Result<CheckOutcome>> out;
    NEARDUP_RETURN_IF_ERROR(CheckBatch(ns_name, std::span<const DocumentInput>(&doc, 1), mode, &out));
    return std::move(out[0]);
  }

  Status CheckBatch(const std::string& ns_name, std::span<const DocumentInput> docs, CheckMode mode,
                    std::vector<Result<CheckOutcome>>* out) override {
    std::vector<std::vector<uint64_t>> waits;
    uint64_t last = 0;
    NEARDUP_RETURN_IF_ERROR(DecideBatch(ns_name, docs, mode, out, &waits, &last));
    if (last != 0) (void)committer_->Wait(last);
    ApplyWriteStatuses(waits, out);
    return Status::OK();
  }

  // Decides in memory on the calling thread, then completes from the commit
  // thread once every document the answers name is durable: no thread waits.
  void CheckBatchAsync(const std::string& ns_name, std::span<const DocumentInput> docs, CheckMode mode,
                       CheckDone done) override {
    auto out = std::make_shared<std::vector<Result<CheckOutcome>>>();
    auto waits = std::make_shared<std::vector<std::vector<uint64_t>>>();
    uint64_t last = 0;
    const Status s = DecideBatch(ns_name, docs, mode, out.get(), waits.get(), &last);
    if (!s.ok()) {
      done(s, {});
      return;
    }
    if (last == 0) {
      done(Status::OK(), std::move(*out));
      return;
    }
    // Writes are applied in sequence order: the last one covers the rest.
    committer_->WhenDurable(last, [this, out, waits, done = std::move(done)] {
      ApplyWriteStatuses(*waits, out.get());
      done(Status::OK(), std::move(*out));
    });
  }

  bool CheckBatchAsyncNeverBlocks() const override { return true; }

  Result<DocumentInfo> GetDocument(const std::string& ns_name, const std::string& id) override {
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(ns_name));
    NEARDUP_RETURN_IF_ERROR(ValidateDocumentId(id));
    auto ns = Lookup(ns_name);
    if (!ns) return Status::NotFound("namespace \"" + ns_name + "\" does not exist");
    DocumentInfo info;
    uint64_t seq = 0;
    {
      std::lock_guard lk(ns->mu);
      const DocMeta* m = ns->FindById(id).second;
      if (m == nullptr || m->timestamp_ms < ns->Cutoff(options_.clock_ms())) {
        return Status::NotFound("document \"" + id + "\" not found in namespace \"" + ns_name + "\"");
      }
      info = DocumentInfo{m->id.str(), m->fingerprint, m->has_features != 0, m->timestamp_ms};
      seq = m->commit_seq;
    }
    if (seq) NEARDUP_RETURN_IF_ERROR(committer_->Wait(seq));
    return info;
  }

  Status DeleteDocument(const std::string& ns_name, const std::string& id) override {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(ns_name));
    NEARDUP_RETURN_IF_ERROR(ValidateDocumentId(id));
    auto ns = Lookup(ns_name);
    if (!ns) return Status::NotFound("namespace \"" + ns_name + "\" does not exist");
    uint64_t seq, number;
    {
      std::lock_guard lk(ns->mu);
      auto [n, m] = ns->FindById(id);
      if (m == nullptr) return Status::NotFound("document \"" + id + "\" not found in namespace \"" + ns_name + "\"");
      number = n;
      seq = committer_->EnqueueWrite(StoreWrite{StoreWrite::Op::kDelete, ns->name, StoredDocument{id}});
    }
    // Memory forgets the document only once the store has: if the write
    // fails the store still holds it, so it stays live (the answer is an
    // error and nothing changed). Until then it is a live document as any.
    NEARDUP_RETURN_IF_ERROR(committer_->Wait(seq));
    std::lock_guard lk(ns->mu);
    // Unless the sweep or a failed put already dropped it meanwhile.
    if (DocMeta* m = ns->Find(number); m != nullptr && m->id == id) {
      ForgetLocked(*ns, number, *m);
      ++ns->counters.deleted;
    }
    return Status::OK();
  }

  EngineMetrics Metrics() override {
    EngineMetrics m;
    std::shared_lock lk(namespaces_mu_);
    m.namespaces = namespaces_.size();
    for (const auto& [name, ns] : namespaces_) {
      std::lock_guard nl(ns->mu);
      m.documents += ns->by_id.size();
      m.memory_bytes += ns->MemoryBytes();
      m.sketch_file_bytes += ns->set->SketchFileBytes();
    }
    lk.unlock();
    m.disk_bytes = store_->ApproximateDiskBytes();
    if (committer_) {
      m.store_commits = committer_->commits();
      m.store_commit_docs = committer_->committed_docs();
    }
    return m;
  }

  Status Shutdown() override {
    if (!gate_.CloseAndDrain()) return Status::OK();  // another caller stops the engine
    {
      std::lock_guard lk(sweep_mu_);
      sweep_stop_ = true;
    }
    sweep_cv_.notify_all();
    if (sweeper_.joinable()) sweeper_.join();
    if (committer_) committer_->Stop();  // drains every queued write
    return Status::OK();
  }

  // SweepExpiredForTesting(): one sweep now; waits for its deletions.
  Status SweepNow() {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    const uint64_t last = SweepOnce();
    return last == 0 ? Status::OK() : committer_->Wait(last);
  }

 private:
  static Status Unavailable() { return Status::Unavailable("the server is shutting down"); }

  // The new settings from the current ones (nullptr: no such namespace).
  using SettingsMerge = std::function<Result<NamespaceSettings>(const NamespaceSettings* current)>;

  // Creates or updates the namespace with merge()'s settings, all under the
  // namespace locks so that no other change lands between read and write.
  Status Modify(const std::string& name, const SettingsMerge& merge, bool* created) {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(name));
    // One settings change at a time, until its record is durable or undone:
    // a rollback then restores what the store holds, not another change's
    // settings that are still in flight. (Rare admin calls: the cost is nil.)
    std::lock_guard settings_lock(settings_mu_);
    uint64_t seq = 0;
    std::shared_ptr<Namespace> ns;
    std::optional<NamespaceSettings> old;  // unset: created here
    {
      std::unique_lock lk(namespaces_mu_);
      auto it = namespaces_.find(name);
      if (it == namespaces_.end()) {
        NEARDUP_RETURN_IF_ERROR(RoomForNamespaceLocked(name));
        auto settings = merge(nullptr);
        if (!settings.ok()) return settings.status();
        NEARDUP_RETURN_IF_ERROR(settings->Validate());
        auto made = NewNamespace(name, settings.value());
        if (!made.ok()) return made.status();
        ns = std::move(made).value();
        seq = committer_->EnqueuePutNamespace(name, EncodeNamespaceRecord(ns->settings, *ns->fingerprinter));
        namespaces_.emplace(name, ns);
      } else {
        ns = it->second;
        std::lock_guard nl(ns->mu);
        auto settings = merge(&ns->settings);
        if (!settings.ok()) return settings.status();
        NEARDUP_RETURN_IF_ERROR(settings->Validate());
        old = ns->settings;
        NEARDUP_RETURN_IF_ERROR(ApplyLocked(name, *ns, settings.value()));
        seq = committer_->EnqueuePutNamespace(name, EncodeNamespaceRecord(ns->settings, *ns->fingerprinter));
      }
    }
    // The namespace is in memory before its record is durable, so later
    // writes queue behind the record; a failed record is undone below so
    // that memory keeps agreeing with the store.
    Status s = committer_->Wait(seq);
    if (!s.ok()) {
      RollBack(name, ns, old);
      return s;
    }
    if (created) *created = !old.has_value();
    return Status::OK();
  }

  // The settings record of `ns` failed to write: a namespace created
  // for it is removed again; an existing one gets its `old` settings back.
  // settings_mu_ held.
  void RollBack(const std::string& name, const std::shared_ptr<Namespace>& ns,
                const std::optional<NamespaceSettings>& old) {
    uint64_t purge = 0;
    {
      std::unique_lock lk(namespaces_mu_);
      auto it = namespaces_.find(name);
      if (it == namespaces_.end() || it->second != ns) return;  // deleted or replaced meanwhile
      std::lock_guard nl(ns->mu);
      if (old) {
        // They were in effect before, so they apply again (no decision check).
        (void)SetLocked(*ns, *old);
        return;
      }
      namespaces_.erase(it);
      ns->deleted = true;  // writers that still hold it see this under the lock
      // Checks stored documents in it meanwhile: drop them from the store
      // too (queued behind them), as DeleteNamespace would.
      if (ns->next_number > 0) purge = committer_->EnqueueDeleteNamespace(name);
    }
    if (purge != 0) (void)committer_->Wait(purge);  // best effort: the answer is the record's error
  }

  // New settings of an existing namespace; n.mu held.
  Status ApplyLocked(const std::string& name, Namespace& n, const NamespaceSettings& settings) {
    if (n.set->size() > 0) NEARDUP_RETURN_IF_ERROR(CheckDecisionSettingsUnchanged(name, n.settings, settings));
    return SetLocked(n, settings);
  }

  // Puts `settings` in effect: fingerprinter, index parameters; n.mu held.
  static Status SetLocked(Namespace& n, const NamespaceSettings& settings) {
    const bool scheme_change = settings.tokenizer != n.settings.tokenizer || settings.cjk_ngram != n.settings.cjk_ngram;
    if (scheme_change) {
      auto fp = MakeNamespaceFingerprinter(settings);
      if (!fp.ok()) return fp.status();
      n.fingerprinter = std::move(fp).value();
    }
    NEARDUP_RETURN_IF_ERROR(n.set->set_k(settings.k));
    NEARDUP_RETURN_IF_ERROR(n.set->SetPolicy(settings.recheck));
    n.settings = settings;
    return Status::OK();
  }

  static Status ValidateInput(const DocumentInput& d) {
    NEARDUP_RETURN_IF_ERROR(ValidateDocumentId(d.id));
    if (d.text.empty()) return Status::InvalidArgument("field \"text\" must be a non-empty string");
    return Status::OK();
  }

  Result<std::shared_ptr<Namespace>> NewNamespace(const std::string& name, const NamespaceSettings& settings) {
    auto ns = std::make_shared<Namespace>(name);
    ns->settings = settings;
    auto fp = MakeNamespaceFingerprinter(settings);
    if (!fp.ok()) return fp.status();
    ns->fingerprinter = std::move(fp).value();
    NearDupOptions o;
    o.k = settings.k;
    o.recheck = settings.recheck;
    if (!options_.sketches_in_memory) o.sketch_dir = options_.sketch_dir;
    auto set = NearDupSet::Create(o);
    if (!set.ok()) return set.status();
    ns->set = std::move(set).value();
    return ns;
  }

  // Before a namespace is created, with namespaces_mu_ held: every
  // namespace costs memory and start-up time, so an operator bounds them.
  Status RoomForNamespaceLocked(const std::string& name) const {
    if (options_.max_namespaces == 0 || namespaces_.size() < options_.max_namespaces) return Status::OK();
    return Status::FailedPrecondition("cannot create namespace \"" + name + "\": there are " +
                                      std::to_string(namespaces_.size()) +
                                      " namespaces, the limit (--max-namespaces); delete one or raise the limit");
  }

  std::shared_ptr<Namespace> Lookup(const std::string& name) {
    std::shared_lock lk(namespaces_mu_);
    auto it = namespaces_.find(name);
    return it == namespaces_.end() ? nullptr : it->second;
  }

  Result<std::shared_ptr<Namespace>> GetOrCreate(const std::string& name) {
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(name));
    if (auto ns = Lookup(name)) return ns;
    if (!options_.auto_create) return Status::NotFound("namespace \"" + name + "\" does not exist");
    uint64_t seq;
    std::shared_ptr<Namespace> created;
    {
      std::unique_lock lk(namespaces_mu_);
      auto it = namespaces_.find(name);
      if (it != namespaces_.end()) return it->second;
      NEARDUP_RETURN_IF_ERROR(RoomForNamespaceLocked(name));
      auto ns = NewNamespace(name, options_.default_settings);
      if (!ns.ok()) return ns.status();
      created = std::move(ns).value();
      seq = committer_->EnqueuePutNamespace(name, EncodeNamespaceRecord(created->settings, *created->fingerprinter));
      namespaces_.emplace(name, created);
    }
    // Document writes queued later are applied after this record.
    (void)seq;
    return created;
  }

  // Fingerprints outside the namespace lock, then decides every document in
  // order under it. (*waits)[i] are the writes document i's answer names
  // (its own, its matches'): they must be durable before it is sent; *last
  // is the largest of all (0: none).
  Status DecideBatch(const std::string& ns_name, std::span<const DocumentInput> docs, CheckMode mode,
                     std::vector<Result<CheckOutcome>>* out, std::vector<std::vector<uint64_t>>* waits,
                     uint64_t* last) {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    auto ns_or = GetOrCreate(ns_name);
    if (!ns_or.ok()) return ns_or.status();
    Namespace& ns = **ns_or;
    out->clear();
    out->reserve(docs.size());
    waits->assign(docs.size(), {});
    *last = 0;

    // Fingerprinting is the expensive part: outside the namespace lock.
    std::shared_ptr<const Fingerprinter> fp;
    int shingle_size = 0;
    {
      std::lock_guard lk(ns.mu);
      fp = ns.fingerprinter;
      shingle_size = ns.settings.recheck.shingle_size;
    }
    std::vector<DocSignature> sigs(docs.size());
    std::vector<Status> input_errors(docs.size());
    thread_local TextAnalysis analysis;
    for (size_t i = 0; i < docs.size(); ++i) {
      input_errors[i] = ValidateInput(docs[i]);
      if (!input_errors[i].ok()) continue;
      fp->Analyze(docs[i].text, &analysis, /*with_features=*/false);
      sigs[i] = MakeSignature(analysis, docs[i].text, shingle_size);
    }

    std::lock_guard lk(ns.mu);
    if (ns.deleted) return Status::NotFound("namespace \"" + ns_name + "\" was deleted");
    if (ns.fingerprinter != fp || ns.settings.recheck.shingle_size != shingle_size) {
      // Settings changed the scheme meanwhile (only possible while empty).
      fp = ns.fingerprinter;
      shingle_size = ns.settings.recheck.shingle_size;
      for (size_t i = 0; i < docs.size(); ++i) {
        if (!input_errors[i].ok()) continue;
        fp->Analyze(docs[i].text, &analysis, /*with_features=*/false);
        sigs[i] = MakeSignature(analysis, docs[i].text, shingle_size);
      }
    }
    const int64_t now = options_.clock_ms();
    for (size_t i = 0; i < docs.size(); ++i) {
      if (!input_errors[i].ok()) {
        out->push_back(input_errors[i]);
        continue;
      }
      auto decided = DecideLocked(ns, docs[i], sigs[i], mode, now, &(*waits)[i]);
      if (decided.ok()) {
        out->push_back(std::move(decided).value());
      } else {
        out->push_back(decided.status());
      }
      for (uint64_t seq : (*waits)[i]) *last = std::max(*last, seq);
    }
    return Status::OK();
  }

  // Once the writes are applied: an answer that names a document whose write
  // failed becomes that error (the document was never durable).
  void ApplyWriteStatuses(const std::vector<std::vector<uint64_t>>& waits, std::vector<Result<CheckOutcome>>* out) {
    for (size_t i = 0; i < waits.size() && i < out->size(); ++i) {
      if (!(*out)[i].ok()) continue;
      for (uint64_t seq : waits[i]) {
        Status s = committer_->StatusOf(seq);
        if (!s.ok()) {
          (*out)[i] = s;
          break;
        }
      }
    }
  }

  // The decision, under the namespace lock. Appends to *waits the write
  // sequence numbers that must be durable before the answer is sent.
  Result<CheckOutcome> DecideLocked(Namespace& ns, const DocumentInput& doc, const DocSignature& sig, CheckMode mode,
                                    int64_t now, std::vector<uint64_t>* waits) {
    CheckOutcome out;
    out.fingerprint = sig.fingerprint;
    out.has_features = sig.has_features;
    ++ns.counters.checks;
    const int64_t cutoff = ns.Cutoff(now);
    if (mode != CheckMode::kQueryOnly) {
      {
        if (DocMeta* m = ns.FindById(doc.id).second; m != nullptr && m->timestamp_ms >= cutoff) {
          // Idempotent re-send: the earlier answer stored it; nothing changes.
          out.stored = true;
          out.replay = true;
          out.fingerprint = m->fingerprint;
          out.has_features = m->has_features != 0;
          waits->push_back(m->commit_seq);
          return out;
        }
      }
    }
    std::optional<DuplicateMatch> best;
    std::vector<DuplicateMatch> all;
    NEARDUP_RETURN_IF_ERROR(ns.set->FindDuplicate(sig, &best, &all));
    for (const DuplicateMatch& match : all) {
      const DocMeta* m = ns.Find(match.id);
      if (m == nullptr || m->timestamp_ms < cutoff) continue;  // expired: never matches, even before the sweep
      out.matches.push_back(
          MatchedDocument{m->id.str(), match.distance, match.similarity, SimilarityIsExact(match), match.exact,
                          m->timestamp_ms});
      waits->push_back(m->commit_seq);
      if (static_cast<int>(out.matches.size()) >= ns.settings.max_matches) break;
    }
    out.duplicate = !out.matches.empty();
    if (out.duplicate) ++ns.counters.duplicates;
    // A time later than its arrival is the arrival: the sweeper pops the
    // documents in arrival order, and one dated a year ahead (a client's
    // clock) held back every later one's expiry for that year (a tester,
    // 2026-12-02). Retention is then at most its span after arrival.
    const int64_t ts = std::min(doc.timestamp_ms.value_or(now), now);
    const bool store = (mode == CheckMode::kInsertAlways || (mode == CheckMode::kCheckAndInsert && !out.duplicate)) &&
                       ts >= cutoff;  // a document already past retention is answered, never stored
    if (store) {
      if (auto [old_number, old] = ns.FindById(doc.id); old != nullptr) {
        // An expired copy not yet swept holds the id: retire it first.
        RemoveLocked(ns, old_number, *old);
      }
      const uint64_t number = ns.next_number;
      NEARDUP_RETURN_IF_ERROR(ns.set->Insert(number, sig));
      ns.by_id.Insert(doc.id, number);
      DocMeta meta(doc.id, sig, ts, 0);
      const uint64_t seq = committer_->EnqueueWrite(StoreWrite{
          StoreWrite::Op::kPut, ns.name, StoredDocument{doc.id, number, meta.KeySignature(), ts, EncodeSignatureExtra(sig)}});
      meta.commit_seq = seq;
      ns.Append(number, std::move(meta));
      ++ns.counters.inserted;
      out.stored = true;
      waits->push_back(seq);
    }
    return out;
  }

  // Drops a live document from memory only.
  static void ForgetLocked(Namespace& ns, uint64_t number, DocMeta& m) {
    ns.set->Remove(number, m.KeySignature());
    ns.by_id.Erase(m.id.view(), number);
    m = DocMeta{};
  }

  // Removes an expired document from memory and queues its deletion. (If
  // that write fails the store keeps an expired record, which never matches
  // and is dropped at the next open.)
  uint64_t RemoveLocked(Namespace& ns, uint64_t number, DocMeta& m) {
    const uint64_t seq = committer_->EnqueueWrite(StoreWrite{StoreWrite::Op::kDelete, ns.name, StoredDocument{m.id.str()}});
    ForgetLocked(ns, number, m);
    return seq;
  }

  // A store batch failed: those documents were never durable, so memory must
  // not keep them either (their answers are errors).
  void ForgetFailed(const std::vector<StoreWrite>& writes) {
    for (const StoreWrite& w : writes) {
      if (w.op != StoreWrite::Op::kPut) continue;
      auto ns = Lookup(w.ns);
      if (!ns) continue;
      std::lock_guard lk(ns->mu);
      auto [number, m] = ns->FindById(w.doc.id);
      if (m == nullptr || number != w.doc.number) continue;
      ForgetLocked(*ns, number, *m);
    }
  }

  void SweepLoop() {
    std::unique_lock lk(sweep_mu_);
    while (!sweep_stop_) {
      sweep_cv_.wait_for(lk, std::chrono::milliseconds(std::max<int64_t>(options_.sweep_interval_ms, 10)));
      if (sweep_stop_) break;
      lk.unlock();
      SweepOnce();
      lk.lock();
    }
  }

  // Pops expired documents off the front of every namespace, a bounded chunk
  // per lock hold so checks are never stalled for long. Returns the sequence
  // number of the last deletion it queued (0: none).
  uint64_t SweepOnce() {
    uint64_t last_seq = 0;
    std::vector<std::shared_ptr<Namespace>> all;
    {
      std::shared_lock lk(namespaces_mu_);
      for (const auto& [name, ns] : namespaces_) all.push_back(ns);
    }
    constexpr size_t kChunk = 10000;
    for (const auto& ns : all) {
      bool more = true;
      bool compact = false;
      while (more) {
        std::lock_guard lk(ns->mu);
        if (ns->deleted) break;
        const int64_t cutoff = ns->Cutoff(options_.clock_ms());
        size_t done = 0;
        while (!ns->docs.empty() && done < kChunk) {
          DocMeta& front = ns->docs.front();
          if (front.live) {
            if (front.timestamp_ms >= cutoff) break;
            last_seq = std::max(last_seq, RemoveLocked(*ns, ns->first_number, front));
            ++ns->counters.expired;
            ++ns->expired_since_compact;
          }
          ns->docs.pop_front();
          ++ns->first_number;
          ++done;
        }
        more = done == kChunk;
        if (ns->docs.empty()) ns->docs.shrink_to_fit();
        if (ns->expired_since_compact >= std::max<uint64_t>(100000, ns->by_id.size())) {
          ns->expired_since_compact = 0;
          compact = true;
        }
      }
      if (compact) (void)store_->Compact(ns->name);  // reclaims the deleted records' disk
    }
    return last_seq;
  }

  LocalEngineOptions options_;
  std::unique_ptr<DocumentStore> store_;
  std::unique_ptr<Committer> committer_;

  std::mutex settings_mu_;  // serializes Modify(); taken before namespaces_mu_
  std::shared_mutex namespaces_mu_;
  std::map<std::string, std::shared_ptr<Namespace>> namespaces_;

  CallGate gate_;
  std::mutex sweep_mu_;
  std::condition_variable sweep_cv_;
  bool sweep_stop_ = false;  // guarded by sweep_mu_
  std::thread sweeper_;
};

}  // namespace

Status SweepExpiredForTesting(Engine& engine) {
  auto* local = dynamic_cast<LocalEngine*>(&engine);
  if (local == nullptr) return Status::InvalidArgument("SweepExpiredForTesting: not a local engine");
  return local->SweepNow();
}

Result<std::unique_ptr<Engine>> OpenLocalEngine(const LocalEngineOptions& options,
                                                std::unique_ptr<DocumentStore> store) {
  NEARDUP_RETURN_IF_ERROR(options.default_settings.Validate());
  auto engine = std::make_unique<LocalEngine>(options, std::move(store));
  NEARDUP_RETURN_IF_ERROR(engine->Open());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace neardup
