// The rule validator (op/rule_validator.hpp, in the library) over every op of the library: each
// declared 1-d signature must hold (lopsided partial pieces, identity padding, uneven boxes), and
// the valid combinations the tables lack are printed (not failed):
//   missing valid signature: log (P(min)) -> P(min)   [for (5, 7) float64]
// so gaps in the tables show in the test log.
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

// The one line per op: its Def, the dtypes to instantiate its kernel for (default: float,
// double, int32, int64), and representative input metas.
template <class Def, class... Ts>
ValidatedOp entry(std::vector<ValidationCase> cases) {
  return validated_op<Def, Ts...>(std::move(cases));
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

std::vector<ValidationCase> binary_cases(bool divisor_nonzero) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {Shape{5, 7}, Shape{5, 7}}, {Shape{5, 7}, Shape{7}}, {Shape{5, 1}, Shape{1, 7}}, {Shape{3, 1, 4}, Shape{2, 1}}};
  std::vector<ValidationCase> cases;
  for (DType t : kAll)
    for (const auto& [a, b] : shapes)
      cases.push_back({{{meta(a, t)}, {meta(b, t), divisor_nonzero ? InputDomain::kNonzero : InputDomain::kAny}}, {}, {}});
  return cases;
}

std::vector<ValidationCase> scalar_cases(InputDomain x_domain) {
  std::vector<ValidationCase> cases;
  for (DType t : kAll)
    for (const Shape& s : {Shape{5, 7}, Shape{3, 1, 4}}) cases.push_back({{{meta(s, t), x_domain}}, {}, scalars_for(t)});
  return cases;
}

std::vector<ValidationCase> unary_cases(UnaryOp op) {
  const InputDomain d = op == UnaryOp::kLog || op == UnaryOp::kSqrt || op == UnaryOp::kRsqrt ? InputDomain::kPositive : InputDomain::kAny;
  std::vector<ValidationCase> cases;
  for (DType t : kAll)
    if (kernel::cpu::unary_supports(op, t))
      for (const Shape& s : {Shape{5, 7}, Shape{3, 1, 4}}) cases.push_back({{{meta(s, t), d}}, {}, {}});
  return cases;
}

std::vector<ValidationCase> matmul_cases() {
  const std::vector<std::pair<Shape, Shape>> shapes = {{Shape{5, 7}, Shape{7, 3}},
                                                       {Shape{4, 6}, Shape{6, 5}},
                                                       {Shape{2, 3, 4}, Shape{4, 5}},
                                                       {Shape{2, 1, 3, 4}, Shape{5, 4, 6}}};
  std::vector<ValidationCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64})
    for (const auto& [a, b] : shapes) cases.push_back({{{meta(a, t)}, {meta(b, t)}}, {}, {}});
  return cases;
}

// attrs [keepdim, sorted axes...]
std::vector<ValidationCase> reduce_cases(const std::vector<DType>& dtypes) {
  std::vector<ValidationCase> cases;
  for (DType t : dtypes) {
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {0, 1}, {}});
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {1, 0}, {}});
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {0, 0, 1}, {}});
    cases.push_back({{{meta(Shape{3, 5, 4}, t)}}, {0, 0, 2}, {}});
    cases.push_back({{{meta(Shape{3, 5, 4}, t)}}, {1, 1}, {}});
  }
  return cases;
}

std::vector<ValidationCase> softmax_cases() {
  std::vector<ValidationCase> cases;
  for (DType t : kFloats) {
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {1}, {}});
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {0}, {}});
    cases.push_back({{{meta(Shape{3, 5, 4}, t)}}, {1}, {}});
  }
  return cases;
}

std::vector<ValidationCase> embedding_cases() {
  std::vector<ValidationCase> cases;
  for (DType t : kFloats) {
    cases.push_back({{{meta(Shape{7, 4}, t)}, {meta(Shape{5}, DType::kInt64), InputDomain::kIndex, 7}}, {}, {}});
    cases.push_back({{{meta(Shape{5, 4}, t)}, {meta(Shape{2, 4}, DType::kInt64), InputDomain::kIndex, 5}}, {}, {}});
  }
  return cases;
}

std::vector<ValidationCase> pick_cases() {
  std::vector<ValidationCase> cases;
  for (DType t : kFloats)
    cases.push_back({{{meta(Shape{5, 7}, t)}, {meta(Shape{5}, DType::kInt64), InputDomain::kIndex, 7}}, {}, {}});
  return cases;
}

