#pragma once
// Activation checkpointing: y = checkpoint(fn, inputs...) computes fn(inputs...) without
// keeping the activations inside fn, and recomputes them in backward.
//
// Forward runs fn with the tape off, so the tensors fn makes between its inputs and its output
// are freed as soon as fn no longer needs them; y gets one node ("checkpoint") that holds only
// fn and the inputs. When backward reaches that node it runs fn again, with the tape on, from
// detached copies of the inputs (each requiring grad as its original does), then runs backward
// of that inner graph from y's incoming gradient: the copies' gradients go on to the outer
// graph, in the layout backward gave them, and the parameters fn uses (captured, not passed)
// get theirs added into grad() as in any backward (reduced early unless NoGradSync is on:
// autograd/grad_sync.hpp). Only one segment's activations are alive at a time in backward: for
// a chain of n checkpointed layers the peak holds n segment inputs plus one segment's
// activations, instead of every layer's.
//
// Randomness: the seed stream (runtime/seed_stream.hpp) is rewound to where it stood when fn
// first ran, so a dropout drawing its seed with next_seed() draws the same mask again; after
// the recomputation the stream is put back. fn must otherwise compute the same thing twice
// (same ops, shapes and layouts: a different output is an spsd::Error at the recomputation).
//
// fn returns one GlobalTensor of a floating type; for several outputs, checkpoint each or
// concatenate them. The tape's view of fn: y requires grad when an input that requires grad,
// or a parameter that does, reaches it (a probe during forward sees the ops that would have
// recorded). With grad mode off (NoGradGuard) checkpoint just calls fn. Collective like any
// op: every rank calls it, with the same fn.
#include <array>
#include <functional>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "spsd/autograd/backward.hpp"
#include "spsd/runtime/seed_stream.hpp"

namespace spsd {

namespace detail {

template <class X>
inline constexpr bool is_floating_global_tensor = false;
template <FloatingElement T>
inline constexpr bool is_floating_global_tensor<GlobalTensor<T>> = true;

// Sets a thread-local variable for a scope, and puts it back.
template <class V>
class ScopedValue {
 public:
  ScopedValue(V& var, V value) : var_(var), previous_(std::exchange(var, std::move(value))) {}
  ~ScopedValue() { var_ = std::move(previous_); }
  ScopedValue(const ScopedValue&) = delete;
  ScopedValue& operator=(const ScopedValue&) = delete;

 private:
  V& var_;
  V previous_;
};

// The checkpoint node's backward: recompute, then backward of the recomputed graph.
template <class Fn, class... Ts, size_t... I>
void recompute_backward(const Fn& fn, const SeedStream& seeds, const GradNode& node, const GlobalData& grad_out,
                        GradList& grad_in, std::index_sequence<I...>) {
  std::tuple<GlobalTensor<Ts>...> copies{GlobalTensor<Ts>::from_data(node.inputs[I])...};
  ((node.input_meta[I] ? (void)std::get<I>(copies).requires_grad_() : (void)0), ...);
  auto y = [&] {
    ScopedValue<bool> tape_on(grad_mode, true);
    ScopedValue<bool*> no_probe(grad_probe, nullptr);
    ScopedValue<SeedStream> rewound(seed_stream_state, seeds);
    return std::apply(fn, copies);
  }();
  const GlobalData yd = y.data();
  SPSD_CHECK(yd.shape == node.output.shape && yd.dtype == node.output.dtype &&
                 yd.placement == node.output.placement && yd.nd_sbp == node.output.nd_sbp && y.requires_grad(),
             "checkpoint", "recomputing the function in backward gave ", describe(yd),
             y.requires_grad() ? "" : " not requiring grad", ", its forward gave ", describe(node.output),
             ": the function must compute the same thing each time it runs");
  const std::array<const AutogradMeta*, sizeof...(Ts)> inner_inputs{std::get<I>(copies).autograd_meta().get()...};
  run_backward(*y.autograd_meta(), yd, grad_out, active_backward_options ? *active_backward_options : BackwardOptions{},
               inner_inputs);
  ((node.input_meta[I] && std::get<I>(copies).has_grad() ? (void)(grad_in[I] = *std::get<I>(copies).autograd_meta()->grad)
                                                         : (void)0),
   ...);
}

}  // namespace detail

// fn(inputs...), its activations recomputed in backward instead of kept (above). A compile error
// when fn does not return one floating GlobalTensor; an Error in backward when the recomputation
// gives another shape, dtype or layout.
template <class Fn, class... Ts>
auto checkpoint(Fn fn, const GlobalTensor<Ts>&... inputs) {
  using Out = std::invoke_result_t<Fn&, const GlobalTensor<Ts>&...>;
  static_assert(detail::is_floating_global_tensor<Out>,
                "checkpoint: fn must return one GlobalTensor of a floating type (checkpoint each output of several)");
  // Tape off, or inside an enclosing checkpoint's forward (whose probe sees fn's ops).
  if (!is_grad_enabled() || detail::grad_probe) return fn(inputs...);
  const SeedStream seeds = seed_stream();
  bool needs_grad = false;
  Out out = [&] {
    detail::ScopedValue<bool*> probe(detail::grad_probe, &needs_grad);
    return fn(inputs...);
  }();
  // Nothing that requires grad reaches out, or fn returned a tensor of the tape as it is (an
  // input, a parameter): no node to add.
  if (!needs_grad || out.requires_grad()) return out;
  Out y = out.detach();
  auto node = std::make_shared<detail::GradNode>(detail::GradNode{
      .op = "checkpoint",
      .inputs = {inputs.data()...},
      .output = y.data(),
      .input_meta = {(inputs.requires_grad() ? inputs.autograd_meta() : nullptr)...},
      .closure = [fn = std::move(fn), seeds](const detail::GradNode& n, const detail::GlobalData& grad_out,
                                             detail::GradList& grad_in) {
        detail::recompute_backward<Fn, Ts...>(fn, seeds, n, grad_out, grad_in, std::index_sequence_for<Ts...>{});
      }});
  detail::record_closure(std::move(node), y.autograd_meta());
  return y;
}

}  // namespace spsd
