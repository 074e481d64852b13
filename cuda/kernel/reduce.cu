// Reductions over axes on the device. The axes are grouped like the cpu kernel (group_axes:
// alternating kept/reduced runs, size-1 axes dropped); the innermost group picks the kernel:
// a reduced one gives one warp per output for short rows, else one block (threads stride along
// contiguous memory); a kept one gives one thread column per output (neighbouring threads read
// neighbouring elements) with the reduced range split over threadIdx.y.
// Kernels read In and write Out, folding in Acc = compute_t<In>: a 16-bit tensor folds in float,
// its partial results of a split row stay float (In = T, Out = float, then In = float, Out = T),
// so each output rounds once.
#include "common.cuh"  // first: its pragma covers the cpu headers below
#include "reduce.cuh"

#include <limits>

#include "spsd/core/reduce_op.hpp"
#include "spsd/kernel/cpu/reduce.hpp"
#include "spsd/kernel/cuda/elementwise.hpp"
#include "spsd/kernel/cuda/reduce.hpp"

namespace spsd::kernel::cuda {

namespace detail {

// The offset of reduced index r: one group is a plain stride, several need the index split.
__device__ inline int64_t reduced_offset(const Strided<1>& red, int64_t r) {
  if (red.ndim == 1) return r * red.strides[0][0];
  int64_t off[1];
  red.offsets(r, off);
  return off[0];
}

// One block per (output o, part p): the fold of reduced indices [p * chunk, (p + 1) * chunk)
// into out[o * parts + p]. parts > 1 splits long rows over several blocks when there are few
// outputs (a full sum would otherwise run on one SM); a second pass folds the parts.
template <class In, class Out, class F, class Acc = compute_t<In>>
__global__ void reduce_rows_kernel(F f, const In* x, Out* out, int64_t out_n, int64_t red_n, Strided<1> kept,
                                   Strided<1> red, Acc identity, int64_t parts, int64_t chunk) {
  __shared__ Acc scratch[kThreads];
  for (int64_t item = blockIdx.x; item < out_n * parts; item += gridDim.x) {
    const int64_t o = item / parts, begin = item % parts * chunk, end = min(red_n, begin + chunk);
    int64_t base[1];
    kept.offsets(o, base);
    Acc acc = identity;
#pragma unroll 4  // several loads in flight per thread
    for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x)
      acc = f(acc, widen(x[base[0] + reduced_offset(red, r)]));
    acc = block_reduce(f, acc, scratch);
    if (threadIdx.x == 0) out[item] = narrow<Out>(acc);
  }
}

// One warp per output, for short rows (kWarpRowMax elements or fewer): a block per row would
// spend more on its barriers than on its few loads (a row sum of 1024-element rows ran at 0.31-0.40
// of copy bandwidth on an H100 that way; docs/benchmarks.md, GPU).
constexpr int64_t kWarpRowMax = 2048;

template <class In, class Out, class F, class Acc = compute_t<In>>
__global__ void reduce_short_rows_kernel(F f, const In* x, Out* out, int64_t out_n, int64_t red_n, Strided<1> kept,
                                         Strided<1> red, Acc identity) {
  const int64_t warps = blockDim.x / 32, lane = threadIdx.x % 32;
  // o is the same on every lane of a warp, so each warp runs the loop and its shuffles together.
  for (int64_t o = blockIdx.x * warps + threadIdx.x / 32; o < out_n; o += static_cast<int64_t>(gridDim.x) * warps) {
    int64_t base[1];
    kept.offsets(o, base);
    Acc acc = identity;
#pragma unroll 4  // several loads in flight per thread
    for (int64_t r = lane; r < red_n; r += 32) acc = f(acc, widen(x[base[0] + reduced_offset(red, r)]));
    acc = warp_reduce(f, acc);
    if (lane == 0) out[o] = narrow<Out>(acc);
  }
}

// reduce_short_rows_kernel for dense rows (x row-major, 16-byte aligned, a row a whole number of
// packs): each lane loads a 16-byte pack at a time, a quarter of the load instructions of one
// float per lane for the same bytes (that kernel's row sum of 1024-float rows reached 0.72 of
// copy bandwidth on an H200).
template <class In, class Out, class F, class Acc = compute_t<In>>
__global__ void reduce_dense_short_rows_kernel(F f, const In* x, Out* out, int64_t out_n, int64_t n, Acc identity) {
  constexpr int k = Pack<In>::kSize;
  const int64_t warps = blockDim.x / 32, lane = threadIdx.x % 32, packs = n / k;
  for (int64_t o = blockIdx.x * warps + threadIdx.x / 32; o < out_n; o += static_cast<int64_t>(gridDim.x) * warps) {
    const Pack<In>* row = reinterpret_cast<const Pack<In>*>(x + o * n);
    Acc acc = identity;
#pragma unroll 2
    for (int64_t p = lane; p < packs; p += 32) {
      const Pack<In> v = row[p];
#pragma unroll
      for (int j = 0; j < k; ++j) acc = f(acc, widen(v.v[j]));
    }
    acc = warp_reduce(f, acc);
    if (lane == 0) out[o] = narrow<Out>(acc);
  }
}

constexpr int kColX = 32, kColY = 16;

// Part p = blockIdx.y of the reduced range ([p * chunk, (p + 1) * chunk)) for outputs o,
// into out[p * out_n + o]; gridDim.y == 1 is the whole reduction.
template <class In, class Out, class F, class Acc = compute_t<In>>
__global__ void reduce_cols_kernel(F f, const In* x, Out* out, int64_t out_n, int64_t red_n, Strided<1> kept,
                                   Strided<1> red, Acc identity, int64_t chunk) {
  __shared__ Acc scratch[kColY][kColX];
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk, end = min(red_n, begin + chunk);
  for (int64_t o0 = static_cast<int64_t>(blockIdx.x) * kColX; o0 < out_n; o0 += static_cast<int64_t>(gridDim.x) * kColX) {
    const int64_t o = o0 + threadIdx.x;
    Acc acc = identity;
    if (o < out_n) {
      int64_t base[1];
      kept.offsets(o, base);
      for (int64_t r = begin + threadIdx.y; r < end; r += kColY) acc = f(acc, widen(x[base[0] + reduced_offset(red, r)]));
    }
    scratch[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && o < out_n) {
      for (int y = 1; y < kColY; ++y) acc = f(acc, scratch[y][threadIdx.x]);
      out[static_cast<int64_t>(blockIdx.y) * out_n + o] = narrow<Out>(acc);
    }
    __syncthreads();
  }
}

// Parts to split each output's reduction into so that about 4 blocks per SM run: 1 when the
// outputs alone fill the GPU or the rows are short (min_chunk elements or more per part).
inline int64_t split_parts(int64_t blocks, int64_t red_n, int64_t min_chunk, int64_t cap) {
  static thread_local int sms = 0;  // per thread: simulated ranks may sit on different GPUs
  if (sms == 0) {
    int device = 0;
    check_cuda(cudaGetDevice(&device), "reduce", "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "reduce", "SM count");
  }
  const int64_t want = 4 * static_cast<int64_t>(sms);
  if (blocks >= want) return 1;
  return std::clamp<int64_t>(std::min((want + blocks - 1) / blocks, red_n / min_chunk), 1, cap);
}

template <class Body>
void with_reduce_fn(ReduceOp op, Body&& body) {
  switch (op) {
    case ReduceOp::kSum: return body(AddOf{});
    case ReduceOp::kMax: return body(MaxOf{});
    case ReduceOp::kMin: return body(MinOf{});
  }
  ::spsd::detail::throw_error("reduce", "invalid op value ", static_cast<int>(op));
}

}  // namespace detail

template <Element T>
void reduce(ReduceOp op, const T* x, const Shape& x_shape, std::span<const int64_t> axes, T* out, void* stream) {
  for (size_t i = 0; i < axes.size(); ++i) {
    SPSD_CHECK(axes[i] >= 0 && axes[i] < x_shape.ndim() && (i == 0 || axes[i] > axes[i - 1]), "reduce", "axes ",
               ::spsd::detail::join({axes.begin(), axes.end()}), " must be sorted, unique and in range for shape ",
               x_shape);
  }
  int64_t out_n = 1;
  for (int64_t d = 0, next = 0; d < x_shape.ndim(); ++d) {
    if (next < static_cast<int64_t>(axes.size()) && axes[next] == d) ++next;
    else out_n *= x_shape[d];
  }
  if (out_n == 0) return;
  if (x_shape.numel() == 0) {  // an empty reduced extent: the identity partial layouts pad with
    fill<T>(out, out_n, reduce_identity<T>(op), stream);
    return;
  }
  // Non-empty floating max/min start from -inf/+inf, as the cpu kernel; 16-bit types fold in float.
  using Acc = compute_t<T>;
  const Acc identity = std::numeric_limits<Acc>::has_infinity && op != ReduceOp::kSum
                           ? (op == ReduceOp::kMax ? -std::numeric_limits<Acc>::infinity()
                                                   : std::numeric_limits<Acc>::infinity())
                           : static_cast<Acc>(reduce_identity<T>(op));
  const cpu::detail::ReduceGroups g = cpu::detail::group_axes(x_shape, axes);
  const size_t r = g.dims.size();
  if (r == 0 || (r == 1 && !g.reduced[0])) {  // nothing of extent > 1 is reduced: a copy
    detail::check_cuda(cudaMemcpyAsync(out, x, static_cast<size_t>(out_n) * sizeof(T), cudaMemcpyDeviceToDevice,
                                       detail::as_stream(stream)),
                       "reduce", "cudaMemcpyAsync");
    return;
  }
  // x's stride of each group, then the kept and the reduced groups as two index spaces; out is
  // dense over the kept ones, in order.
  std::vector<int64_t> group_stride(r), kept_dims, kept_strides, red_dims, red_strides;
  for (int64_t d = static_cast<int64_t>(r) - 1, stride = 1; d >= 0; --d) {
    group_stride[d] = stride;
    stride *= g.dims[d];
  }
  for (size_t d = 0; d < r; ++d) {
    (g.reduced[d] ? red_dims : kept_dims).push_back(g.dims[d]);
    (g.reduced[d] ? red_strides : kept_strides).push_back(group_stride[d]);
  }
  const int64_t red_n = x_shape.numel() / out_n;
  const auto kept = detail::make_strided<1>("reduce", kept_dims, {kept_strides});
  const auto red = detail::make_strided<1>("reduce", red_dims, {red_strides});
  cudaStream_t s = detail::as_stream(stream);
  detail::with_reduce_fn(op, [&](auto f) {
    // Few outputs over long rows: the parts go to a stream-ordered scratch buffer (the pool
    // behind cudaMallocAsync reuses it without a device synchronization), then one more fold.
    // The parts stay in Acc, so a 16-bit output rounds once.
    auto fold_parts = [&](int64_t parts, auto&& first_pass, auto&& second_pass) {
      Acc* partial = nullptr;
      detail::check_cuda(cudaMallocAsync(reinterpret_cast<void**>(&partial), out_n * parts * sizeof(Acc), s), "reduce",
                         "cudaMallocAsync of the partial results");
      first_pass(partial);
      second_pass(partial);
      detail::check_cuda(cudaFreeAsync(partial, s), "reduce", "cudaFreeAsync");
    };
    if (g.reduced.back()) {
      auto rows = [&]<class In, class Out>(const In* in, Out* to, int64_t n, const auto& kept_space,
                                           const auto& red_space, int64_t parts) {
        if (parts == 1 && n <= detail::kWarpRowMax) {
          const int warps_per_block = detail::kThreads / 32;
          const unsigned blocks = static_cast<unsigned>(
              std::min<int64_t>((out_n + warps_per_block - 1) / warps_per_block, int64_t{1} << 20));
          const bool dense = red_space.ndim == 1 && red_space.strides[0][0] == 1 &&
                             (kept_space.ndim == 0 || (kept_space.ndim == 1 && kept_space.strides[0][0] == n)) &&
                             n % detail::Pack<In>::kSize == 0 && detail::aligned_for_packs(in);
          if (dense)
            detail::reduce_dense_short_rows_kernel<<<blocks, detail::kThreads, 0, s>>>(f, in, to, out_n, n, identity);
          else
            detail::reduce_short_rows_kernel<<<blocks, detail::kThreads, 0, s>>>(f, in, to, out_n, n, kept_space,
                                                                                 red_space, identity);
          detail::check_launch("reduce");
          return;
        }
        const int64_t chunk = (n + parts - 1) / parts;
        const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(out_n * parts, int64_t{1} << 20));
        detail::reduce_rows_kernel<<<blocks, detail::row_threads(chunk), 0, s>>>(f, in, to, out_n, n, kept_space,
                                                                                red_space, identity, parts, chunk);
        detail::check_launch("reduce");
      };
      const int64_t parts = detail::split_parts(out_n, red_n, 4096, int64_t{1} << 16);
      if (parts == 1) return rows(x, out, red_n, kept, red, 1);
      // Pass 2 folds each output's parts: rows of `parts` contiguous values.
      const auto part_rows = detail::make_strided<1>("reduce", {out_n}, {std::vector<int64_t>{parts}});
      const auto part_cols = detail::make_strided<1>("reduce", {parts}, {std::vector<int64_t>{1}});
      fold_parts(parts, [&](Acc* partial) { rows(x, partial, red_n, kept, red, parts); },
                 [&](Acc* partial) { rows(static_cast<const Acc*>(partial), out, parts, part_rows, part_cols, 1); });
    } else {
      auto cols = [&]<class In, class Out>(const In* in, Out* to, int64_t n, const auto& kept_space,
                                           const auto& red_space, int64_t parts) {
        const int64_t chunk = (n + parts - 1) / parts;
        const dim3 threads(detail::kColX, detail::kColY), grid(detail::blocks_for(out_n, detail::kColX),
                                                               static_cast<unsigned>(parts));
        detail::reduce_cols_kernel<<<grid, threads, 0, s>>>(f, in, to, out_n, n, kept_space, red_space, identity, chunk);
        detail::check_launch("reduce");
      };
      const int64_t parts =
          detail::split_parts((out_n + detail::kColX - 1) / detail::kColX, red_n, 16 * detail::kColY, 65535);
      if (parts == 1) return cols(x, out, red_n, kept, red, 1);
      // Pass 2 folds part p of output o, at p * out_n + o: columns again.
      const auto part_cols_kept = detail::make_strided<1>("reduce", {out_n}, {std::vector<int64_t>{1}});
      const auto part_red = detail::make_strided<1>("reduce", {parts}, {std::vector<int64_t>{out_n}});
      fold_parts(parts, [&](Acc* partial) { cols(x, partial, red_n, kept, red, parts); },
                 [&](Acc* partial) { cols(static_cast<const Acc*>(partial), out, parts, part_cols_kept, part_red, 1); });
    }
  });
}

#define SPSD_INSTANTIATE(T) \
  template void reduce<T>(ReduceOp, const T*, const Shape&, std::span<const int64_t>, T*, void*);
SPSD_CUDA_FOR_EACH_ELEMENT(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
