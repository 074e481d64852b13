#pragma once
// The element-wise functions the kernels know, by name: UnaryOp and BinaryOp, their printed
// names, and which unary functions integers have. Shared by the cpu and CUDA kernels and by
// kernel/derivative.hpp.
#include <ostream>
#include <string_view>

#include "spsd/core/dtype.hpp"

namespace spsd::kernel::cpu {

// kGelu is exact (x * Phi(x), erf), kGeluTanh the tanh approximation (torch's approximate="tanh").
enum class UnaryOp { kNeg, kRelu, kGelu, kExp, kLog, kTanh, kSigmoid, kSqrt, kAbs, kRsqrt, kErf, kSilu, kGeluTanh };
// kPow: floating types only (binary_supports).
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMax, kMin, kPow };

// "neg", "relu", ...: the op's name.
constexpr std::string_view to_string(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg: return "neg";
    case UnaryOp::kRelu: return "relu";
    case UnaryOp::kGelu: return "gelu";
    case UnaryOp::kExp: return "exp";
    case UnaryOp::kLog: return "log";
    case UnaryOp::kTanh: return "tanh";
    case UnaryOp::kSigmoid: return "sigmoid";
    case UnaryOp::kSqrt: return "sqrt";
    case UnaryOp::kAbs: return "abs";
    case UnaryOp::kRsqrt: return "rsqrt";
    case UnaryOp::kErf: return "erf";
    case UnaryOp::kSilu: return "silu";
    case UnaryOp::kGeluTanh: return "gelu_tanh";
  }
  return "invalid unary op";
}

// Element-wise max/min are "maximum"/"minimum" (numpy, torch): "max" names the reduction.
constexpr std::string_view to_string(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "add";
    case BinaryOp::kSub: return "sub";
    case BinaryOp::kMul: return "mul";
    case BinaryOp::kDiv: return "div";
    case BinaryOp::kMax: return "maximum";
    case BinaryOp::kMin: return "minimum";
    case BinaryOp::kPow: return "pow";
  }
  return "invalid binary op";
}

// Prints to_string(op).
inline std::ostream& operator<<(std::ostream& os, UnaryOp op) { return os << to_string(op); }
inline std::ostream& operator<<(std::ostream& os, BinaryOp op) { return os << to_string(op); }

// Integers have neg, relu and abs (wrapping: -INT_MIN == INT_MIN); the rest need floats.
constexpr bool unary_supports(UnaryOp op, DType t) {
  if (is_floating(t)) return true;
  return op == UnaryOp::kNeg || op == UnaryOp::kRelu || op == UnaryOp::kAbs;
}

// pow needs floats (an integer power overflows or truncates); the rest take every numeric type.
constexpr bool binary_supports(BinaryOp op, DType t) { return is_floating(t) || op != BinaryOp::kPow; }

}  // namespace spsd::kernel::cpu
