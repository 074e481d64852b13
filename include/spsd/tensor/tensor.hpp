#pragma once
// Tensor<T>: a dense row-major local tensor over shared Storage.
#include <algorithm>
#include <memory>
#include <ostream>
#include <utility>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/tensor/capture.hpp"
#include "spsd/tensor/storage.hpp"

namespace spsd {

// A dense row-major local tensor of T over shared Storage.
template <Element T>
class Tensor {
 public:
  // Undefined: shape (), no storage, numel() == 0 (what ranks outside a placement hold).
  Tensor() = default;
  // Zero-filled.
  explicit Tensor(Shape shape, DeviceType device = DeviceType::kCPU)
      : shape_(std::move(shape)), storage_(Storage::allocate(shape_.numel() * sizeof(T), device)) {}

  // A view of existing storage (which must hold at least shape.numel() elements of T).
  Tensor(Shape shape, std::shared_ptr<Storage> storage) : shape_(std::move(shape)), storage_(std::move(storage)) {
    SPSD_CHECK(!storage_ || storage_->bytes() >= shape_.numel() * static_cast<int64_t>(sizeof(T)), "Tensor",
               "storage of ", storage_ ? storage_->bytes() : 0, " bytes is too small for shape ", shape_);
  }

  // A tensor of this shape holding values (row-major), in the given memory space.
  static Tensor from_vector(Shape shape, std::vector<T> values, DeviceType device = DeviceType::kCPU) {
    SPSD_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "Tensor::from_vector", "shape ", shape,
               " needs ", shape.numel(), " values, got ", values.size());
    const int64_t bytes = shape.numel() * static_cast<int64_t>(sizeof(T));
    Tensor t(std::move(shape), Storage::allocate_uninitialized(bytes, device));
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits: one byte per element here
      const std::unique_ptr<bool[]> bytes_of(new bool[values.size()]);
      std::copy(values.begin(), values.end(), bytes_of.get());
      detail::copy_bytes(t.data(), device, bytes_of.get(), DeviceType::kCPU, bytes);
    } else {
      detail::copy_bytes(t.data(), device, values.data(), DeviceType::kCPU, bytes);
    }
    return t;
  }

  // Whether it has storage; its shape, element type, memory space and element count.
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_of<T>; }
  DeviceType device_type() const { return storage_ ? storage_->device_type() : DeviceType::kCPU; }
  int64_t numel() const { return storage_ ? shape_.numel() : 0; }
  // Write access: waits for the communication still reading or writing it (Storage::data).
  T* data() { return storage_ ? static_cast<T*>(storage_->data()) : nullptr; }
  // Read access (waits only for a pending write; see Storage::data).
  const T* data() const { return storage_ ? static_cast<const T*>(std::as_const(*storage_).data()) : nullptr; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // A host copy; for device memory it waits for the kernels that write it.
  std::vector<T> to_vector() const {
    detail::check_not_capturing("Tensor::to_vector", "a value read on the host would be fixed at capture, not read again on a replay; return the tensor from the step and read it after the call");
    if (device_type() == DeviceType::kCPU) return std::vector<T>(data(), data() + numel());
    if constexpr (std::is_same_v<T, bool>) {  // through bytes (std::vector<bool> packs bits)
      return Tensor(shape_, storage_).to(DeviceType::kCPU).to_vector();
    } else {
      std::vector<T> host(static_cast<size_t>(numel()));
      detail::copy_bytes(host.data(), DeviceType::kCPU, data(), device_type(), numel() * static_cast<int64_t>(sizeof(T)));
      return host;
    }
  }
  // This tensor in another memory space (itself when it is there already).
  Tensor to(DeviceType device) const {
    if (device == device_type() || !storage_) return *this;
    const int64_t bytes = numel() * static_cast<int64_t>(sizeof(T));
    Tensor t(shape_, Storage::allocate_uninitialized(bytes, device));
    detail::copy_bytes(t.data(), device, data(), device_type(), bytes);
    return t;
  }

  // "Tensor(2, 3) [1, 2, 3, 4, 5, 6]" (" cuda" after the shape in device memory): every element,
  // read to the host as to_vector() does.
  friend std::ostream& operator<<(std::ostream& os, const Tensor& t) {
    os << "Tensor" << t.shape_ << (t.device_type() == DeviceType::kCUDA ? " cuda" : "") << " [";
    const std::vector<T> values = t.to_vector();
    for (size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
    return os << "]";
  }

 private:
  Shape shape_;
  std::shared_ptr<Storage> storage_;
};

}  // namespace spsd
