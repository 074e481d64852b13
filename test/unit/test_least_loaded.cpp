// The least-loaded dealing of a replicated piece's requests (src/boxing/least_loaded.hpp) deals
// runs of equal requests in whole rounds where it can; it must give every holder what dealing
// the requests one by one gives. Internal header: the rule's ties (equal loads, a gap that is a
// multiple of the request size) are hard to reach through plans alone.
#include <catch2/catch.hpp>
#include <random>

#include "../../src/boxing/least_loaded.hpp"

namespace {

// One by one: the holder with the least load, the first on ties.
struct OneByOne {
  std::vector<int64_t> load, messages;
  explicit OneByOne(int64_t holders) : load(holders, 0), messages(holders, 0) {}
  int64_t deal(int64_t size) {
    const int64_t best = std::min_element(load.begin(), load.end()) - load.begin();
    load[best] += size;
    messages[best] += 1;
    return best;
  }
};

}  // namespace

TEST_CASE("least-loaded dealing by runs gives each request the holder one-by-one dealing does", "[least-loaded]") {
  std::mt19937_64 rng(27);
  int64_t checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t holders = 1 + static_cast<int64_t>(rng() % 9);
    // Few sizes, some multiples of one another, some zero: the ties the rule has to break.
    const int64_t sizes[] = {0, 1, 2, 3, 4, 6, 8, 12, 33, 64};
    spsd::detail::LeastLoaded runs(holders);
    OneByOne single(holders);
    const int runs_count = 1 + static_cast<int>(rng() % 12);
    for (int r = 0; r < runs_count; ++r) {
      const int64_t size = sizes[rng() % (trial % 2 ? 10 : 4)], count = 1 + static_cast<int64_t>(rng() % 30);
      const int64_t watch = static_cast<int64_t>(rng() % count);
      int64_t expected = -1;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t h = single.deal(size);
        if (i == watch) expected = h;
      }
      REQUIRE(runs.deal(size, count, watch) == expected);
      ++checked;
    }
    REQUIRE(runs.max_load() == *std::max_element(single.load.begin(), single.load.end()));
    REQUIRE(runs.max_messages() == *std::max_element(single.messages.begin(), single.messages.end()));
  }
  CHECK(checked > 10000);
}
