// matmul on the device. Floating types: cuBLAS's cublasGemmStridedBatchedEx; a row-major
// C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so the operands are passed swapped,
// each with CUBLAS_OP_T where it is stored transposed, and nothing is copied. The compute type
// says how it accumulates: bfloat16/float16 in float (CUBLAS_COMPUTE_32F, tensor cores, no
// reduced-precision split-k reductions), float32 exactly (CUBLAS_COMPUTE_32F) or, at
// MatmulPrecision::kHigh, with TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32), double in double.
// Broadcast batch dims are collapsed; the innermost becomes cuBLAS's batch (stride 0 where an
// operand broadcasts), any outer ones a host loop. Integers: a shared-memory tiled kernel whose
// wrapping sums equal the cpu's int_gemm exactly (wrapping arithmetic is associative).
#include "common.cuh"  // first: its pragma covers the cpu headers below

#include <cublas_v2.h>

#include <climits>

#include "spsd/kernel/cpu/broadcasting.hpp"
#include "spsd/kernel/cpu/gemm.hpp"
#include "spsd/kernel/cuda/elementwise.hpp"
#include "spsd/kernel/cuda/gemm.hpp"
#include "spsd/runtime/matmul_precision.hpp"

namespace spsd::kernel::cuda {

namespace detail {

inline void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]]
    ::spsd::detail::throw_error("matmul", "cuBLAS error during ", what, ": ", cublasGetStatusName(status), " (",
                                cublasGetStatusString(status), ")");
}

inline int blas_int(int64_t v) {
  SPSD_CHECK(v <= INT_MAX, "matmul", "dimension ", v, " exceeds the cuBLAS int range");
  return static_cast<int>(v);
}

// One cuBLAS handle per (thread, device), created on first use and destroyed with the thread:
// simulated ranks are threads, and a handle must not be used by two threads at once. Each has
// its own workspace, made with it and set after every cublasSetStream (which resets it): left
// to itself cuBLAS allocates a workspace inside each CUDA graph capture (a compiled step's,
// compile.md) and may then choose other algorithms than eager did; with the same workspace a
// replay computes the same bits, and a capture allocates nothing.
class Handles {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // what cuBLAS asks for on Hopper
  struct Handle {
    cublasHandle_t handle = nullptr;
    void* workspace = nullptr;
  };
  Handles() = default;
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
  ~Handles() {
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) return;  // the runtime is gone: nothing to release
    for (size_t d = 0; d < handles_.size(); ++d) {
      if (!handles_[d].handle || cudaSetDevice(static_cast<int>(d)) != cudaSuccess) continue;
      cublasDestroy(handles_[d].handle);
      cudaFree(handles_[d].workspace);
    }
    cudaSetDevice(current);
  }
  const Handle& get() {
    int device = 0;
    check_cuda(cudaGetDevice(&device), "matmul", "cudaGetDevice");
    if (handles_.size() <= static_cast<size_t>(device)) handles_.resize(device + 1);
    Handle& h = handles_[device];
    if (!h.handle) {
      check_cuda(cudaMalloc(&h.workspace, kWorkspaceBytes), "matmul", "the cuBLAS workspace");
      check_cublas(cublasCreate(&h.handle), "cublasCreate");
    }
    return h;
  }

 private:
  std::vector<Handle> handles_;
};

cublasHandle_t handle_for(cudaStream_t stream, cublasMath_t math) {
  thread_local Handles handles;
  const Handles::Handle& handle = handles.get();
  cublasHandle_t h = handle.handle;
  check_cublas(cublasSetStream(h, stream), "cublasSetStream");
  check_cublas(cublasSetWorkspace(h, handle.workspace, Handles::kWorkspaceBytes), "cublasSetWorkspace");
  check_cublas(cublasSetMathMode(h, math), "cublasSetMathMode");
  return h;
}

// How cuBLAS stores and multiplies a floating T (the scale type, of alpha and beta, is compute_t<T>).
template <class T>
struct Blas;
template <>
struct Blas<float> {
  static constexpr cudaDataType_t kData = CUDA_R_32F;
  static cublasComputeType_t compute() {
    return matmul_precision() == MatmulPrecision::kHigh ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  }
  static constexpr cublasMath_t kMath = CUBLAS_DEFAULT_MATH;
};
template <>
struct Blas<double> {
  static constexpr cudaDataType_t kData = CUDA_R_64F;
  static cublasComputeType_t compute() { return CUBLAS_COMPUTE_64F; }
  static constexpr cublasMath_t kMath = CUBLAS_DEFAULT_MATH;
};
// 16-bit inputs and output, float accumulation all the way: split-k partial sums stay float too.
struct Blas16 {
  static cublasComputeType_t compute() { return CUBLAS_COMPUTE_32F; }
  static constexpr cublasMath_t kMath =
      static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
};
template <>
struct Blas<bfloat16> : Blas16 {
  static constexpr cudaDataType_t kData = CUDA_R_16BF;
};
template <>
struct Blas<float16> : Blas16 {
  static constexpr cudaDataType_t kData = CUDA_R_16F;
};

