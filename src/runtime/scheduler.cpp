// Where instructions run (runtime/scheduler.hpp).
#include "spsd/runtime/scheduler.hpp"

#include <cstdlib>
#include <string_view>
#include <utility>

#include "context.hpp"

namespace spsd {

namespace detail {

namespace {

CommStream& stream(Context& ctx) {
  if (!ctx.comm_stream)
    ctx.comm_stream = std::make_unique<CommStream>([&ctx] { set_current_context(&ctx); });
  return *ctx.comm_stream;
}

}  // namespace

bool synchronous_from_env() {
  const char* v = std::getenv("SPSD_SYNC");
  if (v == nullptr || std::string_view(v).empty() || std::string_view(v) == "0") return false;
  SPSD_CHECK(std::string_view(v) == "1", "SPSD_SYNC", "must be \"1\" (synchronous) or \"0\" (asynchronous), got \"",
             v, "\"");
  return true;
}

int64_t inline_bytes_from_env() {
  const char* v = std::getenv("SPSD_INLINE_BYTES");
  if (v == nullptr || std::string_view(v).empty()) return kDefaultInlineBytes;
  char* end = nullptr;
  const long long bytes = std::strtoll(v, &end, 10);
  SPSD_CHECK(end != v && *end == '\0' && bytes >= 0, "SPSD_INLINE_BYTES", "must be a number of bytes >= 0, got \"",
             v, "\"");
  return bytes;
}

namespace {
thread_local bool always_queue = false;
}  // namespace

AlwaysQueueComm::AlwaysQueueComm() : previous_(std::exchange(always_queue, true)) {}
AlwaysQueueComm::~AlwaysQueueComm() { always_queue = previous_; }

void issue_comm(Instruction ins, Urgency urgency) {
  Context& ctx = context(ins.name);
  if (on_comm_worker()) return ins.run();  // a step of an instruction already on the stream
  CommStream& s = stream(ctx);
  if (ctx.synchronous || (!always_queue && s.idle() && (urgency == Urgency::kNow || ins.bytes <= ctx.inline_bytes)))
    return s.run_inline(ins);
  // Inline, the communicators order themselves after the compute stream as it is; queued, after
  // the compute stream as it is now, at issue (on a GPU this is what lets backward overlap).
  if (ctx.device) ins.run = ctx.device->ordered_after_current_work(ins.name, ins.bytes, std::move(ins.run));
  s.enqueue(std::move(ins));
}

void before_host_communication() {
  if (on_comm_worker()) return;
  Context* ctx = current_context();
  if (ctx && ctx->comm_stream) ctx->comm_stream->drain();
}

}  // namespace detail

void set_synchronous(bool on) {
  detail::Context& ctx = detail::context("set_synchronous");
  SPSD_CHECK(on || ctx.async_allowed, "set_synchronous",
             "asynchronous communication needs MPI initialized with MPI_THREAD_SERIALIZED or more; the program "
             "initialized it with less before creating the spsd::Runtime");
  detail::before_host_communication();
  ctx.synchronous = on;
}
bool synchronous() { return detail::context("synchronous").synchronous; }

void set_inline_bytes(int64_t bytes) {
  SPSD_CHECK(bytes >= 0, "set_inline_bytes", "bytes must be >= 0, got ", bytes);
  detail::context("set_inline_bytes").inline_bytes = bytes;
}
int64_t inline_bytes() { return detail::context("inline_bytes").inline_bytes; }

CommStreamStats comm_stream_stats() {
  detail::Context& ctx = detail::context("comm_stream_stats");
  return ctx.comm_stream ? ctx.comm_stream->stats() : CommStreamStats{};
}
void reset_comm_stream_stats() {
  detail::Context& ctx = detail::context("reset_comm_stream_stats");
  if (ctx.comm_stream) ctx.comm_stream->reset_stats();
}

}  // namespace spsd
