#pragma once
// Invalid calls that every rank makes alike and that the calling rank rejects before any
// communication, so the same catalogue runs under simulate and under mpirun without hangs:
// communicator arguments (negative counts, counts of the wrong length, negative entries,
// roots and peers out of range, null buffers), communicator() over bad rank lists, the
// runtime without a Runtime, a second Runtime, a non-positive timeout.
#include "failures.hpp"

namespace spsd_test {

// Each case must throw spsd::Error whose message names the operation, the argument and the
// values, must leave the counters untouched, and the world communicator must still work after
// all of them. Must be called by every rank of the world. Returns the number of cases run.
int run_misuse_catalogue(Failures& failures);

}  // namespace spsd_test
