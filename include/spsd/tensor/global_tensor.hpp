#pragma once
// GlobalTensor<T>: the logical tensor (global shape, placement, NdSbp) and this rank's component,
// and, when it takes part in autograd, its autograd state (autograd/ records and reads it).
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "spsd/layout/diagram.hpp"
#include "spsd/layout/split.hpp"
#include "spsd/runtime/runtime.hpp"
#include "spsd/tensor/boxed_copies.hpp"
#include "spsd/tensor/capture.hpp"
#include "spsd/tensor/hooks.hpp"
#include "spsd/tensor/tensor.hpp"

namespace spsd {

namespace detail {

// A global tensor without its element type: what boxing moves.
struct GlobalData {
  Shape shape;
  DType dtype;
  Placement placement;
  NdSbp nd_sbp;
  std::shared_ptr<Storage> local;  // this rank's box; null on ranks outside the placement
  // The layouts it was already boxed to (tensor/boxed_copies.hpp), shared by the tensor's
  // copies on every rank that holds it; null where nothing caches.
  std::shared_ptr<BoxedCopies> boxed;
};

// Throws unless nd_sbp fits shape and placement, and the placement fits the world.
void check_global_layout(std::string_view op, const Shape& shape, const Placement& placement, const NdSbp& nd_sbp);
// Throws when nd_sbp has a partial axis and dtype has no partial layouts (bool: allows_partial).
void check_layout_dtype(std::string_view op, DType dtype, const NdSbp& nd_sbp);
// Throws unless local, this rank's piece (at mesh coordinates coords), holds the bytes of its box:
// a raw GlobalTensor's piece may be missing or short. Errors name op and what ("src"; with index
// >= 0, "input <index>").
void check_piece_holds(std::string_view op, std::string_view what, int64_t index, const Shape& shape, DType dtype,
                       const Placement& placement, const NdSbp& nd_sbp, std::span<const int64_t> coords,
                       const Storage* local);
// check_global_layout of t's own layout, and, on a rank of its placement, check_piece_holds.
void check_piece(std::string_view op, std::string_view what, const Shape& shape, DType dtype, const Placement& placement,
                 const NdSbp& nd_sbp, const Storage* local);
inline void check_piece(std::string_view op, std::string_view what, const GlobalData& t) {
  check_piece(op, what, t.shape, t.dtype, t.placement, t.nd_sbp, t.local.get());
}
// GlobalTensor::item's work, dtype-erased: writes the value of t (one element) to out, on every
// rank of the world.
void item_of(const GlobalData& t, void* out);

// The op that produced a tensor, with what its backward needs (autograd/node.hpp). Opaque here:
// tensor/ sits below autograd/, so a tensor only holds a pointer to it (one of the names of a
// higher layer that tensor/hooks.hpp lists).
struct GradNode;

// A tensor's autograd state, shared by its copies (as a Python reference would be).
struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<GradNode> grad_fn;  // null for a leaf (a tensor the user made, not an op)
  std::optional<GlobalData> grad;     // leaves: the gradient accumulated by backward
  // Set when another tensor took this one's place in a model (nn::parallelize re-lays a
  // parameter into a new tensor): an optimizer that holds this one refuses to step it.
  std::string replaced_by;
};

// "(4, 5) float32 (S(0), B) on placement(...)", for error messages.
inline std::string describe(const GlobalData& t) {
  return concat(t.shape, " ", to_string(t.dtype), " ", t.nd_sbp, " on ", t.placement);
}

// What an undefined GlobalTensor holds until a tensor is assigned to it (never read).
const Placement& undefined_placement();
// Throws unless defined, naming op and the tensor's element type (GlobalTensor's accessors).
[[noreturn]] void throw_undefined(std::string_view op, DType dtype);
inline void check_defined(bool defined, std::string_view op, DType dtype) {
  if (!defined) [[unlikely]] throw_undefined(op, dtype);
}

}  // namespace detail

// A logical tensor (global shape, placement, NdSbp) and this rank's piece of it.
template <Element T>
class GlobalTensor {
 public:
  using value_type = T;

  // Wraps this rank's component; the caller guarantees it is the box of (shape, placement, nd_sbp).
  // Use spsd::to_global(local, ...) for a checked conversion. A negative split axis counts from
  // the end (normalize_axes): nd_sbp() holds non-negative axes only.
  GlobalTensor(Shape shape, Placement placement, NdSbp nd_sbp, Tensor<T> local)
      : shape_(std::move(shape)),
        placement_(std::move(placement)),
        nd_sbp_(normalize_axes(std::move(nd_sbp), shape_.ndim())),
        local_(std::move(local)),
        boxed_(detail::new_tensor_copies()) {}

  // An undefined tensor: a slot to assign a tensor to later (a member, a container's element, a
  // branch's result), as torch's C++ at::Tensor(). Every use of it but assigning to it,
  // defined(), describe() and the autograd queries (requires_grad(), is_leaf(), has_grad(),
  // zero_grad()) throws spsd::Error; an op given one names itself and the input.
  GlobalTensor() : placement_(detail::undefined_placement()), nd_sbp_(sbp::broadcast), defined_(false) {}
  bool defined() const { return defined_; }

