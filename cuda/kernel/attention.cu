// Scaled dot-product attention on the device (kernel/cuda/attention.hpp): fused forward with an
// online softmax, fused backward recomputing the probabilities from lse. Every kernel gives a
// warp one row (a query row, or a key row for dk/dv) and streams the other side through shared
// memory in tiles of 32 rows, one row per lane: lane j computes the dot products of row j, the
// warp reduces across lanes, and each lane accumulates the head_dim columns lane, lane + 32, ...
// in registers (Cols of them: head_dim <= 32 Cols). Tiles are stored with a row stride of
// head_dim + 1 where lanes read along a row (no bank conflicts between lanes).
#include "common.cuh"
#include "reduce.cuh"

#include <cmath>

#include "spsd/kernel/cuda/attention.hpp"

namespace spsd::kernel::cuda {

namespace detail {

constexpr int kRowsPerBlock = 4;  // warps per block, one row each
constexpr int kTile = 32;         // rows per streamed tile: one per lane
constexpr unsigned kAllLanes = 0xffffffffu;

template <class C>
__device__ C warp_sum(C v) {
  return __shfl_sync(kAllLanes, warp_reduce(AddOf{}, v), 0);
}
template <class C>
__device__ C warp_max(C v) {
  return __shfl_sync(kAllLanes, warp_reduce(MaxOf{}, v), 0);
}

// f(c, col) for this lane's head_dim columns col = lane + 32 c < head_dim (its registers c).
template <int Cols, class F>
__device__ __forceinline__ void for_lane_columns(int lane, int64_t head_dim, F&& f) {
#pragma unroll
  for (int c = 0; c < Cols; ++c)
    if (lane + 32 * c < head_dim) f(c, lane + 32 * c);
}

// The number of leading keys query row i sees (AttentionDims::visible_keys on the device).
__device__ inline int64_t visible_keys(const AttentionDims& d, int64_t i) {
  if (!d.causal) return d.seq_k;
  const int64_t n = d.q_begin + i - d.k_begin + 1;
  return n < 0 ? 0 : n > d.seq_k ? d.seq_k : n;
}

// rows x head_dim elements of src (row-major, head_dim apart) into dst with row stride `stride`,
// widened; rows past `valid` are zero. The whole block copies.
template <class T, class C = compute_t<T>>
__device__ void load_rows(const T* src, int64_t valid, int rows, int64_t head_dim, C* dst, int64_t stride) {
  for (int64_t e = threadIdx.x; e < rows * head_dim; e += blockDim.x) {
    const int64_t r = e / head_dim, c = e - r * head_dim;
    dst[r * stride + c] = r < valid ? widen(src[r * head_dim + c]) : C(0);
  }
}

template <class C>
__device__ C row_dot(const C* a, const C* b, int64_t n) {
  C s = 0;
  for (int64_t c = 0; c < n; ++c) s += a[c] * b[c];
  return s;
}

// The rows of a block: kRowsPerBlock consecutive rows (queries, or keys for dk/dv) of one
// (batch x head) slice, one per warp, for a grid of batch_heads x ceil(rows / kRowsPerBlock).
struct BlockRows {
  int64_t slice, first, count;  // the slice, its first row here, the rows here (<= kRowsPerBlock)
  int64_t row;                  // this warp's row
  bool valid;                   // row < rows (the last block may have fewer rows than warps)
  int lane, warp;
};
__device__ inline BlockRows block_rows(int64_t rows) {
  const int64_t tiles = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  BlockRows b;
  b.slice = blockIdx.x / tiles;
  b.first = (blockIdx.x % tiles) * kRowsPerBlock;
  b.count = rows - b.first < kRowsPerBlock ? rows - b.first : kRowsPerBlock;
  b.lane = threadIdx.x % 32;
  b.warp = threadIdx.x / 32;
  b.row = b.first + b.warp;
  b.valid = b.row < rows;
  return b;
}

// Forward: grid of batch_heads x ceil(seq_q / kRowsPerBlock) blocks. Shared memory: the block's
// query rows (kRowsPerBlock x D), a key tile (kTile x (D + 1)) and a value tile (kTile x D).
template <class T, int Cols, class C = compute_t<T>>
__global__ void attention_forward_kernel(const T* q, const T* k, const T* v, AttentionDims d, T* out, C* lse) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  C* q_sh = reinterpret_cast<C*>(smem_raw);
  const int64_t D = d.head_dim, ks = D + 1;
  C* k_sh = q_sh + kRowsPerBlock * D;
  C* v_sh = k_sh + kTile * ks;
  const BlockRows b = block_rows(d.seq_q);
  const int64_t bh = b.slice, i0 = b.first, i = b.row, rows_here = b.count;
  const int lane = b.lane, warp = b.warp;
  const bool row = b.valid;
  load_rows(q + (bh * d.seq_q + i0) * D, rows_here, kRowsPerBlock, D, q_sh, D);
  // The block's last row sees the most keys (visible_keys grows with i).
  const int64_t block_keys = visible_keys(d, i0 + rows_here - 1);
  const int64_t keys = row ? visible_keys(d, i) : 0;
  const C scale = static_cast<C>(d.scale);
  C m = -static_cast<C>(INFINITY), l = 0, acc[Cols];
  for (int c = 0; c < Cols; ++c) acc[c] = 0;
  const T* kb = k + bh * d.seq_k * D;
  const T* vb = v ? v + bh * d.seq_k * D : nullptr;
  for (int64_t j0 = 0; j0 < block_keys; j0 += kTile) {
    __syncthreads();  // the previous tile is consumed (and q_sh written, the first time)
    load_rows(kb + j0 * D, block_keys - j0, kTile, D, k_sh, ks);
    if (out) load_rows(vb + j0 * D, block_keys - j0, kTile, D, v_sh, D);
    __syncthreads();
    const int64_t j = j0 + lane;
    const bool seen = j < keys;
    const C s = seen ? row_dot(q_sh + warp * D, k_sh + lane * ks, D) * scale : -static_cast<C>(INFINITY);
    const C m_new = MaxOf{}(m, warp_max(s));
    if (m_new == -static_cast<C>(INFINITY)) continue;  // nothing seen yet by this row (uniform in the warp)
    const C correction = exp(m - m_new);
    const C p = seen ? exp(s - m_new) : C(0);
    l = l * correction + warp_sum(p);
    for (int c = 0; c < Cols; ++c) acc[c] *= correction;
    if (out) {
      const int n = keys - j0 < kTile ? static_cast<int>(keys - j0) : kTile;
      for (int jj = 0; jj < n; ++jj) {
        const C pj = __shfl_sync(kAllLanes, p, jj);
        for_lane_columns<Cols>(lane, D, [&](int c, int64_t col) { acc[c] += pj * v_sh[jj * D + col]; });
      }
    }
    m = m_new;
  }
  if (!row) return;
  if (out) {
    T* o = out + (bh * d.seq_q + i) * D;
    for_lane_columns<Cols>(lane, D, [&](int c, int64_t col) { o[col] = narrow<T>(l > 0 ? acc[c] / l : C(0)); });
  }
  if (lse && lane == 0) lse[bh * d.seq_q + i] = l > 0 ? m + log(l) : -static_cast<C>(INFINITY);
}

// dq: grid as the forward. Shared memory: the block's q and g rows (2 x kRowsPerBlock x D), a
// key tile and a value tile (kTile x (D + 1) each: lanes dot both).
template <class T, int Cols, class C = compute_t<T>>
__global__ void attention_backward_q_kernel(const T* q, const T* k, const T* v, const T* out, const T* g,
                                            const C* lse, AttentionDims d, T* dq) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int64_t D = d.head_dim, ks = D + 1;
  C* q_sh = reinterpret_cast<C*>(smem_raw);
  C* g_sh = q_sh + kRowsPerBlock * D;
  C* k_sh = g_sh + kRowsPerBlock * D;
  C* v_sh = k_sh + kTile * ks;
  const BlockRows b = block_rows(d.seq_q);
  const int64_t bh = b.slice, i0 = b.first, i = b.row, rows_here = b.count;
  const int lane = b.lane, warp = b.warp;
  const bool row = b.valid;
  const int64_t first = (bh * d.seq_q + i0) * D;
  load_rows(q + first, rows_here, kRowsPerBlock, D, q_sh, D);
  load_rows(g + first, rows_here, kRowsPerBlock, D, g_sh, D);
  const C L = row ? lse[bh * d.seq_q + i] : -static_cast<C>(INFINITY);
  const int64_t keys = row && L != -static_cast<C>(INFINITY) ? visible_keys(d, i) : 0;
  C Di = 0;  // g_i . out_i
  if (row)
    for_lane_columns<Cols>(lane, D, [&](int, int64_t col) {
      Di += widen(g[(bh * d.seq_q + i) * D + col]) * widen(out[(bh * d.seq_q + i) * D + col]);
    });
  Di = warp_sum(Di);
  const int64_t block_keys = visible_keys(d, i0 + rows_here - 1);
  const C scale = static_cast<C>(d.scale);
  C acc[Cols];
  for (int c = 0; c < Cols; ++c) acc[c] = 0;
  const T* kb = k + bh * d.seq_k * D;
  const T* vb = v + bh * d.seq_k * D;
  for (int64_t j0 = 0; j0 < block_keys; j0 += kTile) {
    __syncthreads();
    load_rows(kb + j0 * D, block_keys - j0, kTile, D, k_sh, ks);
    load_rows(vb + j0 * D, block_keys - j0, kTile, D, v_sh, ks);
    __syncthreads();
    const bool seen = j0 + lane < keys;
    C ds = 0;
    if (seen) {
      const C p = exp(row_dot(q_sh + warp * D, k_sh + lane * ks, D) * scale - L);
      ds = p * (row_dot(g_sh + warp * D, v_sh + lane * ks, D) - Di);
    }
    for (int jj = 0; jj < kTile; ++jj) {
      const C dsj = __shfl_sync(kAllLanes, ds, jj);
      for_lane_columns<Cols>(lane, D, [&](int c, int64_t col) { acc[c] += dsj * k_sh[jj * ks + col]; });
    }
  }
  if (!row) return;
  T* o = dq + (bh * d.seq_q + i) * D;
  for_lane_columns<Cols>(lane, D, [&](int c, int64_t col) { o[col] = narrow<T>(acc[c] * scale); });
}

