#pragma once
// The backend behind spsd::dry_run: one rank of a world whose other ranks are not there. Its
// collectives complete at once, count their traffic as the real ones would (comm_stats), and
// move no data between ranks: each member's result is made from this rank's own contribution,
// as if every rank held what this one holds. Values are therefore not the program's; what a
// dry run is for are the layouts, plans, bytes and compiled steps' searches, which depend only
// on shapes (docs/compile.md, "Planning without the ranks").
#include <memory>
#include <string>
#include <vector>

#include "backend.hpp"

namespace spsd::detail {

class DryBackend final : public Backend {
 public:
  std::string name() const override { return "dry run (the other ranks absent, no data moved)"; }
  std::unique_ptr<Communicator> create(std::vector<int64_t> world_ranks, int64_t my_index, CommStats* stats) override;
  // The consistency check's: its digests come back equal (every member "sent" this rank's).
  std::unique_ptr<Communicator> create_check(std::vector<int64_t> world_ranks, int64_t my_index,
                                             CommStats* stats) override;
};

}  // namespace spsd::detail
