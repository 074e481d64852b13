#pragma once
// Scaled dot-product attention on one rank's pieces, fused: per query row an online softmax
// over blocks of keys (running max, running sum, the output accumulated and rescaled as the max
// grows), so no (seq_q, seq_k) matrix is ever held; the forward's products are block GEMMs
// (BLAS), the backward's plain loops. The backward kernels recompute each row's
// probabilities from the saved log-sum-exp (FlashAttention-2's backward):
//   p_ij = exp(scale q_i.k_j - lse_i),  D_i = g_i.out_i,  ds_ij = p_ij (g_i.v_j - D_i)
//   dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i,  dv_j = sum_i p_ij g_i
// Pieces are dense (batch, heads, seq, head_dim); q may be a slice of the query sequence
// (q_begin: its first global position) and the causal mask compares global positions
// (key j is visible to query i iff k_begin + j <= q_begin + i). A row that sees no key (seq_k
// of 0) gets a zero output and lse = -inf, and no gradient. 16-bit inputs are widened to
// float, computed in float, each output rounded once; float and double compute in their type.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/kernel/cpu/gemm.hpp"
#include "spsd/kernel/cpu/loop.hpp"

namespace spsd::kernel::cpu {

// The local problem: extents of the pieces, where the query and key pieces start in the global
// sequences, the mask and the scale (1 / sqrt(head_dim) for the public op).
struct AttentionDims {
  int64_t batch_heads = 0;  // batch x heads of the pieces (equal for q, k and v)
  int64_t seq_q = 0, seq_k = 0, head_dim = 0;
  int64_t q_begin = 0, k_begin = 0;
  bool causal = false;
  double scale = 1;
  // The number of leading keys query row i may see.
  int64_t visible_keys(int64_t i) const {
    if (!causal) return seq_k;
    return std::clamp<int64_t>(q_begin + i - k_begin + 1, 0, seq_k);
  }
};

namespace detail {

template <class C>
C dot(const C* a, const C* b, int64_t n) {
  C s = 0;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// Keys are visited in blocks of this many: one block's scores for all the slice's queries,
// (seq_q, kAttentionKeyBlock), live in a buffer; never (seq_q, seq_k).
constexpr int64_t kAttentionKeyBlock = 64;

// out (may be null: only lse) and lse (may be null) of one (batch x head) slice, in C. Per key
// block two GEMMs (the block's scores q k_b^T, then p_b v_b), and between them the online
// softmax per row: running max m and sum l, the accumulated output rescaled by exp(m - m_new)
// as the max grows. acc: seq_q x head_dim scratch (the output before the division by l).
template <class C>
void attention_forward_slice(const C* q, const C* k, const C* v, const AttentionDims& d, C* out, C* lse) {
  const int64_t D = d.head_dim, sq = d.seq_q;
  const C minus_inf = -std::numeric_limits<C>::infinity();
  std::vector<C> m(sq, minus_inf), l(sq, C(0)), acc(out ? sq * D : 0, C(0)), block_out(out ? sq * D : 0);
  std::vector<C> s(sq * kAttentionKeyBlock);
  const int64_t last = sq > 0 && D > 0 ? d.visible_keys(sq - 1) : 0;  // the most keys a row sees
  for (int64_t j0 = 0; j0 < last; j0 += kAttentionKeyBlock) {
    const int64_t n = std::min(kAttentionKeyBlock, last - j0);
    // Causal: the rows before `first` see no key of this block; the GEMMs skip them.
    const int64_t first = d.causal ? std::clamp<int64_t>(d.k_begin + j0 - d.q_begin, 0, sq) : 0, rows = sq - first;
    matmul<C>(q + first * D, Shape{rows, D}, k + j0 * D, Shape{n, D}, s.data(), Shape{rows, n}, false, true);
    for (int64_t i = first; i < sq; ++i) {
      C* si = s.data() + (i - first) * n;
      const int64_t seen = std::clamp<int64_t>(d.visible_keys(i) - j0, 0, n);
      C m_new = m[i];
      for (int64_t j = 0; j < seen; ++j) m_new = std::max(m_new, si[j] *= static_cast<C>(d.scale));
      const C correction = seen ? std::exp(m[i] - m_new) : C(1);  // 0 on a row's first block (m = -inf)
      C sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += si[j] = j < seen ? std::exp(si[j] - m_new) : C(0);
      l[i] = l[i] * correction + sum;
      m[i] = m_new;
      if (out && correction != C(1))
        for (int64_t c = 0; c < D; ++c) acc[i * D + c] *= correction;
    }
    if (!out) continue;
    matmul<C>(s.data(), Shape{rows, n}, v + j0 * D, Shape{n, D}, block_out.data(), Shape{rows, D});
    for (int64_t e = 0; e < rows * D; ++e) acc[first * D + e] += block_out[e];
  }
  for (int64_t i = 0; i < sq; ++i) {
    if (out)
      for (int64_t c = 0; c < D; ++c) out[i * D + c] = l[i] > 0 ? acc[i * D + c] / l[i] : C(0);
    if (lse) lse[i] = l[i] > 0 ? m[i] + std::log(l[i]) : minus_inf;
  }
}

// Calls f(i, j, p_ij, ds_ij) for every visible (query, key) pair of one (batch x head) slice.
template <class C, class F>
void for_each_attention_pair(const C* q, const C* k, const C* v, const C* out, const C* g, const C* lse,
                             const AttentionDims& d, F&& f) {
  const int64_t D = d.head_dim;
  for (int64_t i = 0; i < d.seq_q; ++i) {
    if (std::isinf(lse[i]) && lse[i] < 0) continue;  // saw no key
    const C* qi = q + i * D;
    const C* gi = g + i * D;
    const C Di = dot(gi, out + i * D, D);
    const int64_t keys = d.visible_keys(i);
    for (int64_t j = 0; j < keys; ++j) {
      const C p = std::exp(dot(qi, k + j * D, D) * static_cast<C>(d.scale) - lse[i]);
      f(i, j, p, p * (dot(gi, v + j * D, D) - Di));
    }
  }
}

// The whole pieces in compute_t<T>: a copy for 16-bit T, the pointer itself otherwise.
template <class T>
struct Widened {
  using C = compute_t<T>;
  std::vector<C> buffer;
  const C* data;
  Widened(const T* x, int64_t n) {
    if constexpr (is_half_v<T>) {
      buffer = widen(x, n);
      data = buffer.data();
    } else {
      data = x;
    }
  }
};

// An output in compute_t<T>, zeroed (the backward kernels accumulate into it): written in
// place for float and double, through a float buffer rounded once at the end for 16-bit T.
template <class T>
struct Narrowed {
  using C = compute_t<T>;
  std::vector<C> buffer;
  T* target;
  int64_t n;
  Narrowed(T* out, int64_t count) : target(out), n(count) {
    if constexpr (is_half_v<T>) buffer.assign(n, C(0));
    else std::fill(out, out + n, T(0));
  }
  C* data() {
    if constexpr (is_half_v<T>) return buffer.data();
    else return target;
  }
  void finish() {
    if constexpr (is_half_v<T>) narrow(buffer.data(), n, target);
  }
};

// The backward kernels' inputs in compute_t<T>, and their visible pairs per (batch x head).
template <class T>
struct BackwardInputs {
  using C = compute_t<T>;
  const AttentionDims& d;
  int64_t nq, nk;  // elements of one (batch x head) slice of q (and out, g) and of k (and v)
  Widened<T> q, k, v, out, g;
  const C* lse;
  BackwardInputs(const T* q_, const T* k_, const T* v_, const T* out_, const T* g_, const C* lse_,
                 const AttentionDims& dims)
      : d(dims), nq(dims.seq_q * dims.head_dim), nk(dims.seq_k * dims.head_dim), q(q_, dims.batch_heads * nq),
        k(k_, dims.batch_heads * nk), v(v_, dims.batch_heads * nk), out(out_, dims.batch_heads * nq),
        g(g_, dims.batch_heads * nq), lse(lse_) {}
  template <class F>
  void for_each_pair(int64_t bh, F&& f) const {
    for_each_attention_pair<C>(q.data + bh * nq, k.data + bh * nk, v.data + bh * nk, out.data + bh * nq,
                               g.data + bh * nq, lse + bh * d.seq_q, d, f);
  }
};

}  // namespace detail

// out (batch, heads, seq_q, head_dim) = softmax(scale q k^T [+ mask]) v; lse (batch, heads,
// seq_q) in compute_t<T> = the log-sum-exp of each row's scaled scores. Either output may be
// null (the forward without autograd skips lse; the lse op skips out and v).
template <FloatingElement T>
void attention_forward(const T* q, const T* k, const T* v, const AttentionDims& d, T* out, compute_t<T>* lse) {
  using C = compute_t<T>;
  const int64_t nq = d.seq_q * d.head_dim, nk = d.seq_k * d.head_dim;
  const detail::Widened<T> qw(q, d.batch_heads * nq), kw(k, d.batch_heads * nk),
      vw(out ? v : k, out ? d.batch_heads * nk : 0);
  detail::Narrowed<T> o(out, out ? d.batch_heads * nq : 0);
  for (int64_t bh = 0; bh < d.batch_heads; ++bh)
    detail::attention_forward_slice<C>(qw.data + bh * nq, kw.data + bh * nk, out ? vw.data + bh * nk : nullptr, d,
                                       out ? o.data() + bh * nq : nullptr, lse ? lse + bh * d.seq_q : nullptr);
  if (out) o.finish();
}

namespace detail {

// dq and dkv (either may be null: not computed) in one pass over the visible pairs.
template <FloatingElement T>
void attention_backward(const T* q, const T* k, const T* v, const T* out, const T* g, const compute_t<T>* lse,
                        const AttentionDims& d, T* dq, T* dkv) {
  using C = compute_t<T>;
  const int64_t D = d.head_dim;
  const BackwardInputs<T> in(q, k, v, out, g, lse, d);
  const int64_t n = d.batch_heads * in.nk;
  Narrowed<T> rq(dq, dq ? d.batch_heads * in.nq : 0), rkv(dkv, dkv ? 2 * n : 0);
  C* dqc = dq ? rq.data() : nullptr;
  C* dk = dkv ? rkv.data() : nullptr;
  const C scale = static_cast<C>(d.scale);
  for (int64_t bh = 0; bh < d.batch_heads; ++bh) {
    const C *qb = in.q.data + bh * in.nq, *kb = in.k.data + bh * in.nk, *gb = in.g.data + bh * in.nq;
    in.for_each_pair(bh, [&](int64_t i, int64_t j, C p, C ds) {
      if (dqc)
        for (int64_t c = 0; c < D; ++c) dqc[bh * in.nq + i * D + c] += scale * ds * kb[j * D + c];
      if (dk)
        for (int64_t c = 0; c < D; ++c) {
          dk[bh * in.nk + j * D + c] += scale * ds * qb[i * D + c];
          dk[n + bh * in.nk + j * D + c] += p * gb[i * D + c];
        }
    });
  }
  if (dq) rq.finish();
  if (dkv) rkv.finish();
}

}  // namespace detail

// dq (the shape of q) from q, k, v, out, g (the gradient of out) and lse.
template <FloatingElement T>
void attention_backward_q(const T* q, const T* k, const T* v, const T* out, const T* g, const compute_t<T>* lse,
                          const AttentionDims& d, T* dq) {
  detail::attention_backward<T>(q, k, v, out, g, lse, d, dq, nullptr);
}

// dkv (2, batch, heads, seq_k, head_dim): dk, then dv, from the same inputs. With q a slice of
// the queries these are this slice's contributions (the op's P(sum) output).
template <FloatingElement T>
void attention_backward_kv(const T* q, const T* k, const T* v, const T* out, const T* g, const compute_t<T>* lse,
                           const AttentionDims& d, T* dkv) {
  detail::attention_backward<T>(q, k, v, out, g, lse, d, nullptr, dkv);
}

// Compiled into the library (core/instances.hpp), in src/op/attention.cpp.
#define SPSD_CPU_ATTENTION_INSTANCES(prefix, T)                                                                  \
  prefix template void attention_forward<T>(const T*, const T*, const T*, const AttentionDims&, T*, compute_t<T>*); \
  prefix template void attention_backward_q<T>(const T*, const T*, const T*, const T*, const T*, const compute_t<T>*, \
                                               const AttentionDims&, T*);                                          \
  prefix template void attention_backward_kv<T>(const T*, const T*, const T*, const T*, const T*,                  \
                                                const compute_t<T>*, const AttentionDims&, T*);
SPSD_FOR_EACH_FLOATING(SPSD_CPU_ATTENTION_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
