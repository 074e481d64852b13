#pragma once
// Scaled dot-product attention on one rank's pieces, fused: per query row an online softmax
// over blocks of keys (running max, running sum, the output accumulated and rescaled as the max
// grows), so no (seq_q, seq_k) matrix is ever held. The backward kernels recompute each tile's
// probabilities from the saved log-sum-exp (FlashAttention-2's backward):
//   p_ij = exp(scale q_i.k_j - lse_i),  D_i = g_i.out_i,  ds_ij = p_ij (g_i.v_j - D_i)
//   dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i,  dv_j = sum_i p_ij g_i
// on tiles of kAttentionQueryBlock queries by kAttentionKeyBlock keys: per tile two GEMMs (the
// scores q k^T and g v^T), one vectorized pass making p and ds, then the gradient GEMMs
// accumulating into dq (the queries' tile, kept while the keys stream by) or into dk and dv
// (the keys' tile, kept while the queries stream by). Every product is a BLAS GEMM that scales
// and accumulates itself (blas_gemm_ex); exp is kernel/cpu/vector_math.hpp's. A context up to
// one block long is one tile: short contexts pay no tiling.
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
#include "spsd/kernel/cpu/vector_math.hpp"

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

// Keys are visited in blocks of this many, queries (in the backward) in blocks of
// kAttentionQueryBlock: a tile's scores, (queries, kAttentionKeyBlock), live in a buffer; never
// (seq_q, seq_k).
constexpr int64_t kAttentionKeyBlock = 64;
constexpr int64_t kAttentionQueryBlock = 64;

// c (m, n) = alpha op(a) op(b) + beta c, row strides lda, ldb, ldc (BLAS; C is float or double).
template <class C>
void tile_gemm(const C* a, int64_t lda, bool trans_a, const C* b, int64_t ldb, bool trans_b, C* c, int64_t ldc,
               int64_t m, int64_t n, int64_t k, C alpha, C beta) {
  blas_gemm_ex(a, b, c, blas_int(m), blas_int(n), blas_int(k), blas_int(lda), blas_int(ldb), blas_int(ldc), trans_a,
               trans_b, alpha, beta);
}

// out (may be null: only lse) and lse (may be null) of one (batch x head) slice, in C. Per key
// block two GEMMs (the block's scaled scores q k_b^T, then acc += p_b v_b), and between them the
// online softmax per row: running max m and sum l, the accumulated output acc rescaled by
// exp(m - m_new) as the max grows. acc: seq_q x head_dim scratch (the output before the
// division by l).
template <class C>
void attention_forward_slice(const C* q, const C* k, const C* v, const AttentionDims& d, C* out, C* lse) {
  const int64_t D = d.head_dim, sq = d.seq_q;
  const C minus_inf = -std::numeric_limits<C>::infinity();
  std::vector<C> m(sq, minus_inf), l(sq, C(0)), acc(out ? sq * D : 0, C(0));
  std::vector<C> s(sq * kAttentionKeyBlock);
  const int64_t last = sq > 0 && D > 0 ? d.visible_keys(sq - 1) : 0;  // the most keys a row sees
  const auto add = [](C a, C b) { return a + b; };
  for (int64_t j0 = 0; j0 < last; j0 += kAttentionKeyBlock) {
    const int64_t n = std::min(kAttentionKeyBlock, last - j0);
    // Causal: the rows before `first` see no key of this block; the GEMMs skip them.
    const int64_t first = d.causal ? std::clamp<int64_t>(d.k_begin + j0 - d.q_begin, 0, sq) : 0, rows = sq - first;
    tile_gemm<C>(q + first * D, D, false, k + j0 * D, D, true, s.data(), n, rows, n, D, static_cast<C>(d.scale), C(0));
    for (int64_t i = first; i < sq; ++i) {
      C* si = s.data() + (i - first) * n;
      const int64_t seen = std::clamp<int64_t>(d.visible_keys(i) - j0, 0, n);
      const C m_new = fold(MaxOf{}, si, seen, m[i]);
      const C correction = seen ? vexp(m[i] - m_new) : C(1);  // 0 on a row's first block (m = -inf)
      map1([m_new](C x) { return vexp(x - m_new); }, si, si, seen);
      fill_n(si + seen, n - seen, C(0));
      l[i] = l[i] * correction + fold(add, si, seen, C(0));
      m[i] = m_new;
      if (out && correction != C(1)) map1([correction](C x) { return x * correction; }, &acc[i * D], &acc[i * D], D);
    }
    if (out) tile_gemm<C>(s.data(), n, false, v + j0 * D, D, false, &acc[first * D], D, rows, D, n, C(1), C(1));
  }
  for (int64_t i = 0; i < sq; ++i) {
    if (out) {
      const C inv = l[i] > 0 ? C(1) / l[i] : C(0);
      map1([inv](C x) { return x * inv; }, &acc[i * D], out + i * D, D);
    }
    if (lse) lse[i] = l[i] > 0 ? m[i] + std::log(l[i]) : minus_inf;
  }
}

