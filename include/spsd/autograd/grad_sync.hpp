#pragma once
// Gradient accumulation over micro-batches with one gradient reduction per step, as PyTorch
// DDP's no_sync():
//
//   { NoGradSync no_sync;                        // micro-batches 1 .. k-1
//     for (...) backward(loss_of(micro_batch)); }  // gradients stay partial, summed locally
//   backward(loss_of(last_micro_batch));          // reduces each parameter's gradient once
//   optimizer.step();
//
// A data-parallel parameter is broadcast and its gradient comes out of backward partial
// (P(sum): each rank's sum over its samples). Outside NoGradSync, backward reduces it into the
// parameter's layout as soon as it is final (BackwardOptions::reduce_gradients_early, the
// all-reduce overlapped with the rest of backward). Inside, backward leaves it partial and adds
// it to the partial gradient already in grad(), which costs no communication. The next
// backward outside adds its own partial gradient to that sum before it reduces, so the k
// micro-batches cost one reduction per parameter; if the optimizer's step() comes first, it
// does that one reduction instead. grad() read inside is the partial sum, a valid global
// tensor (its value is the full gradient) whose reading communicates.
//
// Like every collective, all ranks must be inside or outside together (SPSD: they run the same
// program). Per thread: simulated ranks are threads.

namespace spsd {

namespace detail {
inline thread_local bool grad_sync = true;
}  // namespace detail

// Whether backward reduces parameter gradients (false inside NoGradSync).
inline bool is_grad_sync_enabled() { return detail::grad_sync; }

// While one lives, backward leaves parameter gradients partial (gradient accumulation, above).
// Not copyable; it restores the previous setting when it goes.
class NoGradSync {
 public:
  NoGradSync() : previous_(detail::grad_sync) { detail::grad_sync = false; }
  ~NoGradSync() { detail::grad_sync = previous_; }
  NoGradSync(const NoGradSync&) = delete;
  NoGradSync& operator=(const NoGradSync&) = delete;

 private:
  bool previous_;
};

}  // namespace spsd
