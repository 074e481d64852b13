#pragma once
// The calls that go up the layers, as one table. A global tensor boxes itself (tensor/ ->
// boxing/) and records what it went through for backward (tensor/ and op/ -> autograd/); those
// layers sit above tensor/ and op/, so the calls go through this table, which src/hooks.cpp, the
// one file above every layer, fills with constants (nothing runs before main, nothing is
// installed later). The include graph stays downward (tools/check-layers); these forward
// declarations and GradNode's (tensor/global_tensor.hpp: a tensor points to the node that made
// it) are the only places where a lower layer names what a higher one defines. The
// communicator's one hook is per thread, installed by the runtime (comm/communicator.hpp).
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace spsd {
class Placement;
class NdSbp;
struct Scalar;  // op/dispatch.hpp
namespace detail {
struct GlobalData;    // tensor/global_tensor.hpp
struct AutogradMeta;  // tensor/global_tensor.hpp
struct InputRef;      // op/dispatch.hpp

struct Hooks {
  // GlobalTensor::to_global: the same logical tensor in another layout, collective over both
  // placements' ranks (boxing/to_layout.hpp).
  GlobalData (*to_layout)(const GlobalData& in, const Placement& placement, const NdSbp& nd_sbp);
  // Records a to_global of a tensor that requires grad as a differentiable step (autograd/node.hpp).
  void (*record_boxing)(const GlobalData& in, const std::shared_ptr<AutogradMeta>& in_meta, const GlobalData& out,
                        std::shared_ptr<AutogradMeta>& out_meta);
  // Records an op with an input that requires grad, with what its backward needs (autograd/node.hpp).
  void (*record_op)(std::string_view op, const std::vector<int64_t>& attrs, const Scalar& scalar,
                    std::span<const InputRef> inputs, const GlobalData& out, std::shared_ptr<AutogradMeta>& out_meta);
};

extern const Hooks hooks;  // src/hooks.cpp

}  // namespace detail
}  // namespace spsd
