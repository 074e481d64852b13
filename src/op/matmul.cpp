// The explicit instantiations of spsd/op/matmul.hpp (core/instances.hpp).
#include "spsd/op/matmul.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_MATMUL_INSTANCES, )

}  // namespace spsd
