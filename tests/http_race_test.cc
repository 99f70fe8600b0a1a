// Check-and-insert is atomic per namespace, over real HTTP (issue 3, §3):
// when many clients send near-duplicates of one text at the same moment,
// exactly one is stored and every other answer names the stored one.
//
// An in-process HttpServer on 127.0.0.1 (kernel-chosen port) in front of a
// LocalEngine in a temporary directory; 16 client threads, each with its own
// kept-alive httplib::Client connection, are released together by a barrier
// and each POSTs a different near-duplicate variant (one small edit: a word or
// character replaced, deleted or inserted, punctuation, case) of one text,
// short Chinese or long English, to a fresh namespace per round. Then the
// namespace's stats and the documents themselves are read back over HTTP.
//
// The race is only meaningful if the variants are near-duplicates of each
// other under the engine's own decision rule (two variants each one edit away
// from the base are two edits apart and, for short texts, may fall outside
// it). So each round first asks the engine, serially, which candidate
// variants match which (a probe namespace: insert all, query all), and races
// only a set of variants that pairwise match in both directions (when it has
// fewer than 16, some clients send the same variant: an exact duplicate under
// another id, which must lose the race just the same).
//
// The suite name contains "Concurren" so scripts/test.sh runs it under TSan.
// Every loop is bounded in count, and rounds stop early (never failing for
// it) past a time budget, so a slow sanitizer build still finishes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "http/http_server.h"
#include "util/httplib_client.h"  // httplib with the ABI macros of Debian's build
#include "util/sanitized.h"
#include "neardup/engine/engine.h"
#include "neardup/engine/local_engine.h"
#include "neardup/store/rocks_store.h"

namespace neardup {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

using testing::kSanitized;  // 5-20x slower: fewer rounds, same races

constexpr int kClients = 16;
constexpr int kCandidates = 32;  // variants generated per text; the race uses a matching subset

// ---- texts -----------------------------------------------------------------

struct Rng {
  uint64_t x;
  explicit Rng(uint64_t seed) : x(seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL) {}
  uint64_t Next() {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  }
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }
};

// Common Chinese characters, each 3 bytes of UTF-8.
const std::string& HanPool() {
  static const std::string pool =
      "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而"
      "方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应"
      "开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命"
      "此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求"
      "老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光"
      "门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速"
      "花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需";
  return pool;
}

std::string HanChar(Rng& r) {
  const std::string& p = HanPool();
  return p.substr(3 * r.Below(p.size() / 3), 3);
}

// A short Chinese text (a microblog post): 28..45 characters with a comma.
std::vector<std::string> ChineseBase(uint64_t seed) {
  Rng r(seed);
  const size_t n = 28 + r.Below(18);
  std::vector<std::string> chars;
  for (size_t i = 0; i < n; ++i) chars.push_back(i == n / 2 ? "，" : HanChar(r));
  chars.push_back("。");
  return chars;
}

const char* const kWords[] = {
    "river",  "market", "signal", "engine",  "quiet",   "yellow", "garden",   "winter", "paper",   "silver",
    "north",  "window", "forest", "number",  "castle",  "planet", "coffee",   "bridge", "mirror",  "rocket",
    "pencil", "valley", "thunder", "island", "harbor",  "meadow", "lantern",  "copper", "violet",  "canyon",
    "orchard", "falcon", "glacier", "tunnel", "saddle",  "ember",  "compass",  "quarry", "velvet",  "summit",
    "anchor", "beacon", "cobalt",  "dune",    "fjord",   "granite", "horizon", "jungle", "kettle",  "ledger"};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

// A long English text (a news article): 260..340 words.
std::vector<std::string> EnglishBase(uint64_t seed) {
  Rng r(seed);
  const size_t n = 260 + r.Below(81);
  std::vector<std::string> words;
  for (size_t i = 0; i < n; ++i) {
    std::string w = kWords[r.Below(kNumWords)];
    if (r.Below(3) == 0) w += std::to_string(r.Below(1000));
    if (i % 17 == 16) w += ".";
    words.push_back(std::move(w));
  }
  return words;
}

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

