// The trace recorder and its Chrome trace-event JSON (runtime/trace.hpp, docs/trace.md).
#include "spsd/runtime/trace.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string_view>

#include "context.hpp"
#include "spsd/core/error.hpp"
#include "spsd/runtime/device.hpp"
#include "spsd/runtime/instruction.hpp"
#include "spsd/runtime/scheduler.hpp"

namespace spsd {

namespace detail {

namespace {

constexpr std::array<std::string_view, 5> kLaneNames = {"host thread", "communication stream", "cuda compute stream",
                                                        "cuda communication stream", "pipeline stages"};

void put_string(std::ostream& os, std::string_view s) {
  os << '"';
  for (char c : s) {
    switch (c) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\t': os << "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          os << buf;
        } else {
          os << c;
        }
    }
  }
  os << '"';
}

void put_value(std::ostream& os, const TraceValue& v) {
  struct Put {
    std::ostream& os;
    void operator()(int64_t n) const { os << n; }
    void operator()(double x) const {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3f", x);
      os << buf;
    }
    void operator()(const std::string& s) const { put_string(os, s); }
    void operator()(const std::vector<int64_t>& list) const {
      os << '[';
      for (size_t i = 0; i < list.size(); ++i) os << (i ? "," : "") << list[i];
      os << ']';
    }
    void operator()(const std::vector<std::string>& list) const {
      os << '[';
      for (size_t i = 0; i < list.size(); ++i) {
        if (i) os << ',';
        put_string(os, list[i]);
      }
      os << ']';
    }
  };
  std::visit(Put{os}, v);
}

// Microseconds (the format's unit) with nanosecond digits, from the steady clock's epoch: ranks
// of one machine share it, so their files can be merged and line up.
void put_micros(std::ostream& os, std::chrono::nanoseconds t) {
  const int64_t ns = t.count();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
  os << buf;
}

void put_metadata(std::ostream& os, std::string_view name, int64_t pid, int64_t tid, std::string_view key,
                  const TraceValue& value) {
  os << "{\"name\":";
  put_string(os, name);
  os << ",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << tid << ",\"args\":{";
  put_string(os, key);
  os << ':';
  put_value(os, value);
  os << "}}";
}

}  // namespace

TraceRecorder::TraceRecorder(std::string file, int64_t rank, std::string_view setting)
    : file_(std::move(file)), rank_(rank) {
  std::ofstream probe(file_, std::ios::trunc);
  SPSD_CHECK(probe.good(), "SPSD_TRACE", "cannot write rank ", rank_, "'s trace file \"", file_, "\" (SPSD_TRACE=\"",
             setting, "\"): ", std::strerror(errno));
  probe << "{\"traceEvents\":[]}\n";  // valid, empty, until the first write
}

TraceRecorder::~TraceRecorder() {
  try {
    write();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spsd: rank %lld: %s\n", static_cast<long long>(rank_), e.what());
  }
}

void TraceRecorder::record(TraceSpan span) {
  std::lock_guard lock(mutex_);
  spans_.push_back(std::move(span));
}

void TraceRecorder::write() {
  std::vector<TraceSpan> device_spans;
  if (device_) device_->resolve_trace_spans(device_spans);
  std::vector<const TraceSpan*> order;
  std::ostringstream os;
  std::lock_guard lock(mutex_);
  std::move(device_spans.begin(), device_spans.end(), std::back_inserter(spans_));
  order.reserve(spans_.size());
  for (const TraceSpan& s : spans_) order.push_back(&s);
  // Spans are recorded when they end (an op after the collectives inside it): sorted by start,
  // the outer one first on a tie, each lane reads in time order.
  std::stable_sort(order.begin(), order.end(), [](const TraceSpan* a, const TraceSpan* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end > b->end;
  });
  std::set<TraceLane> lanes{TraceLane::kHost};
  for (const TraceSpan* s : order) lanes.insert(s->lane);

  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  put_metadata(os, "process_name", rank_, 0, "name", "rank " + std::to_string(rank_));
  os << ",\n";
  put_metadata(os, "process_sort_index", rank_, 0, "sort_index", rank_);
  for (TraceLane lane : lanes) {
    const int64_t tid = static_cast<int64_t>(lane);
    os << ",\n";
    put_metadata(os, "thread_name", rank_, tid, "name", std::string(kLaneNames[tid]));
    os << ",\n";
    put_metadata(os, "thread_sort_index", rank_, tid, "sort_index", tid);
  }
  for (const TraceSpan* s : order) {
    os << ",\n{\"name\":";
    put_string(os, s->name);
    os << ",\"cat\":";
    put_string(os, s->category);
    os << ",\"ph\":\"X\",\"ts\":";
    put_micros(os, s->begin.time_since_epoch());
    os << ",\"dur\":";
    put_micros(os, std::max(s->end - s->begin, TraceClock::duration::zero()));
    os << ",\"pid\":" << rank_ << ",\"tid\":" << static_cast<int>(s->lane) << ",\"args\":{";
    for (size_t i = 0; i < s->args.size(); ++i) {
      if (i) os << ',';
      put_string(os, s->args[i].first);
      os << ':';
      put_value(os, s->args[i].second);
    }
    os << "}}";
  }
  os << "\n]}\n";

  std::ofstream out(file_, std::ios::trunc);
  SPSD_CHECK(out.good(), "SPSD_TRACE", "cannot write rank ", rank_, "'s trace file \"", file_, "\": ", std::strerror(errno));
  out << os.str();
  out.flush();
  SPSD_CHECK(out.good(), "SPSD_TRACE", "writing the trace file \"", file_, "\" failed");
}