// dk and dv: grid of batch_heads x ceil(seq_k / kRowsPerBlock) blocks, a warp per key row.
// Shared memory: the block's k and v rows (2 x kRowsPerBlock x D); tiles of q, g and out
// (kTile x (D + 1) each) and the tile's lse.
template <class T, int Cols, class C = compute_t<T>>
__global__ void attention_backward_kv_kernel(const T* q, const T* k, const T* v, const T* out, const T* g,
                                             const C* lse, AttentionDims d, T* dkv) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int64_t D = d.head_dim, ks = D + 1;
  C* k_sh = reinterpret_cast<C*>(smem_raw);
  C* v_sh = k_sh + kRowsPerBlock * D;
  C* q_sh = v_sh + kRowsPerBlock * D;
  C* g_sh = q_sh + kTile * ks;
  C* o_sh = g_sh + kTile * ks;
  C* lse_sh = o_sh + kTile * ks;
  const BlockRows b = block_rows(d.seq_k);
  const int64_t bh = b.slice, j0 = b.first, j = b.row, rows_here = b.count;
  const int lane = b.lane, warp = b.warp;
  const bool row = b.valid;
  load_rows(k + (bh * d.seq_k + j0) * D, rows_here, kRowsPerBlock, D, k_sh, D);
  load_rows(v + (bh * d.seq_k + j0) * D, rows_here, kRowsPerBlock, D, v_sh, D);
  // Causal: query i sees key j iff q_begin + i >= k_begin + j, so the block's first key bounds
  // the first query tile.
  int64_t i_first = 0;
  if (d.causal) {
    const int64_t first = d.k_begin + j0 - d.q_begin;
    i_first = first < 0 ? 0 : (first / kTile) * kTile;
  }
  const C scale = static_cast<C>(d.scale);
  C dk[Cols], dv[Cols];
  for (int c = 0; c < Cols; ++c) dk[c] = dv[c] = 0;
  const int64_t base = bh * d.seq_q * D;
  for (int64_t i0 = i_first; i0 < d.seq_q; i0 += kTile) {
    const int64_t valid = d.seq_q - i0;
    __syncthreads();
    load_rows(q + base + i0 * D, valid, kTile, D, q_sh, ks);
    load_rows(g + base + i0 * D, valid, kTile, D, g_sh, ks);
    load_rows(out + base + i0 * D, valid, kTile, D, o_sh, ks);
    if (threadIdx.x < kTile)
      lse_sh[threadIdx.x] = threadIdx.x < valid ? lse[bh * d.seq_q + i0 + threadIdx.x] : -static_cast<C>(INFINITY);
    __syncthreads();
    const int64_t i = i0 + lane;
    const C L = lse_sh[lane];
    const bool seen = row && i < d.seq_q && L != -static_cast<C>(INFINITY) && j < visible_keys(d, i);
    C p = 0, ds = 0;
    if (seen) {
      p = exp(row_dot(q_sh + lane * ks, k_sh + warp * D, D) * scale - L);
      const C Di = row_dot(g_sh + lane * ks, o_sh + lane * ks, D);
      ds = p * (row_dot(g_sh + lane * ks, v_sh + warp * D, D) - Di);
    }
    for (int ii = 0; ii < kTile; ++ii) {
      const C pi = __shfl_sync(kAllLanes, p, ii), dsi = __shfl_sync(kAllLanes, ds, ii);
      for_lane_columns<Cols>(lane, D, [&](int c, int64_t col) {
        dv[c] += pi * g_sh[ii * ks + col];
        dk[c] += dsi * q_sh[ii * ks + col];
      });
    }
  }
  if (!row) return;
  T* dk_out = dkv + (bh * d.seq_k + j) * D;
  T* dv_out = dk_out + d.batch_heads * d.seq_k * D;
  for_lane_columns<Cols>(lane, D, [&](int c, int64_t col) {
    dk_out[col] = narrow<T>(dk[c] * scale);
    dv_out[col] = narrow<T>(dv[c]);
  });
}

