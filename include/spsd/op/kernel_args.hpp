#pragma once
// What an op's kernel sees (op/dispatch.hpp): its scalar operand, this rank's pieces of the
// inputs and of the output, and where they live.
#include <bit>
#include <cstdint>
#include <span>
#include <type_traits>

#include "spsd/kernel/any_device.hpp"
#include "spsd/layout/split.hpp"
#include "spsd/op/signature.hpp"

namespace spsd {

// The scalar operand of scalar forms (add(x, 2.0f)); not part of the resolution cache key,
// but compared across ranks by the consistency check (`bits`, the exact operand).
struct Scalar {
  double f = 0;
  int64_t i = 0;
  bool present = false;
  uint64_t bits = 0;
  // v as an operand: its value as double and int64, and its exact bits.
  template <Element T>
  static Scalar of(T v) {
    const double f = static_cast<double>(v);
    const int64_t i = std::is_integral_v<T> ? static_cast<int64_t>(v) : 0;
    return {f, i, true, std::is_integral_v<T> ? static_cast<uint64_t>(i) : std::bit_cast<uint64_t>(f)};
  }
  // The operand in the kernel's element type.
  template <Element T>
  T as() const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(i);
    else return static_cast<T>(f);
  }
};

// One input's piece on this rank, as a kernel sees it.
struct LocalInput {
  const void* data;
  Shape shape;               // of the piece
  Box box;                   // the piece's place in the global tensor
  const TensorMeta* global;  // the whole tensor's type
  // The piece's elements as T.
  template <Element T>
  const T* as() const { return static_cast<const T*>(data); }
  // The row-major index in the whole tensor of the piece's element at row-major index local.
  int64_t global_index(int64_t local) const {
    int64_t index = 0, stride = 1;
    for (int64_t d = shape.ndim() - 1; d >= 0; --d) {
      index += (box.begin[d] + local % shape[d]) * stride;
      local /= shape[d];
      stride *= global->shape[d];
    }
    return index;
  }
};

// Everything a kernel gets: the attributes, the scalar operand, this rank's input pieces and
// output piece (with their boxes), the chosen signature and where to run.
struct KernelArgs {
  const OpAttrs& attrs;
  Scalar scalar;
  std::span<const LocalInput> inputs;
  void* out;
  const Shape& out_shape;   // of this rank's output piece
  const Box& out_box;
  const TensorMeta& out_global;
  const NdSignature& signature;
  kernel::Target target;    // where the pieces live and the kernel runs
  // Input i's piece as T.
  template <Element T>
  const T* in(size_t i) const { return inputs[i].as<T>(); }
  // The output piece as T (the kernel writes every element).
  template <Element T>
  T* out_as() const { return static_cast<T*>(out); }
};

}  // namespace spsd
