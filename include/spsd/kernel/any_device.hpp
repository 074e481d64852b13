#pragma once
// Local kernels on whichever memory space the data lives in: each function forwards to
// kernel::cpu or, for device memory, to kernel::cuda on the rank's compute stream. Ops call
// these, so one op definition serves cpu and cuda placements. A build without CUDA never
// instantiates the cuda branch (if constexpr), so it links without the .cu objects.
#include <span>

#include "spsd/core/config.hpp"
#include "spsd/kernel/cpu/attention.hpp"
#include "spsd/kernel/cpu/cast.hpp"
#include "spsd/kernel/cpu/dropout.hpp"
#include "spsd/kernel/cpu/compare.hpp"
#include "spsd/kernel/cpu/elementwise.hpp"
#include "spsd/kernel/cpu/gemm.hpp"
#include "spsd/kernel/cpu/index.hpp"
#include "spsd/kernel/cpu/normalization.hpp"
#include "spsd/kernel/cpu/optim.hpp"
#include "spsd/kernel/cpu/permute.hpp"
#include "spsd/kernel/cpu/reduce.hpp"
#include "spsd/kernel/cpu/softmax.hpp"
#include "spsd/runtime/device.hpp"
#include "spsd/runtime/device_traffic.hpp"
#if SPSD_HAVE_CUDA
#include "spsd/kernel/cuda/attention.hpp"
#include "spsd/kernel/cuda/cast.hpp"
#include "spsd/kernel/cuda/compare.hpp"
#include "spsd/kernel/cuda/copy.hpp"
#include "spsd/kernel/cuda/dropout.hpp"
#include "spsd/kernel/cuda/elementwise.hpp"
#include "spsd/kernel/cuda/gemm.hpp"
#include "spsd/kernel/cuda/index.hpp"
#include "spsd/kernel/cuda/nonfinite.hpp"
#include "spsd/kernel/cuda/normalization.hpp"
#include "spsd/kernel/cuda/optim.hpp"
#include "spsd/kernel/cuda/permute.hpp"
#include "spsd/kernel/cuda/reduce.hpp"
#include "spsd/kernel/cuda/softmax.hpp"
#endif

