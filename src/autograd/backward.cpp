// The explicit instantiations of spsd/autograd/backward.hpp (core/instances.hpp).
#include "spsd/autograd/backward.hpp"

namespace spsd {

SPSD_FOR_EACH_FLOATING(SPSD_BACKWARD_INSTANCES, )

}  // namespace spsd
