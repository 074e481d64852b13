// IntegerProgramme (compile/integer_programme.hpp): the CPLEX LP text of a small programme, and
// CBC's solve of one whose optimum is known, from a start and without one.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "spsd/compile/integer_programme.hpp"

using spsd::detail::IntegerProgramme;

namespace {

// Choose one of three items (binaries a, b, c costing 3, 1, 2) and pay a fixed 5 (a column fixed
// at 1); b excludes d, a continuous column that must cover c's choice at 4 a unit:
//   minimise 5 k + 3 a + b + 2 c + 4 d  s.t.  a + b + c = 1,  b + d <= 1,  d - c >= 0.
// Optimum: b alone, 6.
IntegerProgramme small() {
  IntegerProgramme p;
  p.comment = "three items";
  const int k = p.add_column("k", 5, false, 1, 1);
  const int a = p.add_column("a", 3, true), b = p.add_column("b", 1, true), c = p.add_column("c", 2, true);
  const int d = p.add_column("d", 4, false);
  (void)k;
  p.add_row("one", {{a, 1}, {b, 1}, {c, 1}}, 1, 1);
  p.add_row("exclude", {{b, 1}, {d, 1}}, -IntegerProgramme::kInfinity, 1);
  p.add_row("cover", {{d, 1}, {c, -1}}, 0, IntegerProgramme::kInfinity);
  return p;
}

}  // namespace

TEST_CASE("IntegerProgramme: CPLEX LP text with every row, bound and binary", "[compile]") {
  std::ostringstream out;
  small().write_lp(out);
  CHECK(out.str() ==
        "\\ three items\n"
        "Minimize\n obj: 5 k + 3 a + 1 b + 2 c + 4 d\n"
        "Subject To\n one: 1 a + 1 b + 1 c = 1\n exclude: 1 b + 1 d <= 1\n cover: 1 d - 1 c >= 0\n"
        "Bounds\n k = 1\n 0 <= d <= 1\n"
        "Binary\n a\n b\n c\n"
        "End\n");
}

TEST_CASE("IntegerProgramme: CBC finds and proves the optimum, from a worse start too", "[compile]") {
  const IntegerProgramme p = small();
  for (const bool from_start : {false, true}) {
    INFO("from a start: " << from_start);
    // The start: item a (cost 8 with the fixed 5), feasible and not optimal.
    const auto s = spsd::detail::solve_exactly(
        p, from_start ? std::vector<std::pair<int, double>>{{1, 1}, {2, 0}, {3, 0}} : std::vector<std::pair<int, double>>{},
        10, "test");
    REQUIRE(s.found);
    CHECK(s.optimal);
    CHECK(s.objective == Approx(6));
    CHECK(s.bound == Approx(6));
    REQUIRE(s.values.size() == 5);
    CHECK(s.values[2] == Approx(1));  // b
    CHECK(s.values[1] == Approx(0));
    CHECK(s.values[3] == Approx(0));
  }
}

// A row naming a column twice (a node tied to the one it reads from, in a programme of repeated
// blocks) holds it once, with the coefficients added, in the order first named; a long row too.
TEST_CASE("IntegerProgramme: a column named twice in a row counts once, its coefficients added", "[compile]") {
  IntegerProgramme p;
  const int a = p.add_column("a", 1, true), b = p.add_column("b", 1, true);
  p.add_row("short", {{b, 1}, {a, 2}, {b, -3}}, 0, 1);
  CHECK(p.rows[0].terms == std::vector<std::pair<int, double>>{{b, -2}, {a, 2}});
  std::vector<std::pair<int, double>> many;
  for (int i = 0; i < 40; ++i) many.emplace_back(i % 2 == 0 ? a : b, 1);
  p.add_row("long", many, 0, 40);
  CHECK(p.rows[1].terms == std::vector<std::pair<int, double>>{{a, 20}, {b, 20}});
}
