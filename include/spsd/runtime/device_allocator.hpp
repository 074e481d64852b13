#pragma once
// A caching allocator for device memory: freed blocks go back to a per-size free list and the
// next request of that size class reuses them, so a training loop's steady state calls the
// driver's malloc no more. Reuse needs no event per block because every user of a block is
// ordered on the rank's compute stream, or on its communication stream inside an instruction
// that the compute stream then waits for; two rules keep it so when the communication worker
// allocates (docs/runtime.md, "CUDA placements"):
//   - generations: a queued instruction waits only for the compute work before its issue, so
//     its allocations take only blocks freed before that issue (OnlyBlocksFreedBefore), not
//     blocks whose last readers were launched after it;
//   - deferred frees: blocks the worker frees while an instruction runs may still be in use on
//     the communication stream, so they return to the free lists when the instruction has made
//     the compute stream wait for it (DeferFrees).
// The raw allocation calls sit behind RawDeviceMemory so the bookkeeping is unit-tested on hosts
// without a GPU (test/unit/test_device_allocator.cpp).
#include <cstdint>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "spsd/core/error.hpp"

namespace spsd {

// The driver calls the allocator sits on (cudaMalloc / cudaFree for a real device).
class RawDeviceMemory {
 public:
  virtual ~RawDeviceMemory() = default;
  // nullptr when the device is out of memory; throws spsd::Error for any other failure.
  virtual void* allocate(int64_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual std::string name() const = 0;  // "cuda:0", for messages
};

// A caching allocator's counters (DeviceAllocator::stats(), device_allocator_stats()).
struct DeviceAllocatorStats {
  int64_t raw_allocations = 0;  // calls to RawDeviceMemory::allocate that succeeded
  int64_t raw_releases = 0;
  int64_t requests = 0;         // allocate() calls with bytes > 0
  int64_t cache_hits = 0;
  int64_t bytes_in_use = 0;     // rounded sizes of blocks handed out and not yet freed
  int64_t bytes_cached = 0;     // rounded sizes of blocks on the free lists
  int64_t peak_bytes_in_use = 0;
};

// The caching allocator of one device's memory (how it reuses blocks: the top of this file).
class DeviceAllocator {
 public:
  // Allocates from raw (spsd::Error when null); releases its cached blocks to raw when it goes.
  // Not copyable.
  explicit DeviceAllocator(std::unique_ptr<RawDeviceMemory> raw) : raw_(std::move(raw)) {
    SPSD_CHECK(raw_ != nullptr, "DeviceAllocator", "needs raw device memory, got none");
  }
  ~DeviceAllocator() { release_cached(); }
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // Size classes: multiples of 512 bytes up to 1 MiB, then multiples of 2 MiB, so a tensor of
  // a slightly different size still finds the block its predecessor left (PyTorch's classes).
  static int64_t round_size(int64_t bytes) {
    constexpr int64_t kSmall = 512, kLarge = 2 << 20, kSmallLimit = 1 << 20;
    const int64_t unit = bytes <= kSmallLimit ? kSmall : kLarge;
    return (bytes + unit - 1) / unit * unit;
  }

  static constexpr int64_t kAnyGeneration = INT64_MAX;

  // Starts a new generation and returns it: blocks freed from now on belong to it.
  int64_t begin_generation() {
    std::lock_guard lock(mutex_);
    return ++generation_;
  }

  // While alive, this thread's allocations take only blocks freed before `generation`.
  class OnlyBlocksFreedBefore {
   public:
    // Restricts this thread to blocks freed before generation until it goes; not copyable.
    explicit OnlyBlocksFreedBefore(int64_t generation) : previous_(std::exchange(tls_freed_before_, generation)) {}
    ~OnlyBlocksFreedBefore() { tls_freed_before_ = previous_; }
    OnlyBlocksFreedBefore(const OnlyBlocksFreedBefore&) = delete;
    OnlyBlocksFreedBefore& operator=(const OnlyBlocksFreedBefore&) = delete;

   private:
    int64_t previous_;
  };

  // While alive, the blocks of `allocator` this thread frees are held back; they return to the
  // free lists when it ends.
  class DeferFrees {
   public:
    // Holds back this thread's frees of allocator's blocks until it goes; not copyable.
    explicit DeferFrees(DeviceAllocator& allocator) : allocator_(allocator), previous_(std::exchange(tls_deferred_, this)) {}
    ~DeferFrees() {
      tls_deferred_ = previous_;
      for (void* p : held_) allocator_.free(p);
    }
    DeferFrees(const DeferFrees&) = delete;
    DeferFrees& operator=(const DeferFrees&) = delete;

