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
