#pragma once
// The values an op's input takes, for the rule validator (op/rule_validator.hpp), which draws
// its test inputs from them: a divisor is nonzero, a logarithm's argument positive, an index
// below its bound. An op states them in its optional `input_domains` member (op/dispatch.hpp),
// which the validation on first dispatch (SPSD_CHECK_OPS, op/op_validation.hpp) reads.
#include <cstdint>

#include "spsd/op/signature.hpp"

namespace spsd {

// The values the rule validator draws for an op's input.
enum class InputDomain {
  kAny,       // [-2, 2] (floats), [-9, 9] (integers)
  kPositive,  // [0.5, 3] (log, sqrt, a divisor), [1, 9]
  kNonzero,   // magnitudes [0.5, 2] or [1, 9], either sign (an integer divisor)
  kIndex,     // integers in [0, bound) (embedding indices, labels)
};

// An input of a validation case: its type and shape, and the values it may take.
struct ValidationInput {
  TensorMeta meta;
  InputDomain domain = InputDomain::kAny;
  int64_t bound = 0;  // kIndex only
};

}  // namespace spsd
