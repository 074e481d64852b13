// scaled_dot_product_attention under simulated ranks on meshes {1}, {2}, {4}, {2, 2}, against the
// plain-loop reference of test/common/attention_suite.hpp (its layout combinations and problems).
//
// Tolerances: float rel 1e-5 + abs 1e-5; double 1e-11 (outputs are convex combinations of
// values in [-2, 2]; P inputs are rebuilt from parts, exact only to rounding); bfloat16
// rel + abs 2e-2 and float16 4e-3 (the output rounded once, float inside; the reference takes
// the 16-bit inputs). Gradients in float64: finite differences (h = 1e-6, abs 1e-6 + rel 1e-5)
// on one rank, for the library and for the reference; in every layout, the reference within
// 1e-10.
#include <catch2/catch.hpp>
#include <functional>

#include "attention_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::AttentionHost;
using spsd_test::AttentionProblem;
using spsd_test::AttentionReference;
using spsd_test::attention_host;
using spsd_test::attention_problems;
using spsd_test::attention_reference;
using spsd_test::expect_near;
using spsd_test::Failures;
using spsd_test::mesh_placement;
using spsd_test::whole;

namespace {

const std::vector<Shape> kMeshes = {Shape{1}, Shape{2}, Shape{4}, Shape{2, 2}};

// body on the ranks of each mesh of kMeshes; one check of all their findings (each line names
// its placement).
void on_meshes(const std::string& what, const std::function<void(const Placement&, Failures&)>& body) {
  Failures all;
  for (const Shape& mesh : kMeshes)
    all.merge(spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()),
                                            [&](Failures& mine) { body(mesh_placement(mesh), mine); }));
  INFO(what << "\n" << all.report());
  CHECK(all.empty());
}

NdSbp uniform(const Placement& p, const Sbp& s) { return NdSbp(std::vector<Sbp>(p.mesh().ndim(), s)); }

}  // namespace

TEST_CASE("attention: forward in every layout on meshes {1, 2, 4, 2x2}, float64", "[attention]") {
  on_meshes("forward float64",
            [](const Placement& p, Failures& f) { spsd_test::run_attention_forward_suite<double>(p, 1, 1e-11, 1e-11, f); });
}

TEST_CASE("attention: forward in every layout on meshes {1, 2, 4, 2x2}, float32", "[attention]") {
  on_meshes("forward float32",
            [](const Placement& p, Failures& f) { spsd_test::run_attention_forward_suite<float>(p, 1, 1e-5, 1e-5, f); });
}

TEST_CASE("attention: bfloat16 and float16 forward, sampled layouts", "[attention]") {
  // Every 5th combination (P layouts included: the suite's 16-bit inputs are multiples of 1/16,
  // so their parts add up exactly).
  on_meshes("forward bfloat16",
            [](const Placement& p, Failures& f) { spsd_test::run_attention_forward_suite<bfloat16>(p, 5, 2e-2, 2e-2, f); });
  on_meshes("forward float16",
            [](const Placement& p, Failures& f) { spsd_test::run_attention_forward_suite<float16>(p, 5, 4e-3, 4e-3, f); });
}

namespace {

// sum(sdpa(q, k, v) * w) on one rank, from host values.
double weighted_loss(const AttentionProblem& pr, const std::array<std::vector<double>, 3>& qkv,
                     const std::vector<double>& w, const Placement& one) {
  const NdSbp b({sbp::broadcast});
  const auto t = [&](const Shape& s, const std::vector<double>& x) {
    return from_host(spsd_test::as_tensor<double>(s, x), one, b);
  };
  const GlobalTensor<double> out = scaled_dot_product_attention(t(pr.q, qkv[0]), t(pr.kv, qkv[1]), t(pr.kv, qkv[2]),
                                                                pr.causal);
  return sum(out * t(pr.q, w)).full().to_vector()[0];
}

// Central differences of weighted_loss in each element of q, k and v.
std::array<std::vector<double>, 3> finite_differences(const AttentionProblem& pr, const AttentionHost& h,
                                                      const Placement& one) {
  std::array<std::vector<double>, 3> qkv = {h.q, h.k, h.v}, grads;
  const double step = 1e-6;
  for (size_t a = 0; a < 3; ++a)
    for (double& x : qkv[a]) {
      const double keep = x;
      x = keep + step;
      const double up = weighted_loss(pr, qkv, h.g, one);
      x = keep - step;
      const double down = weighted_loss(pr, qkv, h.g, one);
      x = keep;
      grads[a].push_back((up - down) / (2 * step));
    }
  return grads;
}

}  // namespace

