// The explicit instantiations of spsd/op/normalization.hpp (core/instances.hpp).
#include "spsd/op/normalization.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_NORM_INSTANCES, )

}  // namespace spsd
