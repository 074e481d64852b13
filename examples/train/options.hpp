#pragma once
// What the training examples (07_train_mlp, 08_gpt) share on their command lines: --device
// (cpu or cuda; default: cuda when a GPU is usable) and --dtype (the compute type of the forward
// pass: float32, bfloat16 or float16), and a call of a template with that compute type.
#include <spsd/spsd.hpp>
#include <string>
#include <string_view>
#include <utility>

namespace examples {

// The placement's device type for --device `given` (empty: not given).
inline std::string checked_device(std::string_view program, const std::string& given) {
  SPSD_CHECK(given.empty() || given == "cpu" || given == "cuda", program, "--device must be cpu or cuda, got \"",
             given, "\"");
  return given.empty() ? (spsd::cuda_available() ? "cuda" : "cpu") : given;
}

inline void check_dtype(std::string_view program, const std::string& dtype) {
  SPSD_CHECK(dtype == "float32" || dtype == "bfloat16" || dtype == "float16", program,
             "--dtype must be float32, bfloat16 or float16, got \"", dtype, "\"");
}

// f.template operator()<C>() with C the C++ type of --dtype.
template <class F>
decltype(auto) with_compute_type(const std::string& dtype, F&& f) {
  if (dtype == "bfloat16") return f.template operator()<spsd::bfloat16>();
  if (dtype == "float16") return f.template operator()<spsd::float16>();
  return f.template operator()<float>();
}

}  // namespace examples
