// The explicit instantiations of spsd/op/softmax.hpp (core/instances.hpp).
#include "spsd/op/softmax.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_SOFTMAX_INSTANCES, )

}  // namespace spsd
