// The dtype-erased steps of the dispatch path (op/dispatch.hpp).
#include "spsd/op/dispatch.hpp"

#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>

#include "spsd/boxing/planner.hpp"
#include "spsd/boxing/reuse.hpp"
#include "spsd/runtime/consistency.hpp"
#include "spsd/runtime/device.hpp"
#include "spsd/runtime/log.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

namespace {
// The op's span in the trace (SPSD_TRACE): its layouts, the chosen signature, and the bytes
// boxing its inputs moves on this rank (the planner's figures, which CommStats counts). On a
// cuda placement the span is timed on the compute stream too.
OpenSpan trace_op(TraceRecorder& recorder, TraceClock::time_point begin, const Resolution& r, int64_t me) {
  std::vector<std::string> inputs;
  for (size_t i = 0; i < r.inputs.size(); ++i)
    inputs.push_back(r.inputs[i].to_string() + " " + r.input_layouts[i].to_string());
  int64_t sent = 0, received = 0;
  for (const std::shared_ptr<const Plan>& plan : r.plans)
    if (plan) {
      const RankTraffic t = plan->traffic_of(me);
      sent += t.bytes_sent, received += t.bytes_received;
    }
  TraceSpan span{current_lane(), r.op, "op", begin, {}, {}};
  span.args = {{"inputs", std::move(inputs)},
               {"output", r.output.to_string() + " " + r.signature().output.to_string()},
               {"signature", r.signature().to_string()},
               {"ranks", r.placement.ranks()},
               {"boxing_bytes_sent", sent},
               {"boxing_bytes_received", received}};
  const bool on_device = r.placement.device_type() == DeviceType::kCUDA && r.placement.contains(me);
  return OpenSpan(recorder, std::move(span), on_device ? &device_runtime(r.op) : nullptr);
}

// SPSD_LOG=dispatch (runtime/log.hpp): the call and the chosen signature, then, when inputs are
// boxed, one line with each boxing's steps and bytes; at level 2 the resolution's candidates too.
std::string log_text(const Resolution& r, int level) {
  std::string s = r.identity->description + ": chose " + r.signature().to_string();
  if (level >= 2) return s + "\n" + r.to_string();
  std::string boxing;
  for (size_t i = 0; i < r.plans.size(); ++i) {
    if (!r.plans[i] || r.plans[i]->steps.empty()) continue;
    boxing += std::string(boxing.empty() ? "\n  boxing" : ";") + " input " + std::to_string(i) + " " +
              r.plans[i]->from.nd_sbp.to_string() + " -> " + r.plans[i]->to.nd_sbp.to_string() + ":";
    for (const Step& step : r.plans[i]->steps)
      boxing += " " + std::string(to_string(step.kind)) + " (" + std::to_string(step.max_bytes()) + " B)";
  }
  return s + boxing;
}
}  // namespace

Prepared prepare_op(const OpSchema& op, const OpAttrs& attrs, std::span<const InputRef> inputs,
                    const Scalar& scalar) {
  TraceRecorder* const recorder = tls_trace_recorder;  // null unless SPSD_TRACE: the one test when off
  const TraceClock::time_point begin = recorder ? TraceClock::now() : TraceClock::time_point{};
  SPSD_CHECK(!inputs.empty(), op.name, "needs at least one input");
  for (size_t i = 0; i < inputs.size(); ++i)
    SPSD_CHECK(inputs[i].shape != nullptr, op.name, "input ", i, " is undefined (a default-constructed GlobalTensor<",
               inputs[i].dtype, ">): assign a tensor to it before using it");
  const Placement& placement = *inputs[0].placement;
  for (size_t i = 1; i < inputs.size(); ++i)
    SPSD_CHECK(*inputs[i].placement == placement, op.name, "inputs must share one placement: input 0 is on ",
               placement, ", input ", i, " is on ", *inputs[i].placement, " (move one with to_global first)");
  // Inputs made by the raw GlobalTensor constructor are not checked there: their layouts must
  // fit the shapes and the mesh, and the placement the world, before anything is planned.
  for (const InputRef& in : inputs) check_layout(op.name, *in.shape, placement.mesh(), *in.nd_sbp);
  check_placement(op.name, placement);

  std::vector<ResolveInput> refs;
  refs.reserve(inputs.size());
  for (const InputRef& in : inputs) refs.push_back({in.shape, in.dtype, in.nd_sbp});
  Prepared p;
  p.resolution = resolve(op, attrs, placement, refs);
  const Resolution& r = *p.resolution;

  const int64_t me = rank();
  if (recorder) p.trace = trace_op(*recorder, begin, r, me);
  p.participates = placement.contains(me);
  if (!p.participates) return p;
  p.coords = placement.coords(me);
  if (const int level = log_level("dispatch"); level > 0 && me == placement.ranks().front())
    log_line("dispatch", log_text(r, level));
  // Inputs already boxed to the layout the signature takes (boxing/reuse.hpp): decided before
  // the note, which names them, so that every rank of the placement agrees on them.
  InputBoxings boxings;
  const bool communicates = r.communicates();
  if (communicates)
    for (size_t i = 0; i < inputs.size(); ++i)
      if (*inputs[i].boxed && r.plans[i] && r.plans[i]->communicates())
        boxings.find(op.name, i, *r.plans[i], inputs[i].boxed->get(), inputs[i].local->get());
  const ScalarOperand operand{scalar.f, scalar.bits};
  note_op(placement.ranks(), boxings.noted(r.identity), scalar.present ? &operand : nullptr);
  if (boxings.communicates(r.plans, communicates)) check_ops(placement.ranks());

  p.locals.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::shared_ptr<Storage>& local = *inputs[i].local;
    // A raw GlobalTensor's piece must hold its box (a smaller one would be read past its end);
    // one that holds the whole tensor's bytes needs no arithmetic.
    if (!local || local->bytes() < inputs[i].shape->numel() * size_of(inputs[i].dtype))
      check_piece_holds(op.name, "input", static_cast<int64_t>(i), *inputs[i].shape, inputs[i].dtype, placement,
                        *inputs[i].nd_sbp, p.coords, local.get());
    p.locals.push_back(r.plans[i] ? boxings.box(i, r.plans[i], local, Urgency::kNow, placement.ranks()) : local);
  }
  return p;
}

void register_op_name(std::string_view name, const void* schema) {
  static std::mutex mutex;  // simulated ranks are threads
  static std::unordered_map<std::string, const void*> owners;
  const std::lock_guard lock(mutex);
  const auto [it, inserted] = owners.try_emplace(std::string(name), schema);
  SPSD_CHECK(inserted || it->second == schema, name, "two different op types are named \"", name,
             "\": an op's name selects its backward rule and its cached resolutions, so each op needs its own "
             "(rename one of them)");
}

int64_t agree_on_bad_element(const Resolution& r, int64_t local) {
  const std::vector<int64_t>& ranks = r.placement.ranks();
  if (ranks.size() == 1) return local;
  check_ops(ranks);
  int64_t v = local < 0 ? std::numeric_limits<int64_t>::max() : local;
  communicator(r.placement).all_reduce(&v, &v, 1, DType::kInt64, ReduceOp::kMin);
  return v == std::numeric_limits<int64_t>::max() ? -1 : v;
}

}  // namespace spsd::detail
