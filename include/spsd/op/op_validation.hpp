#pragma once
// SPSD_CHECK_OPS: every op's SBP table checked against its kernel at the op's first dispatch.
// A wrong row in an op's table gives wrong numbers without any error; the rule validator
// (op/rule_validator.hpp) finds such rows, but only where the op's author runs it. With
// validation on, the dispatch path runs it itself, once per op type and element type per
// process, on a case made from the first call's input types (large extents shrunk, the values
// drawn from the op's input_domains), declared rows only; the verdict is cached, so a failing
// op throws the same spsd::Error at every call, on every rank (every rank computes the same
// verdict, or reads it from the process's cache). docs/custom_ops.md, "Validation on first
// dispatch".
//
// SPSD_CHECK_OPS ("1": on; unset, "" or "0": off) is read once per process; the project's tests
// run with it on (test/meson.build).
#include <cstdint>
#include <span>
#include <string_view>

#include "spsd/op/input_domain.hpp"
#include "spsd/op/resolve.hpp"

namespace spsd {

struct KernelArgs;
struct Scalar;

// Whether ops are validated at their first dispatch (SPSD_CHECK_OPS, unless set below).
bool op_validation();
// Overrides SPSD_CHECK_OPS for the whole process (every simulated rank): tests that use a wrong
// table on purpose.
void set_op_validation(bool on);

namespace detail {

// An op as its first dispatch validates it: the schema, the cpu kernel for `dtype` (the
// validation's element type: 16-bit floats are validated as float32, whose table they share),
// and the values its inputs take.
struct DispatchValidation {
  const OpSchema* schema;
  void (*kernel)(DType, const KernelArgs&);
  void (*input_domains)(std::span<ValidationInput>, const OpAttrs&);
  DType dtype;
};

// Validates op on this call's input types unless (op, dtype) has a verdict in this process;
// throws spsd::Error naming the op and its failing signature when the verdict is a failure.
// A call whose case cannot run on one process (extents that shrink only by changing the attrs,
// as reshape's) leaves the op for a later call.
void validate_on_first_dispatch(const DispatchValidation& op, std::span<const TensorMeta> inputs,
                                const OpAttrs& attrs, const Scalar& scalar);

// (op, dtype) pairs validated so far in this process, passed or failed (tests).
int64_t validated_op_count();

}  // namespace detail

}  // namespace spsd