// Variant `v` of a text: v == 0 is the text itself; others make one small
// edit (replace, delete or insert one token; add punctuation; change case or
// spacing) at a position that depends on v.
std::string Variant(std::vector<std::string> tokens, bool chinese, int v, uint64_t seed) {
  if (v == 0) return Join(tokens, chinese ? "" : " ");
  Rng r(seed * 1000003 + static_cast<uint64_t>(v));
  const size_t pos = r.Below(tokens.size() - 1);
  auto token = [&] { return chinese ? HanChar(r) : std::string(kWords[r.Below(kNumWords)]) + "x"; };
  switch (v % 6) {
    case 1: tokens[pos] = token(); break;                                   // replace one token
    case 2: tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(pos)); break;  // delete one
    case 3: tokens.insert(tokens.begin() + static_cast<std::ptrdiff_t>(pos), token()); break;  // insert one
    case 4: tokens.back() += chinese ? "！！" : "!!"; break;                 // punctuation
    case 5:                                                                 // case / spacing
      if (chinese) {
        tokens.insert(tokens.begin() + static_cast<std::ptrdiff_t>(pos), " ");
      } else {
        for (char& c : tokens[pos]) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        tokens.front() = "  " + tokens.front();
      }
      break;
    default: {  // v % 6 == 0, v > 0: replace a token and add punctuation
      tokens[pos] = token();
      tokens.back() += chinese ? "…" : "...";
    }
  }
  return Join(tokens, chinese ? "" : " ");
}

struct TextGroup {
  std::string label;                 // for messages
  std::vector<std::string> texts;    // the variants raced, pairwise near-duplicates
};

// ---- fixture -----------------------------------------------------------------

