// Pipeline schedules as values: exact texts, the bubble and memory formulas of the papers, the
// checks on custom lists, and program_order against a dependency reference written here.
#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using namespace spsd;
using namespace spsd::pipeline;

namespace {

Action F(int64_t stage, int64_t i) { return {Work::kForward, stage, i}; }
Action B(int64_t stage, int64_t i) { return {Work::kBackward, stage, i}; }
Action BI(int64_t stage, int64_t i) { return {Work::kBackwardInput, stage, i}; }
Action BW(int64_t stage, int64_t i) { return {Work::kBackwardWeight, stage, i}; }

// Idle time summed over the ranks.
double idle_time(const Schedule& s, const Timeline& t) {
  return t.bubble_fraction * static_cast<double>(s.ranks()) * t.makespan;
}

// Every generator's schedule for ranks p, micro-batches m and (interleaved) chunks v.
std::vector<std::pair<std::string, Schedule>> all_generators(int64_t p, int64_t m, int64_t v) {
  return {{"gpipe", gpipe(p, m)},
          {"1f1b", one_f_one_b(p, m)},
          {"interleaved", interleaved_one_f_one_b(p, m, v)},
          {"zb-h1", zero_bubble(p, m)}};
}

// The reference for the dependencies (the header's table), by search rather than by index.
std::vector<Action> needs(const Schedule& s, const Action& a) {
  const int64_t v = a.stage, i = a.microbatch;
  const auto backward_of = [&](int64_t stage) {
    for (const Action& x : s.actions(s.rank_of(stage)))
      if (x.stage == stage && x.microbatch == i && (x.work == Work::kBackward || x.work == Work::kBackwardInput))
        return x;
    FAIL("no backward for stage " << stage << " micro-batch " << i);
    return Action{};
  };
  switch (a.work) {
    case Work::kForward: return v == 0 ? std::vector<Action>{} : std::vector<Action>{F(v - 1, i)};
    case Work::kBackwardWeight: return {BI(v, i)};
    default:
      if (v == s.stages() - 1) return {F(v, i)};
      return {F(v, i), backward_of(v + 1)};
  }
}

// program_order lists every action once, each rank's in its order, by start time (ties to the
// lower rank where costs are positive), and each after what it needs.
void check_program_order(const Schedule& s, const Costs& costs, bool positive) {
  const std::vector<pipeline::Step> order = program_order(s, costs);
  std::vector<int64_t> next(s.ranks(), 0);
  std::map<std::tuple<Work, int64_t, int64_t>, bool> issued;
  size_t total = 0;
  for (int64_t r = 0; r < s.ranks(); ++r) total += s.actions(r).size();
  REQUIRE(order.size() == total);
  for (size_t k = 0; k < order.size(); ++k) {
    const pipeline::Step& step = order[k];
    REQUIRE(step.index == next[step.rank]);
    ++next[step.rank];
    const Action& a = s.actions(step.rank)[step.index];
    for (const Action& d : needs(s, a)) REQUIRE(issued[{d.work, d.stage, d.microbatch}]);
    issued[{a.work, a.stage, a.microbatch}] = true;
    if (k == 0) continue;
    REQUIRE(order[k - 1].start <= step.start);
    if (positive && order[k - 1].start == step.start) REQUIRE(order[k - 1].rank < step.rank);
  }
}

}  // namespace

TEST_CASE("pipeline: to_string of small schedules", "[pipeline]") {
  CHECK(gpipe(2, 2).to_string() ==
        "F0 F1 B0 B1\n"
        "F0 F1 B0 B1\n");
  CHECK(one_f_one_b(3, 4).to_string() ==
        "F0 F1 F2 B0 F3 B1 B2 B3\n"
        "F0 F1 B0 F2 B1 F3 B2 B3\n"
        "F0 B0 F1 B1 F2 B2 F3 B3\n");
  CHECK(zero_bubble(3, 4).to_string() ==
        "F0 F1 F2 BI0 BW0 F3 BI1 BW1 BI2 BW2 BI3 BW3\n"
        "F0 F1 BI0 F2 BI1 BW0 F3 BI2 BW1 BI3 BW2 BW3\n"
        "F0 BI0 F1 BI1 F2 BI2 BW0 F3 BI3 BW1 BW2 BW3\n");
  // Chunk after the dot: rank 0 holds stages 0 and 2, rank 1 stages 1 and 3.
  CHECK(interleaved_one_f_one_b(2, 2, 2).to_string() ==
        "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0\n"
        "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0\n");
  CHECK(describe(BI(5, 3)) == "BI3@stage5");
  const Schedule s = interleaved_one_f_one_b(2, 2, 2);
  CHECK((s.ranks() == 2 && s.chunks() == 2 && s.stages() == 4 && s.microbatches() == 2));
  CHECK(s.actions(1).front() == F(1, 0));
  CHECK(s.actions(1)[2] == F(3, 0));
}

