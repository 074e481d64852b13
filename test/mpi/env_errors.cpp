// The environment variables spsd reads, given bad values: run by check_env.sh under
// `tools/mpirun -np 2` (each variable is read once per process, so one bad value per job).
// Constructs a Runtime and runs one op with a world-wide reduction; prints
// "env_errors rank R (local rank L): ok" and exits 0, or "env_errors rank ...: spsd::Error: ..."
// and exits 3. check_env.sh also runs it without mpirun (an MPI singleton), where the local-rank
// variables are the caller's to set.
#include <cstdio>
#include <string>

#include "spsd/spsd.hpp"

int main() {
  std::string where = "env_errors rank ?";
  try {
    spsd::Runtime runtime;
    where = "env_errors rank " + std::to_string(spsd::rank()) + " (local rank " + std::to_string(spsd::local_rank()) + ")";
    std::vector<int64_t> ranks(spsd::world_size());
    for (int64_t r = 0; r < spsd::world_size(); ++r) ranks[r] = r;
    const spsd::Placement world("cpu", ranks);
    const auto x = spsd::ones<float>({4}, world, spsd::sbp::split(0));
    const std::vector<float> total = spsd::sum(spsd::relu(x)).full().to_vector();
    if (total.size() != 1 || total[0] != 4.0f) {
      std::printf("%s: sum(relu(ones(4))) gave %s, expected 4\n", where.c_str(),
                  total.empty() ? "nothing" : std::to_string(total[0]).c_str());
      return 2;
    }
    std::printf("%s: ok\n", where.c_str());
    return 0;
  } catch (const spsd::Error& e) {
    std::printf("%s: spsd::Error: %s\n", where.c_str(), e.what());
    return 3;
  }
}