// One (batch x head) slice of the backward's inputs in C, and its tiles.
template <class C>
struct BackwardSlice {
  const C *q, *k, *v, *g, *lse;
  const AttentionDims& d;
  std::vector<C> delta;  // D_i = g_i . out_i

  BackwardSlice(const C* q_, const C* k_, const C* v_, const C* out, const C* g_, const C* lse_,
                const AttentionDims& dims)
      : q(q_), k(k_), v(v_), g(g_), lse(lse_), d(dims), delta(dims.seq_q) {
    const int64_t D = d.head_dim;
    for (int64_t i = 0; i < d.seq_q; ++i)
      delta[i] = fold_map2([](C a, C b) { return a + b; }, [](C a, C b) { return a * b; }, g + i * D, out + i * D,
                           D, C(0));
  }

  // The keys query row i sees: none for a row whose lse is -inf (it saw none in the forward).
  int64_t keys_of(int64_t i) const { return std::isinf(lse[i]) && lse[i] < 0 ? 0 : d.visible_keys(i); }

  // p and ds (m x n, row stride n) of queries [i0, i0 + m) and keys [j0, j0 + n): the two score
  // GEMMs, then per row one vectorized pass; an invisible pair has p = ds = 0.
  void tile(int64_t i0, int64_t m, int64_t j0, int64_t n, C* p, C* ds) const {
    const int64_t D = d.head_dim;
    const C scale = static_cast<C>(d.scale);
    tile_gemm<C>(q + i0 * D, D, false, k + j0 * D, D, true, p, n, m, n, D, scale, C(0));
    tile_gemm<C>(g + i0 * D, D, false, v + j0 * D, D, true, ds, n, m, n, D, C(1), C(0));
    for (int64_t r = 0; r < m; ++r) {
      const int64_t i = i0 + r, seen = std::clamp<int64_t>(keys_of(i) - j0, 0, n);
      C *pr = p + r * n, *dr = ds + r * n;
      const C li = lse[i], di = delta[i];
      for_each_index<C>(seen, [=](int64_t j) {
        const C e = vexp(pr[j] - li);
        pr[j] = e;
        dr[j] = e * (dr[j] - di);
      });
      fill_n(pr + seen, n - seen, C(0));
      fill_n(dr + seen, n - seen, C(0));
    }
  }
};

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

// The backward kernels' inputs in compute_t<T>: the whole pieces, then one slice at a time.
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
  BackwardSlice<C> slice(int64_t bh) const {
    return {q.data + bh * nq, k.data + bh * nk, v.data + bh * nk, out.data + bh * nq, g.data + bh * nq,
            lse + bh * d.seq_q, d};
  }
};

}  // namespace detail