class HttpConcurrentRace : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/neardup_http_race_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    LocalEngineOptions o;
    o.data_dir = dir_ + "/data";
    o.sync = false;  // the race is about decisions, not fsync
    o.default_settings.retention_seconds = 0;
    auto e = OpenLocalEngine(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();

    HttpServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.threads = kClients + 4;  // each kept-alive connection holds a worker
    so.keep_alive_timeout_seconds = 120;
    so.read_timeout_seconds = 60;
    so.write_timeout_seconds = 60;
    so.api.default_settings = o.default_settings;
    server_ = std::make_unique<HttpServer>(*engine_, so);
    auto port = server_->Bind();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = port.value();
    serve_thread_ = std::thread([this] { serve_status_ = server_->Serve(); });

    for (int i = 0; i < kClients; ++i) {
      auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
      c->set_keep_alive(true);
      c->set_connection_timeout(30, 0);
      c->set_read_timeout(60, 0);
      c->set_write_timeout(60, 0);
      // Open every connection now, so the race is between requests, not connects.
      auto r = c->Get("/healthz");
      ASSERT_TRUE(r) << "client " << i << ": " << httplib::to_string(r.error());
      ASSERT_EQ(r->status, 200);
      clients_.push_back(std::move(c));
    }
  }

  void TearDown() override {
    clients_.clear();  // close the kept-alive connections first: Stop() waits for them
    if (server_) server_->Stop();
    if (serve_thread_.joinable()) serve_thread_.join();
    EXPECT_TRUE(serve_status_.ok()) << serve_status_.ToString();
    server_.reset();
    if (engine_) {
      EXPECT_TRUE(engine_->Shutdown().ok());
    }
    engine_.reset();
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  // The engine's own verdict, decided serially: of `candidates`, a largest
  // greedy subset (starting with the unedited text) in which every variant
  // matches every other in both directions.
  std::vector<std::string> MutualNearDuplicates(const std::string& probe_ns, const std::vector<std::string>& candidates) {
    NamespaceSettings s;
    s.retention_seconds = 0;
    s.max_matches = 1000;
    bool created = false;
    EXPECT_TRUE(engine_->PutNamespace(probe_ns, s, &created).ok());
    std::vector<DocumentInput> docs;
    for (size_t i = 0; i < candidates.size(); ++i) docs.push_back({"c" + std::to_string(i), candidates[i], {}});
    std::vector<Result<CheckOutcome>> inserted, queried;
    EXPECT_TRUE(engine_->CheckBatch(probe_ns, docs, CheckMode::kInsertAlways, &inserted).ok());
    std::vector<DocumentInput> queries = docs;
    for (auto& q : queries) q.id = "q" + q.id;
    EXPECT_TRUE(engine_->CheckBatch(probe_ns, queries, CheckMode::kQueryOnly, &queried).ok());
    EXPECT_TRUE(engine_->DeleteNamespace(probe_ns).ok());
    const size_t n = candidates.size();
    // m[q][w]: candidate q, checked against stored w, matches it.
    std::vector<std::vector<bool>> m(n, std::vector<bool>(n, false));
    for (size_t q = 0; q < n && q < queried.size(); ++q) {
      if (!queried[q].ok()) continue;
      for (const MatchedDocument& d : queried[q]->matches) m[q][std::stoul(d.id.substr(1))] = true;
    }
    // Greedy clique: the unedited text first, then the candidates that match
    // the most others.
    std::vector<int> degree(n, 0);
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = 0; b < n; ++b) degree[a] += a != b && m[a][b] && m[b][a];
    }
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin() + 1, order.end(), [&](size_t a, size_t b) { return degree[a] > degree[b]; });
    std::vector<size_t> kept;
    std::set<std::string> distinct;
    for (size_t c : order) {
      bool ok = m[c][c];
      for (size_t k : kept) ok = ok && m[c][k] && m[k][c];
      if (ok && distinct.insert(candidates[c]).second) kept.push_back(c);
    }
    std::vector<std::string> out;
    for (size_t k : kept) out.push_back(candidates[k]);
    return out;
  }

  // Variants of one text for the race: kClients pairwise near-duplicates when
  // the edits allow (at least the punctuation/case ones always do).
  TextGroup MakeGroup(const std::string& probe_ns, bool chinese, uint64_t seed) {
    const std::vector<std::string> base = chinese ? ChineseBase(seed) : EnglishBase(seed);
    std::vector<std::string> candidates;
    for (int v = 0; v < kCandidates; ++v) candidates.push_back(Variant(base, chinese, v, seed));
    TextGroup g;
    g.label = std::string(chinese ? "chinese" : "english") + " seed " + std::to_string(seed);
    g.texts = MutualNearDuplicates(probe_ns, candidates);
    if (g.texts.size() > static_cast<size_t>(kClients)) g.texts.resize(kClients);
    return g;
  }

  json Post(httplib::Client& c, const std::string& path, const json& body, int* status, std::string* err) {
    const int now = in_flight_.fetch_add(1) + 1;
    int most = most_in_flight_.load();
    while (now > most && !most_in_flight_.compare_exchange_weak(most, now)) {
    }
    auto r = c.Post(path, body.dump(), "application/json");
    in_flight_.fetch_sub(1);
    if (!r) {
      *status = -1;
      *err = httplib::to_string(r.error());
      return json::object();
    }
    *status = r->status;
    json j = json::parse(r->body, nullptr, false);
    if (j.is_discarded()) {
      *err = "not JSON: " + r->body;
      return json::object();
    }
    return j;
  }

  json Get(const std::string& path, int* status) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    auto r = c.Get(path);
    if (!r) {
      *status = -1;
      return json::object();
    }
    *status = r->status;
    json j = json::parse(r->body, nullptr, false);
    return j.is_discarded() ? json::object() : j;
  }

  // Checks one group's answers: exactly one stored, every other a duplicate
  // naming it, and the store agrees (the winner is readable, the others are
  // not). Returns the winner's id.
  std::string ExpectOneStored(const std::string& ns, const std::string& what, const std::vector<std::string>& ids,
                              const std::vector<json>& answers) {
    std::string winner;
    int stored = 0;
    for (size_t i = 0; i < answers.size(); ++i) {
      const json& a = answers[i];
      EXPECT_EQ(a.value("id", ""), ids[i]) << what << ": " << a.dump();
      if (a.value("stored", false)) {
        ++stored;
        winner = ids[i];
        EXPECT_FALSE(a.value("duplicate", true)) << what << ": " << a.dump();
        EXPECT_FALSE(a.value("replay", true)) << what << ": " << a.dump();
      }
    }
    EXPECT_EQ(stored, 1) << what << ": " << stored << " of " << answers.size()
                         << " near-duplicate variants were stored";
    if (stored != 1) return "";
    for (size_t i = 0; i < answers.size(); ++i) {
      const json& a = answers[i];
      if (ids[i] == winner) continue;
      EXPECT_TRUE(a.value("duplicate", false)) << what << ": " << a.dump();
      EXPECT_FALSE(a.value("replay", true)) << what << ": " << a.dump();
      const json matches = a.value("matches", json::array());
      bool names_winner = false;
      for (const json& m : matches) names_winner = names_winner || m.value("id", "") == winner;
      EXPECT_TRUE(names_winner) << what << ": answer for " << ids[i] << " does not name the stored " << winner
                                << ": " << a.dump();
      // The winner is the only stored document of its text: it is the first match.
      if (!matches.empty()) {
        EXPECT_EQ(matches[0].value("id", ""), winner) << what << ": " << a.dump();
      }
    }
    int status = 0;
    json doc = Get("/v1/namespaces/" + ns + "/documents/" + winner, &status);
    EXPECT_EQ(status, 200) << what << ": stored " << winner << " is not readable";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == winner) continue;
      Get("/v1/namespaces/" + ns + "/documents/" + ids[i], &status);
      EXPECT_EQ(status, 404) << what << ": " << ids[i] << " was answered as not stored but is readable";
    }
    return winner;
  }

  json Stats(const std::string& ns) {
    int status = 0;
    json j = Get("/v1/namespaces/" + ns, &status);
    EXPECT_EQ(status, 200) << j.dump();
    return j.value("stats", json::object());
  }

  // Whether two requests were in flight at once since the last call: a
  // round whose requests ran one after another (a loaded machine may
  // serialize the clients) raced nothing.
  bool Raced() { return most_in_flight_.exchange(0) >= 2; }

  std::atomic<int> in_flight_{0}, most_in_flight_{0};
  std::string dir_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread serve_thread_;
  Status serve_status_;
  int port_ = 0;
  std::vector<std::unique_ptr<httplib::Client>> clients_;
};