TEST_CASE("pipeline: GPipe and 1F1B bubbles are (p-1)/(m+p-1), peaks m and min(p, m)", "[pipeline]") {
  for (int64_t p = 1; p <= 8; ++p) {
    for (int64_t m = 1; m <= 16; ++m) {
      INFO("p = " << p << ", m = " << m);
      const double bubble = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
      const Timeline g = simulate(gpipe(p, m)), o = simulate(one_f_one_b(p, m));
      CHECK(g.makespan == Approx(3.0 * static_cast<double>(m + p - 1)));
      CHECK(g.bubble_fraction == Approx(bubble));
      CHECK(o.makespan == Approx(3.0 * static_cast<double>(m + p - 1)));
      CHECK(o.bubble_fraction == Approx(bubble));
      CHECK(g.peak_activations == std::vector<int64_t>(p, m));
      for (int64_t r = 0; r < p; ++r) CHECK(o.peak_activations[r] == std::min(p - r, m));
    }
  }
}

TEST_CASE("pipeline: interleaved 1F1B has Megatron's bubble where m % p == 0, and works for every m",
          "[pipeline]") {
  for (int64_t p = 1; p <= 8; ++p) {
    for (int64_t v = 2; v <= 4; ++v) {
      for (int64_t m = 1; m <= 32; ++m) {
        INFO("p = " << p << ", m = " << m << ", v = " << v);
        const Schedule s = interleaved_one_f_one_b(p, m, v);
        REQUIRE((s.chunks() == v && s.stages() == p * v));
        const Timeline t = simulate(s), plain = simulate(one_f_one_b(p, m));
        // Never slower than 1F1B, also where the last group of micro-batches is partial.
        CHECK(t.makespan <= plain.makespan + 1e-9);
        if (m % p != 0) continue;
        // (p - 1) / v of a micro-batch's time idle per rank, against m of work.
        const double idle = static_cast<double>(p - 1) / static_cast<double>(v);
        CHECK(t.bubble_fraction == Approx(idle / (static_cast<double>(m) + idle)));
        CHECK(t.makespan == Approx(3.0 * (static_cast<double>(m) + idle)));
        // Megatron's warm-up, plus the forward of the first steady step, in chunk-activations.
        CHECK(t.peak_activations[0] == std::min((v - 1) * p + 2 * (p - 1) + 1, m * v));
      }
    }
  }
  CHECK(interleaved_one_f_one_b(3, 5, 1) == one_f_one_b(3, 5));
}

TEST_CASE("pipeline: ZB-H1 idles a third of 1F1B's time at m >= p, with 1F1B's peak", "[pipeline]") {
  const Costs split{.forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1};
  for (int64_t p = 1; p <= 8; ++p) {
    for (int64_t m = 1; m <= 16; ++m) {
      INFO("p = " << p << ", m = " << m);
      const Schedule zb = zero_bubble(p, m), plain = one_f_one_b(p, m);
      const Timeline z = simulate(zb, split), o = simulate(plain, split);
      // The paper's ZB-H1 bubble, (p - 1)(F + BI - BW) per rank, is p - 1 here; 1F1B's is 3 (p - 1).
      // The fraction falls less than the idle time (the makespan shrinks too), so the third is of time.
      CHECK(idle_time(zb, z) <= idle_time(plain, o) + 1e-9);
      if (m >= p) {
        CHECK(z.makespan == Approx(static_cast<double>(3 * m + p - 1)));
        CHECK(idle_time(zb, z) <= idle_time(plain, o) / 3 + 1e-9);
        CHECK(z.bubble_fraction == Approx(static_cast<double>(p - 1) / static_cast<double>(3 * m + p - 1)));
      }
      CHECK(z.peak_activations[0] == o.peak_activations[0]);
      for (int64_t r = 0; r < p; ++r) CHECK(z.peak_activations[r] <= std::min(p, m));
    }
  }
}

TEST_CASE("pipeline: every generator's lists pass the checks as a custom schedule, program_order is topological",
          "[pipeline]") {
  for (int64_t p = 1; p <= 6; ++p) {
    for (int64_t m = 1; m <= 13; ++m) {
      for (int64_t v = 1; v <= 3; ++v) {
        for (const auto& [name, s] : all_generators(p, m, v)) {
          INFO(name << ": p = " << p << ", m = " << m << ", v = " << v);
          std::vector<std::vector<Action>> lists;
          for (int64_t r = 0; r < s.ranks(); ++r) lists.push_back(s.actions(r));
          CHECK(Schedule(s.ranks(), s.chunks(), s.microbatches(), lists) == s);
          check_program_order(s, {}, true);
          check_program_order(s, {.forward = 0, .backward = 0, .backward_input = 0, .backward_weight = 0}, false);
        }
      }
    }
  }
}

