// The util layer's small pieces: the Result helper, the codec, the hashes.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "neardup/util/parallel.h"
#include "neardup/util/status.h"
#include "util/coding.h"
#include "util/hash.h"
#include "util/utf8.h"

namespace neardup {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

// Two macros in one function: the temporaries must not collide.
Result<int> Quarter(int x) {
  NEARDUP_ASSIGN_OR_RETURN(int half, Half(x));
  NEARDUP_ASSIGN_OR_RETURN(const int quarter, Half(half));
  return quarter;
}

TEST(AssignOrReturn, AssignsOrPropagatesTheStatus) {
  EXPECT_EQ(Quarter(12).value(), 3);
  const Result<int> odd = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(odd.status().message(), "odd: 3");
}

// Messages about names that are not text show their bytes: every byte
// outside a well-formed character as \xHH, the rest as it is.
TEST(Utf8, EscapeInvalidShowsOnlyTheBadBytes) {
  EXPECT_EQ(EscapeInvalidUtf8("caf\xC3\xA9.jsonl"), "caf\xC3\xA9.jsonl");  // é stays
  EXPECT_EQ(EscapeInvalidUtf8("caf\xE9.jsonl"), "caf\\xE9.jsonl");
  EXPECT_EQ(EscapeInvalidUtf8("\xF0\x9F\x99\x82\xF0\x9F"), "\xF0\x9F\x99\x82\\xF0\\x9F");  // a cut emoji
  EXPECT_EQ(EscapeInvalidUtf8("\xED\xA0\x80"), "\\xED\\xA0\\x80");  // a surrogate
  EXPECT_EQ(EscapeInvalidUtf8(""), "");
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    EXPECT_TRUE(IsValidUtf8(EscapeInvalidUtf8(one))) << b;
  }
}

TEST(Coding, LittleEndianWhateverTheHost) {
  std::string s;
  PutFixed32(&s, 0x01020304u);
  PutFixed64(&s, 0x0102030405060708ull);
  ASSERT_EQ(s.size(), 12u);
  EXPECT_EQ(s[0], '\x04');
  EXPECT_EQ(s[4], '\x08');
  EXPECT_EQ(DecodeFixed32(s.data()), 0x01020304u);
  EXPECT_EQ(DecodeFixed64(s.data() + 4), 0x0102030405060708ull);
  EXPECT_EQ(DecodeFixed(s.data(), 3), 0x020304u);
  std::string v;
  PutVarint64(&v, 300);
  size_t pos = 0;
  uint64_t out = 0;
  ASSERT_TRUE(GetVarint64(v, &pos, &out));
  EXPECT_EQ(out, 300u);
  EXPECT_EQ(pos, 2u);
  pos = 0;
  EXPECT_FALSE(GetVarint64(v.substr(0, 1), &pos, &out));  // truncated
}

TEST(Hash, PersistedFinalizerIsPinned) {
  // Murmur3Fmix64 is part of sketch scheme v2 (text/similarity.h): pinned.
  EXPECT_EQ(Murmur3Fmix64(0), 0u);
  EXPECT_EQ(Murmur3Fmix64(1), 0xB456BCFC34C2CB2CULL);
  EXPECT_NE(SplitMix64(1), Murmur3Fmix64(1));
}

// ParallelFor's pool: calls from several threads at once, each with calls
// nested in its chunks, still run every index exactly once.
TEST(ParallelForPool, NestedAndConcurrentCallsCoverEveryIndexOnce) {
  constexpr size_t kOuter = 300, kInner = 40;
  std::vector<std::atomic<int>> hits(4 * kOuter * kInner);
  std::vector<std::thread> callers;
  for (size_t c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      ParallelFor(kOuter, 3, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) {
          ParallelFor(kInner, 2, [&](size_t ib, size_t ie) {
            for (size_t j = ib; j < ie; ++j) hits[(c * kOuter + i) * kInner + j].fetch_add(1);
          });
        }
      });
    });
  }
  for (std::thread& t : callers) t.join();
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << i;
}

