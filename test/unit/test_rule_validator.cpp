// The rule validator (in the spirit of PyTorch DTensor's strategy validation): every 1-d
// signature an op declares is checked by running ONLY the op's local kernel on the pieces a
// 3-rank 1-d mesh would hold (uneven boxes from box_at), with partial inputs built LOPSIDED
// (P(sum): random pieces that add up to the value; P(max): the value on a random rank and
// smaller random values elsewhere; P(min) likewise with larger values; trials 0-3) and
// with the identity padding spsd's factories use (trials 4-7). The per-rank outputs are combined per the
// declared output Sbp (S: placed at their boxes; B: every piece must equal; P: reduced) and
// compared with the kernel run on the whole tensors.
//
// Then every (input Sbps, output Sbp) combination the table does NOT declare is checked the
// same way on several random trials, and the valid ones are printed (not failed):
//   missing valid signature: log (P(min)) -> P(min) for (5, 7) float64
// so gaps in the tables show in the test log. Combinations whose pieces do not fit the op
// (shape inference on the local pieces fails or disagrees with the output box) are skipped, and
// so are P(max)/P(min) outputs that are only valid because every rank computes the same whole
// result (the same inputs with a B output are valid too).
//
// Adding an op is one line in registry() below: entry<Def>(representative input metas).
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <spsd/spsd.hpp>
#include <spsd/autograd/norm_grad.hpp>

using namespace spsd;
using kernel::cpu::BinaryOp;
using kernel::cpu::UnaryOp;

namespace {

constexpr int64_t kRanks = 3;
const Shape kMesh{kRanks};
// Trials per signature: lopsided partial pieces first, then identity padding. Odd trials put
// the extremes of each input's domain (of both signs where it has them) in its first two
// elements, so small inputs (a (2, 1) divisor) still meet both signs.
constexpr int kLopsidedTrials = 4;
constexpr int kTrials = 8;

// ---------------------------------------------------------------------------------------------
// What the validator runs an op on.

enum class Domain { kAny, kPositive, kNonzero, kIndex };

struct InputSpec {
  TensorMeta meta;
  Domain domain = Domain::kAny;
  int64_t bound = 0;  // kIndex: values in [0, bound)
};

struct MetaCase {
  std::vector<InputSpec> inputs;
  OpAttrs attrs;
  std::vector<Scalar> scalars;  // the scalar operand, one per trial (cycled); empty: none
  std::string text() const {
    std::string s;
    for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + inputs[i].meta.to_string();
    if (!attrs.empty()) {
      s += "; attrs [";
      for (size_t i = 0; i < attrs.size(); ++i) s += (i ? ", " : "") + std::to_string(attrs[i]);
      s += "]";
    }
    return s;
  }
};

template <class F>
decltype(auto) with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kBFloat16: return f(bfloat16{});
    case DType::kFloat16: return f(float16{});
    case DType::kBool: return f(bool{});
  }
  throw std::logic_error("bad dtype");
}

using KernelFn = void (*)(DType, const KernelArgs&);

template <class Def, class... Ts>
void run_kernel(DType t, const KernelArgs& k) {
  bool ran = false;
  auto one = [&]<class T>(T) {
    if (!ran && dtype_of<T> == t) {
      Def::template kernel<T>(k);
      ran = true;
    }
  };
  (one(Ts{}), ...);
  if (!ran) throw std::logic_error("the validator did not instantiate this kernel for the dtype");
}

struct OpEntry {
  std::string name;
  const OpSchema* schema;
  KernelFn kernel;
  std::vector<MetaCase> cases;
};

// The one line per op: its Def, the dtypes to instantiate its kernel for (default: all four),
// and representative input metas.
template <class Def, class... Ts>
OpEntry entry(std::vector<MetaCase> cases) {
  if constexpr (sizeof...(Ts) == 0)
    return {std::string(Def::name), &op_schema<Def>(), &run_kernel<Def, float, double, int32_t, int64_t>, std::move(cases)};
  else
    return {std::string(Def::name), &op_schema<Def>(), &run_kernel<Def, Ts...>, std::move(cases)};
}

// ---------------------------------------------------------------------------------------------
// Representative metas.

TensorMeta meta(Shape s, DType t) { return {std::move(s), t}; }

const std::vector<DType> kFloats = {DType::kFloat32, DType::kFloat64};
const std::vector<DType> kAll = {DType::kFloat32, DType::kFloat64, DType::kInt64};

std::vector<Scalar> scalars_for(DType t) {
  if (t == DType::kFloat32 || t == DType::kFloat64)
    return {Scalar::of(2.5), Scalar::of(-1.5), Scalar::of(0.75), Scalar::of(-3.0), Scalar::of(1.25)};
  return {Scalar::of<int64_t>(3), Scalar::of<int64_t>(-2), Scalar::of<int64_t>(1), Scalar::of<int64_t>(-4),
          Scalar::of<int64_t>(5)};
}

std::vector<MetaCase> binary_cases(bool divisor_nonzero) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {Shape{5, 7}, Shape{5, 7}}, {Shape{5, 7}, Shape{7}}, {Shape{5, 1}, Shape{1, 7}}, {Shape{3, 1, 4}, Shape{2, 1}}};
  std::vector<MetaCase> cases;
  for (DType t : kAll)
    for (const auto& [a, b] : shapes)
      cases.push_back({{{meta(a, t)}, {meta(b, t), divisor_nonzero ? Domain::kNonzero : Domain::kAny}}, {}, {}});
  return cases;
}

std::vector<MetaCase> scalar_cases(Domain x_domain) {
  std::vector<MetaCase> cases;
  for (DType t : kAll)
    for (const Shape& s : {Shape{5, 7}, Shape{3, 1, 4}}) cases.push_back({{{meta(s, t), x_domain}}, {}, scalars_for(t)});
  return cases;
}

