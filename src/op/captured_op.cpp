// CapturedOp (op/captured_op.hpp): an op's kernel call, replayed.
#include "spsd/op/captured_op.hpp"

#include "spsd/boxing/planner.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd::detail {

CapturedOp::CapturedOp(OpCall call) : call_(std::move(call)) {
  const Resolution& r = *call_.resolution;
  const NdSignature& sig = r.signature();
  const Shape& mesh = r.placement.mesh();
  locals_.reserve(r.inputs.size());
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    Box box = box_at(r.inputs[i].shape, mesh, sig.inputs[i], call_.coords);
    Shape shape = box.shape();
    locals_.push_back({nullptr, std::move(shape), std::move(box), &r.inputs[i]});
  }
  out_box_ = box_at(r.output.shape, mesh, sig.output, call_.coords);
  out_shape_ = out_box_.shape();
  out_bytes_ = out_shape_.numel() * size_of(r.output.dtype);
  boxed_.resize(r.inputs.size());
}

std::shared_ptr<Storage> CapturedOp::run(std::span<const std::shared_ptr<Storage>> inputs,
                                         std::shared_ptr<Storage> out) const {
  const Resolution& r = *call_.resolution;
  for (size_t i = 0; i < locals_.size(); ++i) {
    boxed_[i] = r.plans[i] ? run_plan(r.plans[i], inputs[i], Urgency::kNow) : inputs[i];
    locals_[i].data = std::as_const(*boxed_[i]).data();
  }
  if (!out) out = Storage::allocate_uninitialized(out_bytes_, r.placement.device_type());
  const KernelArgs args{call_.attrs, call_.scalar, locals_, out->data(), out_shape_, out_box_, r.output,
                        r.signature(), kernel::Target::of(r.placement.device_type())};
  call_.kernel(args, r);
  for (std::shared_ptr<Storage>& b : boxed_) b.reset();  // a boxed piece lives no longer than eager's
  return out;
}

std::string CapturedOp::describe() const { return call_.resolution->identity->description; }

std::shared_ptr<CapturedOp> CapturedOp::with(std::shared_ptr<const Resolution> resolution) const {
  OpCall call = call_;
  call.resolution = std::move(resolution);
  return std::make_shared<CapturedOp>(std::move(call));
}

void record_op(StepRecorder& recorder, OpCall call, std::span<const InputRef> inputs,
               const std::shared_ptr<Storage>& output) {
  std::vector<std::shared_ptr<Storage>> pieces;
  pieces.reserve(inputs.size());
  for (const InputRef& in : inputs) pieces.push_back(*in.local);
  recorder.record(std::make_shared<CapturedOp>(std::move(call)), pieces, output);
}

}  // namespace spsd::detail
