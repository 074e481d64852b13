#pragma once
// What backward may read of the tensors a graph saved (autograd/node.hpp): a node keeps its
// inputs and output by reference, so a tensor written in place after the node was recorded (an
// optimizer step between the forward pass and backward, a copy_ into a weight, a
// load_checkpoint) would silently give gradients of other values; and a graph that backward
// already ran through (without retain_graph) has dropped what it saved. Both are checked for
// the whole graph before backward runs any op, so every rank throws at the same point.
//
// Versions are per storage (Storage::version), counted by the library's in-place writers. A
// rank outside a saved tensor's placement holds no piece and cannot see its version: where the
// graph spans placements of different ranks, the ranks of those placements agree on the verdict
// (one cross-rank consistency check among them, runtime/consistency.hpp) before any throws, so
// none is left waiting. A graph on one placement needs no agreement.
// Unlike torch, which checks only the tensors a formula needs, every input and output a node
// holds counts as saved (spsd's nodes keep them all), except a to_global's, whose backward
// reads layouts only.
#include <vector>

#include "spsd/autograd/node.hpp"

namespace spsd::detail {

// Throws spsd::Error on every rank when a node of order (the graph backward is about to run)
// was freed by an earlier backward, or holds a saved tensor written in place since it was
// recorded: naming the op, which of its tensors, the tensor and both versions.
void check_saved_tensors(const std::vector<GradNode*>& order);

// Drops what node saved (its inputs' and output's pieces, a checkpoint's function): after a
// backward without retain_graph. The layouts stay, for the messages.
void free_saved_tensors(GradNode& node);

}  // namespace spsd::detail
