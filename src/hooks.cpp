// The hooks table (tensor/hooks.hpp): the one place where the calls that go up the layers are
// bound to what the higher layers define. The only file of src/ outside a layer's folder.
#include "spsd/autograd/node.hpp"
#include "spsd/boxing/to_layout.hpp"
#include "spsd/tensor/hooks.hpp"

namespace spsd::detail {

extern constinit const Hooks hooks{
    .to_layout = &to_layout,
    .record_boxing = &record_boxing,
    .record_op = &record_op,
};

}  // namespace spsd::detail
