// The device-traffic counters (runtime/device_traffic.hpp): per rank, in its Context, written by
// the rank's thread and its communication worker (hence the lock; copies cost far more).
#include "spsd/runtime/device_traffic.hpp"

#include <mutex>

#include "context.hpp"

namespace spsd {

std::string DeviceTrafficCounts::to_string() const {
  return "host->device " + std::to_string(host_to_device_bytes) + " B in " + std::to_string(host_to_device_copies) +
         " copies, device->host " + std::to_string(device_to_host_bytes) + " B in " +
         std::to_string(device_to_host_copies) + " copies, " + std::to_string(synchronizations) + " synchronizations";
}

std::string DeviceTraffic::to_string() const {
  std::string s = total.to_string();
  for (const auto& [op, counts] : by_op) s += "\n  " + op + ": " + counts.to_string();
  return s;
}

namespace detail {

namespace {
thread_local std::string_view tls_traffic_op = DeviceTraffic::kNoOp;

// Adds to the total and to the current op's counts, under the ledger's lock.
template <class Add>
void record(Add add) {
  Context* ctx = current_context();
  if (!ctx) return;
  std::lock_guard lock(ctx->device_traffic.mutex);
  DeviceTraffic& t = ctx->device_traffic.traffic;
  add(t.total);
  auto it = t.by_op.find(tls_traffic_op);
  if (it == t.by_op.end()) it = t.by_op.emplace(std::string(tls_traffic_op), DeviceTrafficCounts{}).first;
  add(it->second);
}
}  // namespace

DeviceTrafficScope::DeviceTrafficScope(std::string_view op) noexcept : previous_(tls_traffic_op) {
  tls_traffic_op = op;
}
DeviceTrafficScope::~DeviceTrafficScope() { tls_traffic_op = previous_; }

void note_device_copy(DeviceType dst, DeviceType src, int64_t bytes) {
  if (dst == src && dst == DeviceType::kCPU) return;
  if (src == DeviceType::kCPU) {
    record([bytes](DeviceTrafficCounts& c) { c.host_to_device_bytes += bytes, ++c.host_to_device_copies; });
  } else if (dst == DeviceType::kCPU) {
    // The host reads the data when the call returns: it waited for the device.
    record([bytes](DeviceTrafficCounts& c) {
      c.device_to_host_bytes += bytes, ++c.device_to_host_copies, ++c.synchronizations;
    });
  }
}

void note_device_synchronization() {
  record([](DeviceTrafficCounts& c) { ++c.synchronizations; });
}

}  // namespace detail

DeviceTraffic device_traffic() {
  detail::Context& ctx = detail::context("device_traffic");
  std::lock_guard lock(ctx.device_traffic.mutex);
  return ctx.device_traffic.traffic;
}

void reset_device_traffic() {
  detail::Context& ctx = detail::context("reset_device_traffic");
  std::lock_guard lock(ctx.device_traffic.mutex);
  ctx.device_traffic.traffic = {};
}

}  // namespace spsd
