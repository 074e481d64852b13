#pragma once
// Checkpoints with resharding, shared by the simulate and MPI tests: a reference checkpoint saved
// on 4 ranks as (S(0), S(1)) on a 2x2 mesh (every dtype, bfloat16 and float16 included, uneven
// and empty pieces, a 3-d tensor, partial sums and maxima in int64 and 16-bit), loaded on any
// number of ranks in every layout that fits, bit-equal to the values it was made from, and into
// every other floating dtype (static_cast of those values); and corrupted copies of it, which
// must fail on every rank.
#include <string>

#include "failures.hpp"

namespace spsd_test {

// Collective over the world (at least 4 ranks; ranks 0..3 hold the tensors). Writes the
// reference checkpoint into dir (a map of named tensors) and dir + "/single" (one tensor).
void save_reference_checkpoint(const std::string& dir);

// Collective over the world, any size: loads every tensor of the reference checkpoint on all
// ranks in every layout of the 1-d mesh and of each 2-d mesh (a, world / a), compares each
// rank's piece with the reference values bit for bit, loads each floating one into the other
// floating dtypes, and checks that a rank loading part of the
// large tensor read only the checksummed chunks holding its bytes. Returns the loads done.
int check_reference_loads(Failures& failures, const std::string& dir);

// Collective over the world: rank 0 copies the reference checkpoint into scratch and damages
// the copy (a truncated data file, a flipped bit in one, a flipped bit in the manifest, a
// truncated manifest); a load in a layout where only some ranks read the damage must throw
// spsd::Error naming the damaged file on every rank.
void check_corruption_detected(Failures& failures, const std::string& dir, const std::string& scratch);

}  // namespace spsd_test
