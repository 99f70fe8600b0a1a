// RedisClusterEngine: see include/neardup/redis/redis_engine.h for the contract and
// docs/cluster.md for the layout and why the fenced protocol keeps exactly one.
#include "neardup/redis/redis_engine.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "neardup/text/fingerprint.h"
#include "neardup/dedup/near_dup_set.h"
#include "neardup/text/similarity.h"
#include "util/call_gate.h"
#include "redis/redis_cluster.h"
#include "util/coding.h"

namespace neardup {

// ---------------------------------------------------------------------------
// Layouts.

namespace {

// Bits [lo, hi) of the positions listed in `bits` as a mask.
uint64_t MaskOf(const std::vector<int>& bits, size_t lo, size_t hi) {
  uint64_t m = 0;
  for (size_t i = lo; i < hi; ++i) m |= uint64_t{1} << bits[i];
  return m;
}

// Splits `bits` into n contiguous blocks as evenly as possible.
std::vector<uint64_t> Blocks(const std::vector<int>& bits, int n) {
  std::vector<uint64_t> out;
  const size_t total = bits.size();
  size_t lo = 0;
  for (int i = 0; i < n; ++i) {
    const size_t hi = lo + (total - lo) / static_cast<size_t>(n - i);
    out.push_back(MaskOf(bits, lo, hi));
    lo = hi;
  }
  return out;
}

std::vector<int> BitsOf(uint64_t mask) {
  std::vector<int> bits;
  for (int b = 0; b < 64; ++b) {
    if (mask >> b & 1) bits.push_back(b);
  }
  return bits;
}

}  // namespace

Result<RedisTableLayout> RedisTableLayout::Make(std::string_view name, int k, uint64_t expected_documents) {
  if (k < 0 || k > 8) return Status::InvalidArgument("layout k must be in [0, 8]");
  RedisTableLayout l;
  l.design_k = k;
  const std::vector<int> all = BitsOf(~uint64_t{0});
  if (name == "auto") {
    const double per_bucket = static_cast<double>(expected_documents) / std::ldexp(1.0, 64 / (k + 1));
    name = per_bucket <= 4096 ? "pigeonhole" : "nested";
  }
  if (name == "pigeonhole") {
    l.masks = Blocks(all, k + 1);
  } else if (name == "nested") {
    for (uint64_t outer : Blocks(all, k + 1)) {
      for (uint64_t inner : Blocks(BitsOf(~outer), k + 1)) l.masks.push_back(outer | inner);
    }
  } else if (name == "manku") {
    const int n = k + 3;
    const std::vector<uint64_t> blocks = Blocks(all, n);
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b)
        for (int c = b + 1; c < n; ++c) l.masks.push_back(blocks[a] | blocks[b] | blocks[c]);
  } else {
    return Status::InvalidArgument("unknown layout \"" + std::string(name) +
                                   "\" (expected auto, pigeonhole, nested or manku)");
  }
  l.name = std::string(name);
  return l;
}

uint64_t RedisTableLayout::Key(uint64_t fingerprint, uint64_t mask) {
  uint64_t key = 0;
  int out = 0;
  while (mask) {
    const int b = std::countr_zero(mask);
    key |= ((fingerprint >> b) & 1) << out++;
    mask &= mask - 1;
  }
  return key;
}

int RedisTableLayout::key_bits(size_t table) const { return std::popcount(masks[table]); }

double RedisTableLayout::ExpectedRecordsRead(double n) const {
  double sum = 0;
  for (size_t t = 0; t < masks.size(); ++t) sum += n / std::ldexp(1.0, key_bits(t));
  return sum;
}

// ---------------------------------------------------------------------------
// The engine.

