#pragma once
// SBP signatures: which input layouts an op accepts and the output layout it then produces.
// Ops declare 1-d tables; an N-d mesh takes per-axis products of them (seed 003).
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/layout/nd_sbp.hpp"

namespace spsd {

// An input's or output's logical type: what shape inference and signature tables look at.
struct TensorMeta {
  Shape shape;
  DType dtype;
  // "(4, 5) float32"; == compares shape and dtype.
  std::string to_string() const { return shape.to_string() + " " + std::string(spsd::to_string(dtype)); }
  friend bool operator==(const TensorMeta&, const TensorMeta&) = default;
};

// Integers that parametrize an op and select its signatures (axes, permutation, keepdim...).
// Part of the resolution cache key; scalar operands are not (they never change a signature).
using OpAttrs = std::vector<int64_t>;

// One 1-d signature: an Sbp per input, and the output's Sbp.
struct Signature {
  std::vector<Sbp> inputs;
  Sbp output;
  std::string to_string() const;  // "(S(0), B) -> S(0)"
  // Equal Sbps, input by input, and the same output.
  friend bool operator==(const Signature&, const Signature&) = default;
};

// One N-d signature: an NdSbp per input, and the output's NdSbp.
struct NdSignature {
  std::vector<NdSbp> inputs;
  NdSbp output;
  std::string to_string() const;  // "((S(0), B), (B, S(1))) -> (S(0), S(1))"
  // Equal NdSbps, input by input, and the same output.
  friend bool operator==(const NdSignature&, const NdSignature&) = default;
};

inline std::string Signature::to_string() const {
  std::string s = "(";
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + inputs[i].to_string();
  return s + ") -> " + output.to_string();
}

inline std::string NdSignature::to_string() const {
  std::string s = "(";
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + inputs[i].to_string();
  return s + ") -> " + output.to_string();
}

// Prints to_string().
inline std::ostream& operator<<(std::ostream& os, const Signature& s) { return os << s.to_string(); }
inline std::ostream& operator<<(std::ostream& os, const NdSignature& s) { return os << s.to_string(); }

// The N-d signature that takes table[choice[a]] on mesh axis a.
inline NdSignature nd_signature(std::span<const Signature> table, std::span<const size_t> choice) {
  SPSD_CHECK(!choice.empty(), "nd_signature", "choice must have one entry per mesh axis, got none");
  for (size_t c : choice)
    SPSD_CHECK(c < table.size() && table[c].inputs.size() == table[choice[0]].inputs.size(), "nd_signature", "choice ", c,
               " is not a row of the table of ", table.size(), " signatures with equal input counts");
  const size_t n_inputs = table[choice[0]].inputs.size();
  std::vector<std::vector<Sbp>> inputs(n_inputs);
  std::vector<Sbp> output;
  for (size_t c : choice) {
    for (size_t i = 0; i < n_inputs; ++i) inputs[i].push_back(table[c].inputs[i]);
    output.push_back(table[c].output);
  }
  NdSignature nd{{}, NdSbp(std::move(output))};
  for (auto& in : inputs) nd.inputs.emplace_back(std::move(in));
  return nd;
}

// Helpers for writing tables: every input and the output with the same Sbp.
inline Signature uniform_signature(size_t n_inputs, const Sbp& s) { return {std::vector<Sbp>(n_inputs, s), s}; }

}  // namespace spsd
