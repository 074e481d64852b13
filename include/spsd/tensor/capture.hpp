#pragma once
// What the library's data paths tell a compiled step while it captures (compile/compiled_step.hpp).
// Capturing runs the step eagerly once; every piece of work that produces data on this rank (an
// op's kernel with its input boxing, a to_global) hands the recorder a ReplayStep that can do the
// same work again on other buffers, and host-side steps that must run again on every call (an
// optimizer's update, zero_grad, a scheduler) hand it a closure. What cannot be replayed (a host
// read such as item(), a fresh dropout mask, a checkpoint) refuses to be captured: an spsd::Error
// naming the op. The recorder is per thread (a simulated rank is a thread); null when nothing
// captures, so the eager path pays one thread-local load.
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "spsd/tensor/storage.hpp"

namespace spsd::detail {

struct AutogradMeta;  // tensor/global_tensor.hpp

// One recorded piece of work on this rank, replayable on other buffers.
class ReplayStep {
 public:
  virtual ~ReplayStep() = default;
  // inputs: this rank's pieces of the step's inputs, as recorded (null where the rank holds none);
  // out: a buffer of output_bytes() for the result, or null to allocate one. Returns the result's
  // piece (null where the rank holds none).
  virtual std::shared_ptr<Storage> run(std::span<const std::shared_ptr<Storage>> inputs,
                                       std::shared_ptr<Storage> out) const = 0;
  // The bytes of the result's piece when the step writes into a given buffer; -1 when it always
  // makes its own (a boxing, whose result comes from the communication).
  virtual int64_t output_bytes() const = 0;
  // Where the result's piece lives.
  virtual DeviceType output_device() const = 0;
  // One line for explain(): "matmul (S(0)), (B) -> (S(0))".
  virtual std::string describe() const = 0;
};

class StepRecorder {
 public:
  virtual ~StepRecorder() = default;
  // Inside a host step (HostStep): its work runs again on each replay as a whole, so it is not
  // recorded; what it makes must not be read by recorded work (the recorder refuses that).
  int paused = 0;
  // step ran on inputs (their pieces on this rank, before any boxing) and produced output.
  virtual void record(std::shared_ptr<const ReplayStep> step, std::span<const std::shared_ptr<Storage>> inputs,
                      const std::shared_ptr<Storage>& output) = 0;
  // A host step (an optimizer's update) that replays by running again; what it does inside is
  // not recorded (see HostStep).
  virtual void record_host(std::string_view name, std::function<void()> replay) = 0;
  // backward set meta's gradient (meta.grad); a replay sets it again to the replayed value.
  virtual void record_gradient(const std::shared_ptr<AutogradMeta>& meta) = 0;
  // Throws unless meta's gradient, about to be added to, was made within this capture.
  virtual void check_gradient_fresh(const AutogradMeta& meta) = 0;
};

// The recorder capturing on this thread, or null; active_recorder(): null inside a host step too.
inline thread_local StepRecorder* tls_step_recorder = nullptr;
inline StepRecorder* active_recorder() {
  StepRecorder* r = tls_step_recorder;
  return r && !r->paused ? r : nullptr;
}

// Throws spsd::Error: op cannot run inside a compiled step's capture, because why.
[[noreturn]] void refuse_capture(std::string_view op, std::string_view why);
// refuse_capture while this thread captures; free otherwise.
inline void check_not_capturing(std::string_view op, std::string_view why) {
  if (active_recorder()) [[unlikely]] refuse_capture(op, why);
}

// A host step: while a capture runs, records `replay` (which runs the step again on each replay)
// and pauses the recording for the step's own work until destroyed; nothing otherwise (nor
// inside another host step: a scheduler's step inside an optimizer's replays with it).
class HostStep {
 public:
  HostStep(std::string_view name, std::function<void()> replay) : paused_(active_recorder()) {
    if (!paused_) return;
    paused_->record_host(name, std::move(replay));
    ++paused_->paused;
  }
  ~HostStep() {
    if (paused_) --paused_->paused;
  }
  HostStep(const HostStep&) = delete;
  HostStep& operator=(const HostStep&) = delete;

 private:
  StepRecorder* paused_;
};

}  // namespace spsd::detail