  // Its global shape, placement, layout and element type (spsd::Error on an undefined tensor).
  const Shape& shape() const {
    detail::check_defined(defined_, "GlobalTensor::shape", dtype_of<T>);
    return shape_;
  }
  const Placement& placement() const {
    detail::check_defined(defined_, "GlobalTensor::placement", dtype_of<T>);
    return placement_;
  }
  const NdSbp& nd_sbp() const {
    detail::check_defined(defined_, "GlobalTensor::nd_sbp", dtype_of<T>);
    return nd_sbp_;
  }
  DType dtype() const { return dtype_of<T>; }
  // This rank's component; undefined (numel 0) on a rank outside the placement.
  const Tensor<T>& to_local() const {
    detail::check_defined(defined_, "GlobalTensor::to_local", dtype_of<T>);
    return local_;
  }

  // Boxing to another layout: collective over the ranks of both placements; others return at once.
  GlobalTensor to_global(const Placement& placement, const NdSbp& nd_sbp) const {
    detail::check_defined(defined_, "to_global", dtype_of<T>);
    const detail::GlobalData in = data();
    std::optional<NdSbp> storage;
    const NdSbp& target = normalize_axes(nd_sbp, shape_.ndim(), storage);
    GlobalTensor out = from_data(detail::hooks.to_layout(in, placement, target));
    if (autograd_ && autograd_->requires_grad) detail::hooks.record_boxing(in, autograd_, out.data(), out.autograd_);
    return out;
  }
  GlobalTensor to_global(const NdSbp& nd_sbp) const { return to_global(placement_, nd_sbp); }

  // Collective over the placement: the whole logical tensor on every rank of it (undefined
  // elsewhere), as OneFlow's numpy(); in host memory whatever the placement's device.
  Tensor<T> full() const {
    detail::check_defined(defined_, "GlobalTensor::full", dtype_of<T>);
    detail::check_not_capturing("GlobalTensor::full", "a value read on the host would be fixed at capture, not read again on a replay; return the tensor from the step and read it after the call");
    NdSbp all_broadcast(std::vector<Sbp>(placement_.mesh().ndim(), sbp::broadcast));
    return to_global(placement_, all_broadcast).to_local().to(DeviceType::kCPU);
  }

  // The value of a one-element tensor on EVERY rank of the world, also ranks outside the
  // placement (collective over the world; an error on every rank unless numel() is 1). One
  // collective of one element: a broadcast from a rank holding the value (B, S), or an
  // all-reduce whose other ranks give the reduction's identity (P, one reduce op over the mesh
  // axes); P axes of different ops are first reduced within the placement (boxing to B). On a
  // cuda placement, one device -> host copy of the element.
  T item() const {
    detail::check_defined(defined_, "GlobalTensor::item", dtype_of<T>);
    T value{};
    detail::item_of(data(), &value);
    return value;
  }

  // The tensor without its element type (detail::GlobalData: shape, dtype, layout, this rank's
  // storage, shared, not copied). spsd::Error for an undefined tensor.
  detail::GlobalData data() const {
    detail::check_defined(defined_, "GlobalTensor::data", dtype_of<T>);
    return {shape_, dtype_of<T>, placement_, nd_sbp_, local_.storage(), boxed_};
  }
  // The inverse of data(): wraps a dtype-erased global tensor (this rank's piece is its box).
  static GlobalTensor from_data(const detail::GlobalData& d) {
    SPSD_CHECK(d.dtype == dtype_of<T>, "GlobalTensor", "data of dtype ", d.dtype, " wrapped as ", dtype_of<T>);
    Tensor<T> local;
    if (d.local) local = Tensor<T>(box_of(d.shape, d.placement, d.nd_sbp, rank()).shape(), d.local);
    // The same tensor as d's other copies: the same block (a new one when d has none).
    return GlobalTensor(d.shape, d.placement, d.nd_sbp, std::move(local), d.boxed ? d.boxed : detail::new_tensor_copies());
  }

