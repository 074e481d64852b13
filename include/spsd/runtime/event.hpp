#pragma once
// CommEvent: a point on a rank's communication stream. It is done once the stream has completed
// the instruction with that sequence number; waiting on it blocks the calling thread until
// then. Events outlive their stream safely (the progress they read is shared), so a tensor
// may outlive the Runtime that filled it.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace spsd::detail {

// How far a stream got: instructions 1..completed are done (succeeded, failed or skipped).
struct StreamProgress {
  std::atomic<uint64_t> completed{0};
  std::atomic<int64_t> wait_ns{0};  // time threads spent blocked in wait_for (statistics)
  std::mutex mutex;
  std::condition_variable advanced;
  // Blocks until instruction seq is complete (src/runtime/stream.cpp).
  void wait_for(uint64_t seq);
};

struct CommEvent {
  std::shared_ptr<StreamProgress> stream;  // null: nothing to wait for
  uint64_t seq = 0;
  explicit operator bool() const { return stream != nullptr; }
  bool done() const { return !stream || stream->completed.load(std::memory_order_acquire) >= seq; }
  void wait() const {
    if (!done()) stream->wait_for(seq);
  }
};

}  // namespace spsd::detail
