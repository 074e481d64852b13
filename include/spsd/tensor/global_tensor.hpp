#pragma once
// GlobalTensor<T>: the logical tensor (global shape, placement, NdSbp) and this rank's component.
#include <string>

#include "spsd/layout/diagram.hpp"
#include "spsd/layout/split.hpp"
#include "spsd/runtime/runtime.hpp"
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
};

// Boxing: the same logical tensor in another layout (collective over both placements' ranks).
// Declared here, implemented by the boxing layer (src/boxing/).
GlobalData to_layout(const GlobalData& in, const Placement& placement, const NdSbp& nd_sbp);

// Throws unless nd_sbp fits shape and placement, and the placement fits the world.
void check_global_layout(std::string_view op, const Shape& shape, const Placement& placement, const NdSbp& nd_sbp);

}  // namespace detail

template <Element T>
class GlobalTensor {
 public:
  // Wraps this rank's component; the caller guarantees it is the box of (shape, placement, nd_sbp).
  // Use spsd::to_global(local, ...) for a checked conversion.
  GlobalTensor(Shape shape, Placement placement, NdSbp nd_sbp, Tensor<T> local)
      : shape_(std::move(shape)), placement_(std::move(placement)), nd_sbp_(std::move(nd_sbp)), local_(std::move(local)) {}

  const Shape& shape() const { return shape_; }
  const Placement& placement() const { return placement_; }
  const NdSbp& nd_sbp() const { return nd_sbp_; }
  DType dtype() const { return dtype_of<T>; }
  // This rank's component; undefined (numel 0) on a rank outside the placement.
  const Tensor<T>& to_local() const { return local_; }

  // Boxing to another layout: collective over the ranks of both placements; others return at once.
  GlobalTensor to_global(const Placement& placement, const NdSbp& nd_sbp) const {
    detail::GlobalData out = detail::to_layout(data(), placement, nd_sbp);
    Tensor<T> local;
    if (out.local) local = Tensor<T>(box_of(shape_, placement, nd_sbp, rank()).shape(), out.local);
    return GlobalTensor(shape_, placement, nd_sbp, std::move(local));
  }
  GlobalTensor to_global(const NdSbp& nd_sbp) const { return to_global(placement_, nd_sbp); }

  // Collective over the placement: the whole logical tensor on every rank of it (undefined
  // elsewhere), as OneFlow's numpy(); in host memory whatever the placement's device.
  Tensor<T> full() const {
    NdSbp all_broadcast(std::vector<Sbp>(placement_.mesh().ndim(), sbp::broadcast));
    return to_global(placement_, all_broadcast).to_local().to(DeviceType::kCPU);
  }

  detail::GlobalData data() const { return {shape_, dtype_of<T>, placement_, nd_sbp_, local_.storage()}; }

 private:
  Shape shape_;
  Placement placement_;
  NdSbp nd_sbp_;
  Tensor<T> local_;
};

template <Element T>
std::string layout_diagram(const GlobalTensor<T>& t) {
  return layout_diagram(t.shape(), t.placement(), t.nd_sbp());
}

}  // namespace spsd
