#pragma once
// Host memory for tensor storage (Storage): blocks of kMinBytes and more are kept when their
// storage goes and handed to the next storage of the same size, so that a training step's
// activations reuse the pages the step before touched. Without it glibc maps each such block
// fresh (and unmaps it on free, or trims the heap), and every page faults again on first touch:
// 4-8 ms of the CPU GPT step's 40 (docs/benchmarks.md, "Against PyTorch on the CPU").
//
// Blocks are reused by exact size (tensors of a step recur at the same sizes), up to a cap on
// the bytes kept (SPSD_HOST_CACHE_MB, default 256, read when a Runtime starts; 0 keeps nothing): a block given back past
// the cap is freed. Smaller blocks go to malloc, whose bins already reuse them. Process-wide
// and thread-safe: simulated ranks and the communication workers share it. Under AddressSanitizer
// a kept block is poisoned until it is handed out again (a use after free still reports), and
// with MALLOC_PERTURB_ set a block handed out again is filled as glibc fills fresh memory (so
// tests that perturb still see uninitialized reads).
#include <cstdint>

namespace spsd::detail {

class HostBlockCache {
 public:
  static constexpr int64_t kMinBytes = int64_t{64} << 10;
  // bytes (a positive multiple of 64) of host memory aligned to 64; null when out of memory.
  void* take(int64_t bytes);
  // Gives back a block take returned, of the same bytes.
  void give(void* block, int64_t bytes);
  // The bytes kept now.
  int64_t cached_bytes() const;
  // Frees every kept block.
  void release();
  // Sets the most bytes kept (blocks past it are freed as they come back).
  void set_cap(int64_t bytes);
};

// The process's cache.
HostBlockCache& host_block_cache();
// Sets the process's cache's cap from SPSD_HOST_CACHE_MB (docs/runtime.md), when a Runtime or a
// simulated rank starts; spsd::Error naming the variable and the value unless it is a whole
// number of MiB >= 0.
void configure_host_block_cache_from_env();

}  // namespace spsd::detail
