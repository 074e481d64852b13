// The explicit instantiations of spsd/op/elementwise.hpp (core/instances.hpp).
#include "spsd/op/elementwise.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_ELEMENTWISE_INSTANCES, )

}  // namespace spsd
