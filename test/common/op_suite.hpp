#pragma once
// The rank-side differential suite for global ops, shared by the simulate and MPI tests.
// For every op case (op, input shapes, dtype) and every combination of input layouts (each
// input in every NdSbp of the mesh: S(i) per tensor axis, B, P(sum), P(max), P(min) per mesh
// axis), the inputs are built from one host tensor of deterministic random values (from_host;
// for partial layouts every other case uses lopsided pieces instead, build_layout in
// boxing_suite.hpp), the op runs through the public function, and the result's full() is
// compared with a single-process reference written with plain loops in op_suite.cpp.
//
// Tolerances (|got - expected| <= atol + rtol * |expected|):
//   int64: exact.
//   float32: rtol = atol = 1e-5 for element-wise ops; matmul rtol 1e-5, atol 1e-4 (sums of up to
//            7 products of partial pieces that were themselves rounded).
//   float64: rtol = atol = 1e-12 for element-wise ops; matmul 1e-11.
//   bfloat16 / float16 (u = 2^-8 / 2^-11): the reference is the float computation of the same
//            16-bit inputs, rounded once. The inputs are multiples of 1/16 with |x| <= 3 (exact in
//            both), and their lopsided P(sum) pieces are x - S and parts ((g + 3q) % 7 - 3) / 16
//            (S: the sum of the parts; every piece and partial sum is a multiple of 1/16 below 4,
//            exact), so the inputs themselves are exact in every layout.
//            Element-wise: exact (one float operation rounded once on both sides); exp, log,
//            tanh, sigmoid, gelu, gelu_tanh, rsqrt, erf, silu, pow rtol 2u (one ulp: the kernel's float function and the
//            reference's may differ in the last float bits), atol 1e-6. With lopsided partial inputs the pieces
//            of a linear op's P(sum) output round one by one and the P(sum) reduction rounds each
//            combine (pairwise, as the comm backends do at the time of writing; one rounding of a
//            float32 sum is strictly better): at most 2n - 1 <= 7 roundings of values below
//            |x| + 2.25 * max|other input| (n <= 4 pieces summing to at most |x| + 9/8 in
//            magnitude, the other operand at most 3): rtol 8u, atol 32u.
//            var: the deviations x - mean round to T before they are squared: rtol = atol = 16u
//            (64u / 128u with lopsided partial inputs, whose mean and deviations round per piece).
//            matmul: rtol 2u + 8u * sum_l |a_il||b_lj| (the pieces of a split-k product round
//            one by one, then the reduction, as above); with lopsided inputs
//            8u * sum_l (|a_il| + 9/8)(|b_lj| + 9/8).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "failures.hpp"

namespace spsd_test {

struct OpSuiteOptions {
  // Case i of an op case's layout product runs when i % stride == phase (phase derived from the
  // op case's name, so different op cases sample different combinations). Stride 1 runs the full
  // product.
  int64_t full_stride = 1;     // the "full" ops: add, mul, matmul, relu, float32
  int64_t other_stride = 1;    // every other op case (other ops, and float64 / int64 of the full ops)
  bool float64 = true;
  bool int64 = true;
  // The 16-bit cases of every op, every stride-th combination; 0: not run.
  int64_t bfloat16_stride = 0;
  int64_t float16_stride = 0;
  std::vector<std::string> skip_ops;  // op names not run ("div", "x/s"), to narrow a failure down
};

// Cases run per op (e.g. "add": 5256), for the report.
struct OpSuiteCounts {
  std::map<std::string, int64_t> per_op;
  int64_t total() const;
  std::string to_string() const;  // "1234 cases: add 300, div 57, ..."
  void merge(const OpSuiteCounts& other);
};

// Runs the suite on this rank for every op case on `placement` (collective over the world: ranks
// outside the placement take part in nothing but still walk the same cases). Records mismatches
// and errors in failures; counts only on ranks of the placement.
void run_op_suite(const spsd::Placement& placement, const OpSuiteOptions& options, Failures& failures,
                  OpSuiteCounts& counts);

}  // namespace spsd_test