// count products c_i (m, n) = op(a_i) (m, k) op(b_i) (k, n), operand i at i * stride
// (row-major); a_i stored (k, m) when ta, b_i stored (n, k) when tb. In cuBLAS's column-major
// view a stored row-major (r, c) matrix is its transpose, so c^T = op(b)^T op(a)^T takes b
// first with OP_T exactly where it is stored transposed.
template <class T>
void gemm_batched(cublasHandle_t h, const T* a, int64_t sa, const T* b, int64_t sb, T* c, int64_t sc, int64_t m,
                  int64_t n, int64_t k, int64_t count, bool ta, bool tb) {
  const compute_t<T> one = 1, zero = 0;
  const int im = blas_int(m), in = blas_int(n), ik = blas_int(k), ic = blas_int(count);
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = ta ? im : ik, ldb = tb ? ik : in;
  constexpr cudaDataType_t t = Blas<T>::kData;
  check_cublas(cublasGemmStridedBatchedEx(h, op_b, op_a, in, im, ik, &one, b, t, ldb, sb, a, t, lda, sa, &zero, c, t,
                                          in, sc, ic, Blas<T>::compute(), CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

constexpr int kIntTile = 16;

// c_bt = op(a_bt) op(b_bt) for batch bt, its a and b offsets from batch; one 16x16 output tile
// per block, k walked in 16-wide slabs staged in shared memory (a stored (k, m) when ta, b
// stored (n, k) when tb: only the loads' indexing changes).
template <class T>
__global__ void int_gemm_kernel(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, int64_t batches,
                                Strided<2> batch, bool ta, bool tb) {
  __shared__ T as[kIntTile][kIntTile], bs[kIntTile][kIntTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row_tiles = (m + kIntTile - 1) / kIntTile, col_tiles = (n + kIntTile - 1) / kIntTile;
  for (int64_t bt = blockIdx.z; bt < batches; bt += gridDim.z) {
    int64_t off[2];
    batch.offsets(bt, off);
    const T *pa = a + off[0], *pb = b + off[1];
    T* pc = c + bt * m * n;
    for (int64_t ti = blockIdx.y; ti < row_tiles; ti += gridDim.y) {
      for (int64_t tj = blockIdx.x; tj < col_tiles; tj += gridDim.x) {
        const int64_t i = ti * kIntTile + ty, j = tj * kIntTile + tx;
        T acc = 0;
        for (int64_t p0 = 0; p0 < k; p0 += kIntTile) {
          const int64_t pa_col = p0 + tx, pb_row = p0 + ty;
          as[ty][tx] = (i < m && pa_col < k) ? pa[ta ? pa_col * m + i : i * k + pa_col] : T{0};
          bs[ty][tx] = (pb_row < k && j < n) ? pb[tb ? j * k + pb_row : pb_row * n + j] : T{0};
          __syncthreads();
          for (int p = 0; p < kIntTile; ++p) acc = wrap_add(acc, wrap_mul(as[ty][p], bs[p][tx]));
          __syncthreads();
        }
        if (i < m && j < n) pc[i * n + j] = acc;
      }
    }
  }
}

}  // namespace detail

template <Element T>
void matmul(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out, const Shape& out_shape,
            bool trans_a, bool trans_b, void* stream) {
  const auto [m, n, k, batch_a, batch_b] = cpu::detail::gemm_dims(a_shape, b_shape, out_shape, trans_a, trans_b);
  const int64_t total = out_shape.numel();
  if (total == 0) return;
  if (k == 0) {  // an empty sum
    fill<T>(out, total, T{0}, stream);
    return;
  }
  const int64_t batches = total / (m * n), r = out_shape.ndim() - 2;
  std::vector<int64_t> sa = cpu::detail::broadcast_strides(batch_a, r), sb = cpu::detail::broadcast_strides(batch_b, r);
  for (int64_t& s : sa) s *= m * k;
  for (int64_t& s : sb) s *= k * n;
  const std::vector<int64_t> out_batch(out_shape.dims().begin(), out_shape.dims().end() - 2);
  const cpu::detail::Collapsed<2> c = cpu::detail::collapse<2>(out_batch, {sa, sb});
  cudaStream_t s = detail::as_stream(stream);

  if constexpr (FloatingElement<T>) {
    cublasHandle_t h = detail::handle_for(s, detail::Blas<T>::kMath);
    // b shared by every batch and a dense (untransposed) over them: one (batches*m, k) x (k, n).
    if (!trans_a && batch_b.numel() == 1 && batch_a.numel() == batches && batches * m <= INT_MAX) {
      detail::gemm_batched(h, a, 0, b, 0, out, 0, batches * m, n, k, 1, false, trans_b);
      return;
    }
    // The innermost collapsed batch dim is cuBLAS's batch; the outer ones loop here.
    const size_t nd = c.dims.size();
    const int64_t count = nd ? c.dims.back() : 1, sa_in = nd ? c.strides[0].back() : 0,
                  sb_in = nd ? c.strides[1].back() : 0;
    for (int64_t o = 0, outer = batches / count; o < outer; ++o) {
      int64_t oa = 0, ob = 0;
      for (int64_t d = static_cast<int64_t>(nd) - 2, rest = o; d >= 0; --d) {
        oa += (rest % c.dims[d]) * c.strides[0][d];
        ob += (rest % c.dims[d]) * c.strides[1][d];
        rest /= c.dims[d];
      }
      detail::gemm_batched(h, a + oa, sa_in, b + ob, sb_in, out + o * count * m * n, m * n, m, n, k, count,
                           trans_a, trans_b);
    }
  } else {
    const auto batch = detail::make_strided<2>("matmul", c.dims, c.strides);
    const dim3 grid(detail::grid_dim((n + detail::kIntTile - 1) / detail::kIntTile, INT32_MAX),
                    detail::grid_dim((m + detail::kIntTile - 1) / detail::kIntTile, 65535),
                    detail::grid_dim(batches, 65535));
    detail::int_gemm_kernel<T><<<grid, dim3(detail::kIntTile, detail::kIntTile), 0, s>>>(a, b, out, m, n, k, batches,
                                                                                         batch, trans_a, trans_b);
    detail::check_launch("matmul");
  }
}

#define SPSD_INSTANTIATE(T) \
  template void matmul<T>(const T*, const Shape&, const T*, const Shape&, T*, const Shape&, bool, bool, void*);
SPSD_CUDA_FOR_EACH_ELEMENT(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
