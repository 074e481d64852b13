// memory_stats (runtime/memory_stats.hpp): the host counter lives in the rank's context, the
// device numbers in its caching allocator.
#include "spsd/runtime/memory_stats.hpp"

#include "context.hpp"

namespace spsd {

namespace detail {

const std::shared_ptr<HostMemoryCounter>& host_memory_counter() {
  static const auto process_wide = std::make_shared<HostMemoryCounter>();  // no Runtime on the thread
  const Context* ctx = current_context();
  return ctx ? ctx->host_memory : process_wide;
}

}  // namespace detail

MemoryStats memory_stats(DeviceType device) {
  if (device == DeviceType::kCPU) return detail::host_memory_counter()->stats();
  const DeviceAllocatorStats s = detail::device_runtime("memory_stats").allocator().stats();
  return {s.bytes_in_use, s.peak_bytes_in_use};
}

void reset_peak_memory(DeviceType device) {
  if (device == DeviceType::kCPU) return detail::host_memory_counter()->reset_peak();
  detail::device_runtime("reset_peak_memory").allocator().reset_peak();
}

}  // namespace spsd
