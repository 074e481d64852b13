#pragma once
// The misuse catalogue: every public function of spsd called with bad arguments, on every rank
// alike, so the same catalogue runs under simulate and under mpirun without hangs.
//
// 1. Invalid calls the calling rank rejects before any communication (run_misuse_catalogue's
//    own list): communicator arguments (negative counts, counts of the wrong length, negative
//    entries, roots and peers out of range, null buffers), communicator() over bad rank lists,
//    the runtime without a Runtime, a second Runtime, a non-positive timeout; shapes, placements
//    (empty, duplicate, negative ranks, ranks beyond the world), Sbp/NdSbp (a negative split
//    axis beyond the tensor's axes, wrong number of mesh axes, split axis beyond ndim), boxes, factories, tensors, every
//    operator (shapes, axes, dtypes, mismatched placements, raw GlobalTensors whose layout or
//    piece does not fit), autograd and the optimizers.
// 2. Edge cases (edge_cases.hpp): documented results for empty tensors, zero-size axes and NaN,
//    and the errors that ranks find only after exchanging facts (to_global's local shapes,
//    from_host's data, integer division by zero), which must reach every rank.
// The catalogue then checks that every name of public_api() was reached by some case.
#include <set>
#include <string>
#include <vector>

#include "failures.hpp"

namespace spsd_test {

// Each case of part 1 must throw spsd::Error whose message names the operation, the argument
// and the values, must leave the counters untouched, and the world communicator must still work
// after all of them; part 2 must give its documented result or error. Must be called by every
// rank of the world. Returns the number of cases run.
int run_misuse_catalogue(Failures& failures);

// The public functions (API.md and the public headers under include/spsd/) the catalogue must
// reach: a case named "NAME: what" covers NAME (see misuse_catalogue.cpp for the table).
const std::vector<std::string>& public_api();

// The API name a case covers: its name up to the first ": ".
inline std::string api_of(const std::string& case_name) { return case_name.substr(0, case_name.find(": ")); }

}  // namespace spsd_test
