// The attention differential suite (attention_suite.hpp).
#include "attention_suite.hpp"

#include <cmath>
#include <random>

#include "boxing_suite.hpp"

namespace spsd_test {

using namespace spsd;

std::string AttentionProblem::text() const {
  return "q " + q.to_string() + ", k and v " + kv.to_string() + (causal ? ", causal" : "");
}

const std::vector<AttentionProblem>& attention_problems() {
  static const std::vector<AttentionProblem> problems = {
      {Shape{2, 3, 5, 4}, Shape{2, 3, 7, 4}, false},
      {Shape{2, 3, 5, 4}, Shape{2, 3, 7, 4}, true},  // seq_q < seq_k: row i sees keys 0..i
      {Shape{1, 2, 6, 3}, Shape{1, 2, 6, 3}, true},
      {Shape{2, 1, 7, 5}, Shape{2, 1, 3, 5}, true},  // seq_q > seq_k: rows from 2 on see every key
  };
  return problems;
}

namespace {

std::vector<double> uniform_values(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(-2, 2);
  std::vector<double> v(n);
  for (double& x : v) x = d(gen);
  return v;
}

}  // namespace

AttentionHost attention_host(const AttentionProblem& p, uint64_t seed) {
  return {uniform_values(p.q.numel(), seed), uniform_values(p.kv.numel(), seed + 1),
          uniform_values(p.kv.numel(), seed + 2), uniform_values(p.q.numel(), seed + 3)};
}

// Per row: the scores, the masked softmax as a vector P, out = P v; with g, dP = g v^T and
// dS = P (dP - rowsum(P dP)), then dq = scale dS k, dk = scale dS^T q, dv = P^T g.
AttentionReference attention_reference(const AttentionProblem& p, const std::vector<double>& q,
                                       const std::vector<double>& k, const std::vector<double>& v,
                                       const std::vector<double>* g) {
  const int64_t bh = p.q[0] * p.q[1], sq = p.q[2], sk = p.kv[2], D = p.q[3];
  const double scale = 1 / std::sqrt(static_cast<double>(D));
  AttentionReference r{std::vector<double>(q.size()), std::vector<double>(q.size()), std::vector<double>(k.size()),
                       std::vector<double>(k.size())};
  for (int64_t s = 0; s < bh; ++s)
    for (int64_t i = 0; i < sq; ++i) {
      const double* qi = &q[(s * sq + i) * D];
      const auto seen = [&](int64_t j) { return !p.causal || j <= i; };
      std::vector<double> P(sk, 0.0);
      double mx = -INFINITY, total = 0;
      for (int64_t j = 0; j < sk; ++j) {
        if (!seen(j)) continue;
        for (int64_t c = 0; c < D; ++c) P[j] += qi[c] * k[(s * sk + j) * D + c];
        P[j] *= scale;
        mx = std::max(mx, P[j]);
      }
      for (int64_t j = 0; j < sk; ++j) total += P[j] = seen(j) ? std::exp(P[j] - mx) : 0.0;
      for (int64_t j = 0; j < sk; ++j) {
        P[j] /= total;
        for (int64_t c = 0; c < D; ++c) r.out[(s * sq + i) * D + c] += P[j] * v[(s * sk + j) * D + c];
      }
      if (!g) continue;
      const double* gi = &(*g)[(s * sq + i) * D];
      std::vector<double> dP(sk, 0.0);
      double rowsum = 0;
      for (int64_t j = 0; j < sk; ++j) {
        for (int64_t c = 0; c < D; ++c) dP[j] += gi[c] * v[(s * sk + j) * D + c];
        rowsum += P[j] * dP[j];
      }
      for (int64_t j = 0; j < sk; ++j) {
        const double dS = P[j] * (dP[j] - rowsum);
        for (int64_t c = 0; c < D; ++c) {
          r.dq[(s * sq + i) * D + c] += scale * dS * k[(s * sk + j) * D + c];
          r.dk[(s * sk + j) * D + c] += scale * dS * qi[c];
          r.dv[(s * sk + j) * D + c] += P[j] * gi[c];
        }
      }
    }
  return r;
}

template <class T>
Tensor<T> as_tensor(const Shape& s, const std::vector<double>& v) {
  std::vector<T> t;
  for (double x : v) t.push_back(static_cast<T>(x));
  return Tensor<T>::from_vector(s, std::move(t));
}

template <class T>
std::vector<double> held(const std::vector<double>& v) {
  std::vector<double> r;
  for (double x : v) r.push_back(static_cast<double>(static_cast<T>(x)));
  return r;
}

template <class T>
std::vector<double> whole(const GlobalTensor<T>& t) {
  std::vector<double> r;
  for (const T& x : t.full().to_vector()) r.push_back(static_cast<double>(x));
  return r;
}

void expect_near(Failures& f, const std::string& what, const std::vector<double>& got, const std::vector<double>& want,
                 double abs, double rel) {
  if (got.size() != want.size()) {
    f.add(what + ": " + std::to_string(got.size()) + " elements, expected " + std::to_string(want.size()));
    return;
  }
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::abs(got[i] - want[i]) <= abs + rel * std::abs(want[i])) continue;
    if (bad++ < 3)
      f.add(what + ": element " + std::to_string(i) + ": got " + show(got[i]) + ", expected " + show(want[i]));
  }
  if (bad > 3) f.add(what + ": " + std::to_string(bad - 3) + " more mismatching elements");
}

