#pragma once
// Storage: a reference-counted byte buffer in one memory space. Layout lives in Tensor;
// memory space lives here, so a device allocator slots in without touching tensors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "spsd/core/config.hpp"
#include "spsd/core/error.hpp"
#include "spsd/layout/placement.hpp"

namespace spsd {

class Storage {
 public:
  // Zero-filled bytes in the given memory space.
  static std::shared_ptr<Storage> allocate(int64_t bytes, DeviceType device) {
    auto s = allocate_uninitialized(bytes, device);
    std::memset(s->data(), 0, static_cast<size_t>(bytes));
    return s;
  }

  // For buffers the caller writes in full (boxing outputs): no zero-fill pass.
  static std::shared_ptr<Storage> allocate_uninitialized(int64_t bytes, DeviceType device) {
    SPSD_CHECK(bytes >= 0, "Storage::allocate", "bytes must be non-negative, got ", bytes);
    SPSD_CHECK(device == DeviceType::kCPU, "Storage::allocate",
               SPSD_HAVE_CUDA ? "cuda tensors are not available yet in this version of spsd (host storage only)"
                              : "cuda tensors need spsd built with CUDA (this build has none)");
    return std::shared_ptr<Storage>(new Storage(bytes, device));
  }

  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  int64_t bytes() const { return bytes_; }
  DeviceType device_type() const { return device_; }

 private:
  static constexpr size_t kAlignment = 64;  // a cache line; also what AVX-512 loads like
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  Storage(int64_t bytes, DeviceType device) : bytes_(bytes), device_(device) {
    size_t rounded = (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment)));
    SPSD_CHECK(data_ != nullptr, "Storage::allocate", "out of host memory allocating ", bytes, " bytes");
  }
  std::unique_ptr<std::byte, Free> data_;
  int64_t bytes_;
  DeviceType device_;
};

}  // namespace spsd