namespace {

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Hex(uint64_t v) { return FingerprintToHex(v); }

// The status a fencer writes: "R<its id>".
std::string FenceValue(uint64_t fencer) {
  std::string s = "R";
  s += std::to_string(fencer);
  return s;
}

bool ParseU64(std::string_view s, uint64_t* v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}
bool ParseI64(std::string_view s, int64_t* v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

Result<std::shared_ptr<const Fingerprinter>> MakeFingerprinter(const NamespaceSettings& s) {
  FingerprintOptions o;
  if (s.tokenizer == "mixed") {
    o.tokenizer = TokenizerKind::kMixedNgram;
  } else if (s.tokenizer == "icu-words") {
    o.tokenizer = TokenizerKind::kIcuWords;
  } else {
    return Status::InvalidArgument("unknown tokenizer \"" + s.tokenizer + "\"");
  }
  o.cjk_ngram = s.cjk_ngram;
  auto fp = Fingerprinter::Create(o);
  if (!fp.ok()) return fp.status();
  return std::make_shared<const Fingerprinter>(std::move(fp).value());
}

// Anchor bucket keys take the top `anchor_bits` bits of an anchor. A
// namespace record written before anchor buckets existed has no
// "anchor_bits": every instance then uses this value.
constexpr int kLegacyAnchorBits = 20;

// Anchor buckets are sized so that one (anchor prefix, window) key holds
// about this many records at the expected number of documents: tens of
// 12-byte records share one key's overhead (~50-90 B), and a reader's GET
// stays small.
constexpr double kAnchorRecordsPerKey = 32;

// Bits of anchor prefix per key for n documents spread over `windows` time
// windows, each appended under the default number of anchors.
int AnchorBitsFor(uint64_t n, int windows) {
  const double keys = static_cast<double>(n) * RecheckOptions{}.anchors / (std::max(windows, 1) * kAnchorRecordsPerKey);
  return std::clamp(static_cast<int>(std::ceil(std::log2(std::max(keys, 1.0)))), 8, 32);
}

// A namespace as stored at nd:ns:<name> (JSON) and cached by each engine.
struct NsInfo {
  std::string name;
  std::string raw;  // the stored JSON: a changed value means reload
  NamespaceSettings settings;
  std::string gen;  // random per creation: a deleted namespace's keys are never read again
  int64_t window_ms = 0;  // 0: one window (no retention at creation)
  RedisTableLayout layout;
  int anchor_bits = kLegacyAnchorBits;
  std::shared_ptr<const Fingerprinter> fp;
  int64_t loaded_ms = 0;

  // The policy NearDupSet would apply to this namespace.
  NearDupOptions Policy() const {
    NearDupOptions o;
    o.k = settings.k;
    o.recheck = settings.recheck;
    return o;
  }
  uint32_t AnchorPrefix(uint32_t anchor) const {
    return anchor_bits >= 32 ? anchor : anchor >> (32 - anchor_bits);
  }

  std::string P() const { return name + ":" + gen; }
  int64_t RetentionMs() const { return settings.retention_seconds * 1000; }
  int64_t Cutoff(int64_t now) const {
    return settings.retention_seconds > 0 ? now - RetentionMs() : std::numeric_limits<int64_t>::min();
  }
  int64_t Window(int64_t ts) const { return window_ms > 0 ? FloorDiv(ts, window_ms) : 0; }
  // Absolute expiry (ms) of a document's keys; 0 = never.
  int64_t DocExpiry(int64_t ts) const { return settings.retention_seconds > 0 ? ts + RetentionMs() + window_ms + 1000 : 0; }
  int64_t BucketExpiry(int64_t w, int64_t ts) const {
    if (settings.retention_seconds <= 0) return 0;
    return window_ms > 0 ? (w + 1) * window_ms + RetentionMs() + 1000 : DocExpiry(ts);
  }
};

std::string EncodeNs(const NamespaceSettings& s, const Fingerprinter& fp, const std::string& gen, int64_t window_ms,
                     const RedisTableLayout& layout, int anchor_bits) {
  nlohmann::json masks = nlohmann::json::array();
  for (uint64_t m : layout.masks) masks.push_back(Hex(m));
  nlohmann::json j = {{"settings", nlohmann::json::parse(s.ToJson())},
                      {"scheme_id", Hex(fp.scheme_id())},
                      {"scheme", fp.scheme_name()},
                      {"gen", gen},
                      {"window_ms", window_ms},
                      {"anchor_bits", anchor_bits},
                      {"layout", {{"name", layout.name}, {"design_k", layout.design_k}, {"masks", masks}}}};
  return j.dump();
}

Result<std::shared_ptr<NsInfo>> DecodeNs(const std::string& name, const std::string& raw) {
  const nlohmann::json j = nlohmann::json::parse(raw, nullptr, false);
  auto bad = [&] { return Status::Corruption("namespace \"" + name + "\": unreadable record in redis"); };
  if (j.is_discarded() || !j.is_object() || !j.contains("settings") || !j.contains("gen") || !j.contains("layout")) {
    return bad();
  }
  auto info = std::make_shared<NsInfo>();
  info->name = name;
  info->raw = raw;
  auto settings = NamespaceSettings::FromJson(j["settings"].dump(), NamespaceSettings{});
  if (!settings.ok()) return bad();
  info->settings = settings.value();
  info->gen = j.value("gen", "");
  info->window_ms = j.value("window_ms", int64_t{0});
  info->anchor_bits = j.value("anchor_bits", kLegacyAnchorBits);
  if (info->anchor_bits < 1 || info->anchor_bits > 32) return bad();
  const auto& l = j["layout"];
  info->layout.name = l.value("name", "");
  info->layout.design_k = l.value("design_k", 0);
  for (const auto& m : l.value("masks", nlohmann::json::array())) {
    auto v = ParseFingerprintHex(m.get<std::string>());
    if (!v.ok()) return bad();
    info->layout.masks.push_back(v.value());
  }
  if (info->layout.masks.empty() || info->gen.empty()) return bad();
  auto fp = MakeFingerprinter(info->settings);
  if (!fp.ok()) return fp.status();
  info->fp = std::move(fp).value();
  if (Hex(info->fp->scheme_id()) != j.value("scheme_id", "")) {
    return Status::FailedPrecondition("namespace \"" + name + "\" was written with fingerprint scheme " +
                                      j.value("scheme", std::string("?")) + "; this build computes " +
                                      info->fp->scheme_name() + ": refusing to mix them");
  }
  return info;
}

// A document's metadata (nd:m:...): what answers and peers need.
//   ts|fp hex|content hash hex|has features|lease end|document id[\xFF extra]
// where extra is EncodeSignatureExtra's bytes (num_chars and the sketch).
// Document ids are valid UTF-8, which never contains the byte 0xFF, so the
// first 0xFF ends the id; metadata written before sketches has none and
// decodes as "no sketch" (the pair rule then decides by distance <= k).
struct Meta {
  int64_t ts = 0;
  uint64_t fp = 0, ch = 0;
  bool hf = false;
  int64_t lease_until = 0;
  std::string id;
  std::string extra;  // encoded; empty: no sketch
  DocSignature sig;   // num_chars and sketch decoded from extra (the rest unused)
};

constexpr char kExtraMark = '\xFF';

std::string EncodeMeta(const Meta& m) {
  std::string s = std::to_string(m.ts) + "|" + Hex(m.fp) + "|" + Hex(m.ch) + "|" + (m.hf ? "1" : "0") + "|" +
                  std::to_string(m.lease_until) + "|" + m.id;
  if (!m.extra.empty()) {
    s += kExtraMark;
    s += m.extra;
  }
  return s;
}

bool DecodeMeta(std::string_view s, Meta* m) {
  std::string_view f[5];
  for (auto& part : f) {
    const size_t bar = s.find('|');
    if (bar == std::string_view::npos) return false;
    part = s.substr(0, bar);
    s.remove_prefix(bar + 1);
  }
  auto fp = ParseFingerprintHex(f[1]);
  auto ch = ParseFingerprintHex(f[2]);
  if (!ParseI64(f[0], &m->ts) || !fp.ok() || !ch.ok() || !ParseI64(f[4], &m->lease_until)) return false;
  m->fp = fp.value();
  m->ch = ch.value();
  m->hf = f[3] == "1";
  const size_t mark = s.find(kExtraMark);
  m->id = std::string(s.substr(0, mark));
  m->extra.clear();
  m->sig = DocSignature{};
  if (mark != std::string_view::npos) {
    // An unreadable or newer sketch is no sketch: the document is still
    // matched (by distance <= k), never dropped as if it did not exist.
    if (DecodeSignatureExtra(s.substr(mark + 1), &m->sig).ok()) m->extra = std::string(s.substr(mark + 1));
  }
  return true;
}

// A candidate: a record seen in a bucket, then its metadata and status.
struct Candidate {
  uint64_t iid = 0;
  int distance = 0;        // known once the metadata is read for anchor-only candidates
  bool by_anchor = false;  // shares a live anchor with the document
  bool have_meta = false;
  Meta meta;
  std::string status;  // "" pending, "K" kept, "R<iid>" rejected, "D" deleted
  double similarity = 0;
};

// Anchor bucket records: the full anchor (u32 LE) and the internal id (u64 LE).
constexpr size_t kAnchorRecord = 12;


RedisCommand Cmd(std::vector<std::string> args) {
  std::string key = args.size() > 1 ? args[1] : std::string();
  return RedisCommand{std::move(args), std::move(key)};
}

// SET key value [PXAT exp] [NX] [GET]
RedisCommand SetCmd(const std::string& key, std::string value, int64_t exp, bool nx, bool get) {
  std::vector<std::string> a = {"SET", key, std::move(value)};
  if (exp > 0) {
    a.push_back("PXAT");
    a.push_back(std::to_string(exp));
  }
  if (nx) a.push_back("NX");
  if (get) a.push_back("GET");
  return Cmd(std::move(a));
}

Status ReplyError(const RedisReply& r, const char* what) {
  if (r.is_error()) return Status::Unavailable(std::string("redis ") + what + ": " + r.str);
  return Status::OK();
}


class RedisClusterEngine final : public Engine {
 public:
  RedisClusterEngine(const RedisEngineOptions& options, std::unique_ptr<RedisClusterClient> client)
      : options_(options), client_(std::move(client)) {
    if (!options_.clock_ms) options_.clock_ms = SystemNowMs;
  }
  ~RedisClusterEngine() override { (void)Shutdown(); }

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
    auto info = Load(name, /*fresh=*/true);
    if (!info.ok()) return info.status();
    NamespaceStats s;
    s.name = name;
    s.settings = info.value()->settings;
    auto h = client_->Command({"HGETALL", CountersKey(*info.value())});
    if (!h.ok()) return h.status();
    for (size_t i = 0; i + 1 < h->elements.size(); i += 2) {
      uint64_t v = 0;
      if (!ParseU64(h->elements[i + 1].str, &v)) continue;
      const std::string& f = h->elements[i].str;
      if (f == "checks") s.checks = v;
      if (f == "duplicates") s.duplicates = v;
      if (f == "inserted") s.inserted = v;
      if (f == "deleted") s.deleted = v;
    }
    s.documents = s.inserted >= s.deleted ? s.inserted - s.deleted : 0;
    return s;
  }

  Status DeleteNamespace(const std::string& name) override {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(name));
    // Its data keys are left to their expiry: the next namespace of this
    // name gets a new generation, so they are never read again.
    std::vector<RedisCommand> cmds = {Cmd({"DEL", NsKey(name)}), Cmd({"SREM", kNamespacesKey, name})};
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, Durable()));
    Forget(name);
    if (r[0].integer == 0) return Status::NotFound("namespace \"" + name + "\" does not exist");
    return Status::OK();
  }

  std::vector<std::string> ListNamespaces() override {
    auto r = client_->Command({"SMEMBERS", kNamespacesKey});
    std::vector<std::string> out;
    if (!r.ok()) return out;
    for (const RedisReply& e : r->elements) out.push_back(e.str);
    std::sort(out.begin(), out.end());
    return out;
  }

  // ---- documents ------------------------------------------------------------

  Result<CheckOutcome> Check(const std::string& ns, const DocumentInput& doc, CheckMode mode) override {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(ns));
    return CheckOne(ns, doc, mode);
  }

  Status CheckBatch(const std::string& ns, std::span<const DocumentInput> docs, CheckMode mode,
                    std::vector<Result<CheckOutcome>>* out) override {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(ns));
    auto info = GetOrCreate(ns);
    if (!info.ok()) return info.status();
    out->clear();
    // In order, each as if sent alone: a later document sees the earlier ones.
    for (const DocumentInput& d : docs) out->push_back(CheckOne(ns, d, mode));
    return Status::OK();
  }

  Result<DocumentInfo> GetDocument(const std::string& ns, const std::string& id) override {
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(ns));
    NEARDUP_RETURN_IF_ERROR(ValidateDocumentId(id));
    auto info = Load(ns);
    if (!info.ok()) return info.status();
    uint64_t iid = 0;
    Candidate c;
    auto found = FindById(*info.value(), id, &iid, &c);
    if (!found.ok()) return found;
    return DocumentInfo{c.meta.id, c.meta.fp, c.meta.hf, c.meta.ts};
  }

  Status DeleteDocument(const std::string& ns, const std::string& id) override {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(ns));
    NEARDUP_RETURN_IF_ERROR(ValidateDocumentId(id));
    auto info = Load(ns);
    if (!info.ok()) return info.status();
    const NsInfo& n = *info.value();
    uint64_t iid = 0;
    Candidate c;
    auto found = FindById(n, id, &iid, &c);
    if (!found.ok()) return found.status();
    // "D" over "K": the record stays in its buckets until they expire but no
    // longer matches (only K records do).
    std::vector<RedisCommand> cmds = {SetCmd(StatKey(n, iid), "D", n.DocExpiry(c.meta.ts), false, false),
                                      Cmd({"DEL", IdKey(n, id)}),
                                      Cmd({"HINCRBY", CountersKey(n), "deleted", "1"})};
    std::vector<RedisReply> r;
    return client_->ExecuteBatch(cmds, &r, Durable());
  }

  EngineMetrics Metrics() override {
    EngineMetrics m;
    for (const std::string& name : ListNamespaces()) {
      ++m.namespaces;
      auto s = GetNamespace(name);
      if (s.ok()) m.documents += s->documents;
    }
    m.store_commits = commits_.load();
    m.store_commit_docs = commits_.load();
    return m;
  }

  Status Shutdown() override {
    (void)gate_.CloseAndDrain();
    return Status::OK();
  }

 private:
  static constexpr const char* kNamespacesKey = "nd:namespaces";
  static constexpr const char* kSeqKey = "nd:seq";
  static constexpr uint64_t kIdBlock = 1024;

  static Status Unavailable() { return Status::Unavailable("the engine is shutting down"); }

  RedisClusterClient::BatchOptions Durable() const { return {.wait_replicas = 1, .wait_timeout_ms = options_.wait_timeout_ms}; }

  static std::string NsKey(const std::string& name) { return "nd:ns:" + name; }
  static std::string CountersKey(const NsInfo& n) { return "nd:c:" + n.P(); }
  static std::string MetaKey(const NsInfo& n, uint64_t iid) { return "nd:m:" + n.P() + ":{" + std::to_string(iid) + "}"; }
  static std::string StatKey(const NsInfo& n, uint64_t iid) { return "nd:s:" + n.P() + ":{" + std::to_string(iid) + "}"; }
  static std::string SyncKey(uint64_t iid) { return "nd:y:{" + std::to_string(iid) + "}"; }
  static std::string IdKey(const NsInfo& n, const std::string& id) { return "nd:id:" + n.P() + ":" + id; }
  static std::string BucketKey(const NsInfo& n, size_t table, uint64_t key, int64_t w) {
    return "nd:b:" + n.P() + ":" + std::to_string(table) + ":" + Hex(key) + ":" + std::to_string(w);
  }
  static std::string ExactKey(const NsInfo& n, uint64_t ch, int64_t w) {
    return "nd:e:" + n.P() + ":" + Hex(ch) + ":" + std::to_string(w);
  }
  static std::string AnchorKey(const NsInfo& n, uint32_t prefix, int64_t w) {
    return "nd:a:" + n.P() + ":" + std::to_string(prefix) + ":" + std::to_string(w);
  }

  bool Step(std::string_view step) const { return !options_.step_hook || options_.step_hook(step); }
  static Status AbandonedStatus() { return Status::Unavailable("check abandoned (simulated crash)"); }

  // ---- namespace records ----------------------------------------------------

  // The namespace, from the cache when loaded within the last second.
  Result<std::shared_ptr<const NsInfo>> Load(const std::string& name, bool fresh = false) {
    const int64_t now = SystemNowMs();
    if (!fresh) {
      std::lock_guard lk(cache_mu_);
      auto it = cache_.find(name);
      if (it != cache_.end() && now - it->second->loaded_ms < 1000) return std::shared_ptr<const NsInfo>(it->second);
    }
    auto r = client_->Command({"GET", NsKey(name)});
    if (!r.ok()) return r.status();
    if (r->is_nil()) {
      Forget(name);
      return Status::NotFound("namespace \"" + name + "\" does not exist");
    }
    NEARDUP_RETURN_IF_ERROR(ReplyError(r.value(), "GET namespace"));
    return Remember(name, r->str);
  }

  Result<std::shared_ptr<const NsInfo>> Remember(const std::string& name, const std::string& raw) {
    {
      std::lock_guard lk(cache_mu_);
      auto it = cache_.find(name);
      if (it != cache_.end() && it->second->raw == raw) {
        auto copy = std::make_shared<NsInfo>(*it->second);
        copy->loaded_ms = SystemNowMs();
        it->second = copy;
        return std::shared_ptr<const NsInfo>(copy);
      }
    }
    auto info = DecodeNs(name, raw);
    if (!info.ok()) return info.status();
    info.value()->loaded_ms = SystemNowMs();
    std::lock_guard lk(cache_mu_);
    cache_[name] = info.value();
    return std::shared_ptr<const NsInfo>(info.value());
  }

  void Forget(const std::string& name) {
    std::lock_guard lk(cache_mu_);
    cache_.erase(name);
  }

  // The new settings from the current ones (nullptr: no such namespace).
  using SettingsMerge = std::function<Result<NamespaceSettings>(const NamespaceSettings* current)>;

  // Creates or updates the namespace with merge()'s settings. The record is
  // replaced only if it is still the one merged (compare-and-set), so no
  // other instance's change lands between read and write; else it retries.
  Status Modify(const std::string& name, const SettingsMerge& merge, bool* created) {
    CallGate::Pass guard(gate_);
    if (!guard.ok()) return Unavailable();
    NEARDUP_RETURN_IF_ERROR(ValidateNamespaceName(name));
    for (int attempt = 0; attempt < 8; ++attempt) {
      auto current = Load(name, /*fresh=*/true);
      if (!current.ok() && current.status().code() != Status::Code::kNotFound) return current.status();
      auto settings = merge(current.ok() ? &current.value()->settings : nullptr);
      if (!settings.ok()) return settings.status();
      NEARDUP_RETURN_IF_ERROR(settings->Validate());
      auto done = current.ok() ? Replace(*current.value(), settings.value()) : Create(name, settings.value());
      if (!done.ok()) return done.status();
      if (!done.value()) continue;  // changed, created or deleted meanwhile: merge again
      if (created) *created = !current.ok();
      return Status::OK();
    }
    return Status::Unavailable("namespace \"" + name + "\" keeps changing; retry");
  }

  // Compare-and-set of a namespace record: replaced only while it is `old`.
  static constexpr const char* kReplaceIfScript =
      "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0";

  // False if the record is no longer `n` (the caller merges again).
  Result<bool> Replace(const NsInfo& n, const NamespaceSettings& settings) {
    NEARDUP_RETURN_IF_ERROR(CheckChange(n, settings));
    auto fp = MakeFingerprinter(settings);
    if (!fp.ok()) return fp.status();
    const std::string raw = EncodeNs(settings, *fp.value(), n.gen, n.window_ms, n.layout, n.anchor_bits);
    const std::string key = NsKey(n.name);
    std::vector<RedisCommand> cmds = {RedisCommand{{"EVAL", kReplaceIfScript, "1", key, n.raw, raw}, key}};
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, Durable()));
    NEARDUP_RETURN_IF_ERROR(ReplyError(r[0], "replace namespace"));
    Forget(n.name);
    return r[0].type == RedisReply::Type::kInteger && r[0].integer == 1;
  }

  // kFailedPrecondition for a change the namespace's data cannot follow.
  Status CheckChange(const NsInfo& n, const NamespaceSettings& settings) {
    const std::string& name = n.name;
    const bool scheme_change = settings.tokenizer != n.settings.tokenizer || settings.cjk_ngram != n.settings.cjk_ngram;
    if (scheme_change && Documents(n) > 0) {
      return Status::FailedPrecondition("namespace \"" + name +
                                        "\" holds documents: changing tokenizer or cjk_ngram would mix "
                                        "fingerprint schemes (delete the namespace first)");
    }
    if (settings.k > n.layout.design_k) {
      return Status::FailedPrecondition("namespace \"" + name + "\" was created with a table layout for k <= " +
                                        std::to_string(n.layout.design_k) +
                                        " (docs/cluster.md); recreate it to raise k to " + std::to_string(settings.k));
    }
    // The short-text radius reads the same tables: past the layout's
    // radius a pair within short_k could share no table.
    if (settings.recheck.short_k > n.layout.design_k) {
      return Status::FailedPrecondition("namespace \"" + name + "\" was created with a table layout for radii <= " +
                                        std::to_string(n.layout.design_k) +
                                        " (docs/cluster.md); recreate it to raise recheck.short_k to " +
                                        std::to_string(settings.recheck.short_k));
    }
    return Status::OK();
  }

  // True if this call created it; false if it already existed.
  Result<bool> Create(const std::string& name, const NamespaceSettings& settings) {
    auto fp = MakeFingerprinter(settings);
    if (!fp.ok()) return fp.status();
    // Built for the widest radius the settings search (short texts search
    // max(k, short_k)), and never below 3 so that k can be raised to 3 later.
    auto layout = RedisTableLayout::Make(options_.layout, std::max({settings.k, settings.recheck.short_k, 3}),
                                         options_.expected_documents);
    if (!layout.ok()) return layout.status();
    std::random_device rd;
    const std::string gen = Hex((uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(SystemNowMs()));
    const int64_t window_ms =
        settings.retention_seconds > 0
            ? std::max<int64_t>(settings.retention_seconds * 1000 / std::max(options_.windows_per_retention, 1), 60000)
            : 0;
    const int anchor_bits =
        AnchorBitsFor(options_.expected_documents, window_ms > 0 ? options_.windows_per_retention : 1);
    const std::string raw = EncodeNs(settings, *fp.value(), gen, window_ms, layout.value(), anchor_bits);
    std::vector<RedisCommand> cmds = {SetCmd(NsKey(name), raw, 0, /*nx=*/true, false),
                                      Cmd({"SADD", kNamespacesKey, name})};
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, Durable()));
    NEARDUP_RETURN_IF_ERROR(ReplyError(r[0], "SET namespace"));
    return !r[0].is_nil();
  }

  Result<std::shared_ptr<const NsInfo>> GetOrCreate(const std::string& name) {
    for (int attempt = 0; attempt < 4; ++attempt) {
      auto info = Load(name);
      if (info.ok() || info.status().code() != Status::Code::kNotFound) return info;
      if (!options_.auto_create) return info.status();
      auto made = Create(name, options_.default_settings);
      if (!made.ok()) return made.status();
    }
    return Status::Unavailable("namespace \"" + name + "\" keeps changing; retry");
  }

  uint64_t Documents(const NsInfo& n) {
    auto s = GetNamespace(n.name);
    return s.ok() ? s->documents : 1;  // unknown: assume non-empty (refuse the scheme change)
  }

  // ---- ids ------------------------------------------------------------------

  Result<uint64_t> AllocateId() {
    std::lock_guard lk(id_mu_);
    if (next_id_ == id_end_) {
      auto r = client_->Command({"INCRBY", kSeqKey, std::to_string(kIdBlock)});
      if (!r.ok()) return r.status();
      if (r->type != RedisReply::Type::kInteger) return Status::Unavailable("redis INCRBY: " + r->str);
      id_end_ = static_cast<uint64_t>(r->integer) + 1;
      next_id_ = id_end_ - kIdBlock;
    }
    return next_id_++;
  }

  // ---- reading candidates -----------------------------------------------------

  // MGET meta status for each candidate (plus, when `sync`, a write to the
  // same slot and WAIT: the statuses read are then on a replica too, so an
  // answer never names a document a failover could lose).
  Status ReadCandidates(const NsInfo& n, std::vector<Candidate>* cands, bool sync) {
    if (cands->empty()) return Status::OK();
    std::vector<RedisCommand> cmds;
    for (const Candidate& c : *cands) {
      cmds.push_back(RedisCommand{{"MGET", MetaKey(n, c.iid), StatKey(n, c.iid)}, MetaKey(n, c.iid)});
      if (sync) cmds.push_back(SetCmd(SyncKey(c.iid), "1", SystemNowMs() + 10000, false, false));
    }
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, sync ? Durable() : RedisClusterClient::BatchOptions{}));
    const size_t stride = sync ? 2 : 1;
    for (size_t i = 0; i < cands->size(); ++i) {
      const RedisReply& m = r[i * stride];
      NEARDUP_RETURN_IF_ERROR(ReplyError(m, "MGET"));
      Candidate& c = (*cands)[i];
      c.have_meta = m.elements.size() == 2 && m.elements[0].is_string() && DecodeMeta(m.elements[0].str, &c.meta);
      c.status = m.elements.size() == 2 && m.elements[1].is_string() ? m.elements[1].str : "";
    }
    return Status::OK();
  }

  // Looks up a stored (kept, unexpired) document by id.
  Result<DocumentInfo> FindById(const NsInfo& n, const std::string& id, uint64_t* iid, Candidate* c) {
    auto r = client_->Command({"GET", IdKey(n, id)});
    if (!r.ok()) return r.status();
    auto not_found = [&] { return Status::NotFound("document \"" + id + "\" not found in namespace \"" + n.name + "\""); };
    if (!r->is_string() || !ParseU64(r->str, iid)) return not_found();
    std::vector<Candidate> one(1);
    one[0].iid = *iid;
    NEARDUP_RETURN_IF_ERROR(ReadCandidates(n, &one, /*sync=*/false));
    *c = one[0];
    if (!c->have_meta || c->status != "K" || c->meta.ts < n.Cutoff(options_.clock_ms())) return not_found();
    return DocumentInfo{c->meta.id, c->meta.fp, c->meta.hf, c->meta.ts};
  }

  // ---- the check ----------------------------------------------------------------

  Result<CheckOutcome> CheckOne(const std::string& ns, const DocumentInput& doc, CheckMode mode) {
    NEARDUP_RETURN_IF_ERROR(ValidateDocumentId(doc.id));
    if (doc.text.empty()) return Status::InvalidArgument("field \"text\" must be a non-empty string");
    for (int attempt = 0; attempt < 4; ++attempt) {
      auto info = GetOrCreate(ns);
      if (!info.ok()) return info.status();
      bool stale = false;
      auto out = CheckWith(*info.value(), doc, mode, &stale);
      if (!stale) return out;
      (void)Load(ns, /*fresh=*/true);
    }
    return Status::Unavailable("namespace \"" + ns + "\" keeps changing; retry");
  }

  Result<CheckOutcome> CheckWith(const NsInfo& n, const DocumentInput& doc, CheckMode mode, bool* stale) {
    TextAnalysis analysis;
    n.fp->Analyze(doc.text, &analysis);
    // The signature the embedded store decides on (near_dup_set.h).
    const DocSignature sig = MakeSignature(analysis);
    const uint64_t fp = sig.fingerprint, ch = sig.content_hash;
    const bool hf = sig.has_features;
    const int64_t now = options_.clock_ms();
    const int64_t cutoff = n.Cutoff(now);
    const int64_t ts = doc.timestamp_ms.value_or(now);
    const bool store = mode != CheckMode::kQueryOnly && ts >= cutoff;
    const int k = n.settings.k;
    const NearDupOptions policy = n.Policy();
    const RecheckOptions& rc = policy.recheck;
    // With the re-check off nothing of it is written or read: the store then
    // costs and decides exactly as the plain rule always did.
    const bool sketched = rc.enabled && sig.has_sketch();
    // Fingerprint records are kept up to the widest radius a pair with this
    // document can use: max(k, short_k) when either text is short. Whether a
    // candidate is short is known from its metadata (step 3).
    const int read_radius = sketched ? std::max(k, rc.short_k) : k;
    // The anchors this document is appended and looked up under: its first
    // `anchors`. Both sides of a pair use the same rule, so a pair sharing
    // one shares a key (docs/cluster.md).
    std::vector<uint32_t> anchors;
    if (sketched) {
      const size_t a = std::min(static_cast<size_t>(rc.anchors), sig.sketch.anchors.size());
      anchors.assign(sig.sketch.anchors.begin(), sig.sketch.anchors.begin() + static_cast<std::ptrdiff_t>(a));
    }
    std::vector<uint32_t> prefixes;
    for (uint32_t a : anchors) prefixes.push_back(n.AnchorPrefix(a));
    std::sort(prefixes.begin(), prefixes.end());
    prefixes.erase(std::unique(prefixes.begin(), prefixes.end()), prefixes.end());

    CheckOutcome out;
    out.fingerprint = fp;
    out.has_features = hf;

    // The buckets this document lives in (own window) and those it reads.
    auto keys_in = [&](int64_t w) {
      std::vector<std::string> keys;
      if (hf) {
        for (size_t t = 0; t < n.layout.masks.size(); ++t) keys.push_back(BucketKey(n, t, RedisTableLayout::Key(fp, n.layout.masks[t]), w));
      } else {
        keys.push_back(ExactKey(n, ch, w));
      }
      return keys;
    };
    std::vector<int64_t> windows;
    {
      int64_t hi = n.Window(std::max(now, ts)) + (n.window_ms > 0 ? 1 : 0);
      int64_t lo = cutoff == std::numeric_limits<int64_t>::min() ? hi - 64 : n.Window(cutoff);
      if (n.window_ms == 0) lo = hi = 0;
      lo = std::max(lo, hi - 64);
      for (int64_t w = lo; w <= hi; ++w) windows.push_back(w);
    }

    // Round 1: the namespace record (is our cached view current?), the id
    // (idempotency), and, when storing, our pending record: metadata (with
    // the sketch) and a lease, then APPEND to every bucket and anchor bucket
    // — all before round 2 reads any of them (docs/cluster.md, why exactly
    // one is kept); WAIT for a replica.
    uint64_t iid = 0;
    Meta meta{ts, fp, ch, hf, 0, doc.id};
    if (sketched) meta.extra = EncodeSignatureExtra(sig);
    const int64_t doc_exp = n.DocExpiry(ts);
    {
      if (store) {
        auto id = AllocateId();
        if (!id.ok()) return id.status();
        iid = id.value();
      }
      std::vector<RedisCommand> cmds = {Cmd({"GET", NsKey(n.name)}), Cmd({"GET", IdKey(n, doc.id)})};
      if (store) {
        meta.lease_until = options_.clock_ms() + options_.lease_ms;
        cmds.push_back(SetCmd(MetaKey(n, iid), EncodeMeta(meta), doc_exp, false, false));
        std::string rec(16, '\0');
        EncodeFixed(rec.data(), hf ? fp : ch, 8);
        EncodeFixed(rec.data() + 8, iid, 8);
        const int64_t w = n.Window(ts);
        const int64_t exp = n.BucketExpiry(w, ts);
        auto expire = [&](const std::string& key) {
          if (exp <= 0) return;
          // NX sets a fresh key's expiry, GT only ever extends it.
          cmds.push_back(Cmd({"PEXPIREAT", key, std::to_string(exp), "NX"}));
          cmds.push_back(Cmd({"PEXPIREAT", key, std::to_string(exp), "GT"}));
        };
        for (const std::string& key : keys_in(w)) {
          cmds.push_back(Cmd({"APPEND", key, rec}));
          expire(key);
        }
        for (uint32_t a : anchors) {
          std::string arec(kAnchorRecord, '\0');
          EncodeFixed(arec.data(), a, 4);
          EncodeFixed(arec.data() + 4, iid, 8);
          cmds.push_back(Cmd({"APPEND", AnchorKey(n, n.AnchorPrefix(a), w), std::move(arec)}));
        }
        for (uint32_t p : prefixes) expire(AnchorKey(n, p, w));
      }
      std::vector<RedisReply> r;
      NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, store ? Durable() : RedisClusterClient::BatchOptions{}));
      for (const RedisReply& x : r) NEARDUP_RETURN_IF_ERROR(ReplyError(x, "write"));
      if (!r[0].is_string() || r[0].str != n.raw) {
        // Deleted, re-created or changed by another instance: redo with the
        // current record (what we appended is pending under the old view and
        // is fenced or ignored by whoever sees it).
        *stale = true;
        return Status::Unavailable("stale namespace");
      }
      uint64_t old = 0;
      if (mode != CheckMode::kQueryOnly && r[1].is_string() && ParseU64(r[1].str, &old)) {
        std::vector<Candidate> prior(1);
        prior[0].iid = old;
        NEARDUP_RETURN_IF_ERROR(ReadCandidates(n, &prior, /*sync=*/true));
        if (prior[0].have_meta && prior[0].status == "K" && prior[0].meta.ts >= cutoff) {
          return Replay(n, prior[0], iid, doc_exp, /*repair_id=*/false, &out);
        }
      }
    }
    if (store && !Step("appended")) return AbandonedStatus();

    // Round 2: read every bucket (all tables, all live windows) and the
    // anchor buckets; filter by popcount and exact anchor here, not in Redis.
    std::vector<Candidate> cands;
    {
      std::vector<RedisCommand> cmds;
      std::vector<std::pair<uint32_t, int64_t>> anchor_reads;  // (prefix, window) per anchor GET, after the buckets
      for (int64_t w : windows) {
        for (std::string& key : keys_in(w)) cmds.push_back(Cmd({"GET", std::move(key)}));
      }
      const size_t buckets = cmds.size();
      for (int64_t w : windows) {
        for (uint32_t p : prefixes) {
          cmds.push_back(Cmd({"GET", AnchorKey(n, p, w)}));
          anchor_reads.emplace_back(p, w);
        }
      }
      cmds.push_back(Cmd({"HINCRBY", CountersKey(n), "checks", "1"}));
      std::vector<RedisReply> r;
      NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r));
      // id -> (distance, or -1 when not within read_radius; shares a live anchor)
      std::unordered_map<uint64_t, std::pair<int, bool>> seen;
      size_t records = 0;
      for (size_t i = 0; i < buckets; ++i) {
        NEARDUP_RETURN_IF_ERROR(ReplyError(r[i], "GET bucket"));
        const std::string& s = r[i].str;
        for (size_t off = 0; off + 16 <= s.size(); off += 16, ++records) {
          const uint64_t g = DecodeFixed(s.data() + off, 8), id = DecodeFixed(s.data() + off + 8, 8);
          if (id == iid) continue;
          const int d = hf ? std::popcount(g ^ fp) : (g == ch ? 0 : 65);
          if (d <= read_radius) seen.emplace(id, std::pair<int, bool>(d, false));
        }
      }
      if (!anchors.empty()) {
        // Stop keys by append order (docs/cluster.md): a record is live for
        // anchor x when at most anchor_max_postings records with x precede
        // it in its key. Whoever reads a record sees everything before it,
        // so both sides of a pair compute the same answer.
        const uint32_t cap = static_cast<uint32_t>(rc.anchor_max_postings);
        const int64_t own_w = n.Window(ts);
        std::vector<uint32_t> own_before(anchors.size(), 0);  // x-records before ours in our key
        std::vector<bool> own_found(anchors.size(), false);
        std::vector<std::vector<uint64_t>> hits(anchors.size());  // live records of other documents, per anchor
        std::vector<uint32_t> count(anchors.size());
        for (size_t i = 0; i < anchor_reads.size(); ++i) {
          const RedisReply& reply = r[buckets + i];
          NEARDUP_RETURN_IF_ERROR(ReplyError(reply, "GET anchors"));
          const auto [p, w] = anchor_reads[i];
          std::fill(count.begin(), count.end(), 0);
          const std::string& s = reply.str;
          for (size_t off = 0; off + kAnchorRecord <= s.size(); off += kAnchorRecord, ++records) {
            const auto x = static_cast<uint32_t>(DecodeFixed(s.data() + off, 4));
            const uint64_t id = DecodeFixed(s.data() + off + 4, 8);
            const auto it = std::lower_bound(anchors.begin(), anchors.end(), x);  // anchors ascend
            if (it == anchors.end() || *it != x) continue;
            const size_t a = static_cast<size_t>(it - anchors.begin());
            const uint32_t before = count[a]++;
            if (id == iid && w == own_w) {
              own_before[a] = before;
              own_found[a] = true;
            } else if (id != iid && before <= cap) {
              hits[a].push_back(id);
            }
          }
          if (w == own_w) {
            // Not appended (a query): as if appended now, after every record read.
            for (size_t a = 0; a < anchors.size(); ++a) {
              if (!own_found[a] && n.AnchorPrefix(anchors[a]) == p) own_before[a] = count[a];
            }
          }
        }
        for (size_t a = 0; a < anchors.size(); ++a) {
          if (own_before[a] > cap) continue;  // a stop key for us
          for (uint64_t id : hits[a]) seen.try_emplace(id, -1, false).first->second.second = true;
        }
      }
      for (const auto& [id, found] : seen) {
        Candidate c;
        c.iid = id;
        c.distance = found.first;
        c.by_anchor = found.second;
        cands.push_back(std::move(c));
      }
      std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.iid < b.iid; });
      scanned_.fetch_add(records);
    }
    NEARDUP_RETURN_IF_ERROR(ReadCandidates(n, &cands, /*sync=*/true));
    if (store && !Step("read")) return AbandonedStatus();

    // Step 3's filter: the pair rule (the one NearDupSet applies). A
    // candidate that is not a near-duplicate is dropped here, so it is never
    // waited on or fenced. Candidates without metadata stay (and are
    // ignored below as expired): a record whose metadata is not visible yet
    // belongs to a check whose step 1 has not finished, so its step 2 will
    // see our record and settle the pair.
    const PairSide me = PairSide::Of(sig);
    // A candidate's distance and similarity from its metadata, and the pair
    // rule's verdict: equal text first; texts without features match by equal
    // text only.
    auto measure = [&](Candidate& c) {
      const bool exact = c.meta.ch == ch;
      c.distance = hf && c.meta.hf ? std::popcount(c.meta.fp ^ fp) : (exact ? 0 : 65);
      if (exact) {
        c.similarity = 1.0;
        return true;
      }
      if (!hf || !c.meta.hf) return false;
      const PairDecision d = DecidePair(policy, me, PairSide::Of(c.meta.sig), c.distance);
      c.similarity = d.similarity;
      return d.duplicate;
    };
    std::erase_if(cands, [&](Candidate& c) {
      if (!c.have_meta) return false;
      if (!measure(c)) return true;
      if (c.meta.ch == ch) return false;
      // Found in a bucket within the read radius: a candidate only within the
      // pair's own radius (or through an anchor).
      const bool either_short = IsShortText(rc, sig.num_chars) || IsShortText(rc, c.meta.sig.num_chars);
      return !(c.distance <= k || c.by_anchor || (sketched && either_short && c.distance <= std::max(k, rc.short_k)));
    });

    std::vector<const Candidate*> kept;  // matches: K candidates, unexpired
    auto live = [&](const Candidate& c) { return c.have_meta && c.meta.ts >= cutoff; };
    for (const Candidate& c : cands) {
      if (!live(c) || c.status != "K") continue;
      if (mode != CheckMode::kQueryOnly && c.meta.id == doc.id) {
        // Our own earlier attempt was kept (its id key was not written yet, or its answer was lost).
        return Replay(n, c, iid, doc_exp, /*repair_id=*/true, &out);
      }
      kept.push_back(&c);
    }

    if (mode == CheckMode::kCheckAndInsert && store && kept.empty()) {
      // Resolve pending candidates in id order until one is kept.
      for (Candidate& c : cands) {
        if (!live(c) || !c.status.empty()) continue;
        NEARDUP_RETURN_IF_ERROR(Resolve(n, iid, &meta, doc_exp, &c));
        if (c.status == "K") {
          if (c.meta.id == doc.id) return Replay(n, c, iid, doc_exp, /*repair_id=*/true, &out);
          kept.push_back(&c);
          break;
        }
      }
      if (!Step("resolved")) return AbandonedStatus();
    }

    Candidate fencer;  // set when a peer rejected us
    if (store) {
      const bool keep = mode == CheckMode::kInsertAlways || kept.empty();
      std::vector<RedisCommand> cmds;
      if (keep && mode == CheckMode::kInsertAlways) {
        cmds.push_back(SetCmd(StatKey(n, iid), "K", doc_exp, false, /*get=*/true));
      } else {
        cmds.push_back(SetCmd(StatKey(n, iid), keep ? "K" : FenceValue(iid), doc_exp, true, true));
      }
      std::vector<RedisReply> r;
      NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, Durable()));
      NEARDUP_RETURN_IF_ERROR(ReplyError(r[0], "SET status"));
      if (keep) {
        const bool won = mode == CheckMode::kInsertAlways || r[0].is_nil();
        if (won) {
          commits_.fetch_add(1);
          out.stored = true;
          if (!Step("committed")) return AbandonedStatus();
          std::vector<RedisCommand> after = {SetCmd(IdKey(n, doc.id), std::to_string(iid), doc_exp, false, false),
                                             Cmd({"HINCRBY", CountersKey(n), "inserted", "1"})};
          if (!kept.empty()) after.push_back(Cmd({"HINCRBY", CountersKey(n), "duplicates", "1"}));
          std::vector<RedisReply> r2;
          NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(after, &r2, Durable()));
        } else {
          // A peer saw our pending record and rejected it ("R<its id>"): we
          // are its duplicate if it was kept; if it was not (it died or was
          // itself rejected) nothing names a stored document: 503, retry.
          uint64_t by = 0;
          if (r[0].str.size() < 2 || r[0].str[0] != 'R' || !ParseU64(std::string_view(r[0].str).substr(1), &by)) {
            return Status::Unavailable("unexpected status \"" + r[0].str + "\"");
          }
          fencer.iid = by;
          std::vector<Candidate> one = {fencer};
          NEARDUP_RETURN_IF_ERROR(ReadCandidates(n, &one, true));
          fencer = one[0];
          if (fencer.have_meta && fencer.status.empty()) NEARDUP_RETURN_IF_ERROR(WaitFor(n, &fencer, nullptr, 0, 0));
          if (!fencer.have_meta || fencer.status != "K" || fencer.meta.ts < cutoff) {
            return Status::Unavailable("rejected by a concurrent document that was not kept; retry");
          }
          (void)measure(fencer);  // its distance and similarity for the answer; it fenced us, so it matches
          kept.push_back(&fencer);
        }
      }
    }

    // The answer, in NearDupSet's order: the oldest document with the same
    // text, then the most similar (re-check on), then the nearest, then the
    // oldest.
    const Candidate* first_exact = nullptr;
    for (const Candidate* c : kept) {
      if (c->meta.ch == ch && (first_exact == nullptr || c->iid < first_exact->iid)) first_exact = c;
    }
    auto rank = [&](const Candidate* c) { return MatchRank{c == first_exact, c->similarity, c->distance, c->iid}; };
    std::sort(kept.begin(), kept.end(),
              [&](const Candidate* a, const Candidate* b) { return RanksBefore(rank(a), rank(b), rc.enabled); });
    for (const Candidate* c : kept) {
      if (static_cast<int>(out.matches.size()) >= n.settings.max_matches) break;
      out.matches.push_back(MatchedDocument{c->meta.id, c->distance, c->similarity, c->meta.ch == ch, c->meta.ts});
    }
    out.duplicate = !out.matches.empty();
    if (out.duplicate && !out.stored && mode != CheckMode::kQueryOnly) {
      std::vector<RedisReply> r;
      const std::vector<RedisCommand> cmds = {Cmd({"HINCRBY", CountersKey(n), "duplicates", "1"})};
      (void)client_->ExecuteBatch(cmds, &r);
    }
    return out;
  }

  // Decides a pending candidate `c` (status ""): waits while it is older
  // than us and its lease runs, else fences it with "R<our id>" (SET NX: the
  // status is decided once; whoever sets it first wins). Leaves c->status
  // decided ("K" or "R...") on success.
  Status Resolve(const NsInfo& n, uint64_t iid, Meta* own, int64_t own_exp, Candidate* c) {
    // An older attempt of the same document id (its client retried): fence it
    // at once rather than wait for its lease.
    if (c->iid < iid && c->meta.id != own->id) {
      NEARDUP_RETURN_IF_ERROR(WaitFor(n, c, own, iid, own_exp));
      if (!c->status.empty()) return Status::OK();
    }
    std::vector<RedisCommand> cmds = {SetCmd(StatKey(n, c->iid), FenceValue(iid), n.DocExpiry(c->meta.ts), true, true)};
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, Durable()));
    NEARDUP_RETURN_IF_ERROR(ReplyError(r[0], "SET fence"));
    c->status = r[0].is_nil() ? FenceValue(iid) : r[0].str;
    return Status::OK();
  }

  // Polls c's status until it is decided or its lease ends (by our clock;
  // bounded by lease_ms past the last lease seen, whatever the clocks say).
  // While waiting, renews our own lease (when `own` is given) so that
  // waiting on a dead peer never lets our own record be fenced.
  Status WaitFor(const NsInfo& n, Candidate* c, Meta* own, uint64_t iid, int64_t own_exp) {
    int sleep_ms = 1;
    const auto hard_stop = std::chrono::steady_clock::now() + std::chrono::milliseconds(3 * options_.lease_ms + 1000);
    while (c->status.empty() && options_.clock_ms() < c->meta.lease_until &&
           std::chrono::steady_clock::now() < hard_stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
      sleep_ms = std::min(sleep_ms * 2, 20);
      std::vector<Candidate> one = {*c};
      NEARDUP_RETURN_IF_ERROR(ReadCandidates(n, &one, /*sync=*/true));
      if (!one[0].have_meta) {  // expired meanwhile
        c->status = "R";
        return Status::OK();
      }
      *c = one[0];
      if (own && own->lease_until - options_.clock_ms() < options_.lease_ms / 2) {
        own->lease_until = options_.clock_ms() + options_.lease_ms;
        std::vector<RedisCommand> cmds = {SetCmd(MetaKey(n, iid), EncodeMeta(*own), own_exp, false, false)};
        std::vector<RedisReply> r;
        NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, Durable()));
      }
    }
    return Status::OK();
  }

  // The id is stored (as `kept`): answer replay and retire our own pending
  // record. With repair_id the id key is written if missing (the attempt that
  // stored it died between its status and its id key).
  Result<CheckOutcome> Replay(const NsInfo& n, const Candidate& kept, uint64_t iid, int64_t doc_exp, bool repair_id,
                              CheckOutcome* out) {
    std::vector<RedisCommand> cmds;
    if (iid != 0) cmds.push_back(SetCmd(StatKey(n, iid), FenceValue(iid), doc_exp, true, false));
    if (repair_id) {
      cmds.push_back(SetCmd(IdKey(n, kept.meta.id), std::to_string(kept.iid), n.DocExpiry(kept.meta.ts), true, true));
    }
    if (!cmds.empty()) {
      std::vector<RedisReply> r;
      NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, Durable()));
      if (repair_id && r.back().is_nil()) {
        const std::vector<RedisCommand> count = {Cmd({"HINCRBY", CountersKey(n), "inserted", "1"})};
        (void)client_->ExecuteBatch(count, &r);
      }
    }
    out->stored = true;
    out->replay = true;
    out->duplicate = false;
    out->matches.clear();
    out->fingerprint = kept.meta.fp;
    out->has_features = kept.meta.hf;
    return std::move(*out);
  }

  RedisEngineOptions options_;
  std::unique_ptr<RedisClusterClient> client_;
  std::mutex cache_mu_;
  std::map<std::string, std::shared_ptr<NsInfo>> cache_;
  std::mutex id_mu_;
  uint64_t next_id_ = 0, id_end_ = 0;
  CallGate gate_;
  std::atomic<uint64_t> commits_{0}, scanned_{0};
};

}  // namespace

