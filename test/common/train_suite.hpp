#pragma once
// Training parity, shared by the simulate and MPI tests: the MLP of examples/07_train_mlp
// (784 -> 32 -> 10) trained for a few steps on a fixed slice, single-process and data-, tensor-
// and 2-d-parallel, must give the same loss curve and, after the first backward, the same
// gradient of every parameter. The slice is the first 200 Fashion-MNIST training samples where
// the dataset-fashion-mnist package is installed, a generated stand-in otherwise
// (train_data_source() says which).
//
// Tolerances: float (SGD with momentum): loss relative difference <= 1e-4, gradients
// |g - g1| <= 1e-5 + 1e-4 |g1|; double (Adam): 1e-10 and 1e-12 + 1e-9 |g1|; bfloat16 compute
// with float32 masters (SGD with momentum; each layout rounds its partial sums to bfloat16 at
// other points, 2^-8 relative each): 2e-2 and 2e-3 + 5e-2 |g1|, over 8 steps (this small
// momentum run amplifies the rounding differences: at 4 simulated ranks they measured at most
// 0.9% in the first 8 steps, and grew to 4-6% by step 20).
#include <string>
#include <vector>

#include "failures.hpp"

namespace spsd_test {

std::string train_data_source();

// What a run records, on the ranks of its placement: the loss after each step, and each
// parameter's gradient (whole, on the host) after the first backward.
struct TrainTrace {
  std::vector<double> losses;
  std::vector<std::vector<double>> first_gradients;
};

// Trains on `ranks` in mode "data", "tensor" or "2d" (collective over the world; ranks outside
// the placement take part in nothing and return an empty trace). T: float (SGD) or double (Adam),
// or bfloat16: bfloat16 compute on float32 parameters (SGD), the loss cast to float32.
// device: the placement's device type, "cpu" or "cuda".
template <class C>
TrainTrace train_trace(const std::string& mode, const std::vector<int64_t>& ranks, int steps,
                       const std::string& device = "cpu");

// Compares a trace with the single-process one; records differences in failures, and a failure
// when the reference is empty or the two differ in length.
template <class T>
void expect_same_training(Failures& failures, const std::string& what, const TrainTrace& got, const TrainTrace& want);

}  // namespace spsd_test
