// The explicit instantiations of spsd/op/loss.hpp (core/instances.hpp).
#include "spsd/op/loss.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_LOSS_INSTANCES, )

}  // namespace spsd