std::vector<std::array<NdSbp, 3>> attention_layouts(const Shape& mesh, int64_t stride, int64_t phase) {
  const std::vector<NdSbp> all = all_nd_sbps(mesh.ndim(), 4);
  const NdSbp b(std::vector<Sbp>(mesh.ndim(), sbp::broadcast));
  const size_t n = all.size();
  std::vector<std::array<NdSbp, 3>> combos;
  for (size_t i = 0; i < n; ++i) {
    combos.push_back({all[i], all[i], all[i]});
    combos.push_back({all[i], b, b});
    combos.push_back({b, all[i], all[i]});
    combos.push_back({all[i], all[(i * 7 + 1) % n], all[(i * 13 + 3) % n]});
  }
  std::vector<std::array<NdSbp, 3>> sampled;
  for (size_t i = static_cast<size_t>(phase); i < combos.size(); i += static_cast<size_t>(stride))
    sampled.push_back(combos[i]);
  return sampled;
}

namespace {

std::string layouts_text(const std::array<NdSbp, 3>& c) {
  return "q " + c[0].to_string() + ", k " + c[1].to_string() + ", v " + c[2].to_string();
}

// body(), an exception recorded as a failure (every rank throws alike, none waits).
template <class F>
void guarded(Failures& f, const std::string& what, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    f.add(what + ": threw: " + e.what());
  }
}

}  // namespace

template <class T>
void run_attention_forward_suite(const Placement& p, int64_t stride, double abs, double rel, Failures& f) {
  const std::string type(to_string(dtype_of<T>));
  for (size_t pi = 0; pi < attention_problems().size(); ++pi) {
    const AttentionProblem& pr = attention_problems()[pi];
    AttentionHost h = attention_host(pr, 10 * pi);
    // In 16 bits, multiples of 1/16: the parts build_layout makes of a P(sum) input then add up
    // to the value exactly, as they do in float and double to rounding.
    if constexpr (is_half_v<T>)
      for (std::vector<double>* x : {&h.q, &h.k, &h.v})
        for (double& e : *x) e = std::round(e * 16) / 16;
    const AttentionReference ref = attention_reference(pr, held<T>(h.q), held<T>(h.k), held<T>(h.v), nullptr);
    const Tensor<T> qh = as_tensor<T>(pr.q, h.q), kh = as_tensor<T>(pr.kv, h.k), vh = as_tensor<T>(pr.kv, h.v);
    for (const auto& c : attention_layouts(p.mesh(), stride, static_cast<int64_t>(pi) % stride)) {
      const std::string what = type + " " + pr.text() + "; " + layouts_text(c) + " on " + p.to_string();
      guarded(f, what, [&] {
        const GlobalTensor<T> out = scaled_dot_product_attention(build_layout(qh, {p, c[0]}), build_layout(kh, {p, c[1]}),
                                                                 build_layout(vh, {p, c[2]}), pr.causal);
        if (!(out.shape() == pr.q)) f.add(what + ": shape " + out.shape().to_string());
        else expect_near(f, what + " (output " + out.nd_sbp().to_string() + ")", whole(out), ref.out, abs, rel);
      });
    }
  }
}

void run_attention_backward_suite(const Placement& p, int64_t stride, Failures& f) {
  const NdSbp b(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  for (size_t pi = 0; pi < attention_problems().size(); ++pi) {
    const AttentionProblem& pr = attention_problems()[pi];
    const AttentionHost h = attention_host(pr, 300 + pi);
    const AttentionReference ref = attention_reference(pr, h.q, h.k, h.v, &h.g);
    const Tensor<double> qh = as_tensor<double>(pr.q, h.q), kh = as_tensor<double>(pr.kv, h.k),
                         vh = as_tensor<double>(pr.kv, h.v), gh = as_tensor<double>(pr.q, h.g);
    for (const auto& c : attention_layouts(p.mesh(), stride, static_cast<int64_t>(pi) % stride)) {
      const std::string what = "backward " + pr.text() + "; " + layouts_text(c) + " on " + p.to_string();
      guarded(f, what, [&] {
        GlobalTensor<double> q = build_layout(qh, {p, c[0]}).requires_grad_();
        GlobalTensor<double> k = build_layout(kh, {p, c[1]}).requires_grad_();
        GlobalTensor<double> v = build_layout(vh, {p, c[2]}).requires_grad_();
        backward(scaled_dot_product_attention(q, k, v, pr.causal), from_host(gh, p, b));
        expect_near(f, what + ": dq", whole(q.grad()), ref.dq, 1e-10, 1e-10);
        expect_near(f, what + ": dk", whole(k.grad()), ref.dk, 1e-10, 1e-10);
        expect_near(f, what + ": dv", whole(v.grad()), ref.dv, 1e-10, 1e-10);
      });
    }
  }
}

#define SPSD_ATTENTION_SUITE_INSTANCES(T)                                                         \
  template Tensor<T> as_tensor<T>(const Shape&, const std::vector<double>&);                      \
  template std::vector<double> held<T>(const std::vector<double>&);                               \
  template std::vector<double> whole<T>(const GlobalTensor<T>&);                                  \
  template void run_attention_forward_suite<T>(const Placement&, int64_t, double, double, Failures&);
SPSD_ATTENTION_SUITE_INSTANCES(float)
SPSD_ATTENTION_SUITE_INSTANCES(double)
SPSD_ATTENTION_SUITE_INSTANCES(bfloat16)
SPSD_ATTENTION_SUITE_INSTANCES(float16)
#undef SPSD_ATTENTION_SUITE_INSTANCES

}  // namespace spsd_test
