#pragma once
// Training you can trust (issue 38): the misuses that gave silently wrong results now throw
// spsd::Error on every rank (a second backward, a saved tensor written in place, an optimizer
// made before nn::parallelize, an undefined tensor), and the training features (optimizer state
// dicts, learning rates and schedulers, gradient clipping) give one process's results in every
// layout. Rank-side: every rank of the world runs each check and records what it found wrong
// (no Catch assertions on rank threads); the sim and mpi tests run them on 1 to 4 ranks and a
// 2x2 mesh. Returns the number of cases run, so a test can tell that any ran.
#include <cstdint>
#include <string>
#include <vector>

#include "failures.hpp"

namespace spsd_test {

int run_training_checks(Failures& failures);

// A small MLP (examples/train/mlp.hpp, 8 -> 6 -> 4) trained in plan `mode` ("data", "tensor",
// "2d") on the world's ranks for steps [from, to): Adam, a cosine schedule with warmup, gradient
// clipping; batch s is the same in every world. Resumes from `resume` and saves into `save` when
// not empty: model, optimizer and schedule in one checkpoint (the model alone when
// resume_optimizer is false). Collective over the world; returns the losses, on every rank.
std::vector<float> train_resumable(const std::string& mode, int64_t from, int64_t to, const std::string& resume,
                                   const std::string& save, bool resume_optimizer = true);

}  // namespace spsd_test