namespace {

// "key=value&key=value" after the '?' of the uri: per-deployment options that
// `neardup serve --store` passes through without flags of its own.
Status ApplyUriOptions(std::string_view query, RedisEngineOptions* o) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) return Status::InvalidArgument("store option \"" + std::string(kv) + "\" is not key=value");
    const std::string_view key = kv.substr(0, eq), value = kv.substr(eq + 1);
    int64_t v = 0;
    const bool is_int = ParseI64(value, &v) && v > 0;
    auto bad = [&] { return Status::InvalidArgument("store option " + std::string(kv) + ": expected a positive integer"); };
    if (key == "layout") {
      o->layout = std::string(value);
    } else if (key == "expected_documents") {
      // Also accepts 1e9-style values.
      double d = 0;
      try {
        d = std::stod(std::string(value));
      } catch (...) {
        return bad();
      }
      if (!(d >= 1 && d <= 1e15)) return bad();
      o->expected_documents = static_cast<uint64_t>(d);
    } else if (key == "lease_ms") {
      if (!is_int) return bad();
      o->lease_ms = v;
    } else if (key == "windows_per_retention") {
      if (!is_int || v > 64) return bad();
      o->windows_per_retention = static_cast<int>(v);
    } else if (key == "wait_timeout_ms") {
      if (!is_int || v > 60000) return bad();
      o->wait_timeout_ms = static_cast<int>(v);
    } else if (key == "retry_budget_ms") {
      if (!is_int || v > 3600000) return bad();
      o->retry_budget_ms = static_cast<int>(v);
    } else {
      return Status::InvalidArgument("unknown store option \"" + std::string(key) +
                                     "\" (layout, expected_documents, lease_ms, windows_per_retention, "
                                     "wait_timeout_ms, retry_budget_ms)");
    }
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Engine>> OpenRedisClusterEngine(const RedisEngineOptions& given) {
  RedisEngineOptions options = given;
  if (const size_t q = options.uri.find('?'); q != std::string::npos) {
    NEARDUP_RETURN_IF_ERROR(ApplyUriOptions(std::string_view(options.uri).substr(q + 1), &options));
    options.uri.resize(q);
  }
  auto seeds = ParseRedisClusterUri(options.uri);
  if (!seeds.ok()) return seeds.status();
  NEARDUP_RETURN_IF_ERROR(options.default_settings.Validate());
  auto layout = RedisTableLayout::Make(options.layout, 3, options.expected_documents);
  if (!layout.ok()) return layout.status();
  if (options.lease_ms < 10 || options.wait_timeout_ms < 1 || options.windows_per_retention < 1) {
    return Status::InvalidArgument("lease_ms, wait_timeout_ms and windows_per_retention must be positive");
  }
  RedisClusterOptions co;
  co.seeds = seeds.value();
  co.retry_budget_ms = options.retry_budget_ms;
  auto client = RedisClusterClient::Connect(co);
  if (!client.ok()) return client.status();
  return std::unique_ptr<Engine>(new RedisClusterEngine(options, std::move(client).value()));
}

}  // namespace neardup
