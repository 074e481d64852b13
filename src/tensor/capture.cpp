// refuse_capture (tensor/capture.hpp): the one message for work a compiled step cannot replay.
#include "spsd/tensor/capture.hpp"

#include "spsd/core/error.hpp"

namespace spsd::detail {

void refuse_capture(std::string_view op, std::string_view why) {
  throw_error(op, concat("cannot run inside a compiled step (spsd::compile): ", why,
                         " (docs/compile.md says what a step may do)"));
}

}  // namespace spsd::detail