std::vector<MetaCase> unary_cases(UnaryOp op) {
  const Domain d = op == UnaryOp::kLog || op == UnaryOp::kSqrt || op == UnaryOp::kRsqrt ? Domain::kPositive : Domain::kAny;
  std::vector<MetaCase> cases;
  for (DType t : kAll)
    if (kernel::cpu::unary_supports(op, t))
      for (const Shape& s : {Shape{5, 7}, Shape{3, 1, 4}}) cases.push_back({{{meta(s, t), d}}, {}, {}});
  return cases;
}

std::vector<MetaCase> matmul_cases() {
  const std::vector<std::pair<Shape, Shape>> shapes = {{Shape{5, 7}, Shape{7, 3}},
                                                       {Shape{4, 6}, Shape{6, 5}},
                                                       {Shape{2, 3, 4}, Shape{4, 5}},
                                                       {Shape{2, 1, 3, 4}, Shape{5, 4, 6}}};
  std::vector<MetaCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64})
    for (const auto& [a, b] : shapes) cases.push_back({{{meta(a, t)}, {meta(b, t)}}, {}, {}});
  return cases;
}

// attrs [keepdim, sorted axes...]
std::vector<MetaCase> reduce_cases(const std::vector<DType>& dtypes) {
  std::vector<MetaCase> cases;
  for (DType t : dtypes) {
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {0, 1}, {}});
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {1, 0}, {}});
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {0, 0, 1}, {}});
    cases.push_back({{{meta(Shape{3, 5, 4}, t)}}, {0, 0, 2}, {}});
    cases.push_back({{{meta(Shape{3, 5, 4}, t)}}, {1, 1}, {}});
  }
  return cases;
}

std::vector<MetaCase> softmax_cases() {
  std::vector<MetaCase> cases;
  for (DType t : kFloats) {
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {1}, {}});
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {0}, {}});
    cases.push_back({{{meta(Shape{3, 5, 4}, t)}}, {1}, {}});
  }
  return cases;
}

std::vector<MetaCase> embedding_cases() {
  std::vector<MetaCase> cases;
  for (DType t : kFloats) {
    cases.push_back({{{meta(Shape{7, 4}, t)}, {meta(Shape{5}, DType::kInt64), Domain::kIndex, 7}}, {}, {}});
    cases.push_back({{{meta(Shape{5, 4}, t)}, {meta(Shape{2, 4}, DType::kInt64), Domain::kIndex, 5}}, {}, {}});
  }
  return cases;
}

std::vector<MetaCase> pick_cases() {
  std::vector<MetaCase> cases;
  for (DType t : kFloats)
    cases.push_back({{{meta(Shape{5, 7}, t)}, {meta(Shape{5}, DType::kInt64), Domain::kIndex, 7}}, {}, {}});
  return cases;
}

std::vector<MetaCase> permute_cases(bool transpose) {
  std::vector<MetaCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64}) {
    cases.push_back({{{meta(Shape{5, 7}, t)}}, transpose ? OpAttrs{0, 1} : OpAttrs{1, 0}, {}});
    cases.push_back({{{meta(Shape{3, 5, 4}, t)}}, transpose ? OpAttrs{0, 2} : OpAttrs{2, 0, 1}, {}});
  }
  return cases;
}

std::vector<MetaCase> reshape_cases() {
  std::vector<MetaCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64}) {
    cases.push_back({{{meta(Shape{6, 4}, t)}}, {24}, {}});
    cases.push_back({{{meta(Shape{6, 4}, t)}}, {3, 8}, {}});
    cases.push_back({{{meta(Shape{3, 5, 4}, t)}}, {15, -1}, {}});
    cases.push_back({{{meta(Shape{4, 6}, t)}}, {2, 2, 6}, {}});
  }
  return cases;
}

std::vector<MetaCase> slice_cases() {  // attrs [axis, begin, end]
  std::vector<MetaCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64}) {
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {1, 2, 6}, {}});
    cases.push_back({{{meta(Shape{6, 4}, t)}}, {0, 1, 5}, {}});
  }
  return cases;
}

std::vector<MetaCase> concat_cases() {  // attrs [axis]
  std::vector<MetaCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64}) {
    cases.push_back({{{meta(Shape{5, 3}, t)}, {meta(Shape{5, 4}, t)}}, {1}, {}});
    cases.push_back({{{meta(Shape{2, 7}, t)}, {meta(Shape{3, 7}, t)}, {meta(Shape{1, 7}, t)}}, {0}, {}});
  }
  return cases;
}

// scaled_dot_product_attention and its lse and gradient ops: inputs (q, k, v, out, g, lse),
// the first `inputs` of them; attrs [causal]. seq_q 5 and seq_k 7 split unevenly on 3 ranks,
// and the causal mask meets query pieces that start past position 0.
std::vector<MetaCase> attention_cases(size_t inputs) {
  std::vector<MetaCase> cases;
  for (const auto& [t, causal] : {std::pair{DType::kFloat32, 0}, std::pair{DType::kFloat64, 1}}) {
    const TensorMeta q = meta(Shape{2, 3, 5, 4}, t), kv = meta(Shape{2, 3, 7, 4}, t), lse = meta(Shape{2, 3, 5}, t);
    std::vector<InputSpec> in = {{q}, {kv}, {kv}, {q}, {q}, {lse}};
    in.resize(inputs);
    cases.push_back({std::move(in), {causal}, {}});
  }
  return cases;
}

// Ops whose undeclared combinations are too many to search (6 inputs: 8^6 input layouts):
// only their declared signatures are checked.
const std::vector<OpEntry>& declared_only_registry() {
  using namespace spsd::detail::attention_ops;
  static const std::vector<OpEntry> ops = {
      entry<AttentionGradDef<false>, float, double>(attention_cases(6)),
      entry<AttentionGradDef<true>, float, double>(attention_cases(6)),
  };
  return ops;
}

