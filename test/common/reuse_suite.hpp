#pragma once
// Rank-side checks of boxing reuse (tensor/boxed_copies.hpp, boxing/reuse.hpp) on a world of 4
// ranks: each boxes a tensor again where reuse skips it, counts the collectives (comm_stats)
// against reuse off, and compares values with reuse off bitwise. Collective over the world;
// each restores the setting it found.
#include "failures.hpp"

namespace spsd_test {

// Layer norm's backward with a P(sum) output gradient: one reduce-scatter for its two ops
// under the node scope (two with reuse off); gradients bitwise equal.
void reuse_layer_norm_backward(Failures& f);
// Step scope: a tensor boxed twice boxes once; copy_ into it (or into the to_global result
// that holds the piece) between two boxings makes the second box again, with the new values.
void reuse_copy_invalidates(Failures& f);
// Step scope: an optimizer's step invalidates its parameters' entries.
void reuse_optimizer_invalidates(Failures& f);
// A (3,) tensor on 4 ranks (one empty piece), and tensors on ranks {0, 1} boxed within and to
// ranks {2, 3}: every rank decides alike (the same collectives), values right.
void reuse_empty_pieces_and_outside_ranks(Failures& f);
// Entries go with their tensor: memory_stats and the budgets' bytes back to their start.
void reuse_entries_freed(Failures& f);
// Step scope under a budget of one entry: the least recently used goes, alike on every rank.
void reuse_eviction(Failures& f);
// The GPT of examples/08 in tensor and 2d (2x2) modes, 3 Adam steps: losses and first
// gradients under node and step bitwise those under off.
void reuse_gpt_bitwise(Failures& f);
// One rank forced to miss (a planted divergence): spsd::Error on every rank, naming the op.
// Returns this rank's message ("" for none).
std::string reuse_planted_divergence();

}  // namespace spsd_test
