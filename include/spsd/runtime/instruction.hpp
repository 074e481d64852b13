#pragma once
// An instruction of the eager runtime (DESIGN.md 5): work with the buffers it reads and the
// buffers it writes. A buffer remembers its pending uses on the communication stream: the
// last instruction that writes it and the last that reads it. A thread that reads the buffer
// waits for the writer; a thread that writes it waits for the writer and the readers
// (read-after-write, write-after-write, write-after-read). Readers do not wait for readers.
//
// On the CPU the compute stream is the calling thread itself: a kernel runs when it is issued,
// so what it reads or writes is settled by the waits above when it touches the buffer, and a
// communication instruction issued after it finds its inputs complete. Communication
// instructions run in issue order on the stream's worker thread (runtime/stream.hpp).
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "spsd/core/error.hpp"
#include "spsd/runtime/event.hpp"

namespace spsd::detail {

// True on a communication stream's worker thread, which never waits on its own events.
inline thread_local bool tls_on_comm_worker = false;
inline bool on_comm_worker() { return tls_on_comm_worker; }

// The pending uses of one buffer (Storage derives from it). Its events are set and read by the
// issuing thread only; the worker only marks a failure, before it completes the instruction.
class TrackedBuffer {
 public:
  // Before a read: waits for the pending write; throws when that write failed.
  void settle_for_read() const {
    // The worker's own accesses are ordered by the stream; it never reads these events (they
    // belong to the issuing thread), so test on_comm_worker() first.
    if (!on_comm_worker() && last_write_) settle(last_write_);
  }
  // Before a write: waits for the pending write and the pending reads.
  void settle_for_write() const {
    if (!on_comm_worker() && last_read_) settle(last_read_);
    settle_for_read();
  }
  // Called by the stream when an instruction reads or writes this buffer.
  void note_read(const CommEvent& e) { last_read_ = e; }
  void note_write(const CommEvent& e) {
    last_write_ = e;
    last_read_ = {};  // the stream runs in order: the write completes after every earlier read
  }
  // The instruction that was to write this buffer failed (or was skipped after a failure):
  // every later access throws, naming why.
  void mark_failed(std::shared_ptr<const std::string> why) { failure_ = std::move(why); }

 protected:
  ~TrackedBuffer() = default;

 private:
  void settle(CommEvent& e) const {
    e.wait();
    if (failure_) throw Error(*failure_);
    e = {};  // complete: later accesses take the fast path
  }
  mutable CommEvent last_write_, last_read_;
  std::shared_ptr<const std::string> failure_;
};

struct Instruction {
  std::string_view name;  // a static string: what it is, for logs
  std::vector<std::shared_ptr<TrackedBuffer>> reads, writes;
  std::function<void()> run;
  int64_t bytes = 0;  // the data it moves on this rank (decides whether it may run inline)
};

}  // namespace spsd::detail