// layer_norm / rms_norm and their backward ops: x (..., C), then weight (C) [, bias (C)] or,
// for the backward ops, g like x; the scalar is eps. params: how many of the (C) parameters
// follow x; with_g: a g like x follows (the backward ops).
std::vector<MetaCase> norm_cases(int params, bool with_g) {
  std::vector<MetaCase> cases;
  for (DType t : kFloats)
    for (const Shape& s : {Shape{5, 7}, Shape{3, 2, 4}, Shape{6}}) {
      MetaCase c{{{meta(s, t)}}, {}, {Scalar::of(1e-5), Scalar::of(0.5)}};
      for (int i = 0; i < params; ++i) c.inputs.push_back({meta(Shape{s[s.ndim() - 1]}, t)});
      if (with_g) c.inputs.push_back({meta(s, t)});
      cases.push_back(std::move(c));
    }
  return cases;
}

// dropout: attrs [the bits of p], the scalar is the seed.
std::vector<MetaCase> dropout_cases() {
  std::vector<MetaCase> cases;
  for (DType t : kFloats)
    for (const Shape& s : {Shape{5, 7}, Shape{3, 1, 4}})
      cases.push_back({{{meta(s, t)}}, {std::bit_cast<int64_t>(0.4)}, {Scalar::of<int64_t>(7), Scalar::of<int64_t>(8)}});
  return cases;
}

// ---- issue 25: pow, comparisons, masks, argmax keys ----
std::vector<MetaCase> pow_cases() {
  std::vector<MetaCase> cases;
  for (DType t : kFloats)
    for (const auto& [a, b] : std::vector<std::pair<Shape, Shape>>{{Shape{5, 7}, Shape{5, 7}}, {Shape{5, 1}, Shape{1, 7}}})
      cases.push_back({{{meta(a, t), Domain::kPositive}, {meta(b, t)}}, {}, {}});
  return cases;
}

std::vector<MetaCase> pow_scalar_cases() {
  std::vector<MetaCase> cases;
  for (DType t : kFloats)
    for (const Shape& s : {Shape{5, 7}, Shape{3, 1, 4}})
      cases.push_back({{{meta(s, t), Domain::kPositive}}, {}, {Scalar::of(2.0), Scalar::of(-0.5), Scalar::of(1.5)}});
  return cases;
}

std::vector<MetaCase> compare_cases(const std::vector<DType>& dtypes, bool with_scalars) {
  std::vector<MetaCase> cases;
  for (DType t : dtypes) {
    const std::vector<Scalar> s = !with_scalars ? std::vector<Scalar>{}
                                  : t == DType::kBool ? std::vector<Scalar>{Scalar::of(false)}  // logical_not: eq(x, false)
                                                      : scalars_for(t);
    if (with_scalars) {
      for (const Shape& shape : {Shape{5, 7}, Shape{3, 1, 4}}) cases.push_back({{{meta(shape, t)}}, {}, s});
    } else {
      for (const auto& [a, b] : std::vector<std::pair<Shape, Shape>>{{Shape{5, 7}, Shape{5, 7}}, {Shape{5, 1}, Shape{1, 7}}})
        cases.push_back({{{meta(a, t)}, {meta(b, t)}}, {}, {}});
    }
  }
  return cases;
}

std::vector<MetaCase> where_cases() {
  std::vector<MetaCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64, DType::kBool}) {
    cases.push_back({{{meta(Shape{5, 7}, DType::kBool)}, {meta(Shape{5, 7}, t)}, {meta(Shape{5, 7}, t)}}, {}, {}});
    cases.push_back({{{meta(Shape{5, 1}, DType::kBool)}, {meta(Shape{7}, t)}, {meta(Shape{5, 7}, t)}}, {}, {}});
  }
  return cases;
}

// attrs [value == 0]; the scalars agree with it.
std::vector<MetaCase> masked_fill_cases() {
  std::vector<MetaCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64}) {
    const bool f = t == DType::kFloat64;
    const Scalar zero = f ? Scalar::of(0.0) : Scalar::of<int64_t>(0);
    const std::vector<Scalar> nonzero = f ? std::vector<Scalar>{Scalar::of(2.5), Scalar::of(-1.5)}
                                          : std::vector<Scalar>{Scalar::of<int64_t>(3), Scalar::of<int64_t>(-2)};
    for (const auto& [x, m] : std::vector<std::pair<Shape, Shape>>{{Shape{5, 7}, Shape{5, 7}}, {Shape{5, 7}, Shape{7}}}) {
      cases.push_back({{{meta(x, t)}, {meta(m, DType::kBool)}}, {1}, {zero}});
      cases.push_back({{{meta(x, t)}, {meta(m, DType::kBool)}}, {0}, nonzero});
    }
  }
  return cases;
}

std::vector<MetaCase> extreme_keys_cases() {  // attrs [axis]
  std::vector<MetaCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64}) {
    cases.push_back({{{meta(Shape{5, 7}, t)}, {meta(Shape{5, 1}, t)}}, {1}, {}});
    cases.push_back({{{meta(Shape{5, 7}, t)}, {meta(Shape{1, 7}, t)}}, {0}, {}});
  }
  return cases;
}

