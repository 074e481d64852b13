#pragma once
// The trace (SPSD_TRACE=path, docs/trace.md): per rank, timed spans of the host thread's ops,
// the communication stream's instructions and the collectives, buffered in memory and written
// as Chrome trace-event JSON (Perfetto, chrome://tracing) when the rank's Runtime ends or at
// flush_trace(). Off by default: every recording site costs one test of a thread-local pointer.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace spsd {

// Writes this rank's trace file now with every span recorded so far (the file is rewritten
// whole, and again when the Runtime ends); does nothing when tracing is off.
void flush_trace();
// This rank's trace file ("" when SPSD_TRACE is unset): SPSD_TRACE with its ".json" suffix, if
// any, replaced by ".rank<r>.json", e.g. SPSD_TRACE=out/step.json gives out/step.rank0.json.
std::string trace_file();

namespace detail {

using TraceClock = std::chrono::steady_clock;

// The rows of a rank in the viewer (the event's tid); pid is the rank. kCudaComm holds the
// communication instructions the worker ran on a device, timed on the communication stream.
// kPipeline holds the pipeline runner's actions (pipeline/runner.hpp), one span per forward or
// backward of a micro-batch at a stage this rank is in: the stage lanes a bubble is read from.
enum class TraceLane { kHost = 0, kCommStream = 1, kCudaCompute = 2, kCudaComm = 3, kPipeline = 4 };

// One argument of a span: a count, a time in microseconds, a text, or a list (ranks, layouts).
using TraceValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<std::string>>;

struct TraceSpan {
  TraceLane lane = TraceLane::kHost;
  std::string name;
  std::string category;  // "op", "instruction", "collective", "wait"
  TraceClock::time_point begin, end;
  std::vector<std::pair<std::string, TraceValue>> args;
};

// The start of a span on a device stream; what it holds is the device runtime's.
struct DeviceMark {
  virtual ~DeviceMark() = default;
};

class DeviceRuntime;

// A rank's buffer of spans. Its host thread and its communication worker record into it.
class TraceRecorder {
 public:
  // Creates (truncates) the file to make sure it can be written; throws spsd::Error naming
  // SPSD_TRACE and its value (setting) when it cannot.
  TraceRecorder(std::string file, int64_t rank, std::string_view setting);
  // Writes the file; an error is printed on stderr (a destructor must not throw).
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  void record(TraceSpan span);
  // The rank's device, whose stream spans are read when the file is written (it outlives this).
  void attach_device(DeviceRuntime* device) { device_ = device; }
  // Rewrites the file with every span so far, sorted by start time; throws on a write error.
  void write();
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  int64_t rank_;
  mutable std::mutex mutex_;  // guards spans_
  std::vector<TraceSpan> spans_;
  DeviceRuntime* device_ = nullptr;
};

// The recorder of the rank current on this thread (its host thread and its communication
// worker); null when tracing is off. Set with the current context (set_current_context).
constinit inline thread_local TraceRecorder* tls_trace_recorder = nullptr;

// Makes recorder (null: none) the calling thread's, and has the communicator report this
// thread's collectives to it (set_current_context calls it).
void set_thread_trace_recorder(TraceRecorder* recorder);

// The lane of the calling thread: the communication worker's or the rank's host thread.
TraceLane current_lane();

// This rank's recorder under SPSD_TRACE (its file named as trace_file() says); null when unset.
// Throws spsd::Error naming the variable and the value for an empty value or a file that cannot
// be written.
std::unique_ptr<TraceRecorder> trace_recorder_from_env(int64_t rank);

// A span that is recorded when it ends (when this object is destroyed): an op's, from the start
// of its dispatch to the return of its kernel. Empty (nothing to do) when tracing is off. With a
// device, the same span is also timed on its compute stream (the op's device work, lane
// kCudaCompute), from the work enqueued before it to the work it enqueued.
class OpenSpan {
 public:
  OpenSpan() = default;
  OpenSpan(TraceRecorder& recorder, TraceSpan span, DeviceRuntime* device = nullptr);
  OpenSpan(OpenSpan&&) noexcept = default;
  OpenSpan& operator=(OpenSpan&&) noexcept = default;
  ~OpenSpan() {
    if (span_) close();
  }

 private:
  void close() noexcept;
  TraceRecorder* recorder_ = nullptr;
  std::unique_ptr<TraceSpan> span_;
  DeviceRuntime* device_ = nullptr;
  std::unique_ptr<DeviceMark> device_start_;
};

// A span of a training phase (backward, an optimizer step) on the calling thread's lane,
// category "phase", around the ops it runs; empty when tracing is off.
inline OpenSpan phase_span(std::string_view name) {
  if (!tls_trace_recorder) return {};
  TraceSpan span{current_lane(), std::string(name), "phase", TraceClock::now(), {}, {}};
  return OpenSpan(*tls_trace_recorder, std::move(span));
}

// A span of local work that no dispatched op covers (an optimizer's fused update of one
// parameter's piece): category "op" on the calling thread's lane with its element count, and on
// a cuda device (on_device) timed on the compute stream too (lane kCudaCompute), like an op's.
// Empty when tracing is off.
OpenSpan local_op_span(std::string_view name, bool on_device, int64_t elements);

// A span of a pipeline action ("F3@stage1") on the pipeline lane, category "pipeline"; empty when
// tracing is off.
inline OpenSpan pipeline_span(std::string name) {
  if (!tls_trace_recorder) return {};
  TraceSpan span{TraceLane::kPipeline, std::move(name), "pipeline", TraceClock::now(), {}, {}};
  return OpenSpan(*tls_trace_recorder, std::move(span));
}

}  // namespace detail
}  // namespace spsd