// out (batch, heads, seq_q, head_dim) = softmax(scale q k^T [+ mask]) v; lse (batch, heads,
// seq_q) in compute_t<T> = the log-sum-exp of each row's scaled scores. Either output may be
// null (the lse op skips out and v; a training forward on the cpu keeps lse, for the
// attention_lse kernel that follows: op/attention.hpp).
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

// dq of one slice: per block of queries (its dq rows kept while the keys stream by), the tiles
// of the keys its rows see; dq += scale ds k.
template <class C>
void attention_grad_q_slice(const BackwardSlice<C>& b, C* dq) {
  const AttentionDims& d = b.d;
  const int64_t D = d.head_dim;
  std::vector<C> p(kAttentionQueryBlock * kAttentionKeyBlock), ds(p.size());
  for (int64_t i0 = 0; i0 < d.seq_q; i0 += kAttentionQueryBlock) {
    const int64_t m = std::min(kAttentionQueryBlock, d.seq_q - i0), keys = d.visible_keys(i0 + m - 1);
    for (int64_t j0 = 0; j0 < keys; j0 += kAttentionKeyBlock) {
      const int64_t n = std::min(kAttentionKeyBlock, keys - j0);
      b.tile(i0, m, j0, n, p.data(), ds.data());
      tile_gemm<C>(ds.data(), n, false, b.k + j0 * D, D, false, dq + i0 * D, D, m, D, n, static_cast<C>(d.scale), C(1));
    }
  }
}

// dk and dv of one slice: per block of keys (its rows kept while the queries stream by), the
// tiles of the queries that see it; dk += scale ds^T q, dv += p^T g.
template <class C>
void attention_grad_kv_slice(const BackwardSlice<C>& b, C* dk, C* dv) {
  const AttentionDims& d = b.d;
  const int64_t D = d.head_dim;
  std::vector<C> p(kAttentionQueryBlock * kAttentionKeyBlock), ds(p.size());
  for (int64_t j0 = 0; j0 < d.seq_k; j0 += kAttentionKeyBlock) {
    const int64_t n = std::min(kAttentionKeyBlock, d.seq_k - j0);
    // Causal: the queries before `first` see no key of this block.
    const int64_t first = d.causal ? std::clamp<int64_t>(d.k_begin + j0 - d.q_begin, 0, d.seq_q) : 0;
    for (int64_t i0 = first; i0 < d.seq_q; i0 += kAttentionQueryBlock) {
      const int64_t m = std::min(kAttentionQueryBlock, d.seq_q - i0);
      b.tile(i0, m, j0, n, p.data(), ds.data());
      tile_gemm<C>(ds.data(), n, true, b.q + i0 * D, D, false, dk + j0 * D, D, n, D, m, static_cast<C>(d.scale), C(1));
      tile_gemm<C>(p.data(), n, true, b.g + i0 * D, D, false, dv + j0 * D, D, n, D, m, C(1), C(1));
    }
  }
}

// dq and dkv (either may be null: not computed), slice by slice.
template <FloatingElement T>
void attention_backward(const T* q, const T* k, const T* v, const T* out, const T* g, const compute_t<T>* lse,
                        const AttentionDims& d, T* dq, T* dkv) {
  using C = compute_t<T>;
  if (d.head_dim == 0) return;
  const BackwardInputs<T> in(q, k, v, out, g, lse, d);
  const int64_t n = d.batch_heads * in.nk;
  Narrowed<T> rq(dq, dq ? d.batch_heads * in.nq : 0), rkv(dkv, dkv ? 2 * n : 0);
  for (int64_t bh = 0; bh < d.batch_heads; ++bh) {
    const BackwardSlice<C> b = in.slice(bh);
    if (dq) attention_grad_q_slice(b, rq.data() + bh * in.nq);
    if (dkv) attention_grad_kv_slice(b, rkv.data() + bh * in.nk, rkv.data() + n + bh * in.nk);
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