const std::vector<OpEntry>& registry() {
  using namespace spsd::detail;
  static const std::vector<OpEntry> ops = {
      entry<BinaryDef<BinaryOp::kAdd>>(binary_cases(false)),
      entry<BinaryDef<BinaryOp::kSub>>(binary_cases(false)),
      entry<BinaryDef<BinaryOp::kMul>>(binary_cases(false)),
      entry<BinaryDef<BinaryOp::kDiv>>(binary_cases(true)),
      entry<ScalarDef<BinaryOp::kAdd, false>>(scalar_cases(Domain::kAny)),
      entry<ScalarDef<BinaryOp::kSub, false>>(scalar_cases(Domain::kAny)),
      entry<ScalarDef<BinaryOp::kSub, true>>(scalar_cases(Domain::kAny)),
      entry<ScalarDef<BinaryOp::kMul, false>>(scalar_cases(Domain::kAny)),
      entry<ScalarDef<BinaryOp::kDiv, false>>(scalar_cases(Domain::kAny)),
      entry<ScalarDef<BinaryOp::kDiv, true>>(scalar_cases(Domain::kNonzero)),
      entry<UnaryDef<UnaryOp::kNeg>>(unary_cases(UnaryOp::kNeg)),
      entry<UnaryDef<UnaryOp::kRelu>>(unary_cases(UnaryOp::kRelu)),
      entry<UnaryDef<UnaryOp::kGelu>>(unary_cases(UnaryOp::kGelu)),
      entry<UnaryDef<UnaryOp::kExp>>(unary_cases(UnaryOp::kExp)),
      entry<UnaryDef<UnaryOp::kLog>>(unary_cases(UnaryOp::kLog)),
      entry<UnaryDef<UnaryOp::kTanh>>(unary_cases(UnaryOp::kTanh)),
      entry<UnaryDef<UnaryOp::kSigmoid>>(unary_cases(UnaryOp::kSigmoid)),
      entry<UnaryDef<UnaryOp::kSqrt>>(unary_cases(UnaryOp::kSqrt)),
      entry<UnaryDef<UnaryOp::kAbs>>(unary_cases(UnaryOp::kAbs)),
      entry<MatmulDef>(matmul_cases()),
      entry<ReduceDef<ReduceOp::kSum, false>>(reduce_cases(kAll)),
      entry<ReduceDef<ReduceOp::kSum, true>>(reduce_cases(kFloats)),
      entry<ReduceDef<ReduceOp::kMax, false>>(reduce_cases(kAll)),
      entry<ReduceDef<ReduceOp::kMin, false>>(reduce_cases(kAll)),
      entry<SoftmaxDef<false>, float, double>(softmax_cases()),
      entry<SoftmaxDef<true>, float, double>(softmax_cases()),
      entry<EmbeddingDef, float, double>(embedding_cases()),
      entry<PickDef, float, double>(pick_cases()),
      entry<shape_ops::PermuteLike<false>>(permute_cases(false)),
      entry<shape_ops::PermuteLike<true>>(permute_cases(true)),
      entry<shape_ops::ReshapeDef>(reshape_cases()),
      entry<shape_ops::SliceDef>(slice_cases()),
      entry<shape_ops::ConcatDef>(concat_cases()),
      entry<attention_ops::AttentionDef, float, double>(attention_cases(3)),
      entry<attention_ops::AttentionLseDef, float, double>(attention_cases(2)),
      entry<NormDef<false>, float, double>(norm_cases(2, false)),
      entry<NormDef<true>, float, double>(norm_cases(1, false)),
      entry<norm_grad_ops::NormGradXDef<false>, float, double>(norm_cases(1, true)),
      entry<norm_grad_ops::NormGradXDef<true>, float, double>(norm_cases(1, true)),
      entry<norm_grad_ops::NormGradWeightDef<false>, float, double>(norm_cases(0, true)),
      entry<norm_grad_ops::NormGradWeightDef<true>, float, double>(norm_cases(0, true)),
      entry<DropoutDef, float, double>(dropout_cases()),
      // issue 25
      entry<UnaryDef<UnaryOp::kRsqrt>>(unary_cases(UnaryOp::kRsqrt)),
      entry<UnaryDef<UnaryOp::kErf>>(unary_cases(UnaryOp::kErf)),
      entry<UnaryDef<UnaryOp::kSilu>>(unary_cases(UnaryOp::kSilu)),
      entry<UnaryDef<UnaryOp::kGeluTanh>>(unary_cases(UnaryOp::kGeluTanh)),
      entry<BinaryDef<BinaryOp::kPow>, float, double>(pow_cases()),
      entry<ScalarDef<BinaryOp::kPow, false>, float, double>(pow_scalar_cases()),
      entry<CompareDef<kernel::CompareOp::kLt>, bool>(compare_cases(kAll, false)),
      entry<CompareDef<kernel::CompareOp::kEq>, bool>(compare_cases({DType::kFloat64, DType::kBool}, false)),
      entry<CompareDef<kernel::CompareOp::kOr>, bool>(compare_cases({DType::kBool}, false)),
      entry<CompareScalarDef<kernel::CompareOp::kGe>, bool>(compare_cases(kAll, true)),
      entry<CompareScalarDef<kernel::CompareOp::kEq, true>, bool>(compare_cases({DType::kBool}, true)),
      entry<WhereDef, double, int64_t, bool>(where_cases()),
      entry<MaskedFillDef, double, int64_t>(masked_fill_cases()),
      entry<ExtremeKeysDef, int64_t>(extreme_keys_cases()),
  };
  return ops;
}

// ---------------------------------------------------------------------------------------------
// Values and pieces.

using Rng = std::mt19937_64;

