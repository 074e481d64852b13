#pragma once
// The rule validator (in the spirit of PyTorch DTensor's strategy validation): checks an op's SBP
// table against its kernel, so a wrong rule is reported before it gives wrong results.
//
// Every 1-d signature the table declares is checked by running the op's kernel on the pieces the
// ranks of a 3-rank 1-d mesh would hold (uneven boxes from box_at), with partial inputs built
// LOPSIDED (P(sum): random pieces that add up to the value; P(max): the value on a random rank,
// smaller values elsewhere; P(min) likewise, larger) and with the identity padding spsd's
// factories use. The ranks' outputs are combined per the declared output Sbp (S: placed at their
// boxes; B: every piece must equal the whole; P: reduced) and compared with the kernel run on
// the whole tensors, as one process would. A failure names the op, the signature, the inputs and
// the first wrong element:
//   declared signature fails: relu_broken (P(sum)) -> P(sum) for (5, 7) float64: lopsided trial 0:
//     reduced pieces (...): element 3 of the whole output: got 1.2, expected 0.7
// Then (ValidateOptions::search_missing) every (input Sbps, output Sbp) combination the table
// does not declare is tried the same way, and those that hold are listed as missing: rules the
// table could add (a B-only table is correct but communicates more than it must).
//
//   const ValidationReport r = validate_op<BiasGelu, float, double>({{{meta x}, {meta bias}}});
//   SPSD_CHECK(r.ok(), "bias_gelu", r.to_string());
#include <cstdint>
#include <string>
#include <vector>

#include "spsd/op/dispatch.hpp"
#include "spsd/op/input_domain.hpp"

namespace spsd {

// One representative call: the inputs' types (and the values each is drawn from), the attrs,
// and the scalar operand per trial (cycled; empty: none). Shapes whose extents do not divide by
// 3 exercise the uneven pieces.
struct ValidationCase {
  std::vector<ValidationInput> inputs;
  OpAttrs attrs;
  std::vector<Scalar> scalars;
  // "(5, 7) float64, (7,) float64; attrs [1]"; with the op's schema, its attrs as the op prints
  // them (attrs_text: "; p=0.400000" for dropout's, not the bits of the double).
  std::string text() const;
  std::string text(const OpSchema& op) const;
};

// An op as the validator sees it: its schema and its cpu kernel, dtype-erased.
struct ValidatedOp {
  std::string name;
  const OpSchema* schema;
  void (*kernel)(DType, const KernelArgs&);  // throws spsd::Error for a dtype not instantiated
  std::vector<ValidationCase> cases;
};

// How thoroughly validate_op searches.
struct ValidateOptions {
  bool search_missing = true;  // also try the undeclared combinations (8^n for n inputs: slow for n > 3)
};

// A valid combination the table lacks, and the cases it held for.
struct MissingSignature {
  std::string signature;  // "relu (P(max)) -> P(max)"
  std::vector<std::string> cases;
};

// validate_op's findings: wrong declared signatures, missing ones, and what it checked.
struct ValidationReport {
  std::vector<std::string> failures;  // wrong declared signatures and malformed tables
  std::vector<MissingSignature> missing;
  int64_t checked = 0;   // declared signatures checked (per case)
  int64_t trials = 0;    // their trials
  int64_t searched = 0;  // undeclared combinations tried
  // Whether every declared signature held (no failures; missing rules do not count).
  bool ok() const { return failures.empty(); }
  // The failures, then the missing rules, one a line; then the counts.
  std::string to_string() const;
};

// Checks the declared signatures of op for each case (8 trials each: 4 lopsided, 4 with identity
// padding), the table's shape (ends with the all-B signature, no signature twice), and, when
// asked, searches the undeclared ones. The kernel runs on cpu; nothing is communicated.
ValidationReport validate(const ValidatedOp& op, const ValidateOptions& options = {});

// Op's validator entry, its kernel instantiated for Ts (default: float, double, int32, int64).
template <GlobalOp Op, Element... Ts>
ValidatedOp validated_op(std::vector<ValidationCase> cases) {
  if constexpr (sizeof...(Ts) == 0)
    return {std::string(Op::name), &op_schema<Op>(), &detail::run_cpu_kernel<Op, float, double, int32_t, int64_t>,
            std::move(cases)};
  else
    return {std::string(Op::name), &op_schema<Op>(), &detail::run_cpu_kernel<Op, Ts...>, std::move(cases)};
}

// validate(validated_op<Op, Ts...>(cases), options): checks Op's signature table on cpu.
template <GlobalOp Op, Element... Ts>
ValidationReport validate_op(std::vector<ValidationCase> cases, const ValidateOptions& options = {}) {
  return validate(validated_op<Op, Ts...>(std::move(cases)), options);
}

}  // namespace spsd
