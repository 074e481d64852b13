#pragma once
// An op's call as a compiled step replays it (tensor/capture.hpp): its resolution (signature
// and the boxing plan of each input), this rank's boxes of the pieces, and the typed kernel
// with its data checks. Replaying runs the plans and the kernel, nothing else: no resolution,
// no cache look-up, no consistency check (the capture made them).
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "spsd/op/kernel_args.hpp"
#include "spsd/op/resolve.hpp"
#include "spsd/tensor/capture.hpp"

namespace spsd::detail {

struct InputRef;  // op/dispatch.hpp

// What run_op hands the recorder.
struct OpCall {
  const OpSchema* schema;
  OpAttrs attrs;
  Scalar scalar;
  std::shared_ptr<const Resolution> resolution;
  void (*kernel)(const KernelArgs&, const Resolution&);  // run_checked_kernel<Op, T>
  std::vector<int64_t> coords;                          // this rank's, in the placement's mesh
  bool checks_indices = false;                          // the kernel may note an index error
};

class CapturedOp final : public ReplayStep {
 public:
  // r's resolution with coords' pieces; dtype_bytes: the output element's size.
  explicit CapturedOp(OpCall call);
  std::shared_ptr<Storage> run(std::span<const std::shared_ptr<Storage>> inputs,
                               std::shared_ptr<Storage> out) const override;
  int64_t output_bytes() const override { return out_bytes_; }
  DeviceType output_device() const override { return call_.resolution->placement.device_type(); }
  std::string describe() const override;

  const OpCall& call() const { return call_; }
  const Resolution& resolution() const { return *call_.resolution; }
  // The same call with another resolution of it (another signature, or inputs in other layouts).
  std::shared_ptr<CapturedOp> with(std::shared_ptr<const Resolution> resolution) const;

 private:
  OpCall call_;
  int64_t out_bytes_ = 0;
  Box out_box_;
  Shape out_shape_;
  mutable std::vector<LocalInput> locals_;                 // shapes and boxes fixed; data set per run
  mutable std::vector<std::shared_ptr<Storage>> boxed_;    // the boxed pieces, kept while the kernel runs
};

// run_op's capture: records call's kernel on inputs' pieces with output, its result.
void record_op(StepRecorder& recorder, OpCall call, std::span<const InputRef> inputs,
               const std::shared_ptr<Storage>& output);

}  // namespace spsd::detail