double uniform(Rng& rng, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1.0p-53;
}
int64_t uniform_int(Rng& rng, int64_t lo, int64_t hi) {  // [lo, hi]
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

template <class T>
T extreme(const InputSpec& in, bool high) {
  if constexpr (std::is_same_v<T, bool>) return high;
  if (in.domain == Domain::kIndex) return static_cast<T>(high ? in.bound - 1 : 0);
  if constexpr (std::is_integral_v<T>) {
    if (in.domain == Domain::kPositive) return static_cast<T>(high ? 9 : 1);
    return static_cast<T>(high ? 9 : -9);
  } else {
    if (in.domain == Domain::kPositive) return static_cast<T>(high ? 3.0 : 0.5);
    return static_cast<T>(high ? 2.0 : -2.0);
  }
}

template <class T>
T draw(const InputSpec& in, Rng& rng) {
  if constexpr (std::is_same_v<T, bool>) return (rng() & 1) != 0;
  if (in.domain == Domain::kIndex) return static_cast<T>(uniform_int(rng, 0, in.bound - 1));
  if constexpr (std::is_integral_v<T>) {
    switch (in.domain) {
      case Domain::kPositive: return static_cast<T>(uniform_int(rng, 1, 9));
      case Domain::kNonzero: return static_cast<T>(uniform_int(rng, 1, 9) * (rng() & 1 ? 1 : -1));
      default: return static_cast<T>(uniform_int(rng, -9, 9));
    }
  } else {
    switch (in.domain) {
      case Domain::kPositive: return static_cast<T>(uniform(rng, 0.5, 3.0));
      case Domain::kNonzero: return static_cast<T>(uniform(rng, 0.5, 2.0) * (rng() & 1 ? 1 : -1));
      default: return static_cast<T>(uniform(rng, -2.0, 2.0));
    }
  }
}

// A typed buffer (at least one byte, so empty pieces still have a valid pointer).
struct Buffer {
  DType dtype = DType::kFloat32;
  Shape shape;
  Box box;
  std::vector<unsigned char> bytes;
  template <class T>
  T* as() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T>
  const T* as() const { return reinterpret_cast<const T*>(bytes.data()); }
  int64_t numel() const { return shape.numel(); }
};

Buffer allocate(DType t, Box box) {
  Buffer b{t, box.shape(), std::move(box), {}};
  b.bytes.assign(std::max<int64_t>(1, b.numel() * size_of(t)), 0);
  return b;
}

// Kernels must write every output element: they get a buffer full of NaN (or a pattern).
void poison(Buffer& b) {
  with_dtype(b.dtype, [&]<class T>(T) {
    T v;
    if constexpr (FloatingElement<T>) v = std::numeric_limits<T>::quiet_NaN();
    else v = static_cast<T>(0x5a5a5a5a5a5a5a5aull);
    std::fill(b.as<T>(), b.as<T>() + b.numel(), v);
  });
}

template <class T>
void copy_box(const Buffer& whole, Buffer& piece) {
  const Shape& shape = whole.shape;
  const int64_t n = piece.numel();
  if (n == 0) return;
  std::vector<int64_t> strides = contiguous_strides(shape), idx(piece.box.begin);
  for (int64_t i = 0; i < n; ++i) {
    int64_t g = 0;
    for (size_t k = 0; k < idx.size(); ++k) g += idx[k] * strides[k];
    piece.as<T>()[i] = whole.as<T>()[g];
    for (int64_t k = static_cast<int64_t>(idx.size()) - 1; k >= 0 && ++idx[k] == piece.box.end[k]; --k)
      idx[k] = piece.box.begin[k];
  }
}

enum class Trial { kLopsided, kIdentity };

Box rank_box(const Shape& shape, const Sbp& s, int64_t r) { return box_at(shape, kMesh, NdSbp(s), {r}); }

// The pieces kRanks ranks hold of `whole` in layout s.
std::vector<Buffer> make_pieces(const Buffer& whole, const Sbp& s, Trial trial, Rng& rng) {
  std::vector<Buffer> pieces;
  for (int64_t r = 0; r < kRanks; ++r) pieces.push_back(allocate(whole.dtype, rank_box(whole.shape, s, r)));
  with_dtype(whole.dtype, [&]<class T>(T) {
    if (!s.is_partial()) {
      for (Buffer& p : pieces) copy_box<T>(whole, p);
      return;
    }
    const ReduceOp op = s.reduce_op();
    for (int64_t g = 0; g < whole.numel(); ++g) {
      const T v = whole.as<T>()[g];
      if (trial == Trial::kIdentity) {
        pieces[0].as<T>()[g] = v;
        for (int64_t r = 1; r < kRanks; ++r) pieces[r].as<T>()[g] = reduce_identity<T>(op);
        continue;
      }
      const int64_t holder = uniform_int(rng, 0, kRanks - 1);
      T rest{0};
      for (int64_t r = 0; r < kRanks; ++r) {
        if (r == holder) continue;
        T x;
        if constexpr (std::is_integral_v<T>) {
          const int64_t k = op == ReduceOp::kSum ? uniform_int(rng, -5, 5) : uniform_int(rng, 1, 5);
          x = op == ReduceOp::kSum ? T(k) : op == ReduceOp::kMax ? T(v - k) : T(v + k);
        } else {
          const double k = op == ReduceOp::kSum ? uniform(rng, -2.0, 2.0) : uniform(rng, 0.25, 3.0);
          x = op == ReduceOp::kSum ? T(k) : op == ReduceOp::kMax ? T(v - k) : T(v + k);
        }
        pieces[r].as<T>()[g] = x;
        rest = wrapping_add(rest, x);
      }
      pieces[holder].as<T>()[g] = op == ReduceOp::kSum ? T(v - rest) : v;
    }
  });
  return pieces;
}

// ---------------------------------------------------------------------------------------------
// One trial of one signature.

enum class Outcome { kPass, kFail, kInapplicable };
struct TrialResult {
  Outcome outcome;
  std::string detail;
};

template <class T>
std::string value_text(T v) {
  std::ostringstream s;
  s.precision(std::is_same_v<T, float> ? 9 : 17);
  s << +v;
  return s.str();
}

template <class T>
bool close(T got, T expected) {
  if constexpr (std::is_integral_v<T>) {
    return got == expected;
  } else {
    if (std::isnan(expected)) return std::isnan(got);
    if (std::isnan(got)) return false;
    if (std::isinf(expected)) return got == expected;
    const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-9;
    return std::abs(static_cast<double>(got) - static_cast<double>(expected)) <=
           tol * (1.0 + std::abs(static_cast<double>(expected)));
  }
}

template <class T>
T reduce2(ReduceOp op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  switch (op) {
    case ReduceOp::kSum: return wrapping_add(a, b);
    case ReduceOp::kMax: return a < b ? b : a;
    case ReduceOp::kMin: return b < a ? b : a;
  }
  return a;
}

// Combines the per-rank outputs per `out` and compares with the reference; "" when they agree.
std::string combine_and_compare(const std::vector<Buffer>& outs, const Sbp& out, const Buffer& ref) {
  return with_dtype(ref.dtype, [&]<class T>(T) -> std::string {
    const T* expected = ref.as<T>();
    auto mismatch = [&](const std::string& where, int64_t g, T got) {
      return where + ": element " + std::to_string(g) + " of the whole output: got " + value_text(got) +
             ", expected " + value_text(expected[g]);
    };
    if (out.is_broadcast()) {
      for (int64_t r = 0; r < kRanks; ++r)
        for (int64_t g = 0; g < ref.numel(); ++g)
          if (!close(outs[r].as<T>()[g], expected[g])) return mismatch("rank " + std::to_string(r) + "'s B piece", g, outs[r].as<T>()[g]);
      return "";
    }
    if (out.is_partial()) {
      for (int64_t g = 0; g < ref.numel(); ++g) {
        T acc = outs[0].as<T>()[g];
        std::string pieces = value_text(acc);
        for (int64_t r = 1; r < kRanks; ++r) {
          acc = reduce2(out.reduce_op(), acc, outs[r].as<T>()[g]);
          pieces += ", " + value_text(outs[r].as<T>()[g]);
        }
        if (!close(acc, expected[g])) return mismatch("reduced pieces (" + pieces + ")", g, acc);
      }
      return "";
    }
    // S: place every rank's piece at its box.
    std::vector<int64_t> strides = contiguous_strides(ref.shape);
    for (int64_t r = 0; r < kRanks; ++r) {
      const Buffer& p = outs[r];
      if (p.numel() == 0) continue;
      std::vector<int64_t> idx(p.box.begin);
      for (int64_t i = 0; i < p.numel(); ++i) {
        int64_t g = 0;
        for (size_t k = 0; k < idx.size(); ++k) g += idx[k] * strides[k];
        if (!close(p.as<T>()[i], expected[g])) return mismatch("rank " + std::to_string(r) + "'s piece " + p.box.to_string(), g, p.as<T>()[i]);
        for (int64_t k = static_cast<int64_t>(idx.size()) - 1; k >= 0 && ++idx[k] == p.box.end[k]; --k) idx[k] = p.box.begin[k];
      }
    }
    return "";
  });
}

bool fits(const Sbp& s, const Shape& shape) { return !s.is_split() || (s.axis() >= 0 && s.axis() < shape.ndim()); }

NdSignature nd_of(const Signature& sig) {
  NdSignature nd{{}, NdSbp(sig.output)};
  for (const Sbp& s : sig.inputs) nd.inputs.emplace_back(s);
  return nd;
}

// guard: skip (kInapplicable) when shape inference on a rank's pieces fails or disagrees with
// its output box (the search's combinations may cut inputs inconsistently; declared signatures
// run unguarded, since kernels may read their pieces' boxes and global metas).
TrialResult check_trial(const OpEntry& op, const MetaCase& mc, size_t case_index, const Signature& sig, int trial,
                        bool guard) {
  std::vector<TensorMeta> metas;
  for (const InputSpec& in : mc.inputs) metas.push_back(in.meta);
  const TensorMeta out_meta = op.schema->infer(metas, mc.attrs);
  const Scalar scalar = mc.scalars.empty() ? Scalar{} : mc.scalars[trial % mc.scalars.size()];
  const Trial kind = trial < kLopsidedTrials ? Trial::kLopsided : Trial::kIdentity;
  Rng rng(0x5eed0000ull + 7919ull * case_index + 104729ull * static_cast<uint64_t>(trial) +
          std::hash<std::string>()(op.name));

  std::vector<Buffer> wholes;
  for (const InputSpec& in : mc.inputs) {
    Buffer w = allocate(in.meta.dtype, full_box(in.meta.shape));
    with_dtype(in.meta.dtype, [&]<class T>(T) {
      for (int64_t g = 0; g < w.numel(); ++g) w.as<T>()[g] = draw<T>(in, rng);
      if (trial % 2 == 1 && w.numel() >= 2) {
        w.as<T>()[0] = extreme<T>(in, true);
        w.as<T>()[1] = extreme<T>(in, false);
      }
    });
    wholes.push_back(std::move(w));
  }

  // The reference: the kernel on the whole tensors.
  Buffer ref = allocate(out_meta.dtype, full_box(out_meta.shape));
  {
    poison(ref);
    std::vector<LocalInput> locals;
    for (size_t i = 0; i < wholes.size(); ++i) locals.push_back({wholes[i].bytes.data(), wholes[i].shape, wholes[i].box, &metas[i]});
    NdSignature all_b = nd_of(uniform_signature(metas.size(), sbp::broadcast));
    KernelArgs args{mc.attrs, scalar, locals, ref.bytes.data(), ref.shape, ref.box, out_meta, all_b};
    op.kernel(out_meta.dtype, args);
  }

  std::vector<std::vector<Buffer>> pieces;  // [input][rank]
  for (size_t i = 0; i < wholes.size(); ++i) pieces.push_back(make_pieces(wholes[i], sig.inputs[i], kind, rng));

  const NdSignature nd = nd_of(sig);
  std::vector<Buffer> outs;
  for (int64_t r = 0; r < kRanks; ++r) {
    Buffer out = allocate(out_meta.dtype, rank_box(out_meta.shape, sig.output, r));
    if (guard) {
      std::vector<TensorMeta> local_metas;
      for (size_t i = 0; i < wholes.size(); ++i) local_metas.push_back({pieces[i][r].shape, metas[i].dtype});
      try {
        if (!(op.schema->infer(local_metas, mc.attrs).shape == out.shape)) return {Outcome::kInapplicable, ""};
      } catch (const spsd::Error&) {
        return {Outcome::kInapplicable, ""};
      }
    }
    poison(out);
    std::vector<LocalInput> locals;
    for (size_t i = 0; i < wholes.size(); ++i)
      locals.push_back({pieces[i][r].bytes.data(), pieces[i][r].shape, pieces[i][r].box, &metas[i]});
    KernelArgs args{mc.attrs, scalar, locals, out.bytes.data(), out.shape, out.box, out_meta, nd};
    try {
      op.kernel(out_meta.dtype, args);
    } catch (const spsd::Error& e) {
      return {Outcome::kFail, "the kernel threw on rank " + std::to_string(r) + ": " + e.what()};
    }
    outs.push_back(std::move(out));
  }
  std::string diff = combine_and_compare(outs, sig.output, ref);
  if (diff.empty()) return {Outcome::kPass, ""};
  return {Outcome::kFail, std::string(kind == Trial::kIdentity ? "identity-padding" : "lopsided") + " trial " +
                              std::to_string(trial) + (mc.scalars.empty() ? "" : " (scalar " + value_text(scalar.f) + "/" + std::to_string(scalar.i) + ")") +
                              ": " + diff};
}

std::string label(const OpEntry& op, const MetaCase& mc, const Signature& sig) {
  return op.name + " " + sig.to_string() + " for " + mc.text();
}

// Whether sig holds on every trial (and applies at all).
bool holds(const OpEntry& op, const MetaCase& mc, size_t case_index, const Signature& sig) {
  bool applied = false;
  for (int t = 0; t < kTrials; ++t) {
    TrialResult r = check_trial(op, mc, case_index, sig, t, true);
    if (r.outcome == Outcome::kFail) return false;
    if (r.outcome == Outcome::kPass) applied = true;
  }
  return applied;
}

std::vector<Sbp> sbp_options(int64_t ndim) {
  std::vector<Sbp> options;
  for (int64_t i = 0; i < ndim; ++i) options.push_back(sbp::split(i));
  options.insert(options.end(), {sbp::broadcast, sbp::partial_sum, sbp::partial_max, sbp::partial_min});
  return options;
}

// Every (input Sbps, output Sbp) combination for these metas, input 0 most significant.
std::vector<Signature> all_signatures(const std::vector<TensorMeta>& metas, const Shape& out) {
  std::vector<std::vector<Sbp>> options;
  for (const TensorMeta& m : metas) options.push_back(sbp_options(m.shape.ndim()));
  options.push_back(sbp_options(out.ndim()));
  std::vector<Signature> all;
  std::vector<size_t> pick(options.size(), 0);
  for (;;) {
    Signature s;
    for (size_t i = 0; i + 1 < options.size(); ++i) s.inputs.push_back(options[i][pick[i]]);
    s.output = options.back()[pick.back()];
    all.push_back(std::move(s));
    int64_t a = static_cast<int64_t>(options.size()) - 1;
    while (a >= 0 && ++pick[a] == options[a].size()) pick[a--] = 0;
    if (a < 0) return all;
  }
}

std::vector<TensorMeta> metas_of(const MetaCase& mc) {
  std::vector<TensorMeta> metas;
  for (const InputSpec& in : mc.inputs) metas.push_back(in.meta);
  return metas;
}

bool declared_usable(const OpEntry& op, const MetaCase& mc, const std::vector<TensorMeta>& metas, const TensorMeta& out,
                     const Signature& sig) {
  for (size_t i = 0; i < metas.size(); ++i)
    if (!fits(sig.inputs[i], metas[i].shape)) return false;
  if (!fits(sig.output, out.shape)) return false;
  return !op.schema->valid || op.schema->valid(metas, mc.attrs, kMesh, nd_of(sig));
}

// The declared table's problems for every meta case of op: a failing signature, a table that
// does not end with the all-B signature, a signature declared twice.
struct DeclaredReport {
  std::vector<std::string> failures;
  int64_t checked = 0, trials = 0;
};
DeclaredReport check_declared(const OpEntry& op) {
  DeclaredReport rep;
  for (size_t c = 0; c < op.cases.size(); ++c) {
    const MetaCase& mc = op.cases[c];
    const std::vector<TensorMeta> metas = metas_of(mc);
    const TensorMeta out = op.schema->infer(metas, mc.attrs);
    const std::vector<Signature> table = op.schema->signatures(metas, mc.attrs);
    const Signature all_b = uniform_signature(metas.size(), sbp::broadcast);
    if (table.empty() || !(table.back() == all_b))
      rep.failures.push_back(op.name + " for " + mc.text() + ": the table does not end with the all-B signature " +
                             all_b.to_string());
    for (size_t i = 0; i < table.size(); ++i)
      for (size_t j = i + 1; j < table.size(); ++j)
        if (table[i] == table[j])
          rep.failures.push_back(op.name + " for " + mc.text() + ": " + table[i].to_string() + " is declared twice");
    for (const Signature& sig : table) {
      if (!declared_usable(op, mc, metas, out, sig)) continue;
      ++rep.checked;
      for (int t = 0; t < kTrials; ++t) {
        ++rep.trials;
        TrialResult r = check_trial(op, mc, c, sig, t, false);
        if (r.outcome == Outcome::kFail) {
          rep.failures.push_back("declared signature fails: " + label(op, mc, sig) + ": " + r.detail);
          break;
        }
      }
    }
  }
  return rep;
}

// The valid combinations op's table lacks: "add (P(max), B) -> P(max)" -> the metas it holds for.
struct MissingReport {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> metas;
  int64_t searched = 0;
};
void search_missing(const OpEntry& op, MissingReport& rep) {
  for (size_t c = 0; c < op.cases.size(); ++c) {
    const MetaCase& mc = op.cases[c];
    const std::vector<TensorMeta> metas = metas_of(mc);
    const TensorMeta out = op.schema->infer(metas, mc.attrs);
    const std::vector<Signature> table = op.schema->signatures(metas, mc.attrs);
    for (const Signature& sig : all_signatures(metas, out.shape)) {
      if (std::find(table.begin(), table.end(), sig) != table.end()) continue;
      // bool has no partial layouts: nothing to search there.
      bool bool_partial = !allows_partial(out.dtype) && sig.output.is_partial();
      for (size_t i = 0; i < metas.size(); ++i)
        bool_partial = bool_partial || (!allows_partial(metas[i].dtype) && sig.inputs[i].is_partial());
      if (bool_partial) continue;
      if (op.schema->valid && !op.schema->valid(metas, mc.attrs, kMesh, nd_of(sig))) continue;
      ++rep.searched;
      if (!holds(op, mc, c, sig)) continue;
      if (sig.output == sbp::partial_max || sig.output == sbp::partial_min) {
        Signature as_b = sig;
        as_b.output = sbp::broadcast;
        if (std::find(table.begin(), table.end(), as_b) != table.end() || holds(op, mc, c, as_b)) continue;
      }
      const std::string key = op.name + " " + sig.to_string();
      if (!rep.metas.count(key)) rep.order.push_back(key);
      rep.metas[key].push_back(mc.text());
    }
  }
}

// Self-check fixtures: relu with a table cut down to all-B (the search must find what is
// missing) and relu with a wrong partial rule (the declared check must fail it).
template <bool Broken>
struct ReluVariant : spsd::detail::UnaryDef<UnaryOp::kRelu> {
  static constexpr std::string_view name = Broken ? "relu_broken" : "relu_only_b";
  static std::vector<Signature> signatures(std::span<const TensorMeta>, const OpAttrs&) {
    std::vector<Signature> t;
    if (Broken) t.push_back(uniform_signature(1, sbp::partial_sum));
    t.push_back(uniform_signature(1, sbp::broadcast));
    return t;
  }
};

}  // namespace

