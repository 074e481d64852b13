// Autograd under simulated ranks: every op's backward rule against central finite differences
// in double on one rank, then the same gradients on meshes {2}, {4} and {2, 2} with the inputs
// in sampled layouts (S(i), B, P(sum), P(max), P(min) per mesh axis, partial values spread
// lopsidedly over the group by build_layout) against the single-process gradients.
//
// The checked scalar is L = sum(f(x) * R) for a fixed random R, so every output element gets its
// own weight. Tolerances: finite differences (h = 1e-6) |fd - an| <= 1e-6 + 1e-5 |an|; across
// layouts (same math, other summation orders) |g - g1| <= 1e-10 + 1e-9 |g1|.
// Layout sampling: per case and mesh, at most kMaxCombos combinations of input layouts, every
// stride-th of the product starting at a phase derived from the case name.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>

#include "boxing_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
using spsd_test::mesh_placement;

namespace {

using G = GlobalTensor<double>;
using Inputs = std::vector<G>;

enum class Domain { kAny, kPositive, kNonzero };

struct GradCase {
  std::string name;
  std::vector<Shape> shapes;
  std::function<G(const Inputs&)> f;
  Domain domain = Domain::kAny;
};

// Labels / indices for the index ops: split on axis 0 where the first input is, else B, so the
// data-parallel rules run too.
GlobalTensor<int64_t> index_tensor(const G& like, std::vector<int64_t> values) {
  std::vector<Sbp> axes;
  for (const Sbp& s : like.nd_sbp()) axes.push_back(s.is_split() && s.axis() == 0 ? s : sbp::broadcast);
  const int64_t n = static_cast<int64_t>(values.size());
  return from_host(Tensor<int64_t>::from_vector(Shape{n}, std::move(values)), like.placement(), NdSbp(axes));
}

std::vector<GradCase> grad_cases() {
  const Shape m34{3, 4};
  std::vector<GradCase> c = {
      {"matmul", {m34, Shape{4, 2}}, [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul batched", {Shape{2, 3, 4}, Shape{4, 2}}, [](const Inputs& x) { return matmul(x[0], x[1]); }},
      // The flagged form backward rules use; its own rule covers every flag combination.
      {"matmul a^T b^T", {Shape{4, 3}, Shape{2, 4}},
       [](const Inputs& x) { return detail::matmul_transposed(x[0], x[1], true, true); }},
      {"matmul batched a^T", {Shape{2, 4, 3}, Shape{4, 2}},
       [](const Inputs& x) { return detail::matmul_transposed(x[0], x[1], true, false); }},
      {"matmul b^T broadcast", {Shape{3, 4}, Shape{2, 2, 4}},
       [](const Inputs& x) { return detail::matmul_transposed(x[0], x[1], false, true); }},
      {"add broadcast", {m34, Shape{4}}, [](const Inputs& x) { return x[0] + x[1]; }},
      {"sub broadcast", {m34, Shape{3, 1}}, [](const Inputs& x) { return x[0] - x[1]; }},
      {"mul", {m34, m34}, [](const Inputs& x) { return x[0] * x[1]; }},
      {"div", {m34, Shape{4}}, [](const Inputs& x) { return x[0] / x[1]; }, Domain::kNonzero},
      {"scalars", {m34}, [](const Inputs& x) { return (2.0 - (x[0] + 1.0) * 3.0) / 2.0 - 0.5; }},
      {"rdiv", {m34}, [](const Inputs& x) { return 2.0 / x[0]; }, Domain::kNonzero},
      {"neg", {m34}, [](const Inputs& x) { return -x[0]; }},
      {"relu", {m34}, [](const Inputs& x) { return relu(x[0]); }, Domain::kNonzero},
      {"gelu", {m34}, [](const Inputs& x) { return gelu(x[0]); }},
      {"exp", {m34}, [](const Inputs& x) { return exp(x[0]); }},
      {"log", {m34}, [](const Inputs& x) { return log(x[0]); }, Domain::kPositive},
      {"tanh", {m34}, [](const Inputs& x) { return tanh(x[0]); }},
      {"sigmoid", {m34}, [](const Inputs& x) { return sigmoid(x[0]); }},
      {"sqrt", {m34}, [](const Inputs& x) { return sqrt(x[0]); }, Domain::kPositive},
      {"abs", {m34}, [](const Inputs& x) { return abs(x[0]); }, Domain::kNonzero},
      {"sum axis", {m34}, [](const Inputs& x) { return sum(x[0], {1}); }},
      {"sum all", {m34}, [](const Inputs& x) { return sum(x[0]); }},
      {"mean keepdim", {m34}, [](const Inputs& x) { return mean(x[0], {0}, true); }},
      {"max axis", {m34}, [](const Inputs& x) { return max(x[0], {1}); }},
      {"min all", {m34}, [](const Inputs& x) { return min(x[0]); }},
      {"softmax", {m34}, [](const Inputs& x) { return softmax(x[0], 1); }},
      {"log_softmax", {m34}, [](const Inputs& x) { return log_softmax(x[0], 0); }},
      {"softmax middle axis", {Shape{2, 3, 4}}, [](const Inputs& x) { return softmax(x[0], 1); }},
      // normalization (whole or split last axis, by the sampled layouts) and dropout
      {"layer_norm", {m34, Shape{4}, Shape{4}}, [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); }},
      {"layer_norm 3-d", {Shape{2, 3, 4}, Shape{4}, Shape{4}},
       [](const Inputs& x) { return layer_norm(x[0], x[1], x[2], 0.1); }},
      {"rms_norm", {m34, Shape{4}}, [](const Inputs& x) { return rms_norm(x[0], x[1]); }},
      {"dropout", {m34}, [](const Inputs& x) { return dropout(x[0], 0.4, 3); }},
      {"transpose", {m34}, [](const Inputs& x) { return transpose(x[0], 0, 1); }},
      {"permute", {Shape{2, 3, 4}}, [](const Inputs& x) { return permute(x[0], {2, 0, 1}); }},
      {"reshape", {m34}, [](const Inputs& x) { return reshape(x[0], {2, 6}); }},
      {"slice", {m34}, [](const Inputs& x) { return slice(x[0], 1, 1, 3); }},
      {"concat", {m34, Shape{2, 4}}, [](const Inputs& x) { return concat({x[0], x[1]}, 0); }},
      {"to_global", {m34}, [](const Inputs& x) { return x[0].to_global(NdSbp(std::vector<Sbp>(
                                                     x[0].nd_sbp().size(), sbp::broadcast))) * x[0]; }},
      {"embedding", {Shape{5, 3}},
       [](const Inputs& x) { return embedding(x[0], index_tensor(x[0], {4, 0, 2, 4})); }},
      {"pick", {Shape{4, 5}}, [](const Inputs& x) { return pick(x[0], index_tensor(x[0], {1, 4, 0, 1})); }},
      {"cross_entropy", {Shape{4, 5}},
       [](const Inputs& x) { return cross_entropy(x[0], index_tensor(x[0], {3, 0, 4, 1})); }},
      // issue 25: new functions, pow, var, and the masks (cond from the data: piecewise constant)
      {"gelu tanh", {m34}, [](const Inputs& x) { return gelu(x[0], GeluApproximation::kTanh); }},
      {"rsqrt", {m34}, [](const Inputs& x) { return rsqrt(x[0]); }, Domain::kPositive},
      {"erf", {m34}, [](const Inputs& x) { return erf(x[0]); }},
      {"silu", {m34}, [](const Inputs& x) { return silu(x[0]); }},
      {"pow broadcast", {m34, Shape{4}}, [](const Inputs& x) { return pow(x[0], x[1]); }, Domain::kPositive},
      {"pow scalar", {m34}, [](const Inputs& x) { return pow(x[0], 2.5); }, Domain::kPositive},
      {"var axis", {m34}, [](const Inputs& x) { return var(x[0], {1}); }},
      {"var all, correction 0", {m34}, [](const Inputs& x) { return var(x[0], {}, false, 0); }},
      {"where broadcast", {m34, Shape{4}}, [](const Inputs& x) { return where(x[0] > 0.1, x[0] * 2.0, x[1]); }},
      {"masked_fill 0", {m34, Shape{4}}, [](const Inputs& x) { return masked_fill(x[0], x[1] < 0.0, 0.0) * x[1]; }},
      {"masked_fill value", {m34}, [](const Inputs& x) { return masked_fill(x[0], x[0] >= 0.3, 1.5); }},
      {"mlp", {Shape{4, 3}, Shape{3, 5}, Shape{5}},
       [](const Inputs& x) { return log_softmax(relu(matmul(x[0], x[1]) + x[2]), 1); }},
  };
  return c;
}

Tensor<double> host_values(const Shape& shape, uint64_t seed, Domain d) {
  std::vector<double> v(shape.numel());
  for (int64_t i = 0; i < shape.numel(); ++i) {
    const double n = philox::normal<double>(seed, static_cast<uint64_t>(i));
    v[i] = d == Domain::kAny ? n : d == Domain::kPositive ? 0.5 + std::abs(n) : (n < 0 ? -0.5 : 0.5) + n;
  }
  return Tensor<double>::from_vector(shape, std::move(v));
}

std::vector<Tensor<double>> case_inputs(const GradCase& c) {
  std::vector<Tensor<double>> xs;
  for (size_t i = 0; i < c.shapes.size(); ++i) xs.push_back(host_values(c.shapes[i], 11 + i, c.domain));
  return xs;
}

NdSbp all_broadcast(const Placement& p) { return NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast)); }