   private:
    friend class DeviceAllocator;
    DeviceAllocator& allocator_;
    DeferFrees* previous_;
    std::vector<void*> held_;
  };

  // A block of at least bytes (nullptr for 0). Out of memory: frees the cache and retries
  // once, then throws spsd::Error naming the request and what is in use.
  void* allocate(int64_t bytes) {
    SPSD_CHECK(bytes >= 0, "device allocate", "bytes must be non-negative, got ", bytes);
    if (bytes == 0) return nullptr;
    const int64_t size = round_size(bytes);
    std::lock_guard lock(mutex_);
    ++stats_.requests;
    void* p = nullptr;
    if (void* cached = take_cached(size)) {
      p = cached;
      stats_.bytes_cached -= size;
      ++stats_.cache_hits;
    } else {
      p = raw_->allocate(size);
      if (!p) {
        release_cached_locked();
        p = raw_->allocate(size);
      }
      SPSD_CHECK(p != nullptr, "device allocate", "out of memory on ", raw_->name(), " allocating ", bytes,
                 " bytes (", stats_.bytes_in_use, " bytes in use by spsd tensors)");
      ++stats_.raw_allocations;
    }
    sizes_[p] = size;
    stats_.bytes_in_use += size;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    return p;
  }

  // While `into` is set (null: no more), blocks freed on any thread go there instead of to the
  // free lists, still counted in use: a CUDA graph being captured keeps every block its work
  // used, since its replays write them (runtime/device_graph.hpp); it frees them when it goes.
  void hold_frees(std::vector<void*>* into) {
    std::lock_guard lock(mutex_);
    graph_held_ = into;
  }

  // Returns a block to its free list (or to the thread's DeferFrees, or hold_frees). p must
  // come from allocate() of this allocator.
  void free(void* p) {
    if (!p) return;
    if (tls_deferred_ && &tls_deferred_->allocator_ == this) {
      tls_deferred_->held_.push_back(p);
      return;
    }
    std::lock_guard lock(mutex_);
    if (graph_held_) {
      SPSD_CHECK(sizes_.count(p) != 0, "device free", "pointer ", p, " was not allocated by the allocator of ",
                 raw_->name(), " (or was freed twice)");
      graph_held_->push_back(p);
      return;
    }
    auto it = sizes_.find(p);
    SPSD_CHECK(it != sizes_.end(), "device free", "pointer ", p, " was not allocated by the allocator of ",
               raw_->name(), " (or was freed twice)");
    const int64_t size = it->second;
    sizes_.erase(it);
    stats_.bytes_in_use -= size;
    stats_.bytes_cached += size;
    free_[size].push_back({p, generation_});
  }

  // Gives every cached block back to the driver (blocks in use stay).
  void release_cached() {
    std::lock_guard lock(mutex_);
    release_cached_locked();
  }

  // A copy of the counters now.
  DeviceAllocatorStats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  // Starts a new peak from the bytes in use now (reset_peak_memory).
  void reset_peak() {
    std::lock_guard lock(mutex_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

 private:
  struct FreeBlock {
    void* p;
    int64_t generation;  // the one it was freed in
  };

  // The most recently freed block of this size that the thread may take, or null. A list is in
  // free order, so its generations never decrease: the search from the back stops early.
  void* take_cached(int64_t size) {
    auto it = free_.find(size);
    if (it == free_.end()) return nullptr;
    std::vector<FreeBlock>& blocks = it->second;
    for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) {
      if (b->generation >= tls_freed_before_) continue;
      void* p = b->p;
      blocks.erase(std::next(b).base());
      return p;
    }
    return nullptr;
  }

  void release_cached_locked() {
    for (auto& [size, blocks] : free_) {
      for (const FreeBlock& b : blocks) {
        void* p = b.p;
        raw_->release(p);
        ++stats_.raw_releases;
      }
      stats_.bytes_cached -= size * static_cast<int64_t>(blocks.size());
    }
    free_.clear();
  }

  std::unique_ptr<RawDeviceMemory> raw_;
  mutable std::mutex mutex_;  // Storage may be freed on any thread (a tensor outliving its rank's thread)
  std::map<int64_t, std::vector<FreeBlock>> free_;
  std::map<void*, int64_t> sizes_;
  DeviceAllocatorStats stats_;
  int64_t generation_ = 0;
  std::vector<void*>* graph_held_ = nullptr;  // hold_frees
  static inline thread_local int64_t tls_freed_before_ = kAnyGeneration;
  static inline thread_local DeferFrees* tls_deferred_ = nullptr;
};

}  // namespace spsd