std::vector<ValidationCase> permute_cases(bool transpose) {
  std::vector<ValidationCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64}) {
    cases.push_back({{{meta(Shape{5, 7}, t)}}, transpose ? OpAttrs{0, 1} : OpAttrs{1, 0}, {}});
    cases.push_back({{{meta(Shape{3, 5, 4}, t)}}, transpose ? OpAttrs{0, 2} : OpAttrs{2, 0, 1}, {}});
  }
  return cases;
}

std::vector<ValidationCase> reshape_cases() {
  std::vector<ValidationCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64}) {
    cases.push_back({{{meta(Shape{6, 4}, t)}}, {24}, {}});
    cases.push_back({{{meta(Shape{6, 4}, t)}}, {3, 8}, {}});
    cases.push_back({{{meta(Shape{3, 5, 4}, t)}}, {15, -1}, {}});
    cases.push_back({{{meta(Shape{4, 6}, t)}}, {2, 2, 6}, {}});
  }
  return cases;
}

std::vector<ValidationCase> slice_cases() {  // attrs [axis, begin, end]
  std::vector<ValidationCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64}) {
    cases.push_back({{{meta(Shape{5, 7}, t)}}, {1, 2, 6}, {}});
    cases.push_back({{{meta(Shape{6, 4}, t)}}, {0, 1, 5}, {}});
  }
  return cases;
}

std::vector<ValidationCase> concat_cases() {  // attrs [axis]
  std::vector<ValidationCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64}) {
    cases.push_back({{{meta(Shape{5, 3}, t)}, {meta(Shape{5, 4}, t)}}, {1}, {}});
    cases.push_back({{{meta(Shape{2, 7}, t)}, {meta(Shape{3, 7}, t)}, {meta(Shape{1, 7}, t)}}, {0}, {}});
  }
  return cases;
}

// scaled_dot_product_attention and its lse and gradient ops: inputs (q, k, v, out, g, lse),
// the first `inputs` of them; attrs [causal]. seq_q 5 and seq_k 7 split unevenly on 3 ranks,
// and the causal mask meets query pieces that start past position 0.
std::vector<ValidationCase> attention_cases(size_t inputs) {
  std::vector<ValidationCase> cases;
  for (const auto& [t, causal] : {std::pair{DType::kFloat32, 0}, std::pair{DType::kFloat64, 1}}) {
    const TensorMeta q = meta(Shape{2, 3, 5, 4}, t), kv = meta(Shape{2, 3, 7, 4}, t), lse = meta(Shape{2, 3, 5}, t);
    std::vector<ValidationInput> in = {{q}, {kv}, {kv}, {q}, {q}, {lse}};
    in.resize(inputs);
    cases.push_back({std::move(in), {causal}, {}});
  }
  return cases;
}

// Ops whose undeclared combinations are too many to search (6 inputs: 8^6 input layouts):
// only their declared signatures are checked.
const std::vector<ValidatedOp>& declared_only_registry() {
  using namespace spsd::detail::attention_ops;
  static const std::vector<ValidatedOp> ops = {
      entry<AttentionGradDef<false>, float, double>(attention_cases(6)),
      entry<AttentionGradDef<true>, float, double>(attention_cases(6)),
  };
  return ops;
}

// layer_norm / rms_norm and their backward ops: x (..., C), then weight (C) [, bias (C)] or,
// for the backward ops, g like x; the scalar is eps. params: how many of the (C) parameters
// follow x; with_g: a g like x follows (the backward ops).
std::vector<ValidationCase> norm_cases(int params, bool with_g) {
  std::vector<ValidationCase> cases;
  for (DType t : kFloats)
    for (const Shape& s : {Shape{5, 7}, Shape{3, 2, 4}, Shape{6}}) {
      ValidationCase c{{{meta(s, t)}}, {}, {Scalar::of(1e-5), Scalar::of(0.5)}};
      for (int i = 0; i < params; ++i) c.inputs.push_back({meta(Shape{s[s.ndim() - 1]}, t)});
      if (with_g) c.inputs.push_back({meta(s, t)});
      cases.push_back(std::move(c));
    }
  return cases;
}

// dropout: attrs [the bits of p], the scalar is the seed.
std::vector<ValidationCase> dropout_cases() {
  std::vector<ValidationCase> cases;
  for (DType t : kFloats)
    for (const Shape& s : {Shape{5, 7}, Shape{3, 1, 4}})
      cases.push_back({{{meta(s, t)}}, {std::bit_cast<int64_t>(0.4)}, {Scalar::of<int64_t>(7), Scalar::of<int64_t>(8)}});
  return cases;
}

