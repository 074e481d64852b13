#pragma once
// A 0-1 integer programme: columns with a cost and bounds, some of them binary, and rows of
// coefficients with one bound (or an equality), minimised. The joint layout search
// (compile/layout_search.hpp) states its problem as one, to write it in CPLEX LP form for any MIP
// solver to check, or to solve it here with COIN-OR CBC, loaded at run time
// (libCbcSolver.so.3, Debian's coinor-libcbc3) so that spsd neither builds nor links against it.
#include <iosfwd>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace spsd::detail {

struct IntegerProgramme {
  static constexpr double kInfinity = std::numeric_limits<double>::infinity();
  struct Column {
    std::string name;
    double cost = 0, lower = 0, upper = 1;
    bool binary = false;
    bool operator==(const Column&) const = default;
  };
  // lower <= sum of coefficient * column <= upper, one of the two infinite or both equal.
  struct Row {
    std::string name;
    std::vector<std::pair<int, double>> terms;  // (column, coefficient)
    double lower = -kInfinity, upper = kInfinity;
    bool operator==(const Row&) const = default;
  };
  std::string comment;  // the first line of the LP file
  std::vector<Column> columns;
  std::vector<Row> rows;

  int add_column(std::string name, double cost, bool binary, double lower = 0, double upper = 1) {
    columns.push_back({std::move(name), cost, lower, upper, binary});
    return static_cast<int>(columns.size() - 1);
  }
  // A column named twice in terms counts once, with the coefficients added.
  void add_row(std::string name, std::vector<std::pair<int, double>> terms, double lower, double upper);
  bool operator==(const IntegerProgramme&) const = default;
  // CPLEX LP form ("Minimize", "Subject To", "Bounds", "Binary", "End"), as cbc and glpsol read it.
  void write_lp(std::ostream& out) const;
};

// What the exact solver returned.
struct ExactSolution {
  bool found = false;    // a solution (at worst the start given)
  bool optimal = false;  // proven optimal
  bool infeasible = false;  // proven to have no solution
  double objective = 0;  // the best solution's
  double bound = 0;      // the best lower bound proven
  double seconds = 0;
  std::vector<double> values;  // per column
};

// Minimises p with CBC for at most `seconds`, from `start` (values for the binary columns, in
// their order, or empty). Throws Error (naming `op`) when CBC cannot be loaded.
ExactSolution solve_exactly(const IntegerProgramme& p, const std::vector<std::pair<int, double>>& start, double seconds,
                            const char* op);

}  // namespace spsd::detail
