#pragma once
// HalfReduction: what a reduction of bfloat16 or float16 (all_reduce, reduce_scatter, and so
// P(sum)/P(max)/P(min) resolved by boxing) puts on the wire, process-wide.
//
// kNative (the default): 16-bit pieces on the wire. The host communicators (MPI, in-process)
// send each member its block of every member's piece (an all-to-all), sum the n pieces in
// float32 in member order and round once (then all-gather the 16-bit result for all_reduce):
// the bytes of a ring all-reduce of the 16-bit data, and the result is bit-equal to the float32
// sum of the pieces in member order rounded once (docs/communicators.md states the bound).
// NCCL reduces 16-bit types natively. kFloat32Wire: every member widens its pieces to float32
// (exact), the backend reduces float32 and the result is rounded once: twice the bytes, and on
// NCCL no 16-bit rounding between hops. Other dtypes are never affected.
// The setting is read when a collective runs: every rank must use the same one, so set it on
// every rank at the same point of the program, after spsd::synchronize() when communication may
// still be queued (under simulate, before simulate() starts: the ranks share the process).
#include <ostream>
#include <string_view>

#include "spsd/core/dtype.hpp"

namespace spsd {

// What a 16-bit float reduction puts on the wire: kNative 16-bit pieces, kFloat32Wire float32.
enum class HalfReduction { kNative, kFloat32Wire };

// Sets or reads the process-wide wire format of 16-bit float reductions (kNative by default).
void set_half_reduction(HalfReduction mode);
HalfReduction half_reduction();

// "native" or "float32 wire" (<< prints the same).
constexpr std::string_view to_string(HalfReduction mode) {
  return mode == HalfReduction::kNative        ? "native"
         : mode == HalfReduction::kFloat32Wire ? "float32 wire"
                                               : "invalid half reduction";
}
inline std::ostream& operator<<(std::ostream& os, HalfReduction mode) { return os << to_string(mode); }

// The dtype a reduction of dtype moves on the wire under the current setting: float32 for a
// 16-bit dtype under kFloat32Wire, dtype itself otherwise. The communicator's byte counters and
// the boxing planner's predictions both count reductions in it.
inline DType reduction_wire_dtype(DType dtype) {
  return is_half(dtype) && half_reduction() == HalfReduction::kFloat32Wire ? DType::kFloat32 : dtype;
}

}  // namespace spsd