// ---- issue 25: pow, comparisons, masks, argmax keys ----
std::vector<ValidationCase> pow_cases() {
  std::vector<ValidationCase> cases;
  for (DType t : kFloats)
    for (const auto& [a, b] : std::vector<std::pair<Shape, Shape>>{{Shape{5, 7}, Shape{5, 7}}, {Shape{5, 1}, Shape{1, 7}}})
      cases.push_back({{{meta(a, t), InputDomain::kPositive}, {meta(b, t)}}, {}, {}});
  return cases;
}

std::vector<ValidationCase> pow_scalar_cases() {
  std::vector<ValidationCase> cases;
  for (DType t : kFloats)
    for (const Shape& s : {Shape{5, 7}, Shape{3, 1, 4}})
      cases.push_back({{{meta(s, t), InputDomain::kPositive}}, {}, {Scalar::of(2.0), Scalar::of(-0.5), Scalar::of(1.5)}});
  return cases;
}

std::vector<ValidationCase> compare_cases(const std::vector<DType>& dtypes, bool with_scalars) {
  std::vector<ValidationCase> cases;
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

std::vector<ValidationCase> where_cases() {
  std::vector<ValidationCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64, DType::kBool}) {
    cases.push_back({{{meta(Shape{5, 7}, DType::kBool)}, {meta(Shape{5, 7}, t)}, {meta(Shape{5, 7}, t)}}, {}, {}});
    cases.push_back({{{meta(Shape{5, 1}, DType::kBool)}, {meta(Shape{7}, t)}, {meta(Shape{5, 7}, t)}}, {}, {}});
  }
  return cases;
}

