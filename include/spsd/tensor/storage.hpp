#pragma once
// Storage: a reference-counted byte buffer in one memory space. Layout lives in Tensor;
// memory space lives here: host memory comes from the process's host block cache
// (runtime/host_block_cache.hpp), device memory from the rank's caching allocator
// (runtime/device.hpp). A storage is an operand of the eager runtime
// (runtime/instruction.hpp): data() waits for the communication still writing it (and, for
// writing, reading it), so every access sees the values program order says it should.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "spsd/core/config.hpp"
#include "spsd/core/error.hpp"
#include "spsd/layout/placement.hpp"
#include "spsd/runtime/device.hpp"
#include "spsd/runtime/host_block_cache.hpp"
#include "spsd/runtime/instruction.hpp"
#include "spsd/runtime/memory_stats.hpp"

namespace spsd {

// A reference-counted byte buffer in one memory space.
class Storage final : public detail::TrackedBuffer {
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

  // A storage whose bytes an instruction on the communication stream produces later (the
  // result of a boxing): it has no memory until that instruction adopts its result.
  static std::shared_ptr<Storage> allocate_pending(int64_t bytes, DeviceType device) {
    return std::shared_ptr<Storage>(new Storage(bytes, device, Pending{}));
  }
  // Makes this pending storage hold result's bytes (kept alive with it).
  void adopt(std::shared_ptr<Storage> result) {
    SPSD_CHECK(!data_ && result && result->bytes_ >= bytes_ && result->device_ == device_, "Storage::adopt",
               "a pending storage of ", bytes_, " bytes cannot take ", result ? result->bytes_ : 0, " bytes");
    data_ = result->data_;
    backing_ = std::move(result);
  }

  ~Storage() {
    if (backing_) return;  // adopted: the backing storage frees the bytes
    if (device_ == DeviceType::kCPU) {
      if (host_counter_) {  // null: pending, never adopted
        detail::host_block_cache().give(data_, host_bytes());
        host_counter_->remove(host_bytes());
      }
    }
    else if (owner_) owner_->free(data_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // For writing: waits for the pending communication that reads or writes these bytes.
  void* data() {
    settle_for_write();
    return data_;
  }
  // For reading: waits for the pending communication that writes these bytes.
  const void* data() const {
    settle_for_read();
    return data_;
  }
  int64_t bytes() const { return bytes_; }
  DeviceType device_type() const { return device_; }

  // The version counter (as torch's): the in-place writers of the library (GlobalTensor::copy_,
  // an optimizer's step, load_checkpoint) count every write into bytes that may be shared, so
  // that backward finds a tensor it saved modified since (autograd/node.hpp). Writes through
  // data() are not counted: ops write only storages they allocated.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  static constexpr size_t kAlignment = 64;  // a cache line; also what AVX-512 loads like
  struct Pending {};
  Storage(int64_t bytes, DeviceType device, Pending) : bytes_(bytes), device_(device) {}
  Storage(int64_t bytes, DeviceType device) : bytes_(bytes), device_(device) {
    if (device == DeviceType::kCPU) {
      data_ = detail::host_block_cache().take(host_bytes());
      SPSD_CHECK(data_ != nullptr, "Storage::allocate", "out of host memory allocating ", bytes, " bytes");
      host_counter_ = detail::host_memory_counter();
      host_counter_->add(host_bytes());
    } else {
      detail::DeviceBlock block = detail::allocate_device_block(bytes);
      data_ = block.data;
      owner_ = std::move(block.owner);
    }
  }
  // What aligned_alloc takes: bytes rounded up to the alignment, at least one unit.
  int64_t host_bytes() const {
    const int64_t a = static_cast<int64_t>(kAlignment);
    return bytes_ > 0 ? (bytes_ + a - 1) / a * a : a;
  }
  void* data_ = nullptr;
  uint64_t version_ = 0;
  int64_t bytes_;
  DeviceType device_;
  std::shared_ptr<DeviceAllocator> owner_;  // device memory only: where the block goes back
  std::shared_ptr<detail::HostMemoryCounter> host_counter_;  // host memory only: what counted it (memory_stats)
  std::shared_ptr<Storage> backing_;        // a pending storage's adopted result
};

}  // namespace spsd
