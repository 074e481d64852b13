// The records of SPSD_BOXING_PRIMITIVES (boxing/plan.hpp), in its order, and what is computed
// the same way for every primitive: latency rounds and a prediction's cost.
#include <algorithm>
#include <array>

#include "primitive.hpp"
#include "spsd/boxing/cost.hpp"
#include "spsd/core/error.hpp"

namespace spsd {

namespace detail {

// Each defined in its own file, src/boxing/<name>.cpp.
#define SPSD_DECLARE_PRIMITIVE(kind, name) extern constinit const Primitive name##_primitive;
SPSD_BOXING_PRIMITIVES(SPSD_DECLARE_PRIMITIVE)
#undef SPSD_DECLARE_PRIMITIVE

namespace {
#define SPSD_PRIMITIVE_ADDRESS(kind, name) &name##_primitive,
constinit const std::array kPrimitives = {SPSD_BOXING_PRIMITIVES(SPSD_PRIMITIVE_ADDRESS)};
#undef SPSD_PRIMITIVE_ADDRESS
}  // namespace

std::span<const Primitive* const> primitives() { return kPrimitives; }

const Primitive& primitive(StepKind kind) {
  const auto i = static_cast<size_t>(kind);
  SPSD_CHECK(i < kPrimitives.size() && kPrimitives[i]->kind == kind, "boxing", "no primitive for step kind ",
             static_cast<int>(kind));
  return *kPrimitives[i];
}

namespace {
double cost_of(const Primitive& p, const StepView& step, const StepTraffic& t) {
  // A move between memory spaces is priced by the device's model, as any step on the device.
  const DeviceType device = step.from.placement.device_type() != DeviceType::kCPU ? step.from.placement.device_type()
                                                                                   : step.to.placement.device_type();
  return step_cost_us(cost_model(device), p.rounds(t.members, t.max_messages), t.max_bytes, t.max_local);
}
}  // namespace

Prediction predict(const Primitive& p, const StepView& step) {
  const StepTraffic t = p.traffic(step);
  return {t.max_bytes, cost_of(p, step, t)};
}

double cost_floor(const Primitive& p, const StepView& step) {
  return p.traffic_floor ? cost_of(p, step, p.traffic_floor(step)) : -1;
}

}  // namespace detail

int64_t latency_rounds(StepKind kind, int64_t n, int64_t max_messages) {
  return detail::primitive(kind).rounds(n, max_messages);
}

}  // namespace spsd