TEST_CASE("attention: gradients of q, k and v against finite differences, float64", "[attention]") {
  Failures f = spsd_test::on_simulated_ranks(1, [&](Failures& f) {
    const Placement one("cpu", {0});
    const NdSbp b({sbp::broadcast});
    for (size_t pi = 0; pi < attention_problems().size(); ++pi) {
      const AttentionProblem& pr = attention_problems()[pi];
      const AttentionHost h = attention_host(pr, 200 + pi);
      const std::array<std::vector<double>, 3> fd = finite_differences(pr, h, one);
      const AttentionReference ref = attention_reference(pr, h.q, h.k, h.v, &h.g);
      const std::string what = pr.text() + ": ";
      expect_near(f, what + "the reference's dq vs finite differences", ref.dq, fd[0], 1e-6, 1e-5);
      expect_near(f, what + "the reference's dk vs finite differences", ref.dk, fd[1], 1e-6, 1e-5);
      expect_near(f, what + "the reference's dv vs finite differences", ref.dv, fd[2], 1e-6, 1e-5);
      const auto leaf = [&](const Shape& s, const std::vector<double>& x) {
        return from_host(spsd_test::as_tensor<double>(s, x), one, b).requires_grad_();
      };
      GlobalTensor<double> q = leaf(pr.q, h.q), k = leaf(pr.kv, h.k), v = leaf(pr.kv, h.v);
      const GlobalTensor<double> w = from_host(spsd_test::as_tensor<double>(pr.q, h.g), one, b);
      backward(sum(scaled_dot_product_attention(q, k, v, pr.causal) * w));
      expect_near(f, what + "dq vs finite differences", whole(q.grad()), fd[0], 1e-6, 1e-5);
      expect_near(f, what + "dk vs finite differences", whole(k.grad()), fd[1], 1e-6, 1e-5);
      expect_near(f, what + "dv vs finite differences", whole(v.grad()), fd[2], 1e-6, 1e-5);
    }
  });
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("attention: gradients in every layout equal the single-process reference, float64", "[attention]") {
  on_meshes("backward", [](const Placement& p, Failures& f) { spsd_test::run_attention_backward_suite(p, 1, f); });
}

TEST_CASE("attention: under the query split dk and dv are partial sums equal to one process", "[attention]") {
  using namespace spsd::detail;
  using namespace spsd::detail::attention_ops;
  on_meshes("query split", [](const Placement& p, Failures& f) {
    const NdSbp s2 = uniform(p, sbp::split(2)), b = uniform(p, sbp::broadcast), partial = uniform(p, sbp::partial_sum);
    for (size_t pi = 0; pi < attention_problems().size(); ++pi) {
      const AttentionProblem& pr = attention_problems()[pi];
      const AttentionHost h = attention_host(pr, 400 + pi);
      const AttentionReference ref = attention_reference(pr, h.q, h.k, h.v, &h.g);
      const std::string what = pr.text() + " on " + p.to_string();
      const auto in = [&](const Shape& s, const std::vector<double>& x, const NdSbp& nd) {
        return from_host(spsd_test::as_tensor<double>(s, x), p, nd);
      };
      const GlobalTensor<double> q = in(pr.q, h.q, s2), k = in(pr.kv, h.k, b), v = in(pr.kv, h.v, b),
                                 g = in(pr.q, h.g, s2);
      const OpAttrs attrs{pr.causal ? 1 : 0};
      const GlobalTensor<double> out = scaled_dot_product_attention(q, k, v, pr.causal);
      const InputRef qk[] = {input_ref(q), input_ref(k)};
      const GlobalTensor<double> lse = run_op<AttentionLseDef, double>(qk, attrs);
      const InputRef refs[] = {input_ref(q), input_ref(k), input_ref(v), input_ref(out), input_ref(g), input_ref(lse)};
      const GlobalTensor<double> dq = run_op<AttentionGradDef<false>, double>(refs, attrs);
      const GlobalTensor<double> dkv = run_op<AttentionGradDef<true>, double>(refs, attrs);
      if (!(out.nd_sbp() == s2 && lse.nd_sbp() == s2 && dq.nd_sbp() == s2 && dkv.nd_sbp() == partial))
        f.add(what + ": layouts out " + out.nd_sbp().to_string() + ", lse " + lse.nd_sbp().to_string() + ", dq " +
              dq.nd_sbp().to_string() + ", dk and dv " + dkv.nd_sbp().to_string() +
              "; expected S(2), S(2), S(2) and P(sum) on every mesh axis");
      expect_near(f, what + ": out", whole(out), ref.out, 1e-12, 1e-12);
      expect_near(f, what + ": dq", whole(dq), ref.dq, 1e-12, 1e-12);
      std::vector<double> dk_dv = ref.dk;
      dk_dv.insert(dk_dv.end(), ref.dv.begin(), ref.dv.end());
      expect_near(f, what + ": dk and dv (the partials summed)", whole(dkv), dk_dv, 1e-12, 1e-12);
    }
  });
}

TEST_CASE("attention: the query split of q, k and v all S(2) gathers only k and v", "[attention]") {
  // Sequence parallel on 1-d meshes: the resolver keeps q split and all-gathers k and v
  // (docs/operators.md): each rank receives the keys and values it lacks, (seq_k - its own
  // keys) * head_dim * 8 bytes each, and nothing else moves.
  for (int n : {2, 4}) {
    Failures f = spsd_test::on_simulated_ranks(n, [&](Failures& f) {
      const Placement p = mesh_placement(Shape{n});
      const AttentionProblem pr{Shape{1, 1, 8, 4}, Shape{1, 1, 12, 4}, true};
      const AttentionHost h = attention_host(pr, 500);
      const NdSbp s2({sbp::split(2)});
      const auto in = [&](const Shape& s, const std::vector<double>& x) {
        return from_host(spsd_test::as_tensor<double>(s, x), p, s2);
      };
      const GlobalTensor<double> q = in(pr.q, h.q), k = in(pr.kv, h.k), v = in(pr.kv, h.v);
      reset_comm_stats();
      const GlobalTensor<double> out = scaled_dot_product_attention(q, k, v, true);
      const CommStats got = comm_stats();
      const int64_t mine = local_shape(pr.kv, p, s2, rank())[2];
      const int64_t want = 2 * (pr.kv[2] - mine) * pr.kv[3] * 8;
      if (!(out.nd_sbp() == s2)) f.add("output " + out.nd_sbp().to_string() + ", expected (S(2))");
      if (got.bytes_received != want)
        f.add("received " + std::to_string(got.bytes_received) + " bytes, expected " + std::to_string(want) + " {" +
              got.to_string() + "}");
      expect_near(f, "out", whole(out), attention_reference(pr, h.q, h.k, h.v, nullptr).out, 1e-12, 1e-12);
    });
    INFO("on " << n << " ranks\n" << f.report());
    CHECK(f.empty());
  }
}

TEST_CASE("attention: sequences of several 64-key tiles, float32, one rank and the query split on 2", "[attention]") {
  // The cpu kernels work on blocks of 64 keys (and, in backward, 64 queries): these problems
  // span several, with partial last tiles, causal tiles that are skipped or cut, and (on 2 ranks,
  // q S(2)) a query piece starting mid-sequence. Output and all three gradients against the
  // double reference, rel + abs 2e-5.
  const std::vector<AttentionProblem> problems = {
      {Shape{1, 2, 150, 8}, Shape{1, 2, 130, 8}, false},
      {Shape{1, 2, 150, 8}, Shape{1, 2, 150, 8}, true},
      {Shape{2, 1, 70, 5}, Shape{2, 1, 200, 5}, true},
  };
  for (int ranks : {1, 2}) {
    Failures f = spsd_test::on_simulated_ranks(ranks, [&](Failures& f) {
      const Placement p = mesh_placement(Shape{ranks});
      for (size_t pi = 0; pi < problems.size(); ++pi) {
        const AttentionProblem& pr = problems[pi];
        const AttentionHost h = attention_host(pr, 300 + pi);
        const AttentionReference ref = attention_reference(pr, h.q, h.k, h.v, &h.g);
        const auto leaf = [&](const Shape& s, const std::vector<double>& x, const Sbp& layout) {
          return from_host(spsd_test::as_tensor<float>(s, x), p, NdSbp({layout})).requires_grad_();
        };
        GlobalTensor<float> q = leaf(pr.q, h.q, sbp::split(2)), k = leaf(pr.kv, h.k, sbp::broadcast),
                            v = leaf(pr.kv, h.v, sbp::broadcast);
        const GlobalTensor<float> w = from_host(spsd_test::as_tensor<float>(pr.q, h.g), p, NdSbp({sbp::split(2)}));
        const GlobalTensor<float> out = scaled_dot_product_attention(q, k, v, pr.causal);
        backward(sum(out * w));
        const std::string what = pr.text() + " on " + std::to_string(ranks) + " rank(s): ";
        expect_near(f, what + "out", whole(out), ref.out, 2e-5, 2e-5);
        expect_near(f, what + "dq", whole(q.grad()), ref.dq, 2e-5, 2e-5);
        expect_near(f, what + "dk", whole(k.grad()), ref.dk, 2e-5, 2e-5);
        expect_near(f, what + "dv", whole(v.grad()), ref.dv, 2e-5, 2e-5);
      }
    });
    INFO(f.report());
    CHECK(f.empty());
  }
}

TEST_CASE("attention: the lse handed over by the forward is the recomputed one, bit for bit", "[attention]") {
  // On the cpu the forward's kernel keeps lse for the attention_lse kernel that follows on the
  // thread (op/attention.hpp, LseHandoff). Its lse must be what attention_lse computes from
  // scratch, in every layout of the table on 2 ranks, causal or not; and after another q, the
  // hand-off must not be taken (a stale lse would be wrong, not slow).
  using detail::attention_ops::AttentionDef;
  using detail::attention_ops::AttentionLseDef;
  using detail::attention_ops::lse_handoff;
  const AttentionProblem pr{Shape{2, 2, 70, 8}, Shape{2, 2, 90, 8}, true};
  Failures f = spsd_test::on_simulated_ranks(2, [&](Failures& f) {
    const Placement p = mesh_placement(Shape{2});
    const AttentionHost h = attention_host(pr, 77);
    for (const Sbp& qs : {sbp::split(0), sbp::split(1), sbp::split(2), sbp::broadcast})
      for (const bool causal : {false, true}) {
        const Sbp kvs = qs == sbp::split(2) ? sbp::broadcast : qs;
        const auto t = [&](const Shape& s, const std::vector<double>& x, const Sbp& l) {
          return from_host(spsd_test::as_tensor<float>(s, x), p, NdSbp({l}));
        };
        const GlobalTensor<float> q = t(pr.q, h.q, qs), k = t(pr.kv, h.k, kvs), v = t(pr.kv, h.v, kvs);
        const GlobalTensor<float> q2 = q * 0.5f;
        const OpAttrs attrs{causal ? 1 : 0};
        const detail::InputRef qk[] = {detail::input_ref(q), detail::input_ref(k)};
        const detail::InputRef q2k[] = {detail::input_ref(q2), detail::input_ref(k)};
        const OpAttrs training{causal ? 1 : 0, 1};  // keep_lse: what a forward that records sets
        lse_handoff.q = lse_handoff.k = nullptr;  // nothing to take: computed
        const GlobalTensor<float> computed = detail::run_op<AttentionLseDef, float>(qk, attrs);
        const GlobalTensor<float> computed2 = detail::run_op<AttentionLseDef, float>(q2k, attrs);
        (void)call_op<AttentionDef>(training, {}, q, k, v);
        const GlobalTensor<float> handed = detail::run_op<AttentionLseDef, float>(qk, attrs);
        const bool taken = lse_handoff.q == nullptr;
        (void)call_op<AttentionDef>(training, {}, q, k, v);
        const GlobalTensor<float> other = detail::run_op<AttentionLseDef, float>(q2k, attrs);
        // An inference forward (no keep_lse) keeps nothing: the fingerprints cost it nothing.
        lse_handoff.q = lse_handoff.k = nullptr;
        (void)call_op<AttentionDef>(attrs, {}, q, k, v);
        const bool kept_for_inference = lse_handoff.q != nullptr;
        const std::string what = detail::concat("q ", qs, causal ? " causal" : "", ": ");
        if (whole(handed) != whole(computed)) f.add(what + "the handed lse differs from the computed one");
        if (!taken) f.add(what + "the forward's lse was not taken");
        if (kept_for_inference) f.add(what + "a forward without keep_lse kept its lse");
        if (whole(other) != whole(computed2)) f.add(what + "another q's lse differs from its own computation");
      }
  });
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("attention: a piece whose bytes changed since the forward does not take its lse", "[attention]") {
  // What a validator's trial or a boxed copy freed after the forward can meet: another tensor at
  // the forward's q address, with the same local problem. Here the same piece is rewritten in
  // place (through to_local()): the hand-off's fingerprints must refuse the forward's lse.
  using detail::attention_ops::AttentionDef;
  using detail::attention_ops::AttentionLseDef;
  const Placement p("cpu", {0});
  const AttentionProblem pr{Shape{1, 2, 40, 8}, Shape{1, 2, 40, 8}, false};
  const AttentionHost h = attention_host(pr, 5);
  std::vector<double> handed, computed;
  simulate(1, [&] {
    const auto t = [&](const std::vector<double>& x) {
      return from_host(spsd_test::as_tensor<float>(pr.q, x), p, NdSbp({sbp::broadcast}));
    };
    const GlobalTensor<float> q = t(h.q), k = t(h.k), v = t(h.v);
    const OpAttrs attrs{0};
    (void)call_op<AttentionDef>(OpAttrs{0, 1}, {}, q, k, v);
    Tensor<float> piece = q.to_local();
    for (int64_t i = 0; i < piece.numel(); ++i) piece.data()[i] *= 3;
    const detail::InputRef qk[] = {detail::input_ref(q), detail::input_ref(k)};
    handed = whole(detail::run_op<AttentionLseDef, float>(qk, attrs));
    detail::attention_ops::lse_handoff.q = nullptr;
    computed = whole(detail::run_op<AttentionLseDef, float>(qk, attrs));
  });
  CHECK(handed == computed);
}
