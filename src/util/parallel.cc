#include "neardup/util/parallel.h"

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace neardup {
namespace {

// Set in the child of a fork: there every call runs on its caller alone. The
// child has none of the workers, and the pool's condition variables still
// count the parent's waiters (glibc's broadcast would wait for them forever);
// starting threads after a multi-threaded fork is not allowed under TSan
// either.
std::atomic<bool> in_forked_child{false};

// One ParallelFor call: its chunks are taken by the caller and by the pool's
// workers that join it.
struct Job {
  const std::function<void(size_t, size_t)>* fn = nullptr;
  size_t n = 0, chunk = 1;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;  // the first exception; written once, under `failed`
  size_t wanted = 0;         // workers it still takes (Pool::mu_)
  size_t active = 0;         // workers inside Work (Pool::mu_)

  void Work() {
    try {
      while (!failed.load(std::memory_order_relaxed)) {
        const size_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
        if (begin >= n) break;
        (*fn)(begin, std::min(n, begin + chunk));
      }
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  }
};

// Workers that live as long as the process. Why not a thread per call: a
// worker's thread_local scratch (the text analysis's buffers, the record
// filter's) stays warm from one call to the next. With a fresh thread per
// batch, `dedup --decide join` analyzed 1M short documents only 1.41x faster
// on two threads than on one; with the pool the whole run went from 1.51x
// to 1.86x (docs/BENCHMARKS.md, "a pool of workers").
//
// A caller never waits for a worker that has not started its job: it works
// through the chunks itself, withdraws the job, and waits only for the
// workers already inside it. So nested and concurrent calls cannot deadlock,
// and a call with no free worker runs on its caller alone.
class Pool {
 public:
  static Pool& Get() {
    static Pool* pool = [] {
      auto* p = new Pool;  // never destroyed: workers may outlive main()
      // The lock keeps a fork from copying the pool mid-change; the child
      // releases it but never uses the pool.
      pthread_atfork([] { Get().mu_.lock(); }, [] { Get().mu_.unlock(); },
                     [] {
                       in_forked_child.store(true);
                       Get().mu_.unlock();
                     });
      return p;
    }();
    return *pool;
  }

  void Run(Job* job, size_t helpers) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (workers_ < helpers) {
        std::thread([this] { Loop(); }).detach();
        ++workers_;
      }
      job->wanted = helpers;
      queue_.push_back(job);
    }
    wake_.notify_all();
    job->Work();
    std::unique_lock<std::mutex> lock(mu_);
    if (job->wanted > 0) queue_.erase(std::find(queue_.begin(), queue_.end(), job));
    job->wanted = 0;
    left_.wait(lock, [&] { return job->active == 0; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return !queue_.empty(); });
      Job* job = queue_.front();
      if (--job->wanted == 0) queue_.pop_front();
      ++job->active;
      lock.unlock();
      job->Work();
      lock.lock();
      if (--job->active == 0) left_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;  // a job was queued
  std::condition_variable left_;  // a worker left a job
  std::deque<Job*> queue_;        // jobs that still take workers
  size_t workers_ = 0;
};

}  // namespace

void ParallelFor(size_t n, int threads, const std::function<void(size_t begin, size_t end)>& fn) {
  if (n == 0) return;
  const size_t workers = std::min<size_t>(threads <= 1 ? 1 : static_cast<size_t>(threads), n);
  if (workers <= 1 || in_forked_child.load(std::memory_order_relaxed)) {
    fn(0, n);
    return;
  }
  Job job;
  job.fn = &fn;
  // Small chunks balance uneven texts; large enough to keep the atomic cold.
  job.chunk = std::clamp<size_t>(n / (workers * 32), 1, 256);
  job.n = n;
  Pool::Get().Run(&job, workers - 1);
  if (job.error) std::rethrow_exception(job.error);
}

void StartWorkers(int threads) {
  if (threads > 1) ParallelFor(static_cast<size_t>(threads), threads, [](size_t, size_t) {});
}

void LowerThisThreadPriority(int levels) {
  errno = 0;
  const int now = ::getpriority(PRIO_PROCESS, 0);  // 0: this thread, on Linux
  if (errno == 0) (void)::setpriority(PRIO_PROCESS, 0, std::min(19, now + levels));
}

}  // namespace neardup