// Calls launch(Cols, grid, block) with the smallest Cols (1, 2, 4, 8) such that 32 Cols >= head_dim:
// a block of kRowsPerBlock warps per kRowsPerBlock rows of each (batch x head) slice.
template <class F>
void launch_for_head_dim(const char* name, const AttentionDims& d, int64_t rows, F&& launch) {
  SPSD_CHECK(d.head_dim <= kMaxAttentionHeadDim, name, "the cuda kernels take head_dim up to ", kMaxAttentionHeadDim,
             ", got ", d.head_dim);
  const int64_t blocks = d.batch_heads * ((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  SPSD_CHECK(blocks <= int64_t{0x7fffffff}, name, "needs ", blocks, " blocks, more than one grid holds");
  const dim3 grid(static_cast<unsigned>(blocks)), block(kRowsPerBlock * 32);
  if (d.head_dim <= 32) launch(std::integral_constant<int, 1>{}, grid, block);
  else if (d.head_dim <= 64) launch(std::integral_constant<int, 2>{}, grid, block);
  else if (d.head_dim <= 128) launch(std::integral_constant<int, 4>{}, grid, block);
  else launch(std::integral_constant<int, 8>{}, grid, block);
  check_launch(name);
}

// Kernels needing more than the default 48 KiB of dynamic shared memory opt in (double at
// head_dim 256 takes up to 213 KiB for dk/dv; an H100 block may take 227 KiB).
template <class Kernel>
void allow_shared(Kernel kernel, size_t shared, const char* name) {
  if (shared > 48 * 1024)
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)),
               name, "raising the shared memory limit");
}

}  // namespace detail

