#pragma once
// The instruction set the element-wise math loops run with. spsd is compiled for the x86-64
// baseline (SSE2, 4 floats a vector) without -march, so that one binary runs everywhere; the
// loops of the transcendental functions (unary and unary_grad of floating types, softmax and
// its backward, cross_entropy's backward) and of layer_norm and rms_norm (forward and both
// backward kernels) are compiled a second time for AVX2 (8 floats a vector) and that copy runs
// where the CPU has AVX2.
//
// Both copies give bitwise the same results: AVX2 without FMA has no fused multiply-add to
// contract into (target "avx2" does not enable FMA), every vector operation is the IEEE
// operation of the scalar code lane by lane, and the reductions keep kBlock accumulators
// (loop.hpp) whatever the vector width. test/unit/test_vector_math.cpp runs both and compares.
#include <atomic>

#include "spsd/core/error.hpp"

// SPSD_ISA_DISPATCH: the x86-64 GCC/Clang builds, where target attributes and
// __builtin_cpu_supports exist. Elsewhere only the baseline copy is compiled.
#if defined(__x86_64__) && defined(__GNUC__)
#define SPSD_ISA_DISPATCH 1
#else
#define SPSD_ISA_DISPATCH 0
#endif

namespace spsd::kernel::cpu {

// The instruction sets a dispatched loop can run with.
enum class Isa { kBaseline, kAvx2 };

// Whether this CPU (and the OS, which must save the AVX registers) supports isa.
inline bool isa_supported(Isa isa) {
  if (isa == Isa::kBaseline) return true;
#if SPSD_ISA_DISPATCH
  __builtin_cpu_init();  // may run before libgcc's constructor did (static initialization)
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

namespace detail {

inline std::atomic<Isa>& isa_setting() {
  static std::atomic<Isa> setting{isa_supported(Isa::kAvx2) ? Isa::kAvx2 : Isa::kBaseline};
  return setting;
}

#if SPSD_ISA_DISPATCH
// body() with everything it calls inlined (flatten) and compiled for AVX2.
template <class Body>
[[gnu::target("avx2"), gnu::flatten]] void run_avx2(Body& body) {
  body();
}
#endif

}  // namespace detail

// The instruction set the dispatched loops use now: AVX2 where supported, else the baseline.
inline Isa isa() { return detail::isa_setting().load(std::memory_order_relaxed); }

// Makes the dispatched loops use isa (tests and bench/kernels compare both copies); Error if
// the CPU does not support it. Process-wide; not meant to change while kernels run.
inline void set_isa(Isa isa) {
  SPSD_CHECK(isa_supported(isa), "set_isa", "this CPU does not support AVX2");
  detail::isa_setting().store(isa, std::memory_order_relaxed);
}

namespace detail {

// Runs body() in the copy compiled for isa(): a loop over vector_math's functions gets twice
// the vector width where the CPU has AVX2.
template <class Body>
void with_isa(Body&& body) {
#if SPSD_ISA_DISPATCH
  if (isa() == Isa::kAvx2) return run_avx2(body);
#endif
  body();
}

}  // namespace detail

}  // namespace spsd::kernel::cpu