namespace spsd::kernel {

using cpu::BinaryOp;
using cpu::UnaryOp;

// Where a kernel runs: the memory space of its operands and, for a device, the stream.
struct Target {
  DeviceType device = DeviceType::kCPU;
  void* stream = nullptr;
  // Memory of this device type, on this thread's stream for it (the compute stream, or a
  // KernelStreamOverride's); nullptr for the CPU.
  static Target of(DeviceType device) { return {device, detail::stream_for(device)}; }
  // Whether the operands are in device memory (a CUDA kernel runs).
  bool on_device() const { return device != DeviceType::kCPU; }
};

// SPSD_ON_TARGET(t, fn, args...): kernel::cuda::fn(args..., stream) on a device, else kernel::cpu::fn(args...).
#if SPSD_HAVE_CUDA
#define SPSD_ON_TARGET(t, fn, ...)                 \
  do {                                             \
    if ((t).on_device())                           \
      ::spsd::kernel::cuda::fn(__VA_ARGS__, (t).stream); \
    else                                           \
      ::spsd::kernel::cpu::fn(__VA_ARGS__);        \
  } while (0)
#else
#define SPSD_ON_TARGET(t, fn, ...) ((void)(t), ::spsd::kernel::cpu::fn(__VA_ARGS__))
#endif

// out[i] = op(x[i]) for i < n (kernel/cpu/elementwise.hpp: integer T takes neg, relu, abs only).
template <Element T>
void unary(const Target& t, UnaryOp op, const T* x, T* out, int64_t n) {
  SPSD_ON_TARGET(t, unary<T>, op, x, out, n);
}
// out = a op b with numpy broadcasting to out_shape (kernel/cpu/elementwise.hpp).
template <Element T>
void binary(const Target& t, BinaryOp op, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out,
            const Shape& out_shape) {
  SPSD_ON_TARGET(t, binary<T>, op, a, a_shape, b, b_shape, out, out_shape);
}
// out[i] = a[i] op s, or s op a[i] when scalar_first; s in compute_t<T> (kernel/cpu/elementwise.hpp).
template <Element T>
void binary_scalar(const Target& t, BinaryOp op, const T* a, compute_t<T> s, T* out, int64_t n, bool scalar_first) {
  SPSD_ON_TARGET(t, binary_scalar<T>, op, a, s, out, n, scalar_first);
}
// out[i] = value for i < n.
template <Element T>
void fill(const Target& t, T* out, int64_t n, T value) {
  SPSD_ON_TARGET(t, fill<T>, out, n, value);
}
// x[i] *= factor for i < n, in place (kernel/cpu/reduce.hpp).
template <Element T>
void scale(const Target& t, T* x, int64_t n, compute_t<T> factor) {
  SPSD_ON_TARGET(t, scale<T>, x, n, factor);
}
// out = op-reduction of x over axes (sorted, unique), those axes removed (kernel/cpu/reduce.hpp).
template <Element T>
void reduce(const Target& t, ReduceOp op, const T* x, const Shape& x_shape, std::span<const int64_t> axes, T* out) {
  SPSD_ON_TARGET(t, reduce<T>, op, x, x_shape, axes, out);
}
// out = softmax(x) along axis, or log_softmax when log (kernel/cpu/softmax.hpp).
template <FloatingElement T>
void softmax(const Target& t, const T* x, const Shape& shape, int64_t axis, T* out, bool log) {
  SPSD_ON_TARGET(t, softmax<T>, x, shape, axis, out, log);
}
// out = x with axes reordered, out.shape[i] = x_shape[perm[i]] (kernel/cpu/permute.hpp).
template <Element T>
void permute(const Target& t, const T* x, const Shape& x_shape, std::span<const int64_t> perm, T* out) {
  SPSD_ON_TARGET(t, permute<T>, x, x_shape, perm, out);
}
// Copies the extent box at src_begin of src into dst at dst_begin; spsd::Error for a box that
// does not fit (kernel/cpu/permute.hpp).
template <Element T>
void copy_region(const Target& t, const T* src, const Shape& src_shape, std::span<const int64_t> src_begin, T* dst,
                 const Shape& dst_shape, std::span<const int64_t> dst_begin, const Shape& extent) {
  SPSD_ON_TARGET(t, copy_region<T>, src, src_shape, src_begin, dst, dst_shape, dst_begin, extent);
}
// out (n, dim) = the rows indices[i] of weight this rank holds (rows [row_begin, row_begin +
// rows)), zeros for the others (kernel/cpu/index.hpp).
template <Element T>
void embedding(const Target& t, const T* weight, int64_t row_begin, int64_t rows, int64_t dim, const int64_t* indices,
               int64_t n, T* out) {
  SPSD_ON_TARGET(t, embedding<T>, weight, row_begin, rows, dim, indices, n, out);
}
// out[i] = x[i, labels[i] - c_begin] where this rank holds that class, else 0 (kernel/cpu/index.hpp).
template <Element T>
void pick(const Target& t, const T* x, int64_t n, int64_t c_begin, int64_t c, const int64_t* labels, T* out) {
  SPSD_ON_TARGET(t, pick<T>, x, n, c_begin, c, labels, out);
}
// Rows of out (width elements each) whose index is outside [0, bound) become NaN (0 for integers).
template <Element T>
void mark_out_of_range(const Target& t, const int64_t* indices, int64_t n, int64_t bound, int64_t width, T* out) {
  SPSD_ON_TARGET(t, mark_out_of_range<T>, indices, n, bound, width, out);
}
// out = op(a) @ op(b), op transposing the last two axes when trans_a / trans_b; batch dims
// broadcast (kernel/cpu/gemm.hpp).
template <Element T>
void matmul(const Target& t, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out,
            const Shape& out_shape, bool trans_a = false, bool trans_b = false) {
  SPSD_ON_TARGET(t, matmul<T>, a, a_shape, b, b_shape, out, out_shape, trans_a, trans_b);
}

// Kernels only backward needs (autograd/grad_ops.hpp).
template <FloatingElement T>
void unary_grad(const Target& t, UnaryOp op, const T* saved, const T* g, T* out, int64_t n) {
  SPSD_ON_TARGET(t, unary_grad<T>, op, saved, g, out, n);
}
template <Element T>
void equal_mask(const Target& t, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out,
                const Shape& out_shape) {
  SPSD_ON_TARGET(t, equal_mask<T>, a, a_shape, b, b_shape, out, out_shape);
}
template <Element T>
void broadcast_to(const Target& t, const T* x, const Shape& x_shape, T* out, const Shape& out_shape) {
  SPSD_ON_TARGET(t, broadcast_to<T>, x, x_shape, out, out_shape);
}
template <Element T>
void embedding_grad(const Target& t, const T* g, const int64_t* indices, int64_t n, int64_t row_begin, int64_t rows,
                    int64_t dim, T* out) {
  SPSD_ON_TARGET(t, embedding_grad<T>, g, indices, n, row_begin, rows, dim, out);
}
template <Element T>
void pick_grad(const Target& t, const T* g, const int64_t* labels, int64_t n, int64_t c, T* out) {
  SPSD_ON_TARGET(t, pick_grad<T>, g, labels, n, c, out);
}

// Optimizer steps (kernel/cpu/optim.hpp)
using cpu::AdamStep;
using cpu::SgdStep;
// One SGD update of p (and momentum_buf, which may be null without momentum) in place, n elements.
template <FloatingElement T>
void sgd_step(const Target& t, T* p, const T* g, T* momentum_buf, int64_t n, const SgdStep<compute_t<T>>& s) {
  SPSD_ON_TARGET(t, sgd_step<T>, p, g, momentum_buf, n, s);
}
// One Adam update of p and its moments m and v in place, n elements.
template <FloatingElement T>
void adam_step(const Target& t, T* p, const T* g, T* m, T* v, int64_t n, const AdamStep<compute_t<T>>& s) {
  SPSD_ON_TARGET(t, adam_step<T>, p, g, m, v, n, s);
}

// Fused softmax / log_softmax backward (autograd/softmax_grad.hpp).
template <FloatingElement T>
void softmax_backward(const Target& t, const T* y, const T* g, const Shape& shape, int64_t axis, T* dx, bool log) {
  SPSD_ON_TARGET(t, softmax_backward<T>, y, g, shape, axis, dx, log);
}
template <FloatingElement T>
void cross_entropy_backward(const Target& t, const T* logits, const int64_t* labels, const T* g, int64_t rows,
                            int64_t classes, int64_t total_rows, T* dx) {
  SPSD_ON_TARGET(t, cross_entropy_backward<T>, logits, labels, g, rows, classes, total_rows, dx);
}

// Scaled dot-product attention, fused forward and backward (kernel/cpu/attention.hpp).
using cpu::AttentionDims;
// out = softmax(scale q k^T [+ mask]) v and lse, each row's log-sum-exp; either may be null.
template <FloatingElement T>
void attention_forward(const Target& t, const T* q, const T* k, const T* v, const AttentionDims& d, T* out,
                       compute_t<T>* lse) {
  SPSD_ON_TARGET(t, attention_forward<T>, q, k, v, d, out, lse);
}
// dq from q, k, v, out, g (the gradient of out) and lse.
template <FloatingElement T>
void attention_backward_q(const Target& t, const T* q, const T* k, const T* v, const T* out, const T* g,
                          const compute_t<T>* lse, const AttentionDims& d, T* dq) {
  SPSD_ON_TARGET(t, attention_backward_q<T>, q, k, v, out, g, lse, d, dq);
}
// dkv (2, batch, heads, seq_k, head_dim): dk then dv, from the same inputs.
template <FloatingElement T>
void attention_backward_kv(const Target& t, const T* q, const T* k, const T* v, const T* out, const T* g,
                           const compute_t<T>* lse, const AttentionDims& d, T* dkv) {
  SPSD_ON_TARGET(t, attention_backward_kv<T>, q, k, v, out, g, lse, d, dkv);
}

// layer_norm / rms_norm over the last axis and dropout (op/normalization.hpp, op/dropout.hpp).
template <FloatingElement T>
void norm_forward(const Target& t, const T* x, const T* w, const T* b, int64_t rows, int64_t len, double eps, bool rms,
                  T* out) {
  SPSD_ON_TARGET(t, norm_forward<T>, x, w, b, rows, len, eps, rms, out);
}
template <FloatingElement T>
void norm_backward_x(const Target& t, const T* x, const T* w, const T* g, int64_t rows, int64_t len, double eps,
                     bool rms, T* dx) {
  SPSD_ON_TARGET(t, norm_backward_x<T>, x, w, g, rows, len, eps, rms, dx);
}
template <FloatingElement T>
void norm_backward_w(const Target& t, const T* x, const T* g, int64_t rows, int64_t len, double eps, bool rms, T* dw) {
  SPSD_ON_TARGET(t, norm_backward_w<T>, x, g, rows, len, eps, rms, dw);
}
template <FloatingElement T>
void dropout(const Target& t, const T* x, T* out, const Box& box, const Shape& global_shape, uint64_t seed,
             uint64_t threshold, double scale) {
  SPSD_ON_TARGET(t, dropout<T>, x, out, box, global_shape, seed, threshold, scale);
}

// Comparisons, masks and argmax/argmin keys (kernel/cpu/compare.hpp).
template <Element T>
void compare(const Target& t, CompareOp op, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape,
             bool* out, const Shape& out_shape) {
  SPSD_ON_TARGET(t, compare<T>, op, a, a_shape, b, b_shape, out, out_shape);
}
template <Element T>
void compare_scalar(const Target& t, CompareOp op, const T* a, compute_t<T> s, bool* out, int64_t n) {
  SPSD_ON_TARGET(t, compare_scalar<T>, op, a, s, out, n);
}
template <Element T>
void where(const Target& t, const bool* cond, const Shape& cond_shape, const T* a, const Shape& a_shape, const T* b,
           const Shape& b_shape, T* out, const Shape& out_shape) {
  SPSD_ON_TARGET(t, where<T>, cond, cond_shape, a, a_shape, b, b_shape, out, out_shape);
}
template <Element T>
void masked_fill(const Target& t, const T* x, const Shape& x_shape, const bool* mask, const Shape& mask_shape,
                 compute_t<T> value, T* out) {
  SPSD_ON_TARGET(t, masked_fill<T>, x, x_shape, mask, mask_shape, value, out);
}
template <Element T>
void extreme_keys(const Target& t, const T* x, const T* m, int64_t outer, int64_t len, int64_t inner, int64_t offset,
                  int64_t n, int64_t* keys) {
  SPSD_ON_TARGET(t, extreme_keys<T>, x, m, outer, len, inner, offset, n, keys);
}

#undef SPSD_ON_TARGET

// out[i] = convert<To>(x[i]) (kernel/convert.hpp). Spelled out: SPSD_ON_TARGET cannot take
// the comma of cast<From, To>.
template <Element From, Element To>
void cast(const Target& t, const From* x, To* out, int64_t n) {
#if SPSD_HAVE_CUDA
  if (t.on_device()) return cuda::cast<From, To>(x, out, n, t.stream);
#endif
  (void)t;
  cpu::cast<From, To>(x, out, n);
}

// Sets *flag (a float where x lives) to 1 when some x[i] is inf or NaN; never clears it. No
// host wait on a device: a GradScaler folds many tensors into one flag, then reads it once.
template <FloatingElement T>
void note_nonfinite(const Target& t, const T* x, int64_t n, float* flag) {
#if SPSD_HAVE_CUDA
  if (t.on_device()) return cuda::note_nonfinite<T>(x, n, flag, t.stream);
#endif
  (void)t;
  cpu::note_nonfinite<T>(x, n, flag);
}

// The index of the first zero among x[0, n), or -1 (integer division checks its divisor); on a
// device this waits for the scan and reads back one index.
template <Element T>
int64_t first_zero(const Target& t, const T* x, int64_t n) {
#if SPSD_HAVE_CUDA
  if (t.on_device()) {
    const int64_t i = cuda::first_zero(x, n, dtype_of<T>, t.stream);
    ::spsd::detail::note_device_copy(DeviceType::kCPU, t.device, sizeof i);
    return i;
  }
#endif
  (void)t;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] == T{0}) return i;
  return -1;
}

}  // namespace spsd::kernel
