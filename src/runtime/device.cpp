// The device entry points that do not depend on CUDA: host cases inline, device cases through
// the rank's DeviceRuntime (bound at first use).
#include "spsd/runtime/device.hpp"

#include <cstring>
#include <utility>

#include "spsd/core/config.hpp"

#include "context.hpp"
#include "spsd/runtime/instruction.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd {

namespace detail {

DeviceRuntime& device_runtime(std::string_view op) {
  SPSD_CHECK(SPSD_HAVE_CUDA, op, "cuda tensors need spsd built with CUDA (this build has none)");
  Context* current = current_context();
  SPSD_CHECK(current != nullptr, op, "cuda tensors need an active spsd::Runtime (each rank binds its own device)");
  Context& ctx = *current;
  if (!ctx.device) ctx.device = make_device_runtime(ctx, op);
  // The communication worker launches boxing kernels too: its thread needs the rank's device.
  static thread_local bool worker_bound = false;
  if (on_comm_worker() && !worker_bound) {
    ctx.device->bind_calling_thread();
    worker_bound = true;
  }
  return *ctx.device;
}

void copy_bytes(void* dst, DeviceType dst_device, const void* src, DeviceType src_device, int64_t bytes) {
  if (bytes <= 0) return;
  if (dst_device == DeviceType::kCPU && src_device == DeviceType::kCPU) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return;
  }
  device_runtime("copy").copy_bytes(dst, dst_device, src, src_device, bytes);
  note_device_copy(dst_device, src_device, bytes);
  // The host waited for the stream of the copy: the compute stream (what its kernels found in
  // input values is then final), unless this thread's kernels go to another one meanwhile.
  if (dst_device == DeviceType::kCPU) poll_value_checks(kernel_stream_override() == nullptr);
}

void zero_bytes(void* dst, DeviceType device, int64_t bytes) {
  if (bytes <= 0) return;
  if (device == DeviceType::kCPU) std::memset(dst, 0, static_cast<size_t>(bytes));
  else device_runtime("zero fill").zero_bytes(dst, bytes);
}

void fill_elements(void* dst, DeviceType device, int64_t count, const void* value, int64_t value_bytes) {
  SPSD_CHECK(value_bytes == 2 || value_bytes == 4 || value_bytes == 8, "fill", "elements of 2, 4 or 8 bytes, got ",
             value_bytes);
  if (count <= 0) return;
  if (device != DeviceType::kCPU) return device_runtime("fill").fill_elements(dst, count, value, value_bytes);
  for (int64_t i = 0; i < count; ++i) std::memcpy(static_cast<char*>(dst) + i * value_bytes, value, value_bytes);
}

namespace {
thread_local void* tls_kernel_stream = nullptr;
}  // namespace

KernelStreamOverride::KernelStreamOverride(void* stream) noexcept : previous_(std::exchange(tls_kernel_stream, stream)) {}
KernelStreamOverride::~KernelStreamOverride() { tls_kernel_stream = previous_; }
void* kernel_stream_override() { return tls_kernel_stream; }

void* stream_for(DeviceType device) {
  if (device == DeviceType::kCPU) return nullptr;
  if (tls_kernel_stream) return tls_kernel_stream;
  return device_runtime("kernel launch").compute_stream();
}

Communicator& communicator_for(const std::vector<int64_t>& world_ranks, DeviceType device) {
  if (device == DeviceType::kCPU) return spsd::communicator(world_ranks);
  return device_runtime("communicator").communicator(world_ranks);
}

DeviceBlock allocate_device_block(int64_t bytes) {
  DeviceRuntime& d = device_runtime("Storage::allocate");
  return {d.allocator().allocate(bytes), d.shared_allocator()};
}

}  // namespace detail

int device() { return detail::device_runtime("device").device(); }

bool cuda_available() {
  try {
    detail::device_runtime("cuda_available");
    return true;
  } catch (const Error&) {
    return false;
  }
}

DeviceAllocatorStats device_allocator_stats() {
  return detail::device_runtime("device_allocator_stats").allocator().stats();
}

void empty_device_cache() { detail::device_runtime("empty_device_cache").allocator().release_cached(); }

}  // namespace spsd
