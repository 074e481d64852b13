// The communication stream's worker thread (runtime/stream.hpp).
#include "spsd/runtime/stream.hpp"

#include <chrono>
#include <cstdio>

#include "spsd/runtime/trace.hpp"

namespace spsd::detail {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}
TraceClock::time_point trace_time(int64_t ns) { return TraceClock::time_point(std::chrono::nanoseconds(ns)); }

// An instruction's span on the lane of the thread that ran it (SPSD_TRACE); a queued one says
// how long it waited for the worker.
void trace_instruction(const Instruction& ins, int64_t start_ns, int64_t end_ns, int64_t queued_ns = 0) {
  TraceRecorder* recorder = tls_trace_recorder;
  if (!recorder) return;
  TraceSpan span{current_lane(), std::string(ins.name), "instruction", trace_time(start_ns), trace_time(end_ns),
                 {{"bytes", ins.bytes}}};
  if (queued_ns) span.args.emplace_back("queued_us", (start_ns - queued_ns) * 1e-3);
  recorder->record(std::move(span));
}
}  // namespace

void StreamProgress::wait_for(uint64_t seq) {
  const int64_t start = now_ns();
  std::unique_lock lock(mutex);
  advanced.wait(lock, [&] { return completed.load(std::memory_order_acquire) >= seq; });
  const int64_t end = now_ns();
  wait_ns.fetch_add(end - start, std::memory_order_relaxed);
  // Blocked on the stream: in the trace, the time communication did not overlap this thread's work.
  if (TraceRecorder* recorder = tls_trace_recorder)
    recorder->record({current_lane(), "wait for communication", "wait", trace_time(start), trace_time(end),
                      {{"instruction", static_cast<int64_t>(seq)}}});
}

CommStream::CommStream(std::function<void()> thread_setup) : thread_setup_(std::move(thread_setup)) {}

CommStream::~CommStream() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  worker_.join();  // the worker empties the queue first
  if (failure_)
    std::fprintf(stderr, "spsd: communication failed and nothing waited for it before the runtime ended: %s\n",
                 what_of(failure_).c_str());
}

void CommStream::throw_pending_failure() {
  if (!failed_.load(std::memory_order_acquire)) return;
  drain();
}

void CommStream::enqueue(Instruction ins) {
  throw_pending_failure();
  if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  const CommEvent done{progress_, ++issued_};
  for (const auto& b : ins.reads) b->note_read(done);
  for (const auto& b : ins.writes) b->note_write(done);
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({done.seq, std::move(ins), tls_trace_recorder ? now_ns() : 0});
  }
  queued_.fetch_add(1, std::memory_order_relaxed);
  wake_.notify_one();
}

void CommStream::run_inline(Instruction& ins) {
  throw_pending_failure();
  inline_run_.fetch_add(1, std::memory_order_relaxed);
  const int64_t start = now_ns();
  struct Timed {  // also when it throws
    std::atomic<int64_t>& total;
    const Instruction& ins;
    int64_t start;
    ~Timed() {
      const int64_t end = now_ns();
      total.fetch_add(end - start, std::memory_order_relaxed);
      trace_instruction(ins, start, end);
    }
  } timed{inline_ns_, ins, start};
  ins.run();
}

void CommStream::drain() {
  if (!idle()) CommEvent{progress_, issued_}.wait();
  if (!failed_.load(std::memory_order_acquire)) return;
  std::exception_ptr e;
  {
    std::lock_guard lock(mutex_);
    e = std::exchange(failure_, nullptr);
    failed_.store(false, std::memory_order_release);
  }
  if (e) std::rethrow_exception(e);
}

void CommStream::work() {
  tls_on_comm_worker = true;
  thread_setup_();
  for (;;) {
    Queued next;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    auto& [seq, ins, queued_ns] = next;
    if (failed_.load(std::memory_order_acquire)) {
      for (const auto& b : ins.writes) b->mark_failed(failure_text_);
    } else {
      const int64_t start = now_ns();
      try {
        ins.run();
      } catch (...) {
        failure_text_ = std::make_shared<const std::string>(what_of(std::current_exception()));
        for (const auto& b : ins.writes) b->mark_failed(failure_text_);
        std::lock_guard lock(mutex_);
        failure_ = std::current_exception();
        failed_.store(true, std::memory_order_release);
      }
      const int64_t end = now_ns();
      busy_ns_.fetch_add(end - start, std::memory_order_relaxed);
      trace_instruction(ins, start, end, queued_ns);
    }
    ins = {};  // operands are released once the stream has passed them
    progress_->completed.store(seq, std::memory_order_release);
    { std::lock_guard lock(progress_->mutex); }
    progress_->advanced.notify_all();
  }
}

CommStreamStats CommStream::stats() const {
  return {queued_.load(), inline_run_.load(), busy_ns_.load() * 1e-9, inline_ns_.load() * 1e-9,
          progress_->wait_ns.load() * 1e-9};
}

void CommStream::reset_stats() {
  queued_ = 0;
  inline_run_ = 0;
  busy_ns_ = 0;
  inline_ns_ = 0;
  progress_->wait_ns = 0;
}

}  // namespace spsd::detail
