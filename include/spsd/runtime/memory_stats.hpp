#pragma once
// Bytes of tensor memory this rank holds now and at most since the last reset, per memory
// space: what activation checkpointing (autograd/recompute.hpp) is measured by.
//
//   cpu:  the host storages of tensors (Storage), each counted at its aligned size (a multiple
//         of 64 bytes) from allocation to free, on whatever thread it is freed;
//   cuda: the rank's caching allocator (runtime/device_allocator.hpp): bytes_in_use and its
//         peak, blocks at their rounded sizes; blocks cached for reuse are not counted.
//
// Per rank: a simulated rank (a thread of spsd::simulate) and its communication worker count
// into the rank's counter, a process under mpirun into its own. Storage made with no Runtime
// active on the thread counts into one process-wide counter, which memory_stats reads there.
// Memory that is not tensor storage (the runtime's own buffers, a communicator's staging) is
// not counted.
#include <atomic>
#include <cstdint>
#include <memory>

#include "spsd/layout/placement.hpp"

namespace spsd {

// Bytes of tensor memory of one memory space: held now and the peak since the last reset.
struct MemoryStats {
  int64_t current_bytes = 0;  // held now
  int64_t peak_bytes = 0;     // the most held at once since start or reset_peak_memory
};

// This rank's tensor memory in device's memory space. cuda throws spsd::Error when the rank
// has no usable device (like device()).
MemoryStats memory_stats(DeviceType device);
// Starts a new peak from the bytes held now.
void reset_peak_memory(DeviceType device);

namespace detail {

// The host bytes of one rank; a Storage keeps the one it counted into, so a storage freed on
// another thread, or after its Runtime, is taken off the right counter.
class HostMemoryCounter {
 public:
  void add(int64_t bytes) {
    const int64_t now = current_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  void remove(int64_t bytes) { current_.fetch_sub(bytes, std::memory_order_relaxed); }
  MemoryStats stats() const { return {current_.load(std::memory_order_relaxed), peak_.load(std::memory_order_relaxed)}; }
  void reset_peak() { peak_.store(current_.load(std::memory_order_relaxed), std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> current_{0}, peak_{0};
};

// The counter of the Runtime active on this thread (the process-wide one when none is).
const std::shared_ptr<HostMemoryCounter>& host_memory_counter();

}  // namespace detail

}  // namespace spsd