TEST_CASE("validator: every declared 1-d signature holds on lopsided partial values", "[validator]") {
  std::vector<std::string> failures;
  int64_t checked = 0, trials = 0;
  for (const OpEntry& op : registry()) {
    DeclaredReport rep = check_declared(op);
    failures.insert(failures.end(), rep.failures.begin(), rep.failures.end());
    checked += rep.checked;
    trials += rep.trials;
  }
  std::printf("validator: %lld declared signatures checked (%lld trials) over %zu ops\n",
              static_cast<long long>(checked), static_cast<long long>(trials), registry().size());
  std::string report;
  for (const std::string& f : failures) report += f + "\n";
  INFO(report);
  CHECK(failures.empty());
}

TEST_CASE("validator: the declared signatures of the attention gradient ops hold", "[validator]") {
  std::vector<std::string> failures;
  int64_t checked = 0;
  for (const OpEntry& op : declared_only_registry()) {
    DeclaredReport rep = check_declared(op);
    failures.insert(failures.end(), rep.failures.begin(), rep.failures.end());
    checked += rep.checked;
  }
  std::string report;
  for (const std::string& f : failures) report += f + "\n";
  INFO(report);
  CHECK(failures.empty());
  CHECK(checked == 2 * 2 * 5);  // 2 ops x 2 cases x 5 signatures
}