G weighted_loss(const GradCase& c, const Inputs& xs) {
  G y = c.f(xs);
  return sum(y * from_host(host_values(y.shape(), 99, Domain::kAny), y.placement(), all_broadcast(y.placement())));
}

// d L / d x_i for the inputs in these layouts (collective), as whole host vectors.
std::vector<std::vector<double>> analytic(const GradCase& c, const std::vector<Tensor<double>>& host,
                                          const Placement& p, const std::vector<NdSbp>& layouts) {
  Inputs xs;
  for (size_t i = 0; i < host.size(); ++i) xs.push_back(spsd_test::build_layout(host[i], {p, layouts[i]}).requires_grad_());
  backward(weighted_loss(c, xs));
  std::vector<std::vector<double>> g;
  for (const G& x : xs) g.push_back(x.grad().full().to_vector());
  return g;
}

double loss_at(const GradCase& c, const std::vector<Tensor<double>>& host, const Placement& p) {
  Inputs xs;
  for (const Tensor<double>& h : host) xs.push_back(from_host(h, p, all_broadcast(p)));
  return weighted_loss(c, xs).full().to_vector()[0];
}

std::vector<std::vector<double>> finite_differences(const GradCase& c, const Placement& p) {
  const double h = 1e-6;
  std::vector<Tensor<double>> host = case_inputs(c);
  std::vector<std::vector<double>> g;
  for (Tensor<double>& x : host) {
    g.emplace_back(x.numel());
    for (int64_t j = 0; j < x.numel(); ++j) {
      const double keep = x.data()[j];
      x.data()[j] = keep + h;
      const double up = loss_at(c, host, p);
      x.data()[j] = keep - h;
      const double down = loss_at(c, host, p);
      x.data()[j] = keep;
      g.back()[j] = (up - down) / (2 * h);
    }
  }
  return g;
}

