// Backward rules, one per global op, written with global ops: a gradient's layout follows from
// the signatures the resolver picks, exactly as a forward result's does. So a B weight used by
// S(0) activations gets x^T g with x^T S(1) and g S(0): matmul's S(k) x S(k) -> P(sum), a
// partial gradient, and nothing is communicated until the optimizer boxes it to B (all-reduce).
//
// A rule sees its node through GradArgs (autograd/grad_args.hpp: inputs x(i), output y(),
// incoming gradient g()) and sets the gradient of each input that wants one, as a user op's
// backward does. Gradients of inputs that numpy broadcasting
// stretched are summed back to the input's shape (sum_to).
//
// Compiled once, into the library, for the four floating types: as inline header code every
// program's every translation unit instantiated all of them (a 37-line test compiled in 36 s
// instead of 7).
#include <mutex>
#include <numeric>
#include <string>
#include <string_view>
#include <unordered_map>

#include "attention_rules.hpp"
#include "spsd/autograd/grad_args.hpp"
#include "spsd/autograd/grad_ops.hpp"
#include "spsd/autograd/node.hpp"
#include "spsd/autograd/softmax_grad.hpp"
#include "spsd/op/cast.hpp"
#include "spsd/op/elementwise.hpp"
#include "spsd/op/index.hpp"
#include "spsd/op/matmul.hpp"
#include "spsd/op/reduce.hpp"
#include "spsd/op/shape_ops.hpp"
#include "spsd/op/softmax.hpp"
#include "spsd/op/compare.hpp"
#include "spsd/op/where.hpp"
#include "spsd/tensor/factory.hpp"
#include "norm_rules.hpp"