TEST_CASE("pipeline: costs are a rank's share, one chunk's action takes 1 / chunks of them", "[pipeline]") {
  // One rank runs all its chunks back to back: the chunk count cannot change its time.
  for (int64_t v = 1; v <= 4; ++v) {
    const Timeline t = simulate(interleaved_one_f_one_b(1, 5, v), {.forward = 2, .backward = 3});
    CHECK(t.makespan == Approx(25.0));
    CHECK(t.bubble_fraction == Approx(0.0));
  }
  // BI and BW take their own costs; B is not used by the split form.
  const Timeline z =
      simulate(zero_bubble(1, 2), {.forward = 1, .backward = 100, .backward_input = 2, .backward_weight = 4});
  CHECK(z.makespan == Approx(14.0));
  // All costs zero: nothing takes time, nothing idles.
  const Timeline none = simulate(one_f_one_b(3, 3), {.forward = 0, .backward = 0});
  CHECK((none.makespan == 0 && none.bubble_fraction == 0));
}

TEST_CASE("pipeline: activations are held from the F until the B, or the BW in the split form", "[pipeline]") {
  const Schedule late(1, 1, 2, {{F(0, 0), F(0, 1), BI(0, 0), BI(0, 1), BW(0, 0), BW(0, 1)}});
  const Schedule early(1, 1, 2, {{F(0, 0), BI(0, 0), BW(0, 0), F(0, 1), BI(0, 1), BW(0, 1)}});
  CHECK(simulate(late).peak_activations == std::vector<int64_t>{2});
  CHECK(simulate(early).peak_activations == std::vector<int64_t>{1});
  // A rank may mix the forms across micro-batches.
  const Schedule mixed(1, 1, 2, {{F(0, 0), B(0, 0), F(0, 1), BI(0, 1), BW(0, 1)}});
  const Costs costs{.forward = 1, .backward = 3, .backward_input = 1, .backward_weight = 1};
  CHECK(simulate(mixed, costs).makespan == Approx(7.0));
}

TEST_CASE("pipeline: deadlocks name the first stuck action and what it waits for", "[pipeline]") {
  // A B before its own F on the same rank.
  CHECK_THROWS_WITH(Schedule(2, 1, 1, {{B(0, 0), F(0, 0)}, {F(1, 0), B(1, 0)}}),
                    "pipeline::Schedule: deadlock: rank 0's next action, B0@stage0 (its action 0), waits for "
                    "F0@stage0, which rank 0 runs only later (its action 1)");
  // Two ranks waiting on each other: rank 0 wants micro-batch 0's gradient before sending
  // micro-batch 1 forward, rank 1 wants micro-batch 1 first.
  CHECK_THROWS_WITH(Schedule(2, 1, 2, {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {F(1, 1), F(1, 0), B(1, 0), B(1, 1)}}),
                    "pipeline::Schedule: deadlock: rank 0's next action, B0@stage0 (its action 1), waits for "
                    "B0@stage1, which rank 1 has not reached (its action 2): rank 1's next action is F1@stage1 "
                    "(its action 0)");
  // A BW before its BI.
  CHECK_THROWS_WITH(Schedule(1, 1, 1, {{F(0, 0), BW(0, 0), BI(0, 0)}}),
                    "pipeline::Schedule: deadlock: rank 0's next action, BW0@stage0 (its action 1), waits for "
                    "BI0@stage0, which rank 0 runs only later (its action 2)");
  // Interleaved: rank 0's second chunk needs the first chunk of rank 1, which waits for a gradient.
  CHECK_THROWS_WITH(Schedule(2, 2, 1, {{F(0, 0), F(2, 0), B(2, 0), B(0, 0)}, {B(1, 0), F(1, 0), F(3, 0), B(3, 0)}}),
                    "pipeline::Schedule: deadlock: rank 0's next action, F0@stage2 (its action 1), waits for "
                    "F0@stage1, which rank 1 has not reached (its action 1): rank 1's next action is B0@stage1 "
                    "(its action 0)");
}

