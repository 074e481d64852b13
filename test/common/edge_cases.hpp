#pragma once
// Edge cases of the public API under every layout the world allows: empty tensors and
// zero-size axes (the documented result or an spsd::Error, docs/operators.md "Edge cases"),
// NaN inputs (what propagates), and the errors ranks find only after communicating, which must
// reach every rank of the placement. Collective over the world; part of the misuse catalogue
// (misuse_catalogue.hpp), so it runs under simulate and under mpirun alike.
#include <set>
#include <string>

#include "failures.hpp"

namespace spsd_test {

// Runs the cases on every rank of the world; adds each case's API name (api_of) to covered.
// Returns the number of cases.
int run_edge_cases(Failures& failures, std::set<std::string>& covered);

}  // namespace spsd_test
