// User-defined ops (docs/custom_ops.md), with the example op examples/custom/bias_gelu.hpp:
// its differential test over every layout on simulated meshes (forward and gradients against
// the single-process result), its table through the rule validator, a planted wrong rule that
// the validator reports and that would give wrong results (and that validation on first
// dispatch, SPSD_CHECK_OPS, refuses on every rank), the name registry, a cpu-only op on a cuda
// target, the concepts call_op checks, and a backward reading an int64 scalar exactly.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>

#include "custom_op_suite.hpp"
#include "error_matchers.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using examples::BiasGelu;
using spsd_test::Failures;

namespace {

using spsd_test::PlantedPartialRule;

// And one that splits x's columns but keeps b whole: the kernel indexes b by the piece's column.
struct PlantedSplitRule : BiasGelu {
  static constexpr std::string_view name = "bias_gelu_planted_split";
  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    std::vector<Signature> t = BiasGelu::signatures(in, attrs);
    const int64_t last = in[0].shape.ndim() - 1;
    t.insert(t.begin(), Signature{{sbp::split(last), sbp::broadcast}, sbp::split(last)});
    return t;
  }
};

// A backward that gives b the gradient of x's shape (forgets sum_to).
struct WrongGradShape : BiasGelu {
  static constexpr std::string_view name = "bias_gelu_wrong_grad_shape";
  template <FloatingElement T>
  static void backward(const GradArgs<T>& a) {
    a.set(0, a.g());
    a.set(1, a.g());
  }
};

// Another op type that takes an existing name.
struct SecondBiasGelu : BiasGelu {};
struct NamedMatmul : BiasGelu {
  static constexpr std::string_view name = "matmul";
};

struct NoKernel {
  static constexpr std::string_view name = "no_kernel";
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) { return in[0]; }
  static std::vector<Signature> signatures(std::span<const TensorMeta>, const OpAttrs&) {
    return {uniform_signature(1, sbp::broadcast)};
  }
};

static_assert(GlobalOp<BiasGelu> && HasKernel<BiasGelu, float> && detail::HasBackward<BiasGelu>);
static_assert(GlobalOp<NoKernel> && !HasKernel<NoKernel, float> && !detail::HasBackward<NoKernel>);

TensorMeta meta(Shape s, DType t) { return {std::move(s), t}; }

// x (..., C) and b (C): C = 7 and 5 split unevenly on the validator's 3 ranks.
std::vector<ValidationCase> bias_gelu_cases() {
  std::vector<ValidationCase> cases;
  for (DType t : {DType::kFloat32, DType::kFloat64})
    for (const Shape& s : {Shape{5, 7}, Shape{2, 4, 5}}) cases.push_back({{{meta(s, t)}, {meta(Shape{s[s.ndim() - 1]}, t)}}, {}, {}});
  return cases;
}

}  // namespace

TEST_CASE("custom op: bias_gelu of every layout equals the single-process result, gradients too", "[custom-ops]") {
  for (const Shape& mesh : {Shape{1}, Shape{2}, Shape{4}, Shape{2, 2}}) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& mine) {
      spsd_test::run_custom_op_suite(spsd_test::mesh_placement(mesh), 1, mine);
    });
    INFO("mesh " << mesh << "\n" << f.report());
    CHECK(f.empty());
  }
}

TEST_CASE("custom op: the validator passes bias_gelu's table", "[custom-ops]") {
  const ValidationReport r = validate_op<BiasGelu, float, double>(bias_gelu_cases());
  std::printf("bias_gelu validator report:\n%s", r.to_string().c_str());  // missing rows show in the log
  INFO(r.to_string());
  CHECK(r.ok());
  CHECK(r.checked == 2 * (3 + 4));  // two dtypes; x of 2 axes: 3 signatures, of 3 axes: 4
  CHECK(r.searched > 0);
}

