#pragma once
// Pipeline parallelism (issue 39) on real ranks: the loss and every gradient of one step of a
// pipelined model equal one process's (float64 to 1e-12 relative, float32 to 1e-6), for each
// schedule, 2 and 4 pipeline ranks, 1, 2, 3, 4 and 8 micro-batches, stages of 1 rank and of 2
// (pipeline x data, pipeline x tensor) and of a 2x2 mesh (pipeline x data x tensor, on 8 ranks);
// one data-parallel reduction per parameter per step; small transfers queued, never inline;
// split backward bitwise equal to backward; tied weights across stages; bad inputs an Error on every
// rank. Rank-side, like the other suites: every rank of the world runs each case (the pipeline
// uses the first ranks), records what it found wrong, and returns the number of cases run.
#include <cstdint>
#include <string>

#include "failures.hpp"

namespace spsd_test {

// Every case that fits in the world (p x stage width <= world size). quick: one micro-batch
// count per schedule and pipeline size (the MPI runs; the simulator runs them all). device:
// "cuda" runs the steps on cuda placements (the GPU suite), the reference too.
int run_pipeline_checks(Failures& failures, bool quick = false, const std::string& device = "cpu");

}  // namespace spsd_test