// 16 connections, one request each, all at once: check-and-insert of 16
// near-duplicate variants of one text (short Chinese and long English rounds).
TEST_F(HttpConcurrentRace, ConcurrentChecksOfNearDuplicatesStoreExactlyOne) {
  constexpr int kRounds = kSanitized ? 12 : 30;
  constexpr int kMinRounds = 6;
  const auto budget = std::chrono::seconds(kSanitized ? 40 : 60);  // a budget, never a verdict
  const auto start = Clock::now();
  int rounds = 0, raced_rounds = 0;
  size_t raced = 0;
  for (int round = 0; round < kRounds; ++round) {
    if (round >= kMinRounds && Clock::now() - start > budget) break;
    const bool chinese = round % 2 == 0;
    const TextGroup g = MakeGroup("probe" + std::to_string(round), chinese, 7000 + static_cast<uint64_t>(round));
    ASSERT_GE(g.texts.size(), 2u) << g.label << ": too few mutual near-duplicate variants to race";
    // Every client races; when there are fewer distinct variants than
    // clients, some send the same variant (an exact duplicate, another id).
    const int n = kClients;
    raced += g.texts.size();
    const std::string ns = "race" + std::to_string(round);
    std::vector<std::string> ids(n);
    for (int t = 0; t < n; ++t) ids[t] = "r" + std::to_string(round) + "-" + std::to_string(t);
    std::vector<json> answers(n);
    std::vector<int> statuses(n, 0);
    std::vector<std::string> errors(n);
    std::barrier go(n);
    std::vector<std::thread> threads;
    (void)Raced();
    for (int t = 0; t < n; ++t) {
      threads.emplace_back([&, t] {
        const json body = {{"id", ids[t]}, {"text", g.texts[static_cast<size_t>(t) % g.texts.size()]}};
        go.arrive_and_wait();
        answers[t] = Post(*clients_[t], "/v1/namespaces/" + ns + "/check", body, &statuses[t], &errors[t]);
      });
    }
    for (auto& th : threads) th.join();
    raced_rounds += Raced();
    for (int t = 0; t < n; ++t) {
      ASSERT_EQ(statuses[t], 200) << g.label << " client " << t << ": " << errors[t] << " " << answers[t].dump();
    }
    ExpectOneStored(ns, "round " + std::to_string(round) + " (" + g.label + ")", ids, answers);
    const json stats = Stats(ns);
    EXPECT_EQ(stats.value("documents", -1), 1) << "round " << round << ": " << stats.dump();
    EXPECT_EQ(stats.value("inserted", -1), 1) << "round " << round << ": " << stats.dump();
    EXPECT_EQ(stats.value("checks", -1), n) << "round " << round << ": " << stats.dump();
    EXPECT_EQ(stats.value("duplicates", -1), n - 1) << "round " << round << ": " << stats.dump();
    if (HasFailure()) break;  // one failing round says it all
    ++rounds;
  }
  EXPECT_GE(rounds, kMinRounds);
  EXPECT_GE(raced_rounds, kMinRounds) << "rounds with two requests in flight at once, of " << rounds;
  std::printf("[          ] %d rounds of %d clients (%d raced), %.1f distinct variants per round\n", rounds, kClients,
              raced_rounds, rounds ? static_cast<double>(raced) / rounds : 0.0);
}

