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
#include <span>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "neardup/engine/namespace_record.h"
#include "neardup/text/fingerprint.h"
#include "neardup/dedup/near_dup_set.h"
#include "neardup/text/similarity.h"
#include "engine/shared_store_engine.h"
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


std::string Hex(uint64_t v) { return FingerprintToHex(v); }

bool ParseU64(std::string_view s, uint64_t* v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}
bool ParseI64(std::string_view s, int64_t* v) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
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
  NearDupOptions Policy() const { return PolicyOf(settings); }
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
  nlohmann::json j = {{"gen", gen},
                      {"window_ms", window_ms},
                      {"anchor_bits", anchor_bits},
                      {"layout", {{"name", layout.name}, {"design_k", layout.design_k}, {"masks", masks}}}};
  return EncodeNamespaceRecord(s, fp, j.dump());
}

Result<std::shared_ptr<NsInfo>> DecodeNs(const std::string& name, const std::string& raw) {
  auto record = DecodeNamespaceRecord(name, raw, "redis");
  if (!record.ok()) return record.status();
  NEARDUP_RETURN_IF_ERROR(RequireAnchorScheme(name, *record));
  const nlohmann::json j = nlohmann::json::parse(raw, nullptr, false);
  auto bad = [&] { return Status::Corruption("namespace \"" + name + "\": unreadable record in redis"); };
  if (!j.contains("gen") || !j.contains("layout")) return bad();
  auto info = std::make_shared<NsInfo>();
  info->name = name;
  info->raw = raw;
  info->settings = record->settings;
  info->fp = record->fingerprinter;
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


// A record's status (nd:s:<ns>:{iid}), set once by SET NX. Stored bytes,
// unchanged since the first release (docs/cluster.md): absent = pending,
// "K" kept, "R<iid>" rejected (fenced by the check with that id), "D"
// deleted (was kept). ParseStatus and FormatStatus are the only places that
// know the bytes.
enum class RecordState { kPending, kKept, kRejected, kDeleted, kUnreadable };

struct RecordStatus {
  RecordState state = RecordState::kPending;
  uint64_t by = 0;  // kRejected: the fencer's id; 0 when unknown (its record expired)

  static RecordStatus Kept() { return {RecordState::kKept, 0}; }
  static RecordStatus RejectedBy(uint64_t fencer) { return {RecordState::kRejected, fencer}; }
  static RecordStatus Deleted() { return {RecordState::kDeleted, 0}; }
  bool pending() const { return state == RecordState::kPending; }
  bool kept() const { return state == RecordState::kKept; }
};

// Bytes that are none of the above (never written by this code) read as
// kUnreadable: decided, and not kept, so nothing waits on or matches them.
RecordStatus ParseStatus(std::string_view s) {
  if (s.empty()) return {};
  if (s == "K") return RecordStatus::Kept();
  if (s == "D") return RecordStatus::Deleted();
  if (s[0] == 'R') {
    uint64_t by = 0;
    if (s.size() == 1 || ParseU64(s.substr(1), &by)) return RecordStatus::RejectedBy(by);
  }
  return {RecordState::kUnreadable, 0};
}

// Only decided states are ever written (pending is the key's absence).
std::string FormatStatus(const RecordStatus& s) {
  switch (s.state) {
    case RecordState::kKept: return "K";
    case RecordState::kRejected: {
      std::string out = "R";  // not "R" + to_string(): GCC 12 warns falsely (-Wrestrict)
      out += std::to_string(s.by);
      return out;
    }
    case RecordState::kDeleted: return "D";
    case RecordState::kPending:
    case RecordState::kUnreadable: break;
  }
  return "";
}

// A candidate: a record seen in a bucket, then its metadata and status.
struct Candidate {
  uint64_t iid = 0;
  int distance = 0;        // known once the metadata is read for anchor-only candidates
  // Shares an anchor the document probes (not a stop key for it): a
  // candidate in any state, as in the embedded store.
  bool by_anchor = false;
  // Found only through a check's record under an anchor that is a stop key
  // for the document, with no decided mark: its check had not finished when
  // we read (a concurrent check, which the protocol must settle). A
  // candidate while pending or kept: kept, its kept marks under the anchors
  // we probe may not have landed yet, so that is no proof that the embedded
  // store, deciding it first, would not have found it (issue 16: both were
  // kept). Rejected or deleted, never a match.
  bool in_flight = false;
  uint32_t stop_anchor = 0;  // in_flight: the anchor it was found under
  bool have_meta = false;
  Meta meta;
  RecordStatus status;
  double similarity = 0;
  bool similarity_exact = false;
};

// Anchor bucket records: the full anchor (u32 LE) and the internal id (u64 LE).
constexpr size_t kAnchorRecord = 12;

// One check (RedisClusterEngine::CheckWith): what it derives from the
// document and the namespace up front, and what its steps learn.
struct CheckRun : CheckBasis {
  CheckRun(const NsInfo& ns, const DocumentInput& d, CheckMode m, int64_t now)
      : CheckBasis(*ns.fp, ns.Policy(), d, m, ns.Cutoff(now), now), n(ns) {
    fp = sig.fingerprint;
    ch = sig.content_hash;
    hf = sig.has_features;
    store = mode != CheckMode::kQueryOnly && ts >= cutoff;
    k = n.settings.k;
    // Fingerprint records are kept up to the widest radius a pair with this
    // document can use: max(k, short_k) when either text is short. Whether a
    // candidate is short is known from its metadata (step 3).
    read_radius = sketched ? std::max(k, rc().short_k) : k;
    // Its first `anchors` anchors, appended and looked up: both sides of a
    // pair use the same rule, so a pair sharing one shares a key.
    if (sketched && rc().anchors > 0) {
      all_anchors = sig.sketch.anchors;
      const size_t a = std::min(static_cast<size_t>(rc().anchors), all_anchors.size());
      anchors.assign(all_anchors.begin(), all_anchors.begin() + static_cast<std::ptrdiff_t>(a));
      for (size_t i = 0; i < all_anchors.size(); ++i) anchor_order.emplace_back(all_anchors[i], i);
      std::sort(anchor_order.begin(), anchor_order.end());
    }
    prefixes = PrefixesOf(0, anchors.size(), {});
    // Every window a live record can be in (at most 64 back).
    int64_t hi = n.Window(std::max(now, ts)) + (n.window_ms > 0 ? 1 : 0);
    int64_t lo = cutoff == std::numeric_limits<int64_t>::min() ? hi - 64 : n.Window(cutoff);
    if (n.window_ms == 0) lo = hi = 0;
    lo = std::max(lo, hi - 64);
    for (int64_t w = lo; w <= hi; ++w) windows.push_back(w);
    meta = Meta{ts, fp, ch, hf, 0, doc.id};
    if (sketched) meta.extra = EncodeSignatureExtra(sig);
    doc_exp = n.DocExpiry(ts);
  }
  CheckRun(const CheckRun&) = delete;  // `kept` points into `cands` and at `fencer`

  bool Live(const Candidate& c) const { return c.have_meta && c.meta.ts >= cutoff; }
  // The distinct bucket prefixes of all_anchors[lo, hi), less `skip`.
  std::vector<uint32_t> PrefixesOf(size_t lo, size_t hi, const std::vector<uint32_t>& skip) const {
    std::vector<uint32_t> out;
    for (size_t i = lo; i < hi; ++i) {
      const uint32_t p = n.AnchorPrefix(all_anchors[i]);
      if (std::find(skip.begin(), skip.end(), p) == skip.end()) out.push_back(p);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  const NsInfo& n;
  uint64_t fp = 0, ch = 0;
  bool hf = false;
  bool store = false;  // a pending record is written (not a query, not expired on arrival)
  int k = 0;
  int read_radius = 0;
  std::vector<uint32_t> all_anchors;  // the sketch's anchors (up to kAnchorCount), in its order
  // (anchor, its index in all_anchors), ascending: to file a read record.
  std::vector<std::pair<uint32_t, size_t>> anchor_order;
  std::vector<uint32_t> anchors;      // its first `anchors`: our records are appended under these
  std::vector<uint32_t> prefixes;     // their anchor bucket prefixes, distinct
  std::vector<uint32_t> filed;        // kept: marked under these (ChooseAnchors)
  std::vector<int64_t> windows;
  uint64_t iid = 0;  // our record's id (0: nothing stored)
  Meta meta;         // our record's metadata
  int64_t doc_exp = 0;
  std::vector<Candidate> cands;        // in id order
  std::vector<const Candidate*> kept;  // the matches: kept, unexpired
  Candidate fencer;                    // the peer that rejected us, if one did
  bool answered = false;  // `out` is final (a replay)
};

// How a candidate was found: its distance (-1 when not within read_radius)
// and the Candidate flags by_anchor and in_flight.
struct Seen {
  int distance = -1;
  bool by_anchor = false;
  bool in_flight = false;
  uint32_t stop_anchor = 0;
};
using SeenIds = std::unordered_map<uint64_t, Seen>;
// Fingerprint buckets: records within the read radius (equal text, for texts
// without features).
Status ScanBuckets(const CheckRun& run, std::span<const RedisReply> replies, SeenIds* seen, size_t* records) {
  for (const RedisReply& reply : replies) {
    NEARDUP_RETURN_IF_ERROR(ReplyError(reply, "GET bucket"));
    const std::string& s = reply.str;
    for (size_t off = 0; off + 16 <= s.size(); off += 16, ++*records) {
      const uint64_t g = DecodeFixed(s.data() + off, 8), id = DecodeFixed(s.data() + off + 8, 8);
      if (id == run.iid) continue;
      const int d = run.hf ? std::popcount(g ^ run.fp) : (g == run.ch ? 0 : 65);
      if (d <= run.read_radius) (*seen)[id].distance = d;
    }
  }
  return Status::OK();
}

// An anchor bucket holds three kinds of 12-byte records (anchor u32 LE, id
// u64 LE): a check's record, appended in step 1 under its first `anchors`
// anchors before it is decided (what the protocol's exactly-one argument
// needs); a kept mark (id bit 63), appended once the document is kept, under
// the anchors the embedded store would file it under; and a decided mark
// (bit 62) under every one of its first anchors once its status is set and,
// when kept, once every kept mark is acknowledged (by itself; lazily by a
// reader only for a rejected or deleted record). Stop keys count kept marks
// only, as the embedded store counts kept documents: duplicates, rejected
// attempts and checks in flight never make an anchor a stop key (they did
// before issue 16, so the 17th repost of a text, later the 65th, stopped
// its own anchors and was kept again). Decided marks keep the records
// behind a stop key from being read again and again: only unmarked ones
// can be concurrent checks. Only a decided mark says "decided": a kept
// mark lands in the same round as the document's other kept marks, so
// seeing one under a stop key says nothing of the others (issue 16: a
// reader skipped a kept document through it and missed its mark under an
// anchor it probes; both were kept).
constexpr uint64_t kKeptMark = uint64_t{1} << 63;
constexpr uint64_t kDecidedMark = uint64_t{1} << 62;

// Per anchor of the document (all_anchors' order): the distinct kept marks
// (at most cap + 1: enough to tell a stop key) and, for its first `anchors`,
// other checks' records and the ids marked decided (kept or decided marks).
struct AnchorScan {
  explicit AnchorScan(size_t n) : kept(n), appended(n), decided(n) {}
  std::vector<std::vector<uint64_t>> kept;
  std::vector<std::vector<uint64_t>> appended;
  std::vector<std::unordered_set<uint64_t>> decided;
  size_t read = 0;  // the keys of all_anchors[0, read) were read
};

Status ScanAnchors(const CheckRun& run, std::span<const RedisReply> replies, AnchorScan* scan, size_t* records) {
  const auto& order = run.anchor_order;
  const size_t cap = static_cast<size_t>(run.rc().anchor_max_postings);
  for (const RedisReply& reply : replies) {
    NEARDUP_RETURN_IF_ERROR(ReplyError(reply, "GET anchors"));
    const std::string& s = reply.str;
    for (size_t off = 0; off + kAnchorRecord <= s.size(); off += kAnchorRecord, ++*records) {
      const auto x = static_cast<uint32_t>(DecodeFixed(s.data() + off, 4));
      const uint64_t raw = DecodeFixed(s.data() + off + 4, 8), id = raw & ~(kKeptMark | kDecidedMark);
      const auto it = std::lower_bound(order.begin(), order.end(), std::pair<uint32_t, size_t>{x, 0});
      if (it == order.end() || it->first != x || id == run.iid) continue;
      const size_t a = it->second;
      const bool first = a < run.anchors.size();
      std::vector<uint64_t>& kept = scan->kept[a];
      if ((raw & (kKeptMark | kDecidedMark)) == 0) {
        if (first) scan->appended[a].push_back(id);
        continue;
      }
      if (first && (raw & kDecidedMark) != 0) scan->decided[a].insert(id);
      if ((raw & kKeptMark) != 0 && kept.size() <= cap && std::find(kept.begin(), kept.end(), id) == kept.end()) {
        kept.push_back(id);
      }
    }
  }
  return Status::OK();
}

// The embedded store's anchor choice (NearDupSet, near_dup_set.cc): a
// document probes its first `anchors` anchors that are not stop keys (more
// than anchor_max_postings kept documents filed) and is filed under its
// first max(anchors, 16) such anchors. False when that needs an anchor whose
// keys were not read yet.
bool ChooseAnchors(const CheckRun& run, const AnchorScan& scan, std::vector<size_t>* probe,
                   std::vector<size_t>* filed) {
  const size_t cap = static_cast<size_t>(run.rc().anchor_max_postings);
  return ChooseAnchors(run.rc(), run.all_anchors.size(), [&](size_t a) {
    return a >= scan.read ? -1 : scan.kept[a].size() > cap ? 1 : 0;
  }, probe, filed);
}

// The anchor candidates: kept documents filed under a probed anchor and
// checks that appended one (in any state: as the embedded store finds
// them), and checks that appended a stop key of ours with no decided mark
// there yet (in_flight: unfinished when read; settled by the protocol).
void AddAnchorCandidates(const CheckRun& run, const AnchorScan& scan, const std::vector<size_t>& probe,
                         SeenIds* seen) {
  std::vector<bool> probed(run.all_anchors.size(), false);
  for (size_t a : probe) probed[a] = true;
  for (size_t a = 0; a < run.all_anchors.size(); ++a) {
    if (probed[a]) {
      for (uint64_t id : scan.kept[a]) (*seen)[id].by_anchor = true;
      for (uint64_t id : scan.appended[a]) (*seen)[id].by_anchor = true;
    } else {
      for (uint64_t id : scan.appended[a]) {
        if (scan.decided[a].count(id) != 0) continue;
        Seen& s = (*seen)[id];
        s.in_flight = true;
        s.stop_anchor = run.all_anchors[a];
      }
    }
  }
}

// A candidate's distance and similarity from its metadata, and the pair
// rule's verdict: equal text first; texts without features match by equal
// text only.
bool Measure(const CheckRun& run, Candidate* c) {
  const bool exact = c->meta.ch == run.ch;
  c->distance = run.hf && c->meta.hf ? std::popcount(c->meta.fp ^ run.fp) : (exact ? 0 : 65);
  // Equal normalized text drops punctuation, which the similarity counts:
  // with sketches on both sides it is decided like any other pair.
  const bool both_sketched = run.sig.has_sketch() && c->meta.sig.has_sketch() && run.rc().enabled;
  if (exact && !both_sketched) {
    c->similarity = 1.0;
    c->similarity_exact = true;
    return true;
  }
  if (!exact && (!run.hf || !c->meta.hf)) return false;
  const PairDecision d = DecidePair(run.policy, PairSide::Of(run.sig), PairSide::Of(c->meta.sig), c->distance);
  c->similarity = d.similarity;
  c->similarity_exact = d.exact;
  return d.duplicate;
}

// Step 3, Look: the pair rule (the one NearDupSet applies). A candidate that is
// not a near-duplicate is dropped here, so it is never waited on or fenced.
// Candidates without metadata stay (and are ignored later as expired): a
// record whose metadata is not visible yet belongs to a check whose step 1
// has not finished, so its step 2 will see our record and settle the pair.
void FilterByPairRule(CheckRun& run) {
  const RecheckOptions& rc = run.rc();
  std::erase_if(run.cands, [&](Candidate& c) {
    if (!c.have_meta) return false;
    if (!Measure(run, &c)) return true;
    if (c.meta.ch == run.ch) return false;
    // Found in a bucket within the read radius: a candidate only within the
    // pair's own radius (or through an anchor).
    const bool either_short = IsShortText(rc, run.sig.num_chars) || IsShortText(rc, c.meta.sig.num_chars);
    const bool anchored = c.by_anchor || (c.in_flight && (c.status.pending() || c.status.kept()));
    return !(c.distance <= run.k || anchored ||
             (run.sketched && either_short && c.distance <= std::max(run.k, rc.short_k)));
  });
}

class RedisClusterEngine final : public SharedStoreEngine {
 public:
  RedisClusterEngine(const RedisEngineOptions& options, std::unique_ptr<RedisClusterClient> client)
      : options_(options), client_(std::move(client)) {
    if (!options_.clock_ms) options_.clock_ms = SystemNowMs;
  }
  ~RedisClusterEngine() override { (void)Shutdown(); }

  // ---- namespaces -----------------------------------------------------------

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
    std::vector<RedisCommand> cmds = {SetCmd(StatKey(n, iid), FormatStatus(RecordStatus::Deleted()), n.DocExpiry(c.meta.ts), false, false),
                                      Cmd({"DEL", IdKey(n, id)}),
                                      Cmd({"HINCRBY", CountersKey(n), "deleted", "1"})};
    std::vector<RedisReply> r;
    return client_->ExecuteBatch(cmds, &r, Durable());
  }

  EngineMetrics Metrics() override {
    EngineMetrics m = SharedStoreEngine::Metrics();
    m.store_commits = commits_.load();
    m.store_commit_docs = commits_.load();
    return m;
  }

 private:
  static constexpr const char* kNamespacesKey = "nd:namespaces";
  static constexpr const char* kSeqKey = "nd:seq";
  static constexpr uint64_t kIdBlock = 1024;

  static Status Unavailable() { return ShuttingDown(); }

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
    if (!fresh) {
      if (auto hit = cache_.Fresh(name, SystemNowMs(), 1000)) return std::shared_ptr<const NsInfo>(hit);
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
    if (auto cached = cache_.Find(name); cached && cached->raw == raw) {
      auto copy = std::make_shared<NsInfo>(*cached);
      copy->loaded_ms = SystemNowMs();
      cache_.Put(name, copy);
      return std::shared_ptr<const NsInfo>(copy);
    }
    auto info = DecodeNs(name, raw);
    if (!info.ok()) return info.status();
    info.value()->loaded_ms = SystemNowMs();
    cache_.Put(name, info.value());
    return std::shared_ptr<const NsInfo>(info.value());
  }

  void Forget(const std::string& name) { cache_.Forget(name); }

  // Creates or updates the namespace with merge()'s settings. The record is
  // replaced only if it is still the one merged (compare-and-set), so no
  // other instance's change lands between read and write; else it retries.
  Status ModifyNamespace(const std::string& name, const SettingsMerge& merge, bool* created) override {
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
    auto fp = MakeNamespaceFingerprinter(settings);
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
    // Documents() asks the cluster: only when a decision setting changes.
    if (Status s = CheckDecisionSettingsUnchanged(name, n.settings, settings); !s.ok() && Documents(n) > 0) return s;
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
    auto fp = MakeNamespaceFingerprinter(settings);
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

  Status EnsureNamespace(const std::string& ns) override { return GetOrCreate(ns).status(); }

  Result<std::shared_ptr<const NsInfo>> GetOrCreate(const std::string& name) {
    return LoadOrCreate(
        name, options_.auto_create, [&] { return Load(name); },
        [&] { return Create(name, options_.default_settings).status(); });
  }


  uint64_t Documents(const NsInfo& n) {
    auto s = GetNamespace(n.name);
    return s.ok() ? s->documents : 1;  // unknown: assume non-empty (refuse the change)
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

  // The synced read of a candidate: a write to its slot, then MGET meta
  // status, in one script. The WAIT after it then proves that what was read
  // is on a replica. One command, not MGET + SET: after a failover the old
  // master can come back believing it still owns the slot, answer the MGET
  // from its stale AOF (a "K" that never reached the replica) and refuse the
  // SET (NOREPLICAS); the SET alone was then retried on the new master and
  // the stale read was trusted (issue 16: answers named documents that no
  // node held). A script refused at its write returns no read at all.
  static constexpr const char* kSyncedReadScript =
      "redis.call('SET', KEYS[3], '1', 'PX', 10000) return redis.call('MGET', KEYS[1], KEYS[2])";

  // MGET meta status for each candidate (when `sync`, the synced read
  // above, and WAIT: the statuses read are then on a replica too, so an
  // answer never names a document a failover could lose).
  Status ReadCandidates(const NsInfo& n, std::vector<Candidate>* cands, bool sync) {
    if (cands->empty()) return Status::OK();
    std::vector<RedisCommand> cmds;
    for (const Candidate& c : *cands) {
      const std::string meta = MetaKey(n, c.iid);
      if (sync) {
        cmds.push_back(RedisCommand{{"EVAL", kSyncedReadScript, "3", meta, StatKey(n, c.iid), SyncKey(c.iid)}, meta});
      } else {
        cmds.push_back(RedisCommand{{"MGET", meta, StatKey(n, c.iid)}, meta});
      }
    }
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, sync ? Durable() : RedisClusterClient::BatchOptions{}));
    for (size_t i = 0; i < cands->size(); ++i) {
      const RedisReply& m = r[i];
      NEARDUP_RETURN_IF_ERROR(ReplyError(m, "MGET"));
      Candidate& c = (*cands)[i];
      c.have_meta = m.elements.size() == 2 && m.elements[0].is_string() && DecodeMeta(m.elements[0].str, &c.meta);
      c.status = m.elements.size() == 2 && m.elements[1].is_string() ? ParseStatus(m.elements[1].str) : RecordStatus{};
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
    if (!c->have_meta || !c->status.kept() || c->meta.ts < n.Cutoff(options_.clock_ms())) return not_found();
    return DocumentInfo{c->meta.id, c->meta.fp, c->meta.hf, c->meta.ts};
  }

  // ---- the check ----------------------------------------------------------------
  //
  // The fenced protocol, in the steps of docs/cluster.md (which has the
  // whole argument and the failure cases):
  //   1. Write (AppendPending): check our view of the namespace, look the id
  //      up (a retried request replays its answer) and, when storing, write
  //      our pending record (metadata with a lease) and APPEND it to every
  //      bucket and anchor bucket we live in; a replica acknowledges it.
  //   2. Read (GatherCandidates): every bucket and anchor bucket of every
  //      live window, after all of step 1.
  //   3. Look (ReadCandidates, FilterByPairRule, CollectKept): metadata of
  //      each candidate; drop what the pair rule (DecidePair) rejects; read
  //      the rest again synced (their statuses on a replica); the kept ones
  //      are our matches.
  //   4. Resolve (ResolvePending): with no match, and when inserting, settle
  //      pending candidates in id order: wait for an older one while its
  //      lease runs, else fence it (status "R<our id>", SET NX).
  //   5. Commit (Commit, Publish, AdoptFencer): SET NX our own status, kept
  //      if nothing was, else rejected; if a peer fenced us first, we are
  //      its duplicate when it was kept, else 503.
  //   Then Answer: the matches in NearDupSet's order (RanksBefore), each
  //   named one readable by its id (MakeNamedReadable).
  // Why exactly one of concurrent near-duplicates is kept: each appends
  // (step 1, acknowledged) before it reads (step 2), and two near-duplicates
  // share a key both append to and both read, so at least one of them sees
  // the other's record. The pair relation is symmetric, so that one keeps
  // the other as a candidate and settles its status before committing. A
  // status is set once (SET NX): either the other was "K" first (we reject
  // ourselves) or our fence was first (its "K" fails). Never both "K".
  // Leases only decide when a peer may fence; fencing is always safe.

  Result<CheckOutcome> CheckOne(const std::string& ns, const DocumentInput& doc, CheckMode mode) override {
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
    CheckRun run(n, doc, mode, options_.clock_ms());
    NEARDUP_RETURN_IF_ERROR(AppendPending(run, stale));
    if (run.answered) return std::move(run.out);
    if (run.store && !Step("appended")) return AbandonedStatus();
    NEARDUP_RETURN_IF_ERROR(GatherCandidates(run));
    // Metadata first, unsynced: the pair rule depends only on what step 1
    // wrote (fingerprint, content hash, sketch), which never changes, and
    // most candidates fail it (a common anchor has up to 64 holders). Only
    // those that pass, and those whose metadata was not there, are read
    // again synced: their statuses decide the answer. (One synced read of
    // every candidate made checks 3x slower with the embedded store's
    // candidate set.)
    NEARDUP_RETURN_IF_ERROR(ReadCandidates(n, &run.cands, /*sync=*/false));
    MarkDecidedLazily(run);
    FilterByPairRule(run);
    NEARDUP_RETURN_IF_ERROR(ReadCandidates(n, &run.cands, /*sync=*/true));
    if (run.store && !Step("read")) return AbandonedStatus();
    FilterByPairRule(run);
    NEARDUP_RETURN_IF_ERROR(CollectKept(run));
    if (run.answered) return std::move(run.out);
    if (mode == CheckMode::kCheckAndInsert && run.store && run.kept.empty()) {
      NEARDUP_RETURN_IF_ERROR(ResolvePending(run));
      if (run.answered) return std::move(run.out);
      if (!Step("resolved")) return AbandonedStatus();
    }
    if (run.store) NEARDUP_RETURN_IF_ERROR(Commit(run));
    return Answer(run);
  }

  // The buckets a document lives in for window w: one per table, or, for a
  // text without features, its exact-text key.
  static std::vector<std::string> OwnKeys(const CheckRun& run, int64_t w) {
    const NsInfo& n = run.n;
    std::vector<std::string> keys;
    if (run.hf) {
      for (size_t t = 0; t < n.layout.masks.size(); ++t) {
        keys.push_back(BucketKey(n, t, RedisTableLayout::Key(run.fp, n.layout.masks[t]), w));
      }
    } else {
      keys.push_back(ExactKey(n, run.ch, w));
    }
    return keys;
  }

  // Step 1, Write. Everything of ours is written before step 2 reads
  // anything: the order the exactly-one argument rests on.
  Status AppendPending(CheckRun& run, bool* stale) {
    const NsInfo& n = run.n;
    if (run.store) {
      auto id = AllocateId();
      if (!id.ok()) return id.status();
      run.iid = id.value();
    }
    std::vector<RedisCommand> cmds = {Cmd({"GET", NsKey(n.name)}), Cmd({"GET", IdKey(n, run.doc.id)})};
    if (run.store) AddPendingWrites(run, &cmds);
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(
        client_->ExecuteBatch(cmds, &r, run.store ? Durable() : RedisClusterClient::BatchOptions{}));
    for (const RedisReply& x : r) NEARDUP_RETURN_IF_ERROR(ReplyError(x, "write"));
    if (!r[0].is_string() || r[0].str != n.raw) {
      // Deleted, re-created or changed by another instance: redo with the
      // current record (what we appended is pending under the old view and
      // is fenced or ignored by whoever sees it).
      *stale = true;
      return Status::Unavailable("stale namespace");
    }
    uint64_t old = 0;
    if (run.mode != CheckMode::kQueryOnly && r[1].is_string() && ParseU64(r[1].str, &old)) {
      std::vector<Candidate> prior(1);
      prior[0].iid = old;
      NEARDUP_RETURN_IF_ERROR(ReadCandidates(n, &prior, /*sync=*/true));
      if (prior[0].have_meta && prior[0].status.kept() && prior[0].meta.ts >= run.cutoff) {
        return Replay(run, prior[0], /*repair_id=*/false);
      }
    }
    return Status::OK();
  }

  // Our pending record: metadata with a lease, then the record in every
  // bucket and anchor bucket of our own window.
  void AddPendingWrites(CheckRun& run, std::vector<RedisCommand>* cmds) const {
    const NsInfo& n = run.n;
    run.meta.lease_until = options_.clock_ms() + options_.lease_ms;
    cmds->push_back(SetCmd(MetaKey(n, run.iid), EncodeMeta(run.meta), run.doc_exp, false, false));
    std::string rec(16, '\0');
    EncodeFixed(rec.data(), run.hf ? run.fp : run.ch, 8);
    EncodeFixed(rec.data() + 8, run.iid, 8);
    const int64_t w = n.Window(run.ts);
    const int64_t exp = n.BucketExpiry(w, run.ts);
    auto expire = [&](const std::string& key) {
      if (exp <= 0) return;
      // NX sets a fresh key's expiry, GT only ever extends it.
      cmds->push_back(Cmd({"PEXPIREAT", key, std::to_string(exp), "NX"}));
      cmds->push_back(Cmd({"PEXPIREAT", key, std::to_string(exp), "GT"}));
    };
    for (const std::string& key : OwnKeys(run, w)) {
      cmds->push_back(Cmd({"APPEND", key, rec}));
      expire(key);
    }
    for (uint32_t a : run.anchors) {
      std::string arec(kAnchorRecord, '\0');
      EncodeFixed(arec.data(), a, 4);
      EncodeFixed(arec.data() + 4, run.iid, 8);
      cmds->push_back(Cmd({"APPEND", AnchorKey(n, n.AnchorPrefix(a), w), std::move(arec)}));
    }
    for (uint32_t p : run.prefixes) expire(AnchorKey(n, p, w));
  }

  // Step 2, Read: every bucket (all tables, all live windows) and anchor
  // bucket, filtered by popcount and exact anchor here, not in Redis. The
  // candidates come out in id order: the order ResolvePending settles them
  // in, so that every check waits on older ids only.
  Status GatherCandidates(CheckRun& run) {
    const NsInfo& n = run.n;
    std::vector<RedisCommand> cmds;
    for (int64_t w : run.windows) {
      for (std::string& key : OwnKeys(run, w)) cmds.push_back(Cmd({"GET", std::move(key)}));
    }
    const size_t buckets = cmds.size();
    AddAnchorReads(run, run.prefixes, &cmds);
    cmds.push_back(Cmd({"HINCRBY", CountersKey(n), "checks", "1"}));
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r));
    SeenIds seen;
    size_t records = 0;
    NEARDUP_RETURN_IF_ERROR(ScanBuckets(run, std::span(r).first(buckets), &seen, &records));
    if (!run.anchors.empty()) {
      AnchorScan scan(run.all_anchors.size());
      scan.read = run.anchors.size();
      NEARDUP_RETURN_IF_ERROR(
          ScanAnchors(run, std::span(r).subspan(buckets, cmds.size() - buckets - 1), &scan, &records));
      std::vector<size_t> probe, filed;
      if (!ChooseAnchors(run, scan, &probe, &filed)) {
        // Some of our first anchors are stop keys: the embedded store probes
        // and files the next ones instead (rare: only a hot anchor does it).
        NEARDUP_RETURN_IF_ERROR(ReadMoreAnchors(run, &scan, &records));
        (void)ChooseAnchors(run, scan, &probe, &filed);
      }
      AddAnchorCandidates(run, scan, probe, &seen);
      for (size_t a : filed) run.filed.push_back(run.all_anchors[a]);
    }
    for (const auto& [id, found] : seen) {
      Candidate c;
      c.iid = id;
      c.distance = found.distance;
      c.by_anchor = found.by_anchor;
      c.in_flight = found.in_flight;
      c.stop_anchor = found.stop_anchor;
      run.cands.push_back(std::move(c));
    }
    std::sort(run.cands.begin(), run.cands.end(), [](const Candidate& a, const Candidate& b) { return a.iid < b.iid; });
    scanned_.fetch_add(records);
    return Status::OK();
  }

  // GETs of the anchor buckets with these prefixes in every live window.
  static void AddAnchorReads(const CheckRun& run, const std::vector<uint32_t>& prefixes,
                             std::vector<RedisCommand>* cmds) {
    for (int64_t w : run.windows) {
      for (uint32_t p : prefixes) cmds->push_back(Cmd({"GET", AnchorKey(run.n, p, w)}));
    }
  }

  // The keys of every anchor again, the later ones for the first time.
  // Everything but the decided marks comes from this round: a record is
  // skipped behind a stop key only for a decided mark read in the first
  // round, and a kept document writes its decided marks only after its kept
  // marks are acknowledged, so this round, which starts after the first
  // has ended, sees those kept marks under the anchors we probe. Taken from
  // one round, a decided mark read late on one master and a kept mark read
  // early on another could both be missed (a redirect retried in a later
  // round, a stalled node).
  Status ReadMoreAnchors(const CheckRun& run, AnchorScan* scan, size_t* records) {
    std::vector<RedisCommand> cmds;
    AddAnchorReads(run, run.PrefixesOf(0, run.all_anchors.size(), {}), &cmds);
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r));
    AnchorScan late(run.all_anchors.size());
    late.read = run.all_anchors.size();
    NEARDUP_RETURN_IF_ERROR(ScanAnchors(run, r, &late, records));
    late.decided = std::move(scan->decided);
    *scan = std::move(late);
    return Status::OK();
  }

  // Step 3, Look: the kept, unexpired candidates are the matches. Our own earlier
  // attempt among them (its id key not written yet, or its answer lost)
  // makes this a replay.
  Status CollectKept(CheckRun& run) {
    for (const Candidate& c : run.cands) {
      if (!run.Live(c) || !c.status.kept()) continue;
      if (run.mode != CheckMode::kQueryOnly && c.meta.id == run.doc.id) return Replay(run, c, /*repair_id=*/true);
      run.kept.push_back(&c);
    }
    return Status::OK();
  }

  // Step 4, Resolve: settles pending candidates in id order until one
  // is kept (then we are its duplicate).
  Status ResolvePending(CheckRun& run) {
    for (Candidate& c : run.cands) {
      if (!run.Live(c) || !c.status.pending()) continue;
      NEARDUP_RETURN_IF_ERROR(Resolve(run.n, run.iid, &run.meta, run.doc_exp, &c));
      if (c.status.kept()) {
        if (c.meta.id == run.doc.id) return Replay(run, c, /*repair_id=*/true);
        run.kept.push_back(&c);
        break;
      }
    }
    return Status::OK();
  }

  // Step 5, Commit: our status, decided once. kInsertAlways keeps unconditionally
  // (a plain SET); otherwise SET NX: "K" when nothing was kept, else our own
  // rejection. A value already there means a peer fenced us first.
  Status Commit(CheckRun& run) {
    const NsInfo& n = run.n;
    const bool always = run.mode == CheckMode::kInsertAlways;
    const bool keep = always || run.kept.empty();
    const RecordStatus mine = keep ? RecordStatus::Kept() : RecordStatus::RejectedBy(run.iid);
    std::vector<RedisCommand> cmds = {
        SetCmd(StatKey(n, run.iid), FormatStatus(mine), run.doc_exp, /*nx=*/!always, /*get=*/true)};
    // A duplicate is decided by this very SET: its marks may ride along.
    if (!keep) AddDecidedMarks(run, &cmds);
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, Durable()));
    NEARDUP_RETURN_IF_ERROR(ReplyError(r[0], "SET status"));
    if (!keep) return Status::OK();
    if (always || r[0].is_nil()) return Publish(run);
    return AdoptFencer(run, r[0].str);
  }

  // We are kept: the id key (later checks of this id replay) and counters.
  Status Publish(CheckRun& run) {
    const NsInfo& n = run.n;
    commits_.fetch_add(1);
    run.out.stored = true;
    if (!Step("committed")) return AbandonedStatus();
    std::vector<RedisCommand> after = {SetCmd(IdKey(n, run.doc.id), std::to_string(run.iid), run.doc_exp, false, false),
                                       Cmd({"HINCRBY", CountersKey(n), "inserted", "1"})};
    AddKeptMarks(run, &after);
    if (!run.kept.empty()) after.push_back(Cmd({"HINCRBY", CountersKey(n), "duplicates", "1"}));
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(after, &r, Durable()));
    if (!Step("marked")) return AbandonedStatus();
    // Only now, with every kept mark on a replica: a reader that skips our
    // record behind a stop key through a decided mark finds our kept marks
    // under the anchors it probes. Best effort: without them readers read
    // our status instead (and take "K" as a match).
    std::vector<RedisCommand> decided;
    AddDecidedMarks(run, &decided);
    (void)client_->ExecuteBatch(decided, &r);
    return Status::OK();
  }

  // Our kept marks (kKeptMark) under the anchors the embedded store would
  // file us under. After the status: a mark names a kept document. Sent
  // again after a broken connection, a mark may repeat: readers count
  // distinct ids.
  void AddKeptMarks(const CheckRun& run, std::vector<RedisCommand>* cmds) const {
    const NsInfo& n = run.n;
    const int64_t w = n.Window(run.ts);
    const int64_t exp = n.BucketExpiry(w, run.ts);
    std::vector<uint32_t> prefixes;
    for (uint32_t a : run.filed) {
      cmds->push_back(MarkCmd(n, a, run.iid | kKeptMark, w));
      prefixes.push_back(n.AnchorPrefix(a));
    }
    std::sort(prefixes.begin(), prefixes.end());
    prefixes.erase(std::unique(prefixes.begin(), prefixes.end()), prefixes.end());
    for (uint32_t p : prefixes) {
      // Keys of our first anchors got their expiry in step 1.
      if (exp <= 0) break;
      if (std::binary_search(run.prefixes.begin(), run.prefixes.end(), p)) continue;
      cmds->push_back(Cmd({"PEXPIREAT", AnchorKey(n, p, w), std::to_string(exp), "NX"}));
      cmds->push_back(Cmd({"PEXPIREAT", AnchorKey(n, p, w), std::to_string(exp), "GT"}));
    }
  }

  // Our decided marks: under each of our first `anchors` anchors. Only once
  // our status is set (a mark is never read as "not in flight" while we
  // are) and, when kept, our kept marks are acknowledged (Publish). The keys
  // exist (step 1).
  void AddDecidedMarks(const CheckRun& run, std::vector<RedisCommand>* cmds) const {
    const int64_t w = run.n.Window(run.ts);
    for (uint32_t a : run.anchors) cmds->push_back(MarkCmd(run.n, a, run.iid | kDecidedMark, w));
  }

  static RedisCommand MarkCmd(const NsInfo& n, uint32_t anchor, uint64_t id_bits, int64_t w) {
    std::string rec(kAnchorRecord, '\0');
    EncodeFixed(rec.data(), anchor, 4);
    EncodeFixed(rec.data() + 4, id_bits, 8);
    return Cmd({"APPEND", AnchorKey(n, n.AnchorPrefix(anchor), w), std::move(rec)});
  }

  // Readers' decided marks, for records behind a stop key whose status they
  // read rejected or deleted (their check died before marking). Best effort,
  // under our own window's key of that anchor (it exists: we appended to
  // it). Never for a kept record: its own kept marks may not have landed
  // (it is between its "K" and its marks, or paused there by SIGSTOP), and
  // a mark from us would let a third check skip it and miss it (issue 16).
  void MarkDecidedLazily(const CheckRun& run) {
    if (!run.store) return;
    std::vector<RedisCommand> cmds;
    for (const Candidate& c : run.cands) {
      const bool never_a_match = !c.status.pending() && !c.status.kept();
      if (c.in_flight && !c.by_anchor && never_a_match) {
        cmds.push_back(MarkCmd(run.n, c.stop_anchor, c.iid | kDecidedMark, run.n.Window(run.ts)));
      }
    }
    std::vector<RedisReply> r;
    if (!cmds.empty()) (void)client_->ExecuteBatch(cmds, &r);
  }

  // A peer saw our pending record and fenced it: we are its duplicate if it
  // was kept; if it was not (it died or was itself rejected) nothing names a
  // stored document: 503, the client retries.
  Status AdoptFencer(CheckRun& run, const std::string& raw) {
    const RecordStatus s = ParseStatus(raw);
    if (s.state != RecordState::kRejected || s.by == 0) return Status::Unavailable("unexpected status \"" + raw + "\"");
    std::vector<Candidate> one(1);
    one[0].iid = s.by;
    NEARDUP_RETURN_IF_ERROR(ReadCandidates(run.n, &one, /*sync=*/true));
    run.fencer = std::move(one[0]);
    Candidate& f = run.fencer;
    if (f.have_meta && f.status.pending()) NEARDUP_RETURN_IF_ERROR(WaitFor(run.n, &f, nullptr, 0, 0));
    if (!f.have_meta || !f.status.kept() || f.meta.ts < run.cutoff) {
      return Status::Unavailable("rejected by a concurrent document that was not kept; retry");
    }
    (void)Measure(run, &f);  // its distance and similarity for the answer; it fenced us, so it matches
    run.kept.push_back(&f);
    return Status::OK();
  }

  // The answer, in NearDupSet's order: the oldest document with the same text,
  // then the most similar (re-check on), then the nearest, then the oldest.
  Result<CheckOutcome> Answer(CheckRun& run) {
    const Candidate* first_exact = nullptr;
    for (const Candidate* c : run.kept) {
      if (c->meta.ch == run.ch && (first_exact == nullptr || c->iid < first_exact->iid)) first_exact = c;
    }
    auto rank = [&](const Candidate* c) { return MatchRank{c == first_exact, c->similarity, c->distance, c->iid}; };
    const bool by_similarity = run.rc().enabled;
    std::sort(run.kept.begin(), run.kept.end(),
              [&](const Candidate* a, const Candidate* b) { return RanksBefore(rank(a), rank(b), by_similarity); });
    CheckOutcome& out = run.out;
    for (const Candidate* c : run.kept) {
      if (static_cast<int>(out.matches.size()) >= run.n.settings.max_matches) break;
      // "similarity_exact" as SimilarityIsExact (pair_rule.h) reports it in the
      // embedded store and the batch job: Measure() already set it so (true
      // for an equal normalized text only when no sketch measured the pair).
      const bool exact = c->meta.ch == run.ch;
      out.matches.push_back(
          MatchedDocument{c->meta.id, c->distance, c->similarity, c->similarity_exact, exact, c->meta.ts});
    }
    out.duplicate = !out.matches.empty();
    if (out.duplicate) NEARDUP_RETURN_IF_ERROR(MakeNamedReadable(run));
    return std::move(out);
  }

  // Every document the answer names can be read by its id afterwards. A
  // kept document's id key is written after its status (Publish): a check
  // that set "K" and then failed (503 in a failover) left a kept record
  // without one, and answers named it while GET said 404 (issue 16: found
  // by scripts/history_check.py). So the id key of each named match is
  // written if missing (SET NX, as a replay repairs its own), durably,
  // before the answer.
  Status MakeNamedReadable(CheckRun& run) {
    const NsInfo& n = run.n;
    std::vector<RedisCommand> cmds;
    const size_t named = std::min(run.kept.size(), static_cast<size_t>(std::max(n.settings.max_matches, 0)));
    for (size_t i = 0; i < named; ++i) {
      const Candidate& c = *run.kept[i];
      cmds.push_back(SetCmd(IdKey(n, c.meta.id), std::to_string(c.iid), n.DocExpiry(c.meta.ts), /*nx=*/true, false));
    }
    if (!run.out.stored && run.mode != CheckMode::kQueryOnly) {
      cmds.push_back(Cmd({"HINCRBY", CountersKey(n), "duplicates", "1"}));
    }
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, Durable()));
    std::vector<RedisCommand> repaired;
    for (size_t i = 0; i < named; ++i) {
      if (!r[i].is_nil() && !r[i].is_error()) repaired.push_back(Cmd({"HINCRBY", CountersKey(n), "inserted", "1"}));
    }
    if (!repaired.empty()) (void)client_->ExecuteBatch(repaired, &r);
    return Status::OK();
  }

  // Decides a pending candidate `c`: waits while it is older than us and its
  // lease runs, else fences it with "R<our id>" (SET NX: the status is
  // decided once; whoever sets it first wins). Leaves c->status decided
  // (kept or rejected) on success.
  Status Resolve(const NsInfo& n, uint64_t iid, Meta* own, int64_t own_exp, Candidate* c) {
    // An older attempt of the same document id (its client retried): fence it
    // at once rather than wait for its lease.
    if (c->iid < iid && c->meta.id != own->id) {
      NEARDUP_RETURN_IF_ERROR(WaitFor(n, c, own, iid, own_exp));
      if (!c->status.pending()) return Status::OK();
    }
    const RecordStatus fence = RecordStatus::RejectedBy(iid);
    std::vector<RedisCommand> cmds = {
        SetCmd(StatKey(n, c->iid), FormatStatus(fence), n.DocExpiry(c->meta.ts), true, true)};
    std::vector<RedisReply> r;
    NEARDUP_RETURN_IF_ERROR(client_->ExecuteBatch(cmds, &r, Durable()));
    NEARDUP_RETURN_IF_ERROR(ReplyError(r[0], "SET fence"));
    c->status = r[0].is_nil() ? fence : ParseStatus(r[0].str);
    return Status::OK();
  }

  // Polls c's status until it is decided or its lease ends (by our clock;
  // bounded by lease_ms past the last lease seen, whatever the clocks say).
  // While waiting, renews our own lease (when `own` is given) so that
  // waiting on a dead peer never lets our own record be fenced.
  Status WaitFor(const NsInfo& n, Candidate* c, Meta* own, uint64_t iid, int64_t own_exp) {
    int sleep_ms = 1;
    const auto hard_stop = std::chrono::steady_clock::now() + std::chrono::milliseconds(3 * options_.lease_ms + 1000);
    while (c->status.pending() && options_.clock_ms() < c->meta.lease_until &&
           std::chrono::steady_clock::now() < hard_stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
      sleep_ms = std::min(sleep_ms * 2, 20);
      std::vector<Candidate> one = {*c};
      NEARDUP_RETURN_IF_ERROR(ReadCandidates(n, &one, /*sync=*/true));
      if (!one[0].have_meta) {  // expired meanwhile: as good as rejected (by nobody)
        c->status = RecordStatus::RejectedBy(0);
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

  // The id is stored (as `kept`): the answer is a replay, and our own
  // pending record (if any) is retired. With repair_id the id key is written
  // if missing (the attempt that stored it died between its status and its
  // id key).
  Status Replay(CheckRun& run, const Candidate& kept, bool repair_id) {
    const NsInfo& n = run.n;
    std::vector<RedisCommand> cmds;
    if (run.iid != 0) {
      cmds.push_back(SetCmd(StatKey(n, run.iid), FormatStatus(RecordStatus::RejectedBy(run.iid)), run.doc_exp, true, false));
    }
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
    CheckOutcome& out = run.out;
    out.stored = true;
    out.replay = true;
    out.duplicate = false;
    out.matches.clear();
    out.fingerprint = kept.meta.fp;
    out.has_features = kept.meta.hf;
    run.answered = true;
    return Status::OK();
  }

  RedisEngineOptions options_;
  std::unique_ptr<RedisClusterClient> client_;
  NamespaceCache<NsInfo> cache_;
  std::mutex id_mu_;
  uint64_t next_id_ = 0, id_end_ = 0;
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
