#pragma once
// DeviceTrace: a rank's spans on its CUDA compute stream for the trace (SPSD_TRACE,
// runtime/trace.hpp). A span is two timing events recorded on the stream around the work an op
// enqueued. They are read (cudaEventElapsedTime) only when the trace is written, so tracing
// never waits for the device while the program runs. Device times become host-clock times
// through an anchor: an event recorded on a stream of its own, with nothing queued before it,
// completes at once, so cudaEventSynchronize on it and a clock reading give its host time to
// within a few microseconds. cudaEventElapsedTime is a float of milliseconds (about 8 us of
// resolution 100 s away), so a new anchor is taken each second.
#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "../comm/event.cuh"
#include "spsd/runtime/trace.hpp"

namespace spsd::detail {

class DeviceTrace {
 public:
  // On the current device (the rank's).
  DeviceTrace() : anchor_stream_("trace") {}
  ~DeviceTrace() {
    for (Pending& p : pending_) destroy(p);
  }
  DeviceTrace(const DeviceTrace&) = delete;
  DeviceTrace& operator=(const DeviceTrace&) = delete;

  // The start of a span: a timing event recorded on stream now.
  std::unique_ptr<DeviceMark> begin(cudaStream_t stream) {
    auto mark = std::make_unique<Mark>();
    {
      std::lock_guard lock(mutex_);
      mark->anchor = current_anchor();  // before the start event: elapsed times are never negative
    }
    mark->start = timing_event();
    check_cuda(cudaEventRecord(mark->start, stream), "trace", "cudaEventRecord");
    return mark;
  }

  // The end of the span begun with start (a mark of begin()): span's begin and end are read from
  // the two events when the trace is written.
  void end(std::unique_ptr<DeviceMark> start, cudaStream_t stream, TraceSpan span) {
    auto& mark = static_cast<Mark&>(*start);
    cudaEvent_t stop = timing_event();
    if (cudaError_t err = cudaEventRecord(stop, stream); err != cudaSuccess) {
      (void)cudaEventDestroy(stop);
      check_cuda(err, "trace", "cudaEventRecord");
    }
    std::lock_guard lock(mutex_);
    pending_.push_back({std::move(mark.anchor), std::exchange(mark.start, nullptr), stop, std::move(span)});
  }

  // Appends every finished span with host-clock times (waits for their events) and forgets them.
  void resolve(std::vector<TraceSpan>& out) {
    std::lock_guard lock(mutex_);
    for (Pending& p : pending_) {
      check_cuda(cudaEventSynchronize(p.stop), "trace", "cudaEventSynchronize");
      p.span.begin = p.anchor->host_time(p.start);
      p.span.end = p.anchor->host_time(p.stop);
      out.push_back(std::move(p.span));
      destroy(p);
    }
    pending_.clear();
  }

 private:
  struct Anchor {
    cudaEvent_t event = nullptr;
    TraceClock::time_point host;
    ~Anchor() {
      if (event) (void)cudaEventDestroy(event);
    }
    TraceClock::time_point host_time(cudaEvent_t e) const {
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, event, e), "trace", "cudaEventElapsedTime");
      return host + std::chrono::duration_cast<TraceClock::duration>(std::chrono::duration<double, std::milli>(ms));
    }
  };
  struct Mark final : DeviceMark {
    std::shared_ptr<const Anchor> anchor;
    cudaEvent_t start = nullptr;
    ~Mark() override {
      if (start) (void)cudaEventDestroy(start);  // a span that never ended
    }
  };
  struct Pending {
    std::shared_ptr<const Anchor> anchor;
    cudaEvent_t start, stop;
    TraceSpan span;
  };

  static cudaEvent_t timing_event() {
    cudaEvent_t e = nullptr;
    check_cuda(cudaEventCreateWithFlags(&e, cudaEventDefault), "trace", "cudaEventCreateWithFlags");
    return e;
  }
  static void destroy(Pending& p) {
    (void)cudaEventDestroy(p.start);
    (void)cudaEventDestroy(p.stop);
  }

  // Caller holds mutex_.
  std::shared_ptr<const Anchor> current_anchor() {
    const TraceClock::time_point now = TraceClock::now();
    if (anchor_ && now - anchor_->host < std::chrono::seconds(1)) return anchor_;
    auto a = std::make_shared<Anchor>();
    a->event = timing_event();
    check_cuda(cudaEventRecord(a->event, anchor_stream_.get()), "trace", "cudaEventRecord");
    check_cuda(cudaEventSynchronize(a->event), "trace", "cudaEventSynchronize");
    a->host = TraceClock::now();
    anchor_ = std::move(a);
    return anchor_;
  }

  Stream anchor_stream_;  // empty but for anchors
  std::mutex mutex_;      // the host thread and the communication worker may both record
  std::shared_ptr<const Anchor> anchor_;
  std::vector<Pending> pending_;
};

}  // namespace spsd::detail