TEST_CASE("validator: valid signatures the tables are missing (printed, not failed)", "[validator]") {
  MissingReport rep;
  for (const OpEntry& op : registry()) search_missing(op, rep);
  for (const std::string& key : rep.order) {
    const std::vector<std::string>& m = rep.metas[key];
    std::string metas;
    for (size_t i = 0; i < m.size() && i < 3; ++i) metas += (i ? "; " : "") + m[i];
    if (m.size() > 3) metas += "; and " + std::to_string(m.size() - 3) + " more";
    std::printf("missing valid signature: %s   [for %s]\n", key.c_str(), metas.c_str());
  }
  std::printf("validator search: %lld undeclared combinations checked, %zu valid ones missing from the tables\n",
              static_cast<long long>(rep.searched), rep.order.size());
  CHECK(rep.searched > 0);
}

TEST_CASE("validator: self-check on doctored tables", "[validator]") {
  const std::vector<MetaCase> cases = {{{{meta(Shape{5, 7}, DType::kFloat64)}}, {}, {}}};
  SECTION("a table of only B: the search finds the splits and the monotone partial rules") {
    MissingReport rep;
    search_missing(entry<ReluVariant<false>, double>(cases), rep);
    INFO(Catch::Detail::stringify(rep.order));
    CHECK(rep.order == std::vector<std::string>{"relu_only_b (S(0)) -> S(0)", "relu_only_b (S(1)) -> S(1)",
                                                "relu_only_b (P(max)) -> P(max)", "relu_only_b (P(min)) -> P(min)"});
  }
  SECTION("a wrong partial rule fails the declared check, naming op, signature and values") {
    DeclaredReport rep = check_declared(entry<ReluVariant<true>, double>(cases));
    REQUIRE(rep.failures.size() == 1);
    CHECK_THAT(rep.failures[0], Catch::Contains("relu_broken (P(sum)) -> P(sum) for (5, 7) float64") &&
                                    Catch::Contains("reduced pieces") && Catch::Contains("expected"));
  }
  SECTION("the real relu table passes and misses nothing") {
    const OpEntry relu = entry<spsd::detail::UnaryDef<UnaryOp::kRelu>, double>(cases);
    CHECK(check_declared(relu).failures.empty());
    MissingReport rep;
    search_missing(relu, rep);
    CHECK(rep.order.empty());
  }
}
