#pragma once
// CommStream: a rank's communication stream on the CPU side. A worker thread runs the queued
// instructions one at a time, in the order they were queued (so every rank issues its
// collectives in program order and they match across ranks). Only the rank's own thread
// queues, waits and drains. When an instruction throws, the stream records the error, marks
// what it was to write as failed, skips (and marks) every instruction queued after it, and
// the next drain() throws the error; later instructions then run again.
#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "spsd/runtime/event.hpp"
#include "spsd/runtime/instruction.hpp"

namespace spsd {

// What a rank's communication stream did since the last reset (comm_stream_stats()).
struct CommStreamStats {
  int64_t queued = 0;      // instructions run by the worker thread
  int64_t inline_run = 0;  // instructions run on the calling thread (synchronous mode, small, or needed at once)
  double busy_s = 0;       // time the worker spent running instructions
  double inline_s = 0;     // time instructions run inline took
  double wait_s = 0;       // time the rank's thread spent blocked waiting for the stream
};

namespace detail {

class CommStream {
 public:
  // thread_setup runs first on the worker thread (it makes the rank's context current there).
  explicit CommStream(std::function<void()> thread_setup);
  // Waits for the queued instructions (errors are reported on stderr), then stops the worker.
  ~CommStream();
  CommStream(const CommStream&) = delete;
  CommStream& operator=(const CommStream&) = delete;

  // Queues ins and returns at once. Its operands get events. Throws (after draining) the
  // error of an earlier instruction that nobody has seen yet.
  void enqueue(Instruction ins);
  // Runs ins on the calling thread; the stream must be idle. Throws like enqueue.
  void run_inline(Instruction& ins);
  // Every queued instruction completed.
  bool idle() const { return progress_->completed.load(std::memory_order_acquire) == issued_; }
  // Waits for every queued instruction, then throws the first error since the last drain.
  void drain();

  CommStreamStats stats() const;
  void reset_stats();

 private:
  void work();
  void throw_pending_failure();

  std::function<void()> thread_setup_;
  std::shared_ptr<StreamProgress> progress_ = std::make_shared<StreamProgress>();
  uint64_t issued_ = 0;  // the owning thread's count of queued instructions
  std::mutex mutex_;     // guards queue_, stop_, failure_
  std::condition_variable wake_;
  struct Queued {
    uint64_t seq;
    Instruction ins;
    int64_t queued_ns;  // when it was queued; stamped only while tracing (how long it waited)
  };
  std::deque<Queued> queue_;
  bool stop_ = false;
  std::exception_ptr failure_;
  std::shared_ptr<const std::string> failure_text_;  // worker only: what skipped instructions mark
  std::atomic<bool> failed_{false};
  std::atomic<int64_t> queued_{0}, inline_run_{0}, busy_ns_{0}, inline_ns_{0};
  std::thread worker_;  // started at the first enqueue
};

}  // namespace detail
}  // namespace spsd
