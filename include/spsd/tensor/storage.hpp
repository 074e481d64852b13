#pragma once
// Storage: a reference-counted byte buffer in one memory space. Layout lives in Tensor;
// memory space lives here: host memory is aligned_alloc'd, device memory comes from the rank's
// caching allocator (runtime/device.hpp).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "spsd/core/config.hpp"
#include "spsd/core/error.hpp"
#include "spsd/layout/placement.hpp"
#include "spsd/runtime/device.hpp"

namespace spsd {

class Storage {
 public:
  // Zero-filled bytes in the given memory space.
  static std::shared_ptr<Storage> allocate(int64_t bytes, DeviceType device) {
    auto s = allocate_uninitialized(bytes, device);
    if (device == DeviceType::kCPU) std::memset(s->data(), 0, static_cast<size_t>(bytes));
    else detail::zero_bytes(s->data(), device, bytes);
    return s;
  }

  // For buffers the caller writes in full (boxing outputs): no zero-fill pass. Device memory
  // comes from the rank's caching allocator (spsd::Error when no device is usable).
  static std::shared_ptr<Storage> allocate_uninitialized(int64_t bytes, DeviceType device) {
    SPSD_CHECK(bytes >= 0, "Storage::allocate", "bytes must be non-negative, got ", bytes);
    return std::shared_ptr<Storage>(new Storage(bytes, device));
  }

  ~Storage() {
    if (device_ == DeviceType::kCPU) std::free(data_);
    else if (owner_) owner_->free(data_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  DeviceType device_type() const { return device_; }

 private:
  static constexpr size_t kAlignment = 64;  // a cache line; also what AVX-512 loads like
  Storage(int64_t bytes, DeviceType device) : bytes_(bytes), device_(device) {
    if (device == DeviceType::kCPU) {
      size_t rounded = (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
      data_ = std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment);
      SPSD_CHECK(data_ != nullptr, "Storage::allocate", "out of host memory allocating ", bytes, " bytes");
    } else {
      detail::DeviceBlock block = detail::allocate_device_block(bytes);
      data_ = block.data;
      owner_ = std::move(block.owner);
    }
  }
  void* data_ = nullptr;
  int64_t bytes_;
  DeviceType device_;
  std::shared_ptr<DeviceAllocator> owner_;  // device memory only: where the block goes back
};

}  // namespace spsd