namespace spsd::detail {

namespace {

template <class Rule, FloatingElement T>
void run_rule(const GradNode& node, const GlobalData& grad_out, GradList& grad_in) {
  Rule{}(GradArgs<T>{node, grad_out, grad_in});
}

// Backward rules by op name, per floating type.
using RuleTable = std::unordered_map<std::string_view, BackwardRule>;

// Rule: a captureless generic lambda taking GradArgs<T> (default-constructible in C++20).
template <class Rule>
void define_rule(RuleTable& rules, std::string_view op, Rule) {
  rules[op] = {&run_rule<Rule, float>, &run_rule<Rule, double>, &run_rule<Rule, bfloat16>, &run_rule<Rule, float16>};
}

// A reduction's (output or gradient) tensor with the reduced axes kept as size 1, so it
// broadcasts against the input. attrs = [keepdim, axes...] (op/reduce.hpp).
template <Element T>
GlobalTensor<T> with_kept_axes(const GlobalTensor<T>& t, const Shape& x, const OpAttrs& attrs) {
  if (attrs[0] != 0) return t;
  std::vector<int64_t> dims = x.dims();
  for (size_t i = 1; i < attrs.size(); ++i) dims[attrs[i]] = 1;
  return spsd::reshape(t, Shape(std::move(dims)));
}

template <kernel::cpu::UnaryOp K>
void define_unary_rule(RuleTable& rules) {
  define_rule(rules, kernel::cpu::to_string(K), [](const auto& a) {
    if constexpr (K == kernel::cpu::UnaryOp::kNeg) a.set(0, spsd::neg(a.g()));
    else a.set(0, unary_grad<K>(kernel::derivative_reads_output(K) ? a.y() : a.x(0), a.g()));
  });
}

void define_elementwise_rules(RuleTable& rules) {
  // cast: the gradient converted back to the input's type (a float32 master weight cast to
  // bfloat16 gets its gradient in float32); integer inputs take none.
  define_rule(rules, "cast", [](const auto& a) {
    visit_dtype(a.node.inputs[0].dtype, [&]<class From>() {
      if constexpr (FloatingElement<From>) a.set_as(0, spsd::cast<From>(a.g()));
    });
  });
  define_rule(rules, "add", [](const auto& a) {
    for (size_t i : {0, 1})
      if (a.wants(i)) a.set(i, sum_to(a.g(), a.shape(i)));
  });
  define_rule(rules, "sub", [](const auto& a) {
    if (a.wants(0)) a.set(0, sum_to(a.g(), a.shape(0)));
    if (a.wants(1)) a.set(1, spsd::neg(sum_to(a.g(), a.shape(1))));
  });
  define_rule(rules, "mul", [](const auto& a) {
    if (a.wants(0)) a.set(0, sum_to(a.g() * a.x(1), a.shape(0)));
    if (a.wants(1)) a.set(1, sum_to(a.g() * a.x(0), a.shape(1)));
  });
  define_rule(rules, "div", [](const auto& a) {  // y = x0 / x1: dy/dx1 = -y / x1
    if (a.wants(0)) a.set(0, sum_to(a.g() / a.x(1), a.shape(0)));
    if (a.wants(1)) a.set(1, spsd::neg(sum_to(a.g() * a.y() / a.x(1), a.shape(1))));
  });
  define_rule(rules, "add_scalar", [](const auto& a) { a.set(0, a.g()); });
  define_rule(rules, "sub_scalar", [](const auto& a) { a.set(0, a.g()); });
  define_rule(rules, "rsub_scalar", [](const auto& a) { a.set(0, spsd::neg(a.g())); });
  define_rule(rules, "mul_scalar", [](const auto& a) { a.set(0, a.g() * a.scalar()); });
  define_rule(rules, "div_scalar", [](const auto& a) { a.set(0, a.g() / a.scalar()); });
  define_rule(rules, "rdiv_scalar", [](const auto& a) {  // s / x
    a.set(0, spsd::neg(a.g() * a.y() / a.x(0)));
  });
  using kernel::cpu::UnaryOp;
  define_unary_rule<UnaryOp::kNeg>(rules);
  define_unary_rule<UnaryOp::kRelu>(rules);
  define_unary_rule<UnaryOp::kGelu>(rules);
  define_unary_rule<UnaryOp::kExp>(rules);
  define_unary_rule<UnaryOp::kLog>(rules);
  define_unary_rule<UnaryOp::kTanh>(rules);
  define_unary_rule<UnaryOp::kSigmoid>(rules);
  define_unary_rule<UnaryOp::kSqrt>(rules);
  define_unary_rule<UnaryOp::kAbs>(rules);
}

void define_matmul_reduce_softmax_rules(RuleTable& rules) {
  // c = A B with A = op(a), B = op(b) (attrs [trans_a, trans_b], or none): dA = g B^T and
  // dB = A^T g, and a transposed operand takes the transpose (da = dA^T = B g^T, db = g^T A),
  // all as gemms with transpose flags: nothing is transposed in memory. Summed over broadcast
  // batch axes.
  define_rule(rules, "matmul", [](const auto& a) {
    const bool ta = a.attrs().size() == 2 && a.attrs()[0] != 0, tb = a.attrs().size() == 2 && a.attrs()[1] != 0;
    if (a.wants(0))
      a.set(0, sum_to(ta ? matmul_transposed(a.x(1), a.g(), tb, true) : matmul_transposed(a.g(), a.x(1), false, !tb),
                      a.shape(0)));
    // A 2-d b (a weight) and a batched, untransposed a: db = sum over the batch of x^T g (g^T x
    // for b^T), one op whose kernel runs one GEMM over all rows of the piece, where x^T g per
    // batch element and sum_to ran one GEMM per element and a sum. Same table, same layouts.
    if (a.wants(1) && !ta && a.shape(1).ndim() == 2 && a.shape(0).ndim() >= 3)
      a.set(1, tb ? matmul_batch_summed(a.g(), a.x(0)) : matmul_batch_summed(a.x(0), a.g()));
    else if (a.wants(1))
      a.set(1, sum_to(tb ? matmul_transposed(a.g(), a.x(0), true, ta) : matmul_transposed(a.x(0), a.g(), !ta, false),
                      a.shape(1)));
  });
  define_rule(rules, "sum", [](const auto& a) {
    a.set(0, expand(with_kept_axes(a.g(), a.shape(0), a.attrs()), a.shape(0)));
  });
  define_rule(rules, "mean", [](const auto& a) {
    int64_t count = 1;
    for (size_t i = 1; i < a.attrs().size(); ++i) count *= a.shape(0)[a.attrs()[i]];
    using T = typename std::remove_cvref_t<decltype(a)>::value_type;
    a.set(0, expand(with_kept_axes(a.g(), a.shape(0), a.attrs()) / static_cast<T>(count), a.shape(0)));
  });
  // max/min: the gradient goes to the elements that reached the extreme, shared among ties.
  for (std::string_view op : {"max", "min"}) {
    define_rule(rules, op, [](const auto& a) {
      const Shape& x = a.shape(0);
      auto mask = mask_eq(a.x(0), with_kept_axes(a.y(), x, a.attrs()));
      std::vector<int64_t> axes(a.attrs().begin() + 1, a.attrs().end());
      auto ties = spsd::sum(mask, axes, true);
      a.set(0, mask * (with_kept_axes(a.g(), x, a.attrs()) / ties));
    });
  }
  // softmax and log_softmax: one fused kernel (autograd/softmax_grad.hpp) while the axis is
  // whole on every rank; a split axis needs the row sum across ranks: the composed formula,
  // whose sum over the split axis is a P(sum) the resolver all-reduces.
  define_rule(rules, "softmax", [](const auto& a) {  // dx = y (g - sum(g y))
    const int64_t axis = a.attrs()[0];
    auto y = a.y(), g = a.g();
    if (!splits_axis(y.nd_sbp(), axis) && !splits_axis(g.nd_sbp(), axis)) return a.set(0, softmax_grad(y, g, axis));
    a.set(0, y * (g - spsd::sum(g * y, {axis}, true)));
  });
  define_rule(rules, "log_softmax", [](const auto& a) {  // dx = g - softmax * sum(g)
    const int64_t axis = a.attrs()[0];
    auto y = a.y(), g = a.g();
    if (!splits_axis(y.nd_sbp(), axis) && !splits_axis(g.nd_sbp(), axis)) return a.set(0, log_softmax_grad(y, g, axis));
    a.set(0, g - spsd::exp(y) * spsd::sum(g, {axis}, true));
  });
  // Recorded as one node only where the class axis is whole (op/loss.hpp); else the composed
  // ops recorded their own nodes.
  define_rule(rules, "cross_entropy", [](const auto& a) {
    if (a.wants(0)) a.set(0, cross_entropy_grad(a.x(0), a.template x_as<int64_t>(1), a.g()));
  });
}

// The layout a gradient piece of zeros next to g takes: g's, with splits of `axis` made B.
NdSbp without_split_of(const NdSbp& nd, int64_t axis) {
  std::vector<Sbp> out;
  for (const Sbp& s : nd) out.push_back(s.is_split() && s.axis() == axis ? sbp::broadcast : s);
  return NdSbp(std::move(out));
}

void define_shape_index_rules(RuleTable& rules) {
  define_rule(rules, "permute", [](const auto& a) {
    const int64_t r = a.shape(0).ndim();
    std::vector<int64_t> inverse(r);
    for (int64_t i = 0; i < r; ++i) inverse[a.attrs()[i] < 0 ? a.attrs()[i] + r : a.attrs()[i]] = i;
    a.set(0, spsd::permute(a.g(), inverse));
  });
  define_rule(rules, "transpose", [](const auto& a) {
    a.set(0, spsd::transpose(a.g(), a.attrs()[0], a.attrs()[1]));
  });
  define_rule(rules, "reshape", [](const auto& a) { a.set(0, spsd::reshape(a.g(), a.shape(0))); });
  // slice: g padded with zeros back to x's extent along the axis.
  define_rule(rules, "slice", [](const auto& a) {
    using T = typename std::remove_cvref_t<decltype(a)>::value_type;
    const Shape& x = a.shape(0);
    const int64_t axis = a.attrs()[0] < 0 ? a.attrs()[0] + x.ndim() : a.attrs()[0];
    const int64_t begin = a.attrs()[1], end = a.attrs()[2];
    auto g = a.g();
    auto zeros_along = [&](int64_t n) {
      std::vector<int64_t> dims = x.dims();
      dims[axis] = n;
      return zeros<T>(Shape(std::move(dims)), g.placement(), without_split_of(g.nd_sbp(), axis));
    };
    std::vector<GlobalTensor<T>> parts;
    if (begin > 0) parts.push_back(zeros_along(begin));
    parts.push_back(g);
    if (end < x[axis]) parts.push_back(zeros_along(x[axis] - end));
    a.set(0, parts.size() == 1 ? g : spsd::concat(parts, axis));
  });
  define_rule(rules, "concat", [](const auto& a) {
    const int64_t r = a.shape(0).ndim(), axis = a.attrs()[0] < 0 ? a.attrs()[0] + r : a.attrs()[0];
    int64_t offset = 0;
    for (size_t i = 0; i < a.node.inputs.size(); ++i) {
      const int64_t n = a.shape(i)[axis];
      if (a.wants(i)) a.set(i, spsd::slice(a.g(), axis, offset, offset + n));
      offset += n;
    }
  });
  define_rule(rules, "embedding", [](const auto& a) {
    if (a.wants(0)) a.set(0, embedding_grad(a.g(), a.template x_as<int64_t>(1), a.shape(0)[0]));
  });
  define_rule(rules, "pick", [](const auto& a) {
    if (a.wants(0)) a.set(0, pick_grad(a.g(), a.template x_as<int64_t>(1), a.shape(0)[a.shape(0).ndim() - 1]));
  });
  // Boxing moves values, so the gradient is g itself, boxed back into the input's layout
  // (partials made B: each summand's gradient is the whole g), as DTensor's redistribute does.
  // So each boxing's backward is its mirror: S->B (all-gather) gets P->S (reduce-scatter), P->S
  // gets S->B, B->S (a slice) gets S->B; Megatron's sequence parallelism (nn::sequence_parallel)
  // moves exactly its analytic bytes because of it.
  define_rule(rules, "to_global", [](const auto& a) {
    const GlobalData& in = a.node.inputs[0];
    const NdSbp back = without_partial(in.nd_sbp);
    auto g = a.g();
    a.set(0, g.placement() == in.placement && g.nd_sbp() == back ? g : g.to_global(in.placement, back));
  });
}

// The ops of issue 25: new unary functions, pow, comparisons and masks, var's parts.
void define_comparison_and_math_rules(RuleTable& rules) {
  using kernel::cpu::UnaryOp;
  define_unary_rule<UnaryOp::kRsqrt>(rules);
  define_unary_rule<UnaryOp::kErf>(rules);
  define_unary_rule<UnaryOp::kSilu>(rules);
  define_unary_rule<UnaryOp::kGeluTanh>(rules);
  // y = x^e: dy/dx = e x^(e-1), taken as 0 where e == 0 (y is the constant 1; the formula
  // would give 0 * inf = NaN at x == 0), and dy/de = y log x, taken as 0 where x == 0 and e >= 0
  // (0 * log 0 would be NaN where the limit is 0). Both masks are torch's.
  define_rule(rules, "pow", [](const auto& a) {
    using T = typename std::remove_cvref_t<decltype(a)>::value_type;
    const auto x = a.x(0), e = a.x(1);
    if (a.wants(0)) {
      const auto dx = spsd::masked_fill(e * spsd::pow(x, e - compute_t<T>(1)), e == compute_t<T>(0), 0);
      a.set(0, sum_to(a.g() * dx, a.shape(0)));
    }
    if (a.wants(1)) {
      const GlobalTensor<bool> at_zero = (x == compute_t<T>(0)) & (e >= compute_t<T>(0));
      a.set(1, sum_to(spsd::masked_fill(a.g() * a.y() * spsd::log(x), at_zero, 0), a.shape(1)));
    }
  });
  define_rule(rules, "pow_scalar", [](const auto& a) {
    using T = typename std::remove_cvref_t<decltype(a)>::value_type;
    const auto g = a.g();
    if (a.scalar() == 0) a.set(0, spsd::zeros<T>(g.shape(), g.placement(), without_partial(g.nd_sbp())));
    else a.set(0, g * a.scalar() * spsd::pow(a.x(0), a.scalar() - 1));
  });
  // where(cond, a, b): g where cond holds to a, the rest to b (cond is bool: no gradient).
  define_rule(rules, "where", [](const auto& a) {
    const auto cond = GlobalTensor<bool>::from_data(a.node.inputs[0]);
    if (a.wants(1)) a.set(1, sum_to(spsd::masked_fill(a.g(), spsd::logical_not(cond), 0), a.shape(1)));
    if (a.wants(2)) a.set(2, sum_to(spsd::masked_fill(a.g(), cond, 0), a.shape(2)));
  });
  define_rule(rules, "masked_fill", [](const auto& a) {
    a.set(0, spsd::masked_fill(a.g(), GlobalTensor<bool>::from_data(a.node.inputs[1]), 0));
  });
}

RuleTable make_rules() {
  RuleTable rules;
  define_elementwise_rules(rules);
  define_comparison_and_math_rules(rules);
  define_matmul_reduce_softmax_rules(rules);
  define_shape_index_rules(rules);
  rules["scaled_dot_product_attention"] = {&attention_backward<float>, &attention_backward<double>,
                                           &attention_backward<bfloat16>, &attention_backward<float16>};
  for (const NamedBackward& r : norm_backward_rules()) rules[r.op] = {r.f32, r.f64, r.bf16, r.f16};
  return rules;
}

}  // namespace

namespace {
// Rules of ops outside the library (a user op's backward), added on the op's first call.
struct AddedRules {
  std::mutex mutex;  // simulated ranks are threads
  std::unordered_map<std::string, BackwardRule> rules;
};
AddedRules& added_rules() {
  static AddedRules added;
  return added;
}
const RuleTable& library_rules() {
  static const RuleTable rules = make_rules();  // thread-safe: simulated ranks are threads
  return rules;
}
}  // namespace

void add_backward_rule(std::string_view op, const BackwardRule& rule) {
  SPSD_CHECK(!library_rules().contains(op), op, "has a backward rule in the library already: a user op needs a name "
                                                "of its own");
  AddedRules& added = added_rules();
  const std::lock_guard lock(added.mutex);
  SPSD_CHECK(added.rules.try_emplace(std::string(op), rule).second, op, "has a backward rule already");
}

BackwardFn backward_rule(std::string_view op, DType dtype) {
  const RuleTable& rules = library_rules();
  BackwardRule rule;
  if (const auto it = rules.find(op); it != rules.end()) {
    rule = it->second;
  } else {
    AddedRules& added = added_rules();
    const std::lock_guard lock(added.mutex);
    const auto a = added.rules.find(std::string(op));
    if (a == added.rules.end()) return nullptr;
    rule = a->second;
  }
  switch (dtype) {
    case DType::kFloat32: return rule.f32;
    case DType::kFloat64: return rule.f64;
    case DType::kBFloat16: return rule.bf16;
    case DType::kFloat16: return rule.f16;
    default: return nullptr;  // integer outputs carry no gradient
  }
}

}  // namespace spsd::detail
