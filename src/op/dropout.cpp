// The explicit instantiations of spsd/op/dropout.hpp (core/instances.hpp).
#include "spsd/op/dropout.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_DROPOUT_INSTANCES, )

}  // namespace spsd
