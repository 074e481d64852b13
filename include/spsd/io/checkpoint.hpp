#pragma once
// Distributed checkpoints (docs/checkpoints.md): each rank writes the box it holds, once per
// distinct box, with checksums; a manifest written last, atomically, makes the save visible.
// Loading into any placement, layout or world size reads only the checksummed chunks that hold
// the bytes each rank needs. save_checkpoint and load_checkpoint are collective over the whole
// world: every rank calls them with the same arguments, and an error on one rank (a missing or
// corrupt file, a bad argument) throws spsd::Error on every rank.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "spsd/tensor/global_tensor.hpp"
#include "spsd/tensor/state_dict.hpp"

namespace spsd {

// What a checkpoint holds, from its manifest.
struct CheckpointEntry {
  std::string name;
  Shape shape;
  DType dtype;
  int64_t boxes;  // stored boxes (one per distinct non-empty box of the saved layout)
};

// Collective over the world. Writes every tensor of state into dir (created if missing). A
// partial tensor is first boxed to its layout with each P replaced by B (an all-reduce); of
// ranks holding the same box only the first in placement order writes it. Saving over an
// existing checkpoint replaces it atomically: a crash leaves the old one loadable.
void save_checkpoint(const StateDict& state, const std::string& dir);
// One tensor, stored under the name "tensor".
template <Element T>
void save_checkpoint(const GlobalTensor<T>& t, const std::string& dir) {
  StateDict state;
  state.insert("tensor", t);
  save_checkpoint(state, dir);
}

// Collective over the world. Reads every tensor named in `into` from dir into its storage, in
// the entry's own placement and layout (in place: the model's parameters take the values).
// Names the checkpoint holds beyond those are not read. Throws (on every rank, with nothing
// written) when a name is missing, or a dtype or shape differs from the stored one.
void load_checkpoint(const std::string& dir, StateDict& into);

namespace detail {
GlobalData load_tensor(const std::string& dir, const std::string& name, DType dtype, const Placement& placement,
                       const NdSbp& nd_sbp);
}  // namespace detail

// Collective over the world: the tensor `name` of dir in this placement and layout, its shape
// the stored one.
template <Element T>
GlobalTensor<T> load_checkpoint(const std::string& dir, const std::string& name, const Placement& placement,
                                const NdSbp& nd_sbp) {
  return GlobalTensor<T>::from_data(detail::load_tensor(dir, name, dtype_of<T>, placement, nd_sbp));
}
// The tensor of a checkpoint written by save_checkpoint(tensor, dir).
template <Element T>
GlobalTensor<T> load_checkpoint(const std::string& dir, const Placement& placement, const NdSbp& nd_sbp) {
  return load_checkpoint<T>(dir, "tensor", placement, nd_sbp);
}

// Collective over the world: the manifest's tensors, sorted by name (reads nothing else).
std::vector<CheckpointEntry> checkpoint_contents(const std::string& dir);

// This rank's checkpoint file traffic since the start or the last reset.
struct CheckpointIoStats {
  int64_t bytes_written = 0;  // data files and manifest
  int64_t bytes_read = 0;     // data files only (every rank also reads the manifest)
  int64_t files_read = 0;     // data files opened for reading
};
// This rank's counters, and their reset to zero.
CheckpointIoStats checkpoint_io_stats();
void reset_checkpoint_io_stats();

namespace detail {
// Tests only: called by save_checkpoint at "data written" (every data file renamed into place)
// and "manifest written" (the temporary manifest complete, not yet renamed). Throwing there
// stops the save as a crash at that point would, leaving the files as they are.
inline std::function<void(std::string_view stage)> checkpoint_fault_hook;
}  // namespace detail

}  // namespace spsd
