// Races of near-duplicates sent at the same moment to several engine
// instances sharing one store (the Redis Cluster and PostgreSQL stores'
// exactly-one tests): one thread per text, a kUnavailable answer retried on
// the next engine as an HTTP client retries a 503, and the checks of the
// result (exactly one stored, every other answer names it, GetDocument finds
// only it). Staller() injects stalls and simulated crashes at an engine's
// step hook.
#ifndef NEARDUP_TESTS_RACE_TRIALS_H_
#define NEARDUP_TESTS_RACE_TRIALS_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <barrier>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "neardup/engine/engine.h"

namespace neardup::testing {

// A namespace no other test (or earlier run on the same store) has used.
inline std::string UniqueNs(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

// The engine an Open* function returned, or nullptr and a test failure.
inline std::unique_ptr<Engine> EngineOrFail(Result<std::unique_ptr<Engine>> e) {
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

inline std::string DocName(size_t i) {
  std::string s = "doc";
  s += std::to_string(i);
  return s;
}

struct RaceResult {
  int kept = 0;
  bool ok = true;
  std::string why;
  // Two checks had their pending records in the store at once (each past
  // its "appended" step, neither answered): the fenced protocol had to
  // decide between them. A loaded machine may serialize the threads, and
  // a trial whose checks ran one after another tested nothing.
  bool raced = false;
};

// Checks with a pending record right now, across every engine of a test
// (Staller marks a thread at its "appended" step; Race clears the mark when
// the thread's check returns).
inline std::atomic<int> g_pending{0}, g_most_pending{0};
inline thread_local bool t_pending = false;

inline void MarkPending() {
  if (t_pending) return;
  t_pending = true;
  const int now = g_pending.fetch_add(1) + 1;
  int most = g_most_pending.load();
  while (now > most && !g_most_pending.compare_exchange_weak(most, now)) {
  }
}

inline void ClearPending() {
  if (!t_pending) return;
  t_pending = false;
  g_pending.fetch_sub(1);
}

// Sends `texts` at the same moment from one thread each, alternating
// between the engines; a check that fails with kUnavailable (an abandoned
// attempt, a peer that never committed) is retried on the other engine, as
// an HTTP client retries a 503 or a reset connection.
// `prefix` starts every document id (trials sharing a namespace need their own ids).
inline RaceResult Race(std::vector<Engine*> engines, const std::string& ns, const std::vector<std::string>& texts,
                       const std::string& prefix = "") {
  auto DocName = [&](size_t i) { return prefix + testing::DocName(i); };
  const size_t n = texts.size();
  std::vector<Result<CheckOutcome>> answers(n, Status::Unavailable("not run"));
  std::barrier start(static_cast<std::ptrdiff_t>(n));
  g_most_pending = 0;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      for (int attempt = 0; attempt < 30; ++attempt) {
        Engine* e = engines[(i + attempt) % engines.size()];
        answers[i] = e->Check(ns, {DocName(i), texts[i], std::nullopt}, CheckMode::kCheckAndInsert);
        ClearPending();
        if (answers[i].ok() || answers[i].status().code() != Status::Code::kUnavailable) break;
      }
    });
  }
  for (auto& t : threads) t.join();
  RaceResult r;
  r.raced = g_most_pending.load() >= 2;
  std::string kept_id;
  for (size_t i = 0; i < n; ++i) {
    if (!answers[i].ok()) {
      r.ok = false;
      r.why += DocName(i) + ": " + answers[i].status().ToString() + "; ";
      continue;
    }
    if (answers[i]->stored) {
      ++r.kept;
      kept_id = DocName(i);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!answers[i].ok() || answers[i]->stored) continue;
    // Every other answer names the kept document.
    if (!answers[i]->duplicate || answers[i]->matches.empty() || answers[i]->matches[0].id != kept_id) {
      r.ok = false;
      r.why += DocName(i) + " not named as duplicate of " + kept_id + "; ";
    }
  }
  // The store agrees: exactly the kept one is found.
  int found = 0;
  for (size_t i = 0; i < n; ++i) found += engines[0]->GetDocument(ns, DocName(i)).ok();
  if (found != r.kept) {
    r.ok = false;
    r.why += "GetDocument found " + std::to_string(found) + "; ";
  }
  return r;
}

// Trials with at least two checks in flight together that a race test
// needs before it may pass.
inline constexpr int kMinRacedTrials = 10;

// Random stalls between protocol steps: mostly short, sometimes longer than
// the lease (300 ms), so peers fence a stalled instance's pending record.
inline std::function<bool(std::string_view)> Staller(uint64_t seed, double abandon_probability,
                                              std::string pending_step = "appended") {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  auto mu = std::make_shared<std::mutex>();
  return [rng, mu, abandon_probability, pending_step](std::string_view step) {
    if (step == pending_step) MarkPending();
    int sleep_us = 0;
    bool abandon = false;
    {
      std::lock_guard lk(*mu);
      const double u = std::uniform_real_distribution<double>(0, 1)(*rng);
      if (u < 0.03) {
        sleep_us = 350000 + static_cast<int>((*rng)() % 100000);  // past the lease
      } else if (u < 0.15) {
        sleep_us = 5000 + static_cast<int>((*rng)() % 30000);
      } else {
        sleep_us = static_cast<int>((*rng)() % 3000);
      }
      abandon = std::uniform_real_distribution<double>(0, 1)(*rng) < abandon_probability;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    return !abandon;
  };
}

// Up to `want` trials (or until `budget` runs out) of Race over `engines`:
// trial t races texts_of(t) in namespace ns_of(t), ids prefixed with
// "t<t>-". `failure` is empty when every trial kept exactly one.
struct TrialsResult {
  int trials = 0;
  int raced = 0;
  std::string failure;
};
inline TrialsResult RunTrials(const std::vector<Engine*>& engines, int want, std::chrono::seconds budget,
                              const std::function<std::string(int)>& ns_of,
                              const std::function<std::vector<std::string>(int)>& texts_of) {
  TrialsResult out;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (; out.trials < want && std::chrono::steady_clock::now() < deadline; ++out.trials) {
    const int t = out.trials;
    const RaceResult r = Race(engines, ns_of(t), texts_of(t), "t" + std::to_string(t) + "-");
    if (!r.ok || r.kept != 1) {
      out.failure = "trial " + std::to_string(t) + ": kept " + std::to_string(r.kept) + "; " + r.why;
      break;
    }
    out.raced += r.raced;
  }
  return out;
}

// RunTrials, then the verdict: exactly one kept in every trial, and enough
// trials really raced (a loaded machine may serialize the threads).
inline void ExpectExactlyOneInEveryTrial(const std::vector<Engine*>& engines, int want, std::chrono::seconds budget,
                                         const std::function<std::string(int)>& ns_of,
                                         const std::function<std::vector<std::string>(int)>& texts_of) {
  const TrialsResult r = RunTrials(engines, want, budget, ns_of, texts_of);
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  // The time bound only limits the run; it must not make the test pass on
  // too few real races.
  EXPECT_GE(r.raced, kMinRacedTrials) << "of " << r.trials << " trials";
  std::printf("[          ] %d trials (%d raced), exactly one kept in each\n", r.trials, r.raced);
}

}  // namespace neardup::testing

#endif  // NEARDUP_TESTS_RACE_TRIALS_H_