// The batch form, mixed with single checks: each round races G texts at once.
// Every client sends one variant of each text — most in one /batch request
// (mode=check, in a client-specific order), every fourth client as G single
// /check requests — so batches interleave with each other and with singles.
// Per text exactly one variant is stored and every other answer names it.
TEST_F(HttpConcurrentRace, ConcurrentBatchesOfNearDuplicatesStoreExactlyOnePerText) {
  constexpr int kRounds = kSanitized ? 5 : 12;
  constexpr int kMinRounds = 3;
  constexpr int kGroups = 4;  // two short Chinese, two long English texts
  const auto budget = std::chrono::seconds(kSanitized ? 40 : 60);
  const auto start = Clock::now();
  int rounds = 0, raced_rounds = 0;
  for (int round = 0; round < kRounds; ++round) {
    if (round >= kMinRounds && Clock::now() - start > budget) break;
    (void)Raced();
    std::vector<TextGroup> groups;
    const size_t n = kClients;  // clients past a group's variant count repeat a variant
    for (int gi = 0; gi < kGroups; ++gi) {
      groups.push_back(MakeGroup("bprobe" + std::to_string(round) + "-" + std::to_string(gi), gi < 2,
                                 90000 + static_cast<uint64_t>(round * kGroups + gi)));
      ASSERT_GE(groups.back().texts.size(), 2u) << groups.back().label << ": too few mutual near-duplicates";
    }
    const std::string ns = "batch" + std::to_string(round);
    auto id_of = [&](size_t client, int group) {
      return "b" + std::to_string(round) + "-g" + std::to_string(group) + "-c" + std::to_string(client);
    };
    // answers[client][group]
    std::vector<std::vector<json>> answers(n, std::vector<json>(kGroups));
    std::vector<std::string> errors(n);
    std::barrier go(static_cast<std::ptrdiff_t>(n));
    std::vector<std::thread> threads;
    for (size_t c = 0; c < n; ++c) {
      threads.emplace_back([&, c] {
        std::vector<int> order(kGroups);
        for (int i = 0; i < kGroups; ++i) order[i] = static_cast<int>((c + static_cast<size_t>(i)) % kGroups);
        if (c % 2) std::reverse(order.begin(), order.end());
        go.arrive_and_wait();
        int status = 0;
        std::string err;
        if (c % 4 == 3) {
          for (int gi : order) {
            json a = Post(*clients_[c], "/v1/namespaces/" + ns + "/check",
                          {{"id", id_of(c, gi)}, {"text", groups[gi].texts[c % groups[gi].texts.size()]}}, &status, &err);
            if (status != 200) {
              errors[c] = "single " + std::to_string(status) + " " + err + " " + a.dump();
              return;
            }
            answers[c][gi] = std::move(a);
          }
          return;
        }
        json docs = json::array();
        for (int gi : order) docs.push_back({{"id", id_of(c, gi)}, {"text", groups[gi].texts[c % groups[gi].texts.size()]}});
        json a = Post(*clients_[c], "/v1/namespaces/" + ns + "/batch?mode=check", {{"documents", docs}}, &status,
                      &err);
        if (status != 200 || !a.contains("results") || a["results"].size() != static_cast<size_t>(kGroups)) {
          errors[c] = "batch " + std::to_string(status) + " " + err + " " + a.dump();
          return;
        }
        for (int i = 0; i < kGroups; ++i) answers[c][order[i]] = a["results"][i];  // results come in order
      });
    }
    for (auto& th : threads) th.join();
    raced_rounds += Raced();
    for (size_t c = 0; c < n; ++c) ASSERT_TRUE(errors[c].empty()) << "client " << c << ": " << errors[c];
    for (int gi = 0; gi < kGroups; ++gi) {
      std::vector<std::string> ids;
      std::vector<json> group_answers;
      for (size_t c = 0; c < n; ++c) {
        ids.push_back(id_of(c, gi));
        group_answers.push_back(answers[c][gi]);
      }
      ExpectOneStored(ns, "round " + std::to_string(round) + " group " + std::to_string(gi) + " (" +
                              groups[gi].label + ")", ids, group_answers);
    }
    const json stats = Stats(ns);
    EXPECT_EQ(stats.value("documents", -1), kGroups) << "round " << round << ": " << stats.dump();
    EXPECT_EQ(stats.value("inserted", -1), kGroups) << "round " << round << ": " << stats.dump();
    EXPECT_EQ(stats.value("duplicates", -1), static_cast<int>(kGroups * (n - 1))) << stats.dump();
    if (HasFailure()) break;
    ++rounds;
  }
  EXPECT_GE(rounds, kMinRounds);
  EXPECT_GE(raced_rounds, kMinRounds) << "rounds with two requests in flight at once, of " << rounds;
}

}  // namespace
}  // namespace neardup
