#pragma once
// What a compiled step may return, as a list of dtype-erased tensors and back: nothing, a
// GlobalTensor, or a std::pair / std::tuple of them (nested). Outputs carry no autograd history
// (a replay records none): call backward inside the step.
#include <cstddef>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "spsd/tensor/global_tensor.hpp"

namespace spsd::detail {

template <class R>
struct StepOutputs {
  static_assert(sizeof(R) == 0, "spsd::compile: a step returns void, a GlobalTensor, or a std::pair/std::tuple of "
                                "them (return tensors and read them after the call)");
};

template <Element T>
struct StepOutputs<GlobalTensor<T>> {
  static void flatten(const GlobalTensor<T>& t, std::vector<GlobalData>& out) {
    SPSD_CHECK(t.defined(), "compile", "the step returned an undefined tensor");
    out.push_back(t.data());
  }
  static GlobalTensor<T> rebuild(std::span<const GlobalData> in, size_t& next) {
    return GlobalTensor<T>::from_data(in[next++]);
  }
};

template <class... Ts>
struct StepOutputs<std::tuple<Ts...>> {
  static void flatten(const std::tuple<Ts...>& t, std::vector<GlobalData>& out) {
    std::apply([&](const Ts&... parts) { (StepOutputs<Ts>::flatten(parts, out), ...); }, t);
  }
  static std::tuple<Ts...> rebuild(std::span<const GlobalData> in, size_t& next) {
    return std::tuple<Ts...>{StepOutputs<Ts>::rebuild(in, next)...};  // braces: left to right
  }
};

template <class A, class B>
struct StepOutputs<std::pair<A, B>> {
  static void flatten(const std::pair<A, B>& p, std::vector<GlobalData>& out) {
    StepOutputs<A>::flatten(p.first, out);
    StepOutputs<B>::flatten(p.second, out);
  }
  static std::pair<A, B> rebuild(std::span<const GlobalData> in, size_t& next) {
    A first = StepOutputs<A>::rebuild(in, next);
    return {std::move(first), StepOutputs<B>::rebuild(in, next)};
  }
};

}  // namespace spsd::detail
