#pragma once
// GradScaler on real ranks (autograd/grad_scaler.hpp): an overflow in one rank's gradient piece
// only makes every rank of the world skip the step and back off the scale; clean steps unscale
// exactly and grow the scale. Collective over the world (any size; 4 ranks in the tests).
#include "failures.hpp"

namespace spsd_test {

void check_grad_scaler(Failures& failures);

}  // namespace spsd_test
