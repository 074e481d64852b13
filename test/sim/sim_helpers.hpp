#pragma once
// Running rank-side code under spsd::simulate and bringing its findings back to the main thread,
// where Catch assertions are safe.
#include <functional>
#include <string>
#include <vector>

#include "failures.hpp"

namespace spsd_test {

// The ranks 0 .. mesh.numel()-1, row-major, as a cpu placement with this mesh.
inline spsd::Placement mesh_placement(const spsd::Shape& mesh) {
  std::vector<int64_t> ranks(mesh.numel());
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<int64_t>(i);
  return spsd::Placement("cpu", ranks, mesh);
}

// Runs f on n simulated ranks, each recording into its own Failures; returns them merged.
inline Failures on_simulated_ranks(int n, const std::function<void(Failures&)>& f) {
  std::vector<Failures> per_rank(n);
  spsd::simulate(n, [&] { f(per_rank[spsd::rank()]); });
  Failures all;
  for (const Failures& p : per_rank) all.merge(p);
  return all;
}

// Runs body on n simulated ranks; returns what each rank's call returned, by rank, for the test to
// assert on its own thread.
template <class R>
std::vector<R> results_by_rank(int n, const std::function<R()>& body) {
  std::vector<R> results(n);
  spsd::simulate(n, [&] { results[spsd::rank()] = body(); });
  return results;
}

// Runs body on n simulated ranks; returns each rank's spsd::Error message, "" where none was thrown.
inline std::vector<std::string> errors_by_rank(int n, const std::function<void()>& body) {
  return results_by_rank<std::string>(n, [&]() -> std::string {
    try {
      body();
    } catch (const spsd::Error& e) {
      return e.what();
    }
    return "";
  });
}

}  // namespace spsd_test