  // ---- autograd (docs/autograd.md) ----
  // Whether backward computes a gradient for this tensor (a leaf that asked for one, or an op's
  // output with such an input, recorded while grad mode was on).
  bool requires_grad() const { return autograd_ && autograd_->requires_grad; }
  // A leaf: a tensor made by a factory or the user, not by a recorded op.
  bool is_leaf() const { return !autograd_ || !autograd_->grad_fn; }
  // Marks a leaf as a parameter: backward(loss) accumulates d loss / d this into grad(). Copies
  // made before this call do not share the flag; copies made after do.
  GlobalTensor& requires_grad_(bool on = true) {
    detail::check_defined(defined_, "requires_grad_", dtype_of<T>);
    SPSD_CHECK(!on || is_floating(dtype_of<T>), "requires_grad_", "only floating tensors have gradients; this is ",
               describe());
    SPSD_CHECK(is_leaf(), "requires_grad_", "only leaves can change requires_grad; this tensor is the output of an op (",
               describe(), "): use detach() for a leaf with the same values");
    if (!autograd_) autograd_ = std::make_shared<detail::AutogradMeta>();
    autograd_->requires_grad = on;
    return *this;
  }
  bool has_grad() const { return autograd_ && autograd_->grad.has_value(); }
  // The gradient accumulated by backward: in this tensor's own layout by default (backward boxes
  // it there as soon as it is final, so a B parameter used by S(0) activations gets its P(sum)
  // gradient all-reduced during backward); with BackwardOptions{.reduce_gradients_early =
  // false}, in the layout the backward ops produced (the optimizer boxes it).
  GlobalTensor grad() const {
    detail::check_defined(defined_, "grad", dtype_of<T>);
    SPSD_CHECK(requires_grad(), "grad", "the tensor ", describe(), " does not require grad (call requires_grad_() "
               "before the forward pass)");
    SPSD_CHECK(is_leaf(), "grad", "the tensor ", describe(), " is not a leaf; backward keeps gradients of leaves only");
    SPSD_CHECK(has_grad(), "grad", "the tensor ", describe(), " has no gradient yet (call backward(loss) first, "
               "or it does not reach the loss)");
    return from_data(*autograd_->grad);
  }
  // Drops the accumulated gradient (the next backward starts from zero).
  void zero_grad() {
    if (autograd_) autograd_->grad.reset();
  }
  // The same values (shared storage) outside autograd: a leaf that does not require grad.
  GlobalTensor detach() const {
    detail::check_defined(defined_, "detach", dtype_of<T>);
    return GlobalTensor(shape_, placement_, nd_sbp_, local_, boxed_);  // the same values: the same block
  }
  // In place: this tensor's pieces take src's values (boxed into this layout first). Every copy
  // of this tensor, and every graph that saved it, sees the new values (as torch's copy_).
  void copy_(const GlobalTensor& src) {
    detail::check_defined(defined_, "copy_", dtype_of<T>);
    detail::check_defined(src.defined_, "copy_ (src)", dtype_of<T>);
    detail::check_not_capturing("copy_", "an in-place write into a tensor is not replayed; make the new value an "
                                "output of the step, or copy it between calls");
    SPSD_CHECK(src.shape() == shape_, "copy_", "shapes differ: this is ", describe(), ", src is ", src.describe());
    // A raw piece smaller than its box is neither written nor read past its end.
    detail::check_piece("copy_", "this tensor", shape_, dtype_of<T>, placement_, nd_sbp_, local_.storage().get());
    detail::check_piece("copy_", "src", src.shape_, dtype_of<T>, src.placement_, src.nd_sbp_, src.local_.storage().get());
    const GlobalTensor moved = src.placement() == placement_ && src.nd_sbp() == nd_sbp_
                                   ? src
                                   : src.detach().to_global(placement_, nd_sbp_);
    // On every rank holding the tensor, before the return of those outside its placement:
    // what was boxed from it is stale everywhere alike (tensor/boxed_copies.hpp).
    detail::bump_boxed_version(boxed_);
    if (!placement_.contains(rank()) || moved.to_local().data() == local_.data()) return;
    // Distinct storages (moved is a fresh box, or src's own when the layouts match); a box's
    // worth, which both hold (checked above).
    const int64_t numel = box_of(shape_, placement_, nd_sbp_, rank()).numel();
    const DeviceType device = placement_.device_type();
    detail::copy_bytes(local_.data(), device, moved.to_local().data(), device, numel * static_cast<int64_t>(sizeof(T)));
    local_.storage()->bump_version();  // a graph that saved this tensor must not use the new values
  }
  std::string describe() const { return defined_ ? detail::describe(data()) : "an undefined tensor"; }

  const std::shared_ptr<detail::AutogradMeta>& autograd_meta() const { return autograd_; }
  std::shared_ptr<detail::AutogradMeta>& autograd_meta() { return autograd_; }
  // The layouts this tensor was already boxed to (tensor/boxed_copies.hpp); null where nothing caches.
  const std::shared_ptr<detail::BoxedCopies>& boxed_copies() const { return boxed_; }

 private:
  GlobalTensor(Shape shape, Placement placement, NdSbp nd_sbp, Tensor<T> local, std::shared_ptr<detail::BoxedCopies> boxed)
      : shape_(std::move(shape)),
        placement_(std::move(placement)),
        nd_sbp_(normalize_axes(std::move(nd_sbp), shape_.ndim())),
        local_(std::move(local)),
        boxed_(std::move(boxed)) {}

  Shape shape_;
  Placement placement_;
  NdSbp nd_sbp_;
  Tensor<T> local_;
  std::shared_ptr<detail::AutogradMeta> autograd_;  // null: not part of autograd
  std::shared_ptr<detail::BoxedCopies> boxed_;      // shared by the copies; null where nothing caches
  bool defined_ = true;
};

// A text picture of which rank holds which block of t.
template <Element T>
std::string layout_diagram(const GlobalTensor<T>& t) {
  return layout_diagram(t.shape(), t.placement(), t.nd_sbp());
}

}  // namespace spsd