// An exception in a chunk reaches the caller, and the pool still works.
TEST(ParallelForPool, RethrowsAndStaysUsable) {
  EXPECT_THROW(ParallelFor(1000, 2,
                           [](size_t b, size_t e) {
                             if (b <= 500 && 500 < e) throw std::runtime_error("chunk");
                           }),
               std::runtime_error);
  std::atomic<size_t> sum{0};
  ParallelFor(1000, 2, [&](size_t b, size_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 1000u);
}

// The workers live from one call to the next, so their thread_local state
// does too (a thread per call left it cold for every batch: issue 17).
TEST(ParallelForPool, WorkersServeMoreThanOneCall) {
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> most{0};
  for (int call = 0; call < 20; ++call) {
    ParallelFor(8, 2, [&](size_t, size_t) {
      thread_local int calls_seen = 0, last_call = -1;
      if (std::this_thread::get_id() != caller && last_call != call) {
        last_call = call;
        int seen = ++calls_seen, m = most.load();
        while (seen > m && !most.compare_exchange_weak(m, seen)) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    });
  }
  EXPECT_GE(most.load(), 2);
}

// dedup's read-ahead lowers its own priority (LowerThisThreadPriority): the
// caller's stays, and so does the pool's, whose workers were started before
// (StartWorkers) and serve the lowered thread's calls too.
TEST(ParallelForPool, ALoweredThreadLeavesOthersAndThePoolAlone) {
  StartWorkers(3);
  const int base = ::getpriority(PRIO_PROCESS, 0);
  std::atomic<int> lowered{-100};
  std::mutex mu;
  std::vector<int> seen_on_workers;
  std::thread t([&] {
    LowerThisThreadPriority(2);
    lowered = ::getpriority(PRIO_PROCESS, 0);
    const std::thread::id self = std::this_thread::get_id();
    ParallelFor(64, 3, [&](size_t, size_t) {
      if (std::this_thread::get_id() != self) {
        std::lock_guard<std::mutex> lock(mu);
        seen_on_workers.push_back(::getpriority(PRIO_PROCESS, 0));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  });
  t.join();
  EXPECT_EQ(lowered.load(), std::min(19, base + 2));
  EXPECT_EQ(::getpriority(PRIO_PROCESS, 0), base);
  EXPECT_FALSE(seen_on_workers.empty());  // 64 chunks of 1 ms: the workers took some
  for (int p : seen_on_workers) EXPECT_EQ(p, base);
}

// A child forked after the pool started has none of its workers: its calls
// must still finish, on its own thread (no thread may start after a
// multi-threaded fork under TSan). Several calls: with a pool rebuilt in the
// child, the second broadcast waited for the parent's dead waiters (review).
TEST(ParallelForPool, AForkedChildCanStillCall) {
  ParallelFor(100, 4, [](size_t, size_t) {});
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);  // a hang fails the test instead of stalling it
    std::atomic<size_t> sum{0};
    for (int call = 0; call < 5; ++call) {
      ParallelFor(10000, 4, [&](size_t b, size_t e) { sum += e - b; });
    }
    _exit(sum.load() == 50000 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// ParallelSort against std::sort: sizes below, at and past the point where
// it splits, many equal keys (told apart by the second member, so the order
// is total and the result must match exactly), and thread counts that do
// not divide the size.
TEST(ParallelSortTest, SortsAsStdSortForAnyThreadCount) {
  std::mt19937_64 rng(7);
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{1} << 15, (size_t{1} << 15) + 3, size_t{200001}}) {
    std::vector<std::pair<uint32_t, uint32_t>> v(n);
    for (uint32_t i = 0; i < n; ++i) v[i] = {static_cast<uint32_t>(rng() % 97), i};
    std::shuffle(v.begin(), v.end(), rng);
    std::vector<std::pair<uint32_t, uint32_t>> want = v;
    std::sort(want.begin(), want.end());
    for (int threads : {1, 2, 3, 5, 8}) {
      std::vector<std::pair<uint32_t, uint32_t>> got = v;
      ParallelSort(got, threads, std::less<>());
      ASSERT_EQ(got, want) << "n=" << n << " threads=" << threads;
    }
  }
}

// MergePathSplit against the stable merge itself: for every output length
// p, how many of the first p merged elements came from a (ties: a's first),
// on runs with many ties between and inside the two sides.
TEST(ParallelSortTest, MergePathSplitCountsTheFirstSidesElements) {
  std::mt19937_64 rng(11);
  auto by_key = [](const std::pair<int, int>& x, const std::pair<int, int>& y) { return x.first < y.first; };
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::pair<int, int>> a(rng() % 40), b(rng() % 40);
    for (auto& x : a) x = {static_cast<int>(rng() % 6), 0};
    for (auto& x : b) x = {static_cast<int>(rng() % 6), 1};
    std::sort(a.begin(), a.end(), by_key);
    std::sort(b.begin(), b.end(), by_key);
    std::vector<std::pair<int, int>> merged(a.size() + b.size());
    std::merge(a.begin(), a.end(), b.begin(), b.end(), merged.begin(), by_key);
    size_t from_a = 0;
    for (size_t p = 0; p <= merged.size(); ++p) {
      ASSERT_EQ(MergePathSplit(a.begin(), a.size(), b.begin(), b.size(), p, by_key), from_a) << trial << " " << p;
      if (p < merged.size()) from_a += merged[p].second == 0;
    }
  }
}

// A strict weak order with ties: sorted by it, whatever the ties' order.
TEST(ParallelSortTest, SortsByAWeakOrder) {
  std::vector<std::pair<uint32_t, uint32_t>> v(100000);
  for (uint32_t i = 0; i < v.size(); ++i) v[i] = {(i * 2654435761u) % 13, i};
  auto by_first = [](const auto& a, const auto& b) { return a.first < b.first; };
  ParallelSort(v, 3, by_first);
  EXPECT_TRUE(std::is_sorted(v.begin(), v.end(), by_first));
  std::vector<uint32_t> seconds;
  for (const auto& p : v) seconds.push_back(p.second);
  std::sort(seconds.begin(), seconds.end());
  for (uint32_t i = 0; i < seconds.size(); ++i) ASSERT_EQ(seconds[i], i);  // a permutation
}

}  // namespace
}  // namespace neardup