void compare(Failures& f, const std::string& what, const std::vector<std::vector<double>>& got,
             const std::vector<std::vector<double>>& want, double atol, double rtol) {
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t j = 0; j < want[i].size(); ++j)
      if (!(std::abs(got[i][j] - want[i][j]) <= atol + rtol * std::abs(want[i][j]))) {
        f.add(what + ": d/d input " + std::to_string(i) + " element " + std::to_string(j) + ": got " +
              std::to_string(got[i][j]) + ", expected " + std::to_string(want[i][j]));
        return;
      }
}

// The single-process gradients of every case (checked against finite differences on the way).
std::vector<std::vector<std::vector<double>>> single_process_gradients(Failures& failures) {
  std::vector<std::vector<std::vector<double>>> out;
  failures.merge(spsd_test::on_simulated_ranks(1, [&](Failures& f) {
    const Placement one("cpu", {0});
    for (const GradCase& c : grad_cases()) {
      const std::vector<NdSbp> b(c.shapes.size(), all_broadcast(one));
      out.push_back(analytic(c, case_inputs(c), one, b));
      compare(f, c.name + " vs finite differences", out.back(), finite_differences(c, one), 1e-6, 1e-5);
    }
  }));
  return out;
}

constexpr int64_t kMaxCombos = 12;

