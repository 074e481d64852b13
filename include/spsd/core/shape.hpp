#pragma once
// Shape: the extent of each tensor axis, and small formatting helpers for index lists.
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "spsd/core/error.hpp"

namespace spsd {

namespace detail {
// "[0, 1, 2]": used in messages for rank lists, counts and index vectors.
inline std::string join(const std::vector<int64_t>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}
}  // namespace detail

// The extent of each axis of a tensor; a 0-d tensor's shape has no axis.
class Shape {
 public:
  Shape() = default;  // 0-d: one element
  // From the extents, each >= 0.
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) { validate(); }
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) { validate(); }

  // The number of axes, the extent of one (out of range: spsd::Error), and the element count.
  int64_t ndim() const { return static_cast<int64_t>(dims_.size()); }
  int64_t operator[](int64_t axis) const { return dims_.at(checked_axis(axis)); }
  int64_t& operator[](int64_t axis) { return dims_.at(checked_axis(axis)); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  // The extents, in order.
  const std::vector<int64_t>& dims() const { return dims_; }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }

  // Python-style: "()", "(7,)", "(4, 5)".
  std::string to_string() const {
    std::string s = "(";
    for (size_t i = 0; i < dims_.size(); ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
    return s + (dims_.size() == 1 ? ",)" : ")");
  }
  friend bool operator==(const Shape&, const Shape&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.to_string(); }

 private:
  // Non-negative dims whose non-zero ones multiply within int64, so numel(), strides and
  // offsets never overflow.
  void validate() const {
    int64_t product = 1;
    for (int64_t d : dims_) {
      SPSD_CHECK(d >= 0, "Shape", "dimensions must be non-negative, got ", detail::join(dims_));
      SPSD_CHECK(d == 0 || !__builtin_mul_overflow(product, d, &product), "Shape", "dimensions ", detail::join(dims_),
                 " have more than 2^63 - 1 elements");
    }
  }
  size_t checked_axis(int64_t axis) const {
    SPSD_CHECK(axis >= 0 && axis < ndim(), "Shape", "axis ", axis, " is out of range for shape ", to_string());
    return static_cast<size_t>(axis);
  }
  std::vector<int64_t> dims_;
};

// Row-major strides of a dense tensor of this shape, in elements.
inline std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.ndim(), 1);
  for (int64_t i = shape.ndim() - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

}  // namespace spsd
