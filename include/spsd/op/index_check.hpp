#pragma once
// Indices outside their range (embedding's, pick's labels, hence cross_entropy's) are an
// spsd::Error on every rank of the op's placement, naming the op, the argument and the first bad
// value: `embedding: indices[2] = -1 is outside [0, 3), the rows of the weight (3, 2) float32`.
//
// Only the ranks whose pieces hold a bad index see it. So (runtime/consistency.hpp,
// note_data_error) it rides on the placement's next consistency check, which runs before the
// placement next communicates (reading the result with full() is such a point) and after at
// most 256 ops: every rank then throws the error of the earliest op with one, naming its
// smallest bad index. No collective is added (the check runs anyway; its bytes are not counted
// in comm_stats). Where no rank can be left waiting, the error is thrown at once: every rank of
// the placement holds all the indices (B), or the placement has one rank. Until raised, the
// bad rows of the output are NaN (op/index.hpp).
//
// On cpu each rank scans its piece when the op runs. On cuda a kernel scans it and reports into
// the rank's device flag (runtime/value_errors.hpp) without a host wait; the rank learns of it
// where it already waits for the device (a device -> host copy, synchronize()) or when its next
// consistency check is issued, and the check carries it to the others.
#include <cstdint>
#include <string>
#include <string_view>

#include "spsd/op/resolve.hpp"

namespace spsd {

struct KernelArgs;

// An int64 input whose values must lie in [0, bound), as an op declares it (its optional
// `static IndexCheck index_check(std::span<const TensorMeta> inputs)`, op/dispatch.hpp).
struct IndexCheck {
  size_t input = 0;
  int64_t bound = 0;
  std::string_view argument;  // "indices", "labels"
  std::string range;          // what [0, bound) counts: "the rows of the weight (3, 2) float32"
};

namespace detail {

// While alive, index errors raised from this thread name `op` (cross_entropy, whose labels its
// pick checks) instead of the op that found them.
class IndexErrorName {
 public:
  explicit IndexErrorName(std::string_view op) noexcept;
  ~IndexErrorName();
  IndexErrorName(const IndexErrorName&) = delete;
  IndexErrorName& operator=(const IndexErrorName&) = delete;

 private:
  std::string_view previous_;
};

// Checks this rank's piece of the indices (k.inputs[check.input]) as above; op names the op
// (unless an IndexErrorName is alive). Throws at once only where every rank does alike.
void check_indices(std::string_view op, const Resolution& r, const KernelArgs& k, const IndexCheck& check);

}  // namespace detail

}  // namespace spsd