// The sampled combinations of input layouts of case c on a mesh.
std::vector<std::vector<NdSbp>> layout_combos(const GradCase& c, const Shape& mesh) {
  std::vector<std::vector<NdSbp>> options;
  int64_t total = 1;
  for (const Shape& s : c.shapes) {
    options.push_back(spsd_test::all_nd_sbps(mesh.ndim(), s.ndim()));
    total *= static_cast<int64_t>(options.back().size());
  }
  const int64_t stride = (total + kMaxCombos - 1) / kMaxCombos;
  const int64_t phase = static_cast<int64_t>(std::hash<std::string>{}(c.name) % static_cast<size_t>(stride));
  std::vector<std::vector<NdSbp>> combos;
  for (int64_t k = phase; k < total; k += stride) {
    std::vector<NdSbp> combo;
    for (int64_t rest = k, i = static_cast<int64_t>(options.size()) - 1; i >= 0; --i) {
      combo.insert(combo.begin(), options[i][rest % options[i].size()]);
      rest /= static_cast<int64_t>(options[i].size());
    }
    combos.push_back(std::move(combo));
  }
  return combos;
}

}  // namespace

TEST_CASE("every op's gradient matches finite differences and is the same on 2, 4 and 2x2 ranks", "[autograd]") {
  Failures failures;
  const auto reference = single_process_gradients(failures);
  INFO(failures.report());
  REQUIRE(failures.empty());
  const std::vector<GradCase> cases = grad_cases();
  int64_t runs = 0;
  for (const Shape& mesh : {Shape{2}, Shape{4}, Shape{2, 2}}) {
    failures.merge(spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& f) {
      const Placement p = mesh_placement(mesh);
      for (size_t k = 0; k < cases.size(); ++k)
        for (const std::vector<NdSbp>& combo : layout_combos(cases[k], mesh)) {
          std::string what = cases[k].name + " on mesh " + mesh.to_string() + " with";
          for (const NdSbp& s : combo) what += " " + s.to_string();
          try {
            compare(f, what, analytic(cases[k], case_inputs(cases[k]), p, combo), reference[k], 1e-10, 1e-9);
          } catch (const std::exception& e) {
            f.add(what + ": threw " + e.what());
          }
          if (rank() == 0) ++runs;
        }
    }));
  }
  INFO(failures.report());
  CHECK(failures.empty());
  CHECK(runs > 3 * static_cast<int64_t>(cases.size()));
  WARN(runs << " layout combinations");
}