template <FloatingElement T>
void attention_forward(const T* q, const T* k, const T* v, const AttentionDims& d, T* out, compute_t<T>* lse,
                       void* stream) {
  using C = compute_t<T>;
  if (d.batch_heads == 0 || d.seq_q == 0) return;
  const char* name = out ? "scaled_dot_product_attention" : "attention_lse";
  const int64_t D = d.head_dim;
  const size_t shared = sizeof(C) * (detail::kRowsPerBlock * D + detail::kTile * (D + 1) + detail::kTile * D);
  detail::launch_for_head_dim(name, d, d.seq_q, [&](auto cols, dim3 grid, dim3 block) {
    const auto kernel = detail::attention_forward_kernel<T, decltype(cols)::value>;
    detail::allow_shared(kernel, shared, name);
    kernel<<<grid, block, shared, detail::as_stream(stream)>>>(q, k, v, d, out, lse);
  });
}

template <FloatingElement T>
void attention_backward_q(const T* q, const T* k, const T* v, const T* out, const T* g, const compute_t<T>* lse,
                          const AttentionDims& d, T* dq, void* stream) {
  using C = compute_t<T>;
  if (d.batch_heads == 0 || d.seq_q == 0) return;
  const char* name = "attention_grad_q";
  const int64_t D = d.head_dim;
  const size_t shared = sizeof(C) * (2 * detail::kRowsPerBlock * D + 2 * detail::kTile * (D + 1));
  detail::launch_for_head_dim(name, d, d.seq_q, [&](auto cols, dim3 grid, dim3 block) {
    const auto kernel = detail::attention_backward_q_kernel<T, decltype(cols)::value>;
    detail::allow_shared(kernel, shared, name);
    kernel<<<grid, block, shared, detail::as_stream(stream)>>>(q, k, v, out, g, lse, d, dq);
  });
}

