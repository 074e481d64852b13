#pragma once
// A caching allocator for device memory: freed blocks go back to a per-size free list and the
// next request of that size class reuses them, so a training loop's steady state calls the
// driver's malloc no more. Reuse without events is safe because every user of a block on a rank
// is ordered on that rank's compute stream (collectives join back to it before they return);
// a block freed while a kernel still reads it is handed out only to later work on that stream.
// The raw allocation calls sit behind RawDeviceMemory so the bookkeeping is unit-tested on hosts
// without a GPU (test/unit/test_device_allocator.cpp).
#include <cstdint>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
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

struct DeviceAllocatorStats {
  int64_t raw_allocations = 0;  // calls to RawDeviceMemory::allocate that succeeded
  int64_t raw_releases = 0;
  int64_t requests = 0;         // allocate() calls with bytes > 0
  int64_t cache_hits = 0;
  int64_t bytes_in_use = 0;     // rounded sizes of blocks handed out and not yet freed
  int64_t bytes_cached = 0;     // rounded sizes of blocks on the free lists
  int64_t peak_bytes_in_use = 0;
};

class DeviceAllocator {
 public:
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

  // A block of at least bytes (nullptr for 0). Out of memory: frees the cache and retries
  // once, then throws spsd::Error naming the request and what is in use.
  void* allocate(int64_t bytes) {
    SPSD_CHECK(bytes >= 0, "device allocate", "bytes must be non-negative, got ", bytes);
    if (bytes == 0) return nullptr;
    const int64_t size = round_size(bytes);
    std::lock_guard lock(mutex_);
    ++stats_.requests;
    void* p = nullptr;
    if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
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

  // Returns a block to its free list. p must come from allocate() of this allocator.
  void free(void* p) {
    if (!p) return;
    std::lock_guard lock(mutex_);
    auto it = sizes_.find(p);
    SPSD_CHECK(it != sizes_.end(), "device free", "pointer ", p, " was not allocated by the allocator of ",
               raw_->name(), " (or was freed twice)");
    const int64_t size = it->second;
    sizes_.erase(it);
    stats_.bytes_in_use -= size;
    stats_.bytes_cached += size;
    free_[size].push_back(p);
  }

  // Gives every cached block back to the driver (blocks in use stay).
  void release_cached() {
    std::lock_guard lock(mutex_);
    release_cached_locked();
  }

  DeviceAllocatorStats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  void release_cached_locked() {
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) {
        raw_->release(p);
        ++stats_.raw_releases;
      }
      stats_.bytes_cached -= size * static_cast<int64_t>(blocks.size());
    }
    free_.clear();
  }

  std::unique_ptr<RawDeviceMemory> raw_;
  mutable std::mutex mutex_;  // Storage may be freed on any thread (a tensor outliving its rank's thread)
  std::map<int64_t, std::vector<void*>> free_;
  std::map<void*, int64_t> sizes_;
  DeviceAllocatorStats stats_;
};

}  // namespace spsd
