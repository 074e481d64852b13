#pragma once
// Factories and local -> global conversion. Each rank computes only its own box; a factory
// asked for a partial layout puts the value on the ranks at coordinate 0 of the partial axes
// and the reduction's identity elsewhere (layout/partial.hpp). A negative split axis counts
// from the end of the tensor's axes (normalize_axes).
#include <concepts>
#include <cstring>
#include <vector>

#include "spsd/core/instances.hpp"
#include "spsd/core/reduce_op.hpp"
#include "spsd/layout/partial.hpp"
#include "spsd/runtime/consistency.hpp"
#include "spsd/tensor/global_tensor.hpp"
#include "spsd/tensor/random.hpp"

namespace spsd {

namespace detail {

// A factory's checks and its note for the cross-rank check; false on a rank outside the
// placement (which holds nothing).
template <Element T>
bool start_factory(std::string_view op, const Shape& shape, const Placement& placement, const NdSbp& nd_sbp) {
  check_global_layout(op, shape, placement, nd_sbp);
  check_layout_dtype(op, dtype_of<T>, nd_sbp);
  if (!placement.contains(rank())) return false;
  note_op(placement.ranks(), std::make_shared<const OpIdentity>(std::string(op) + "(" + shape.to_string() + " " +
                                                                std::string(to_string(dtype_of<T>)) + " " +
                                                                nd_sbp.to_string() + ") on " + placement.to_string()));
  return true;
}

// Calls f(g, i, n) for each row of box inside a row-major tensor of shape: rows of the innermost
// axis are contiguous in both the box and the global index space; g is the global linear index
// of the row's first element, i its offset in the box's row-major buffer, n its length.
template <class F>
void for_each_box_row(const Shape& shape, const Box& box, F f) {
  if (box.numel() == 0) return;
  const int64_t d = shape.ndim(), row = d ? box.shape()[d - 1] : 1;
  std::vector<int64_t> strides = contiguous_strides(shape), idx(box.begin);
  for (int64_t i = 0; i < box.numel(); i += row) {
    int64_t g = 0;
    for (int64_t k = 0; k < d; ++k) g += idx[k] * strides[k];
    f(g, i, row);
    for (int64_t k = d - 2; k >= 0 && ++idx[k] == box.end[k]; --k) idx[k] = box.begin[k];
  }
}

// this rank's component, value_at(global linear index) at each element of its box.
template <Element T, class F>
GlobalTensor<T> generate(std::string_view op, const Shape& shape, const Placement& placement, const NdSbp& given,
                         F value_at) {
  const NdSbp nd_sbp = normalize_axes(given, shape.ndim());
  if (!start_factory<T>(op, shape, placement, nd_sbp)) return GlobalTensor<T>(shape, placement, nd_sbp, Tensor<T>());
  const int64_t me = rank();
  Box box = box_of(shape, placement, nd_sbp, me);
  // Computed on the host and copied to a device in one transfer: the values are those of a cpu
  // placement bit for bit (randn's log and cos included), whatever the device.
  Tensor<T> local = Tensor<T>(box.shape(), Storage::allocate_uninitialized(box.numel() * static_cast<int64_t>(sizeof(T)),
                                                                           DeviceType::kCPU));
  T* out = local.data();
  if (!holds_partial_value(placement, nd_sbp, me)) {
    std::fill(out, out + box.numel(), reduce_identity<T>(filler_op(placement, nd_sbp, me)));
  } else {
    for_each_box_row(shape, box, [&](int64_t g, int64_t i, int64_t row) {
      for (int64_t j = 0; j < row; ++j) out[i + j] = value_at(g + j);
    });
  }
  return GlobalTensor<T>(shape, placement, nd_sbp, local.to(placement.device_type()));
}

// this rank's component of a tensor of one value: the value, or the partial layout's filler
// (layout/partial.hpp), written where the piece lives (a fill on a device: no host copy).
template <Element T>
GlobalTensor<T> constant(std::string_view op, const Shape& shape, T value, const Placement& placement,
                         const NdSbp& given) {
  const NdSbp nd_sbp = normalize_axes(given, shape.ndim());
  if (!start_factory<T>(op, shape, placement, nd_sbp)) return GlobalTensor<T>(shape, placement, nd_sbp, Tensor<T>());
  const int64_t me = rank();
  const Box box = box_of(shape, placement, nd_sbp, me);
  const T fill = holds_partial_value(placement, nd_sbp, me) ? value : reduce_identity<T>(filler_op(placement, nd_sbp, me));
  const DeviceType device = placement.device_type();
  Tensor<T> local(box.shape(), Storage::allocate_uninitialized(box.numel() * static_cast<int64_t>(sizeof(T)), device));
  fill_elements(local.data(), device, box.numel(), &fill, sizeof(T));
  return GlobalTensor<T>(shape, placement, nd_sbp, std::move(local));
}

// The local shapes of every rank of the placement, gathered over its communicator; throws on
// every rank when any passed an undefined tensor (shape (), no storage: not one element).
std::vector<Shape> gather_local_shapes(std::string_view op, const Placement& placement, const Shape& mine,
                                       bool undefined);
template <Element T>
bool is_undefined(const Tensor<T>& t) {
  return !t.defined() && t.shape().numel() != 0;
}
// The global shape whose layout gives every rank its gathered shape; throws (on every rank) otherwise.
Shape infer_global_shape(std::string_view op, const Placement& placement, const NdSbp& nd_sbp,
                         const std::vector<Shape>& locals);
void check_local_shapes(std::string_view op, const Shape& global, const Placement& placement, const NdSbp& nd_sbp,
                        const std::vector<Shape>& locals);
// distribute's work, dtype-erased: whole (shape src_shape, host memory) is read on src_rank only;
// undefined there: src passed no tensor. Returns this rank's GlobalData.
GlobalData distribute_data(const void* whole, const Shape& src_shape, bool undefined, DType dtype,
                           const Placement& placement, const NdSbp& nd_sbp, int64_t src_rank);
// Throws on every rank of the placement unless all of them passed the same bytes.
void check_same_on_all_ranks(std::string_view op, const Placement& placement, const Shape& shape, const void* data,
                             int64_t bytes);

}  // namespace detail

// value is a compute_t<T> (float for a 16-bit T, so full<bfloat16>(shape, 0.1f, ...) reads as
// written), rounded once to T.
template <Element T>
GlobalTensor<T> full(const Shape& shape, compute_t<T> value, const Placement& placement, const NdSbp& nd_sbp) {
  return detail::constant<T>("full", shape, static_cast<T>(value), placement, nd_sbp);
}
template <Element T>
GlobalTensor<T> zeros(const Shape& shape, const Placement& placement, const NdSbp& nd_sbp) {
  return detail::constant<T>("zeros", shape, T{0}, placement, nd_sbp);
}
template <Element T>
GlobalTensor<T> ones(const Shape& shape, const Placement& placement, const NdSbp& nd_sbp) {
  return detail::constant<T>("ones", shape, T{1}, placement, nd_sbp);
}
template <Element T>
GlobalTensor<T> arange(int64_t n, const Placement& placement, const NdSbp& nd_sbp) {
  SPSD_CHECK(n >= 0, "arange", "n must be non-negative, got ", n);
  return detail::generate<T>("arange", Shape{n}, placement, nd_sbp, [](int64_t g) { return static_cast<T>(g); });
}
// Uniform in [0, 1); the value of each element depends only on (seed, shape, T). A 16-bit
// tensor holds the float tensor's values rounded once (rand<bfloat16> == cast<bfloat16>(rand<float>)
// bit for bit), so values within half an ulp of 1 round to 1.
template <FloatingElement T>
GlobalTensor<T> rand(const Shape& shape, const Placement& placement, const NdSbp& nd_sbp, uint64_t seed = 0) {
  return detail::generate<T>("rand", shape, placement, nd_sbp, [seed](int64_t g) {
    return static_cast<T>(philox::uniform<compute_t<T>>(seed, static_cast<uint64_t>(g)));
  });
}
// Standard normal; the value of each element depends only on (seed, shape, T); 16-bit as rand.
template <FloatingElement T>
GlobalTensor<T> randn(const Shape& shape, const Placement& placement, const NdSbp& nd_sbp, uint64_t seed = 0) {
  return detail::generate<T>("randn", shape, placement, nd_sbp, [seed](int64_t g) {
    return static_cast<T>(philox::normal<compute_t<T>>(seed, static_cast<uint64_t>(g)));
  });
}

// Every rank of the placement passes the same whole tensor (checked); each keeps its part.
template <Element T>
GlobalTensor<T> from_host(const Tensor<T>& given, const Placement& placement, const NdSbp& nd_sbp) {
  detail::check_global_layout("from_host", given.shape(), placement, normalize_axes(nd_sbp, given.shape().ndim()));
  detail::check_layout_dtype("from_host", dtype_of<T>, nd_sbp);
  // An undefined Tensor (shape (), no storage) would be read as one element.
  SPSD_CHECK(!detail::is_undefined(given), "from_host", "the tensor is undefined (shape ",
             given.shape(), ", no storage); pass Tensor::from_vector or a shaped Tensor");
  const Tensor<T> whole = given.to(DeviceType::kCPU);
  if (placement.contains(rank()))
    detail::check_same_on_all_ranks("from_host", placement, whole.shape(), whole.data(), whole.numel() * sizeof(T));
  const T* data = whole.data();
  return detail::generate<T>("from_host", whole.shape(), placement, nd_sbp, [data](int64_t g) { return data[g]; });
}

// DTensor's distribute_tensor with a source rank: only src_rank's host tensor is read (every
// other rank may pass Tensor<T>()). Its shape travels from src_rank (two broadcasts of a few
// int64 over the world), then each rank of the placement receives exactly its piece from
// src_rank (point-to-point: bytes received = the piece's bytes; src_rank keeps its own piece
// without a message). A partial layout's value goes to the ranks at coordinate 0 of the partial
// axes, the others hold the reduction's identity and receive nothing (as from_host). Collective
// over the world (every rank learns the shape); src_rank may be outside the placement. On a cuda
// placement the pieces arrive in host memory and are copied to the device once.
template <Element T>
GlobalTensor<T> distribute(const Tensor<T>& host, const Placement& placement, const NdSbp& nd_sbp, int64_t src_rank) {
  const bool src = rank() == src_rank, undefined = src && detail::is_undefined(host);
  const Tensor<T> whole = src && !undefined ? host.to(DeviceType::kCPU) : Tensor<T>();
  return GlobalTensor<T>::from_data(detail::distribute_data(whole.data(), whole.shape(), undefined, dtype_of<T>,
                                                            placement, nd_sbp, src_rank));
}

// local -> global, the global shape inferred from the ranks' local shapes (collective over the
// placement; a rank outside it cannot infer the shape and must use the form below).
template <Element T>
GlobalTensor<T> to_global(const Tensor<T>& local, const Placement& placement, const NdSbp& nd_sbp) {
  check_placement("to_global", placement);
  SPSD_CHECK(placement.contains(rank()), "to_global", "rank ", rank(), " is not in ", placement,
             ", so it cannot infer the global shape: pass global_shape");
  detail::check_layout_dtype("to_global", dtype_of<T>, nd_sbp);
  std::vector<Shape> locals = detail::gather_local_shapes("to_global", placement, local.shape(), detail::is_undefined(local));
  const NdSbp normalized = normalize_axes(nd_sbp, local.shape().ndim());
  Shape global = detail::infer_global_shape("to_global", placement, normalized, locals);
  return GlobalTensor<T>(global, placement, normalized, local.to(placement.device_type()));
}

// local -> global of the given global shape: a rank outside the placement may call it too (it
// holds nothing and communicates nothing). spsd::Error, on every rank of the placement, when a
// rank's local shape is not the piece the layout gives it.
template <Element T>
GlobalTensor<T> to_global(const Tensor<T>& local, const Placement& placement, const NdSbp& given,
                          const Shape& global_shape) {
  const NdSbp nd_sbp = normalize_axes(given, global_shape.ndim());
  detail::check_global_layout("to_global", global_shape, placement, nd_sbp);
  detail::check_layout_dtype("to_global", dtype_of<T>, nd_sbp);
  if (!placement.contains(rank())) return GlobalTensor<T>(global_shape, placement, nd_sbp, Tensor<T>());
  std::vector<Shape> locals = detail::gather_local_shapes("to_global", placement, local.shape(), detail::is_undefined(local));
  detail::check_local_shapes("to_global", global_shape, placement, nd_sbp, locals);
  return GlobalTensor<T>(global_shape, placement, nd_sbp, local.to(placement.device_type()));
}

// Compiled into the library (core/instances.hpp).
#define SPSD_FACTORY_INSTANCES(prefix, T)                                                                    \
  prefix template GlobalTensor<T> full<T>(const Shape&, compute_t<T>, const Placement&, const NdSbp&);       \
  prefix template GlobalTensor<T> zeros<T>(const Shape&, const Placement&, const NdSbp&);                    \
  prefix template GlobalTensor<T> ones<T>(const Shape&, const Placement&, const NdSbp&);                     \
  prefix template GlobalTensor<T> arange<T>(int64_t, const Placement&, const NdSbp&);                        \
  prefix template GlobalTensor<T> from_host<T>(const Tensor<T>&, const Placement&, const NdSbp&);            \
  prefix template GlobalTensor<T> distribute<T>(const Tensor<T>&, const Placement&, const NdSbp&, int64_t);  \
  prefix template GlobalTensor<T> to_global<T>(const Tensor<T>&, const Placement&, const NdSbp&);            \
  prefix template GlobalTensor<T> to_global<T>(const Tensor<T>&, const Placement&, const NdSbp&, const Shape&);
#define SPSD_RANDOM_FACTORY_INSTANCES(prefix, T)                                                       \
  prefix template GlobalTensor<T> rand<T>(const Shape&, const Placement&, const NdSbp&, uint64_t);     \
  prefix template GlobalTensor<T> randn<T>(const Shape&, const Placement&, const NdSbp&, uint64_t);
SPSD_FOR_EACH_ELEMENT(SPSD_FACTORY_INSTANCES, extern)
SPSD_FACTORY_INSTANCES(extern, bool)
SPSD_FOR_EACH_FLOATING(SPSD_RANDOM_FACTORY_INSTANCES, extern)

}  // namespace spsd