TEST_CASE("custom op: a planted wrong rule is reported by the validator, and would give wrong results",
          "[custom-ops]") {
  SECTION("P(sum) through gelu") {
    const ValidationReport r =
        validate_op<PlantedPartialRule, float, double>(bias_gelu_cases(), {.search_missing = false});
    INFO(r.to_string());
    REQUIRE(r.failures.size() == 4);  // every case
    CHECK_THAT(r.failures[0], Catch::Contains("bias_gelu_planted_partial (P(sum), B) -> P(sum) for (5, 7) float32") &&
                                  Catch::Contains("reduced pieces") && Catch::Contains("expected"));
    CHECK_FALSE(r.ok());
    // What the validator prevents: a P(sum) x takes the planted rule (no boxing), and the
    // reduced result is not gelu(x + b). Validation on first dispatch would refuse the op.
    const bool validating = op_validation();
    set_op_validation(false);
    Failures f = spsd_test::on_simulated_ranks(2, [](Failures& mine) {
      const Placement p = spsd_test::mesh_placement(Shape{2});
      const Tensor<double> xv = spsd_test::reference_tensor<double>(Shape{4, 3});
      const Tensor<double> bv = Tensor<double>::from_vector(Shape{3}, {0.5, -0.25, 1.0});
      const auto b = from_host(bv, p, NdSbp(sbp::broadcast));
      const std::vector<double> planted =
          call_op<PlantedPartialRule>(spsd_test::build_layout(xv, {p, NdSbp(sbp::partial_sum)}), b).full().to_vector();
      const std::vector<double> right = examples::bias_gelu(from_host(xv, p, NdSbp(sbp::broadcast)), b).full().to_vector();
      double worst = 0;
      for (size_t i = 0; i < right.size(); ++i) worst = std::max(worst, std::abs(planted[i] - right[i]));
      if (worst < 1e-3) mine.add("the planted rule gave the right result: the test shows nothing");
    });
    set_op_validation(validating);
    INFO(f.report());
    CHECK(f.empty());
  }
  SECTION("a split x with a whole b") {
    const ValidationReport r = validate_op<PlantedSplitRule, float, double>(bias_gelu_cases(), {.search_missing = false});
    INFO(r.to_string());
    REQUIRE(r.failures.size() == 4);
    CHECK_THAT(r.to_string(), Catch::Contains("declared signature fails: bias_gelu_planted_split (S(1), B) -> S(1) for "
                                              "(5, 7) float32, (7,) float32"));
  }
}

TEST_CASE("custom op: two op types with one name are an Error naming it", "[custom-ops]") {
  (void)op_schema<BiasGelu>();
  (void)op_schema<detail::MatmulDef>();
  simulate(1, [] {
    const Placement p = spsd_test::mesh_placement(Shape{1});
    const auto x = zeros<float>(Shape{2, 3}, p, NdSbp(sbp::broadcast)), b = zeros<float>(Shape{3}, p, NdSbp(sbp::broadcast));
    CHECK_THROWS_WITH(call_op<SecondBiasGelu>(x, b), Catch::Contains("bias_gelu") &&
                                                         Catch::Contains("two different op types are named \"bias_gelu\""));
    CHECK_THROWS_WITH(call_op<NamedMatmul>(x, b), Catch::Contains("two different op types are named \"matmul\""));
    CHECK_NOTHROW(examples::bias_gelu(x, b));  // the first type keeps its name
  });
}

TEST_CASE("custom op: a cpu-only op on a cuda target is an Error naming it", "[custom-ops]") {
  const TensorMeta xm = meta(Shape{2, 3}, DType::kFloat32), bm = meta(Shape{3}, DType::kFloat32);
  std::vector<float> x(6, 1.0f), b(3, 0.5f), y(6);
  const LocalInput in[] = {{x.data(), xm.shape, full_box(xm.shape), &xm}, {b.data(), bm.shape, full_box(bm.shape), &bm}};
  const NdSignature sig{{NdSbp(sbp::broadcast), NdSbp(sbp::broadcast)}, NdSbp(sbp::broadcast)};
  const Box out_box = full_box(xm.shape);
  const KernelArgs on_cuda{{}, {}, in, y.data(), xm.shape, out_box, xm, sig, kernel::Target{DeviceType::kCUDA, nullptr}};
  CHECK_THROWS_WITH((detail::run_kernel<BiasGelu, float>(on_cuda)),
                    Catch::StartsWith("bias_gelu") && Catch::Contains("has no cuda kernel"));
  const KernelArgs on_cpu{{}, {}, in, y.data(), xm.shape, out_box, xm, sig, kernel::Target{}};
  detail::run_kernel<BiasGelu, float>(on_cpu);
  CHECK(y[0] == Approx(1.5 * 0.5 * (1 + std::erf(1.5 / std::sqrt(2.0)))));
}