template <FloatingElement T>
void attention_backward_kv(const T* q, const T* k, const T* v, const T* out, const T* g, const compute_t<T>* lse,
                           const AttentionDims& d, T* dkv, void* stream) {
  using C = compute_t<T>;
  if (d.batch_heads == 0 || d.seq_k == 0) return;
  const char* name = "attention_grad_kv";
  const int64_t D = d.head_dim;
  if (d.seq_q == 0) {  // no query: dk = dv = 0
    detail::check_cuda(cudaMemsetAsync(dkv, 0, sizeof(T) * 2 * d.batch_heads * d.seq_k * D, detail::as_stream(stream)),
                       name, "zeroing dk and dv");
    return;
  }
  const size_t shared = sizeof(C) * (2 * detail::kRowsPerBlock * D + 3 * detail::kTile * (D + 1) + detail::kTile);
  detail::launch_for_head_dim(name, d, d.seq_k, [&](auto cols, dim3 grid, dim3 block) {
    const auto kernel = detail::attention_backward_kv_kernel<T, decltype(cols)::value>;
    detail::allow_shared(kernel, shared, name);
    kernel<<<grid, block, shared, detail::as_stream(stream)>>>(q, k, v, out, g, lse, d, dkv);
  });
}

#define SPSD_INSTANTIATE(T)                                                                                        \
  template void attention_forward<T>(const T*, const T*, const T*, const AttentionDims&, T*, compute_t<T>*, void*); \
  template void attention_backward_q<T>(const T*, const T*, const T*, const T*, const T*, const compute_t<T>*,     \
                                        const AttentionDims&, T*, void*);                                          \
  template void attention_backward_kv<T>(const T*, const T*, const T*, const T*, const T*, const compute_t<T>*,    \
                                         const AttentionDims&, T*, void*);
SPSD_CUDA_FOR_EACH_FLOATING(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
