// The explicit instantiations of spsd/op/index.hpp, softmax.hpp and loss.hpp (core/instances.hpp).
#include "spsd/op/index.hpp"
#include "spsd/op/loss.hpp"
#include "spsd/op/softmax.hpp"

namespace spsd {

SPSD_FOR_EACH_ELEMENT(SPSD_INDEX_INSTANCES, )
SPSD_FOR_EACH_ELEMENT(SPSD_SOFTMAX_INSTANCES, )
SPSD_FOR_EACH_ELEMENT(SPSD_LOSS_INSTANCES, )

}  // namespace spsd