TEST_CASE("custom op: a backward that sets a gradient of the wrong shape is an Error naming the op", "[custom-ops]") {
  simulate(1, [] {
    const Placement p = spsd_test::mesh_placement(Shape{1});
    auto x = ones<float>(Shape{2, 3}, p, NdSbp(sbp::broadcast)), b = ones<float>(Shape{3}, p, NdSbp(sbp::broadcast));
    x.requires_grad_();
    b.requires_grad_();
    CHECK_THROWS_WITH(backward(sum(call_op<WrongGradShape>(x, b))),
                      Catch::StartsWith("bias_gelu_wrong_grad_shape: backward: the gradient of input 1 must be (3,) "
                                        "float32 like the input, got (2, 3) float32"));
  });
}

TEST_CASE("custom op: with SPSD_CHECK_OPS a wrong rule is an Error at the op's first dispatch, on every rank",
          "[custom-ops]") {
  const bool validating = op_validation();
  set_op_validation(true);
  for (const Shape& mesh : {Shape{1}, Shape{2}, Shape{2, 2}}) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& mine) {
      spsd_test::check_planted_rule_refused(spsd_test::mesh_placement(mesh), mine);
    });
    INFO("mesh " << mesh << "\n" << f.report());
    CHECK(f.empty());
  }
  CHECK(detail::validated_op_count() >= 2);  // the planted op and bias_gelu, at least
  set_op_validation(validating);
}

namespace {
// y = x; its backward reads the seed, an int64 scalar operand beyond float's 24 bits: exactly
// with scalar_as, rounded with scalar() (which computes in float for the 16-bit types).
constexpr int64_t kSeed = (int64_t{1} << 40) + 1;
struct SeededIdentity {
  static constexpr std::string_view name = "seeded_identity";
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) { return in[0]; }
  static std::vector<Signature> signatures(std::span<const TensorMeta>, const OpAttrs&) {
    return {uniform_signature(1, sbp::split(0)), uniform_signature(1, sbp::broadcast)};
  }
  template <Element T>
  static void cpu_kernel(const KernelArgs& k) {
    std::copy_n(k.in<T>(0), k.out_shape.numel(), k.out_as<T>());
  }
  template <FloatingElement T>
  static void backward(const GradArgs<T>& a) {
    const bool exact = a.template scalar_as<int64_t>() == kSeed && a.template scalar_as<uint64_t>() == uint64_t(kSeed);
    const bool rounded = static_cast<double>(a.scalar()) != static_cast<double>(kSeed);
    a.set(0, a.g() * compute_t<T>(exact ? (rounded ? 1 : 2) : 3));
  }
};
}  // namespace

TEST_CASE("custom op: a backward reads an int64 scalar operand exactly with scalar_as", "[custom-ops]") {
  const Failures failures = spsd_test::on_simulated_ranks(2, [](Failures& f) {
    const Placement p = spsd_test::mesh_placement(Shape{2});
    auto x = ones<bfloat16>(Shape{4}, p, NdSbp(sbp::split(0)));
    x.requires_grad_();
    backward(sum(call_op<SeededIdentity>(OpAttrs{}, Scalar::of(kSeed), x)));
    const std::vector<bfloat16> g = x.grad().full().to_vector();
    // 1: exact through scalar_as, rounded through scalar() (what a seed would suffer).
    for (const bfloat16 v : g)
      if (static_cast<float>(v) != 1.0f) f.add("rank " + std::to_string(rank()) + ": gradient " + spsd_test::show(static_cast<float>(v)) + ", expected 1");
  });
  INFO(failures.report());
  CHECK(failures.empty());
}
