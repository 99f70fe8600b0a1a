// CallGate: counts an engine's calls in progress, so that Shutdown() can
// refuse new calls and wait for the ones already running before it stops the
// engine's threads and store. Shared by every Engine implementation.
//
// Thread-safety: every method may be called from any thread.
#ifndef NEARDUP_SRC_CALL_GATE_H_
#define NEARDUP_SRC_CALL_GATE_H_

#include <condition_variable>
#include <mutex>

namespace neardup {

class CallGate {
 public:
  // Held for the length of one call: ok() is false when the gate was
  // already closed (the call must answer kUnavailable and do nothing).
  class Pass {
   public:
    explicit Pass(CallGate& gate) : gate_(gate) {
      std::lock_guard lk(gate_.mu_);
      ok_ = !gate_.closed_;
      if (ok_) ++gate_.active_;
    }
    ~Pass() {
      if (!ok_) return;
      std::lock_guard lk(gate_.mu_);
      if (--gate_.active_ == 0) gate_.drained_.notify_all();
    }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    bool ok() const { return ok_; }

   private:
    CallGate& gate_;
    bool ok_ = false;
  };

  // Refuses new passes, then waits until none is out. True for the first
  // caller only, so one caller goes on to stop the engine.
  bool CloseAndDrain() {
    std::unique_lock lk(mu_);
    const bool first = !closed_;
    closed_ = true;
    drained_.wait(lk, [&] { return active_ == 0; });
    return first;
  }

 private:
  std::mutex mu_;
  std::condition_variable drained_;
  int active_ = 0;
  bool closed_ = false;
};

}  // namespace neardup

#endif  // NEARDUP_SRC_CALL_GATE_H_
