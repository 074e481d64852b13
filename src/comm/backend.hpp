#pragma once
// Backend: what a rank's context creates its communicators with (MPI between processes, the
// in-process one under simulate); the runtime picks one per context.
#include <memory>
#include <string>
#include <vector>

#include "spsd/comm/communicator.hpp"

namespace spsd::detail {

// Creates communicators over a set of world ranks; one backend per context.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Collective over world_ranks (which holds the caller at my_index), called once per set.
  virtual std::unique_ptr<Communicator> create(std::vector<int64_t> world_ranks, int64_t my_index,
                                               CommStats* stats) = 0;
  // The same, for the consistency check's own traffic: a communicator distinct from create()'s
  // for the same ranks, so a check can never be matched with a data collective of a diverged rank.
  virtual std::unique_ptr<Communicator> create_check(std::vector<int64_t> world_ranks, int64_t my_index,
                                                     CommStats* stats) = 0;
};

}  // namespace spsd::detail