// attrs [value == 0]; the scalars agree with it.
std::vector<ValidationCase> masked_fill_cases() {
  std::vector<ValidationCase> cases;
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

std::vector<ValidationCase> extreme_keys_cases() {  // attrs [axis]
  std::vector<ValidationCase> cases;
  for (DType t : {DType::kFloat64, DType::kInt64}) {
    cases.push_back({{{meta(Shape{5, 7}, t)}, {meta(Shape{5, 1}, t)}}, {1}, {}});
    cases.push_back({{{meta(Shape{5, 7}, t)}, {meta(Shape{1, 7}, t)}}, {0}, {}});
  }
  return cases;
}

const std::vector<ValidatedOp>& registry() {
  using namespace spsd::detail;
  static const std::vector<ValidatedOp> ops = {
      entry<BinaryDef<BinaryOp::kAdd>>(binary_cases(false)),
      entry<BinaryDef<BinaryOp::kSub>>(binary_cases(false)),
      entry<BinaryDef<BinaryOp::kMul>>(binary_cases(false)),
      entry<BinaryDef<BinaryOp::kDiv>>(binary_cases(true)),
      entry<ScalarDef<BinaryOp::kAdd, false>>(scalar_cases(InputDomain::kAny)),
      entry<ScalarDef<BinaryOp::kSub, false>>(scalar_cases(InputDomain::kAny)),
      entry<ScalarDef<BinaryOp::kSub, true>>(scalar_cases(InputDomain::kAny)),
      entry<ScalarDef<BinaryOp::kMul, false>>(scalar_cases(InputDomain::kAny)),
      entry<ScalarDef<BinaryOp::kDiv, false>>(scalar_cases(InputDomain::kAny)),
      entry<ScalarDef<BinaryOp::kDiv, true>>(scalar_cases(InputDomain::kNonzero)),
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

// relu_broken with an attribute the op prints its own way: reports must quote attrs_text.
struct ReluBrokenWithP : ReluVariant<true> {
  static constexpr std::string_view name = "relu_broken_with_p";
  static std::string attrs_text(const OpAttrs& attrs) { return "p=" + std::to_string(std::bit_cast<double>(attrs[0])); }
};

}  // namespace

// The declared checks of every op (no search), the failures joined.
ValidationReport declared(const std::vector<ValidatedOp>& ops) {
  ValidationReport all;
  for (const ValidatedOp& op : ops) {
    ValidationReport r = validate(op, {.search_missing = false});
    all.failures.insert(all.failures.end(), r.failures.begin(), r.failures.end());
    all.checked += r.checked;
    all.trials += r.trials;
  }
  return all;
}

std::vector<std::string> missing_names(const ValidationReport& r) {
  std::vector<std::string> names;
  for (const MissingSignature& m : r.missing) names.push_back(m.signature);
  return names;
}

TEST_CASE("validator: every declared 1-d signature holds on lopsided partial values", "[validator]") {
  const ValidationReport rep = declared(registry());
  std::printf("validator: %lld declared signatures checked (%lld trials) over %zu ops\n",
              static_cast<long long>(rep.checked), static_cast<long long>(rep.trials), registry().size());
  INFO(rep.to_string());
  CHECK(rep.ok());
}

TEST_CASE("validator: the declared signatures of the attention gradient ops hold", "[validator]") {
  const ValidationReport rep = declared(declared_only_registry());
  INFO(rep.to_string());
  CHECK(rep.ok());
  CHECK(rep.checked == 2 * 2 * 5);  // 2 ops x 2 cases x 5 signatures
}

TEST_CASE("validator: valid signatures the tables are missing (printed, not failed)", "[validator]") {
  ValidationReport all;
  for (const ValidatedOp& op : registry()) {
    ValidationReport r = validate(op);
    all.missing.insert(all.missing.end(), r.missing.begin(), r.missing.end());
    all.searched += r.searched;
  }
  for (const MissingSignature& m : all.missing) {
    std::string cases;
    for (size_t i = 0; i < m.cases.size() && i < 3; ++i) cases += (i ? "; " : "") + m.cases[i];
    if (m.cases.size() > 3) cases += "; and " + std::to_string(m.cases.size() - 3) + " more";
    std::printf("missing valid signature: %s   [for %s]\n", m.signature.c_str(), cases.c_str());
  }
  std::printf("validator search: %lld undeclared combinations checked, %zu valid ones missing from the tables\n",
              static_cast<long long>(all.searched), all.missing.size());
  CHECK(all.searched > 0);
}

TEST_CASE("validator: self-check on doctored tables", "[validator]") {
  const std::vector<ValidationCase> cases = {{{{meta(Shape{5, 7}, DType::kFloat64)}}, {}, {}}};
  SECTION("a table of only B: the search finds the splits and the monotone partial rules") {
    const ValidationReport rep = validate_op<ReluVariant<false>, double>(cases);
    INFO(rep.to_string());
    CHECK(rep.ok());
    CHECK(missing_names(rep) == std::vector<std::string>{"relu_only_b (S(0)) -> S(0)", "relu_only_b (S(1)) -> S(1)",
                                                         "relu_only_b (P(max)) -> P(max)",
                                                         "relu_only_b (P(min)) -> P(min)"});
  }
  SECTION("a wrong partial rule fails the declared check, naming op, signature and values") {
    const ValidationReport rep = validate_op<ReluVariant<true>, double>(cases, {.search_missing = false});
    REQUIRE(rep.failures.size() == 1);
    CHECK_THAT(rep.failures[0], Catch::Contains("relu_broken (P(sum)) -> P(sum) for (5, 7) float64") &&
                                    Catch::Contains("reduced pieces") && Catch::Contains("expected"));
    CHECK_THAT(rep.to_string(), Catch::Contains("1 failures"));
  }
  SECTION("the real relu table passes and misses nothing") {
    const ValidationReport rep = validate_op<spsd::detail::UnaryDef<UnaryOp::kRelu>, double>(cases);
    CHECK(rep.ok());
    CHECK(rep.missing.empty());
  }
}

TEST_CASE("validator: reports print the attributes as the op's attrs_text does", "[validator]") {
  const int64_t p_bits = std::bit_cast<int64_t>(0.4);
  const std::vector<ValidationCase> cases = {{{{meta(Shape{5, 7}, DType::kFloat64)}}, {p_bits}, {}}};
  const ValidationReport rep = validate_op<ReluBrokenWithP, double>(cases);
  INFO(rep.to_string());
  REQUIRE(rep.failures.size() == 1);
  CHECK_THAT(rep.failures[0], Catch::Contains("relu_broken_with_p (P(sum)) -> P(sum) for (5, 7) float64; p=0.400000"));
  CHECK_THAT(rep.to_string(), !Catch::Contains(std::to_string(p_bits)));  // not the bits of the double
  CHECK_THAT(rep.to_string(), Catch::Contains("[for (5, 7) float64; p=0.400000"));  // the missing rows' cases too
  CHECK(cases[0].text() == "(5, 7) float64; attrs [" + std::to_string(p_bits) + "]");  // without the op: the integers
}