OpenSpan::OpenSpan(TraceRecorder& recorder, TraceSpan span, DeviceRuntime* device)
    : recorder_(&recorder), span_(std::make_unique<TraceSpan>(std::move(span))), device_(device) {
  if (device_) device_start_ = device_->begin_compute_span();
}

void OpenSpan::close() noexcept {
  span_->end = TraceClock::now();
  try {
    if (device_start_) {
      TraceSpan on_device = *span_;  // its times come from the device's events
      on_device.lane = TraceLane::kCudaCompute;
      // The host span's start, which ties the device work to its op and to the phase (backward,
      // an optimizer step) that ran it: device times lag the host's.
      on_device.args.emplace_back(
          "host_ts", std::chrono::duration<double, std::micro>(span_->begin.time_since_epoch()).count());
      device_->end_compute_span(std::move(device_start_), std::move(on_device));
    }
    recorder_->record(std::move(*span_));
  } catch (...) {  // out of memory or a failed event: the trace loses a span, the program goes on
  }
  span_.reset();
}

OpenSpan local_op_span(std::string_view name, bool on_device, int64_t elements) {
  if (!tls_trace_recorder) return {};
  TraceSpan span{current_lane(), std::string(name), "op", TraceClock::now(), {}, {{"elements", elements}}};
  return OpenSpan(*tls_trace_recorder, std::move(span), on_device ? &device_runtime(name) : nullptr);
}

namespace {
// The collective observer: a span on the lane of the thread that called the collective, so one
// run inline sits on the host thread, inside the instruction or op that issued it.
void record_collective(const CollectiveSpan& c) {
  TraceRecorder* recorder = tls_trace_recorder;
  if (!recorder) return;
  TraceSpan span{current_lane(), std::string(to_string(c.kind)), "collective", c.begin, c.end, {}};
  span.args.emplace_back("ranks", c.comm.world_ranks());
  span.args.emplace_back("dtype", std::string(to_string(c.dtype)));
  span.args.emplace_back("bytes_sent", c.bytes_sent);
  span.args.emplace_back("bytes_received", c.bytes_received);
  if (c.kind == CollectiveKind::kSendRecv) span.args.emplace_back("messages", c.messages);
  // The cross-rank check's own communicators (docs/communicators.md): not the program's traffic.
  if (const Context* ctx = current_context())
    for (const auto& [ranks, comm] : ctx->check_communicators)
      if (comm.get() == &c.comm) span.args.emplace_back("purpose", std::string("consistency check"));
  recorder->record(std::move(span));
}
}  // namespace

void set_thread_trace_recorder(TraceRecorder* recorder) {
  tls_trace_recorder = recorder;
  set_collective_observer(recorder ? &record_collective : nullptr);
}

TraceLane current_lane() { return on_comm_worker() ? TraceLane::kCommStream : TraceLane::kHost; }

std::unique_ptr<TraceRecorder> trace_recorder_from_env(int64_t rank) {
  const char* v = std::getenv("SPSD_TRACE");
  if (v == nullptr) return nullptr;
  std::string file = v;
  SPSD_CHECK(!file.empty(), "SPSD_TRACE",
             "must be a path such as trace.json (each rank writes trace.rank<r>.json), got \"\"; unset it to turn "
             "tracing off");
  constexpr std::string_view kSuffix = ".json";
  if (file.size() > kSuffix.size() && file.ends_with(kSuffix)) file.resize(file.size() - kSuffix.size());
  return std::make_unique<TraceRecorder>(file + ".rank" + std::to_string(rank) + ".json", rank, v);
}

}  // namespace detail

void flush_trace() {
  detail::Context& ctx = detail::context("flush_trace");
  if (!ctx.trace) return;
  detail::before_host_communication();  // the spans of what was queued so far are in
  ctx.trace->write();
}

std::string trace_file() {
  const detail::Context& ctx = detail::context("trace_file");
  return ctx.trace ? ctx.trace->file() : std::string();
}

}  // namespace spsd