TEST_CASE("pipeline: incomplete or misplaced lists are named", "[pipeline]") {
  const std::string op = "pipeline::Schedule: ";
  // A missing action.
  CHECK_THROWS_WITH(Schedule(2, 1, 1, {{F(0, 0), B(0, 0)}, {F(1, 0)}}),
                    op + "B0@stage1 is missing from rank 1's list (or BI0@stage1 and BW0@stage1)");
  CHECK_THROWS_WITH(Schedule(2, 1, 1, {{B(0, 0)}, {F(1, 0), B(1, 0)}}), op + "F0@stage0 is missing from rank 0's list");
  CHECK_THROWS_WITH(Schedule(1, 1, 1, {{F(0, 0), BI(0, 0)}}),
                    op + "BW0@stage0 is missing from rank 0's list (BI0@stage0 is there)");
  CHECK_THROWS_WITH(Schedule(1, 1, 1, {{F(0, 0), BW(0, 0)}}),
                    op + "B0@stage0 is missing from rank 0's list (or BI0@stage0 and BW0@stage0)");
  // An action on the wrong rank.
  CHECK_THROWS_WITH(Schedule(2, 1, 1, {{F(0, 0), F(1, 0), B(0, 0)}, {B(1, 0)}}),
                    op + "rank 0's action 1, F0@stage1, belongs on rank 1 (stage 1 % 2 ranks)");
  // Twice, or both forms.
  CHECK_THROWS_WITH(Schedule(1, 1, 1, {{F(0, 0), F(0, 0), B(0, 0)}}),
                    op + "rank 0 has F0@stage0 twice (its actions 0 and 1)");
  CHECK_THROWS_WITH(Schedule(1, 1, 1, {{F(0, 0), B(0, 0), BI(0, 0), BW(0, 0)}}),
                    op + "rank 0 has both B0@stage0 and BI0@stage0 (its actions 1 and 2); "
                         "a stage runs one B or one BI per micro-batch");
  CHECK_THROWS_WITH(Schedule(1, 1, 1, {{F(0, 0), BI(0, 0), BW(0, 0), BW(0, 0)}}),
                    op + "rank 0 has BW0@stage0 twice (its actions 2 and 3)");
  CHECK_THROWS_WITH(Schedule(1, 1, 1, {{F(0, 0), B(0, 0), BW(0, 0)}}),
                    op + "rank 0 has both B0@stage0 and BW0@stage0; "
                         "a stage runs one B or one BI and one BW per micro-batch");
  // Out of range.
  CHECK_THROWS_WITH(Schedule(2, 2, 1, {{F(4, 0)}, {}}),
                    op + "rank 0's action 0, F0@stage4, has a stage outside [0, 4) (2 ranks x 2 chunks)");
  CHECK_THROWS_WITH(Schedule(1, 1, 2, {{F(0, 2)}}),
                    op + "rank 0's action 0, F2@stage0, has a micro-batch outside [0, 2)");
  CHECK_THROWS_WITH(Schedule(1, 1, 1, {{Action{static_cast<Work>(7), 0, 0}}}),
                    op + "rank 0's action 0 has no Work kind (7)");
  CHECK_THROWS_WITH(Schedule(2, 1, 1, {{F(0, 0), B(0, 0)}}), op + "got 1 action lists for 2 ranks");
}

TEST_CASE("pipeline: invalid requests name the function and the value", "[pipeline]") {
  CHECK_THROWS_WITH(gpipe(0, 4), "pipeline::gpipe: ranks is 0; it must be >= 1");
  CHECK_THROWS_WITH(gpipe(2, 0), "pipeline::gpipe: microbatches is 0; it must be >= 1");
  CHECK_THROWS_WITH(one_f_one_b(-1, 4), "pipeline::one_f_one_b: ranks is -1; it must be >= 1");
  CHECK_THROWS_WITH(one_f_one_b(2, -3), "pipeline::one_f_one_b: microbatches is -3; it must be >= 1");
  CHECK_THROWS_WITH(interleaved_one_f_one_b(2, 4, 0),
                    "pipeline::interleaved_one_f_one_b: chunks is 0; it must be >= 1");
  CHECK_THROWS_WITH(interleaved_one_f_one_b(0, 4, 2), "pipeline::interleaved_one_f_one_b: ranks is 0; it must be >= 1");
  CHECK_THROWS_WITH(zero_bubble(4, 0), "pipeline::zero_bubble: microbatches is 0; it must be >= 1");
  CHECK_THROWS_WITH(Schedule(1, 0, 1, {{}}), "pipeline::Schedule: chunks is 0; it must be >= 1");
  CHECK_THROWS_WITH(Schedule(0, 1, 1, {}), "pipeline::Schedule: ranks is 0; it must be >= 1");
  CHECK_THROWS_WITH(one_f_one_b(2, 2).actions(2), "pipeline::Schedule::actions: pipeline rank 2 is outside [0, 2)");
  CHECK_THROWS_WITH(simulate(gpipe(2, 2), {.forward = -1}),
                    "pipeline::simulate: costs.forward is -1; costs must be finite and >= 0");
  CHECK_THROWS_WITH(program_order(gpipe(2, 2), {.backward_weight = NAN}),
                    "pipeline::program_order: costs.backward_weight is nan; costs must be finite and >= 0");
  CHECK_THROWS_AS(zero_bubble(1, 0), Error);
}
