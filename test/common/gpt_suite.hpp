#pragma once
// GPT parity, shared by the simulate and MPI tests: the character GPT of examples/08_gpt (one
// block, dim 16, 4 heads, context 8, dropout 0.1) trained for a few Adam steps on batches of
// a fixed text, single-process and under each of its plans (examples::gpt_plan), must give the
// same loss curve and, after the first backward, the same gradient of every parameter. That
// also checks that dropout drops the same elements in every layout (manual_seed before each
// step: every layout draws the same seeds). The text is the first
// 20,000 characters of the fortunes where the package is installed, generated sentences
// otherwise (gpt_text_source() says which). Tolerances: those of train_suite.hpp (float, double).
#include <string>
#include <vector>

#include "train_suite.hpp"

namespace spsd_test {

std::string gpt_text_source();

// Trains on `ranks` in mode "data", "sequence", "tensor", "2d" or "2d-sequence" (collective over the world;
// ranks outside the placement return an empty trace). T: float or double, masters and compute.
// tied: the head is the token table.
template <class T>
TrainTrace gpt_trace(const std::string& mode, const std::vector<int64_t>& ranks, int steps, bool tied,
                     const std::string& device = "cpu");

}  // namespace spsd_test