TEST_CASE("a B weight used by S(0) activations: its P(sum) gradient is all-reduced once, in backward or in step",
          "[autograd]") {
  Failures failures = spsd_test::on_simulated_ranks(4, [](Failures& f) {
    const Placement p("cpu", {0, 1, 2, 3});
    auto x = randn<float>({8, 3}, p, sbp::split(0), 1);
    int64_t sent_per_step[2] = {0, 0};
    for (const bool early : {false, true}) {
      const std::string mode = early ? "reduce_gradients_early: " : "reduced by step: ";
      auto w = randn<float>({3, 2}, p, sbp::broadcast, 2).requires_grad_();
      reset_comm_stats();
      backward(sum(matmul(x, w)), {.reduce_gradients_early = early});
      const CommStats in_backward = comm_stats();
      const NdSbp want = early ? NdSbp(sbp::broadcast) : NdSbp(sbp::partial_sum);
      if (!(w.grad().nd_sbp() == want)) f.add(mode + "grad layout " + w.grad().nd_sbp().to_string());
      SGD<float> sgd({w}, {.lr = 0.1});
      reset_comm_stats();
      sgd.step();
      const CommStats in_step = comm_stats();
      // The forward and the backward ops communicate nothing; the gradient's one all-reduce moves.
      const CommStats& reducing = early ? in_backward : in_step;
      const CommStats& silent = early ? in_step : in_backward;
      if (reducing.calls_of(CollectiveKind::kAllReduce) != 1 || reducing.collectives != 1)
        f.add(mode + "expected one all-reduce, got " + reducing.to_string());
      if (silent.collectives != 0) f.add(mode + "expected no communication, got " + silent.to_string());
      if (!(w.nd_sbp() == NdSbp(sbp::broadcast))) f.add(mode + "w layout after step " + w.nd_sbp().to_string());
      sent_per_step[early] = in_backward.bytes_sent + in_step.bytes_sent;
    }
    if (sent_per_step[0] != sent_per_step[1])
      f.add("bytes per step: " + std::to_string(sent_per_step[0]) + " reduced by step, " +
            std::to_string(sent_per_step[1]) + " reduced early");
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

namespace {

// A 3-layer MLP: parameters in layer order w1, b1, w2, w3. Data-parallel on a 1-d mesh (all B);
// on a 2x2 mesh, mesh axis 1 is tensor-parallel (w1 S(1), b1 and w2 S(0)), so gradients of S
// parameters are reduce-scattered and backward communicates by itself.
std::vector<GlobalTensor<float>> mlp_params(const Placement& p) {
  const bool two_d = p.mesh().ndim() == 2;
  auto layout = [&](Sbp tensor_parallel) {
    return two_d ? NdSbp{sbp::broadcast, tensor_parallel} : NdSbp{sbp::broadcast};
  };
  std::vector<GlobalTensor<float>> w = {randn<float>({6, 5}, p, layout(sbp::split(1)), 1),
                                        randn<float>({5}, p, layout(sbp::split(0)), 2),
                                        randn<float>({5, 4}, p, layout(sbp::split(0)), 3),
                                        randn<float>({4, 3}, p, layout(sbp::broadcast), 4)};
  for (GlobalTensor<float>& t : w) t.requires_grad_();
  return w;
}

struct MlpForward {
  GlobalTensor<float> loss, h1, h2;  // h1, h2: the relu outputs of layers 1 and 2
};

MlpForward mlp_forward(const std::vector<GlobalTensor<float>>& w) {
  const Placement& p = w[0].placement();
  const NdSbp data = p.mesh().ndim() == 2 ? NdSbp{sbp::split(0), sbp::broadcast} : NdSbp{sbp::split(0)};
  auto x = randn<float>({8, 6}, p, data, 5);
  auto labels = from_host(Tensor<int64_t>::from_vector(Shape{8}, {0, 1, 2, 0, 1, 2, 0, 1}), p, data);
  auto h1 = relu(matmul(x, w[0]) + w[1]);
  auto h2 = relu(matmul(h1, w[2]));
  return {cross_entropy(matmul(h2, w[3]), labels), h1, h2};
}

// The bytes this rank had sent when each observed node's backward began (per simulated rank).
thread_local std::vector<int64_t> sent_at_observed;
thread_local detail::BackwardFn observed_rule = nullptr;

void observed_backward(const detail::GradNode& node, const detail::GlobalData& g, detail::GradList& grad_in) {
  sent_at_observed.push_back(comm_stats().bytes_sent);
  observed_rule(node, g, grad_in);
}

// Makes the relu node that produced t note comm_stats() when its backward runs.
void observe_relu(const GlobalTensor<float>& t) {
  detail::GradNode& node = *t.autograd_meta()->grad_fn;
  observed_rule = node.backward;
  node.backward = &observed_backward;
}

struct BackwardRun {
  std::vector<GlobalTensor<float>> params;
  std::vector<int64_t> sent_at_relu;  // at layer 2's relu, then layer 1's
  int64_t sent = 0;                   // by the whole backward
};

BackwardRun mlp_backward(const Placement& p, bool early) {
  BackwardRun run{mlp_params(p)};
  const MlpForward m = mlp_forward(run.params);
  observe_relu(m.h2);
  observe_relu(m.h1);
  sent_at_observed.clear();
  reset_comm_stats();
  backward(m.loss, {.reduce_gradients_early = early});
  run.sent_at_relu = sent_at_observed;
  run.sent = comm_stats().bytes_sent;
  return run;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("reduce_gradients_early: each leaf gradient is boxed into its layout as soon as it is final, "
          "last layer first, with the bits of boxing it after backward", "[autograd]") {
  Failures failures;
  for (const Shape& mesh : {Shape{2}, Shape{4}, Shape{2, 2}}) {
    failures.merge(spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& f) {
      const Placement p = mesh_placement(mesh);
      const std::string on = " on mesh " + mesh.to_string();
      const BackwardRun early = mlp_backward(p, true), late = mlp_backward(p, false);
      std::vector<int64_t> boxing_sent;  // per parameter: bytes of boxing its late gradient afterwards
      for (size_t i = 0; i < late.params.size(); ++i) {
        const GlobalTensor<float>& param = late.params[i];
        reset_comm_stats();
        const GlobalTensor<float> boxed = param.grad().to_global(param.placement(), param.nd_sbp());
        boxing_sent.push_back(comm_stats().bytes_sent);
        const GlobalTensor<float> g = early.params[i].grad();
        const std::string what = "parameter " + std::to_string(i) + on;
        if (!(g.nd_sbp() == param.nd_sbp()) || !(g.placement() == param.placement()))
          f.add(what + ": gradient layout " + g.describe() + ", parameter " + param.describe());
        else if (!same_bits(g.to_local().to_vector(), boxed.to_local().to_vector()))
          f.add(what + ": the early gradient differs from the late one boxed after backward");
      }
      // Layer order w1, b1, w2, w3: when layer 2's relu runs backward only w3 is final (and
      // reduced); at layer 1's relu, w2 too. The rest of backward sends the same in both modes.
      const int64_t w3 = boxing_sent[3], w2 = boxing_sent[2];
      const int64_t all = boxing_sent[0] + boxing_sent[1] + w2 + w3;
      if (early.sent_at_relu.size() != 2 || late.sent_at_relu.size() != 2)
        return f.add("observed " + std::to_string(early.sent_at_relu.size()) + " relu backwards" + on + ", expected 2");
      if (mesh.ndim() == 1 && (w3 == 0 || w2 == 0)) f.add("data-parallel gradients boxed without communication" + on);
      const int64_t at2 = early.sent_at_relu[0] - late.sent_at_relu[0];
      const int64_t at1 = early.sent_at_relu[1] - late.sent_at_relu[1];
      if (at2 != w3 || at1 != w3 + w2)
        f.add("reduced before layer 2's relu " + std::to_string(at2) + " B, before layer 1's " + std::to_string(at1) +
              " B; expected w3's " + std::to_string(w3) + " B, then with w2's " + std::to_string(w3 + w2) + " B" + on);
      if (early.sent - late.sent != all)
        f.add("early backward sent " + std::to_string(early.sent - late.sent) + " B more than the late one, expected " +
              std::to_string(all) + " B" + on);
    }));
  }
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("reduce_gradients_early: gradients accumulated over backward calls match the late ones", "[autograd]") {
  Failures failures;
  for (const Shape& mesh : {Shape{2}, Shape{2, 2}}) {
    failures.merge(spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& f) {
      const Placement p = mesh_placement(mesh);
      // Two calls without zero_grad: late then late (the reference), early then early, late then early.
      const bool modes[3][2] = {{false, false}, {true, true}, {false, true}};
      std::vector<std::vector<float>> reference;
      for (int k = 0; k < 3; ++k) {
        const std::vector<GlobalTensor<float>> w = mlp_params(p);
        for (const bool early : modes[k]) backward(mlp_forward(w).loss, {.reduce_gradients_early = early});
        for (size_t i = 0; i < w.size(); ++i) {
          const std::string what =
              "case " + std::to_string(k) + " parameter " + std::to_string(i) + " on mesh " + mesh.to_string();
          if (k > 0 && !(w[i].grad().nd_sbp() == w[i].nd_sbp()))
            f.add(what + ": gradient " + w[i].grad().describe() + ", parameter " + w[i].describe());
          const std::vector<float> g = w[i].grad().full().to_vector();
          if (k == 0) {
            reference.push_back(g);
            continue;
          }
          for (size_t j = 0; j < g.size(); ++j)
            if (!(std::abs(g[j] - reference[i][j]) <= 1e-6 + 1e-5 * std::abs(reference[i][j]))) {
              f.add(what + " element " + std::to_string(j) + ": " + std::to_string(g[j]) + ", expected " +
                    std::to_string(reference[i][j]));
              break;
            }
        }
      }
    }));
  }
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("SGD with momentum and Adam follow their formulas on any layout", "[autograd]") {
  // minimize sum(w * c) + sum(w * w) / 2: gradient c + w, checked against host loops.
  Failures failures;
  for (int n : {1, 4}) {
    failures.merge(spsd_test::on_simulated_ranks(n, [n](Failures& f) {
      const Placement p = mesh_placement(n == 4 ? Shape{2, 2} : Shape{1});
      const NdSbp layout = n == 4 ? NdSbp{sbp::split(0), sbp::split(1)} : NdSbp{sbp::broadcast};
      const Shape shape{3, 4};
      auto c = randn<double>(shape, p, layout, 5);
      std::vector<double> ch = c.full().to_vector(), w0 = randn<double>(shape, p, layout, 6).full().to_vector();
      for (int which = 0; which < 3; ++which) {
        auto w = randn<double>(shape, p, layout, 6).requires_grad_();
        std::vector<double> wh = w0, m(wh.size(), 0), v(wh.size(), 0);
        SGD<double> sgd({w}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
        Adam<double> adam({w}, {.lr = 0.05, .weight_decay = 0.01});
        AdamW<double> adamw({w}, {.lr = 0.05, .weight_decay = 0.01});
        for (int t = 1; t <= 3; ++t) {
          backward(sum(w * c) + sum(w * w) / 2.0);
          which == 0 ? sgd.step() : which == 1 ? adam.step() : adamw.step();
          w.zero_grad();
          for (size_t i = 0; i < wh.size(); ++i) {
            double g = ch[i] + wh[i];
            if (which == 0) {
              g += 0.01 * wh[i];
              m[i] = t == 1 ? g : 0.9 * m[i] + g;
              wh[i] -= 0.1 * m[i];
              continue;
            }
            if (which == 1) g += 0.01 * wh[i];
            else wh[i] *= 1 - 0.05 * 0.01;
            m[i] = 0.9 * m[i] + 0.1 * g;
            v[i] = 0.999 * v[i] + 0.001 * g * g;
            wh[i] -= 0.05 * (m[i] / (1 - std::pow(0.9, t))) / (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-8);
          }
        }
        const std::vector<double> got = w.full().to_vector();
        for (size_t i = 0; i < wh.size(); ++i)
          if (std::abs(got[i] - wh[i]) > 1e-12 + 1e-10 * std::abs(wh[i])) {
            f.add("optimizer " + std::to_string(which) + " on " + std::to_string(n) + " ranks: element " +
                  std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " + std::to_string(wh[i]));
            break;
          }
      }
    }));
  }
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("autograd misuse is an Error naming the operation and the values, on every rank", "[autograd]") {
  Failures failures = spsd_test::on_simulated_ranks(2, [](Failures& f) {
    const Placement p("cpu", {0, 1});
    auto x = randn<float>({4, 3}, p, sbp::split(0), 1);
    auto w = randn<float>({3, 2}, p, sbp::broadcast, 2).requires_grad_();
    auto y = matmul(x, w);
    spsd_test::expect_error(f, "backward on a non-scalar", [&] { backward(y); },
                            {"backward", "scalar", "(4, 2) float32"});
    spsd_test::expect_error(f, "backward without grad", [&] { backward(sum(x)); }, {"backward", "does not require grad"});
    spsd_test::expect_error(f, "grad of x", [&] { (void)x.grad(); }, {"grad", "(4, 3) float32 (S(0))", "requires_grad_()"});
    spsd_test::expect_error(f, "grad before backward", [&] { (void)w.grad(); }, {"grad", "no gradient yet"});
    spsd_test::expect_error(f, "grad of a non-leaf", [&] { (void)y.grad(); }, {"grad", "not a leaf"});
    spsd_test::expect_error(f, "requires_grad_ on int64", [&] { arange<int64_t>(4, p, sbp::broadcast).requires_grad_(); },
                            {"requires_grad_", "floating", "int64"});
    spsd_test::expect_error(f, "optimizer without grad", [&] { SGD<float> s({x}, {}); },
                            {"SGD", "parameter 0", "(4, 3) float32", "requires grad"});
    spsd_test::expect_error(f, "optimizer twice", [&] { Adam<float> s({w, w}, {}); }, {"Adam", "parameter 1", "twice"});
    spsd_test::expect_error(f, "bad beta", [&] { Adam<float> s({w}, {.beta1 = 1.5}); }, {"Adam", "beta1", "1.5"});
    {
      NoGradGuard guard;
      if (matmul(x, w).requires_grad()) f.add("NoGradGuard: the output requires grad");
    }
    if (!matmul(x, w).requires_grad()) f.add("after NoGradGuard: the output does not require grad");
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("pow: the exponent's gradient is 0 where x == 0 and e >= 0, as torch", "[autograd]") {
  const auto grads = spsd_test::results_by_rank<std::vector<double>>(2, [] {
    const Placement p = mesh_placement(Shape{2});
    const auto x = from_host(Tensor<double>::from_vector(Shape{2}, {0.0, 2.0}), p, NdSbp({sbp::split(0)}));
    auto e = from_host(Tensor<double>::from_vector(Shape{2}, {1.5, 0.5}), p, NdSbp({sbp::broadcast}));
    e.requires_grad_();
    backward(sum(pow(x, e)));
    return e.grad().full().to_vector();
  });
  for (const std::vector<double>& g : grads) {
    REQUIRE(g.size() == 2);
    CHECK(g[0] == 0.0);
    CHECK(g[1] == Approx(std::sqrt(2.0) * std::log(2.0)).epsilon(1e-12));
  }
}
