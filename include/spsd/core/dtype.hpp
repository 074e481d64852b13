#pragma once
// DType: the element types the library moves and computes, and T <-> DType traits.
#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>

#include "spsd/core/error.hpp"
#include "spsd/core/half.hpp"

namespace spsd {

// New values go at the end: a DType's number is part of cache keys and of what ranks compare.
// kBool: C++ bool, one byte; results of comparisons, masks. Not an arithmetic type: no partial
// layouts, no reductions, no gradient.
enum class DType { kFloat32, kFloat64, kInt32, kInt64, kBFloat16, kFloat16, kBool };

// False for values cast from integers that name no enumerator (checked where they enter: the
// communicator, plan_boxing).
constexpr bool is_valid(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt32 || t == DType::kInt64 ||
         t == DType::kBFloat16 || t == DType::kFloat16 || t == DType::kBool;
}

namespace detail {
template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<bfloat16> { static constexpr DType value = DType::kBFloat16; };
template <> struct DTypeOf<float16> { static constexpr DType value = DType::kFloat16; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };
}  // namespace detail

// The element types spsd supports: dtype_of<T> exists exactly for these. The ops and factories
// are compiled for the six numeric ones (core/instances.hpp); bool only where it makes sense.
template <class T>
concept Element = requires { detail::DTypeOf<T>::value; };

template <Element T>
inline constexpr DType dtype_of = detail::DTypeOf<T>::value;

// Bytes per element.
constexpr int64_t size_of(DType t) {
  switch (t) {
    case DType::kBool: return 1;
    case DType::kBFloat16: case DType::kFloat16: return 2;
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kFloat64: case DType::kInt64: return 8;
  }
  return 0;
}

// Partial layouts (P(sum), P(max), P(min)) hold values to be reduced: numbers, not bool.
constexpr bool allows_partial(DType t) { return t != DType::kBool; }

// The 16-bit floating types: stored in 2 bytes, computed in float (core/half.hpp).
constexpr bool is_half(DType t) { return t == DType::kBFloat16 || t == DType::kFloat16; }

// float32, float64, bfloat16 or float16.
constexpr bool is_floating(DType t) { return t == DType::kFloat32 || t == DType::kFloat64 || is_half(t); }

// "float32", "int64", ...: the type's name, which operator<< prints too.
constexpr std::string_view to_string(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
    case DType::kBool: return "bool";
  }
  return "invalid dtype";
}

// Prints to_string(t).
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << to_string(t); }

// The floating element types: float, double, bfloat16, float16.
template <class T>
concept FloatingElement = Element<T> && is_floating(dtype_of<T>);

// The type a kernel computes T in: float for the 16-bit types (load, compute in float, round
// once on store), T itself otherwise.
template <class T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

// Calls f.template operator()<T>() with the C++ type of a runtime DType: one switch
// at the dtype-erased boundary, templated loops inside.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f.template operator()<float>();
    case DType::kFloat64: return f.template operator()<double>();
    case DType::kInt32: return f.template operator()<int32_t>();
    case DType::kInt64: return f.template operator()<int64_t>();
    case DType::kBFloat16: return f.template operator()<bfloat16>();
    case DType::kFloat16: return f.template operator()<float16>();
    case DType::kBool: return f.template operator()<bool>();
  }
  detail::throw_error("visit_dtype", "invalid dtype value ", static_cast<int>(t));
}

}  // namespace spsd
