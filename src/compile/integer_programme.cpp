// IntegerProgramme (compile/integer_programme.hpp): the LP file and the CBC solve.
#include "spsd/compile/integer_programme.hpp"

#include <dlfcn.h>

#include <chrono>
#include <unordered_map>
#include <string>
#include <type_traits>
#include <cmath>
#include <ostream>

#include "spsd/core/error.hpp"

namespace spsd::detail {

namespace {

void write_terms(std::ostream& out, const std::vector<std::pair<int, double>>& terms,
                 const std::vector<IntegerProgramme::Column>& columns) {
  bool first = true;
  for (const auto& [column, coefficient] : terms) {
    if (coefficient == 0) continue;
    out << (coefficient < 0 ? " - " : first ? " " : " + ") << std::abs(coefficient) << " "
        << columns[static_cast<size_t>(column)].name;
    first = false;
  }
  if (first) out << " 0 " << columns.front().name;  // an empty sum still names a column
}

// CBC's C interface (Cbc_C_Interface.h, CBC 2.10), the functions the solve calls, looked up once.
struct Cbc {
  void* (*new_model)();
  void (*load_problem)(void*, int, int, const int*, const int*, const double*, const double*, const double*,
                       const double*, const double*, const double*);
  void (*set_integer)(void*, int);
  void (*set_mip_start)(void*, int, const int*, const double*);
  void (*set_maximum_seconds)(void*, double);
  void (*set_log_level)(void*, int);
  void (*set_parameter)(void*, const char*, const char*);
  int (*solve)(void*);
  const double* (*column_solution)(void*);
  double (*objective)(void*);
  double (*best_possible)(void*);
  int (*proven_optimal)(void*);
  int (*proven_infeasible)(void*);
  void (*delete_model)(void*);
  std::string error;  // why it could not be loaded; empty when it was
};

const Cbc& cbc() {
  static const Cbc loaded = [] {
    Cbc c{};
    void* lib = dlopen("libCbcSolver.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      c.error = dlerror();
      return c;
    }
    auto find = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name));
      if (!f && c.error.empty()) c.error = std::string("no ") + name + " in libCbcSolver.so.3";
    };
    find(c.new_model, "Cbc_newModel");
    find(c.load_problem, "Cbc_loadProblem");
    find(c.set_integer, "Cbc_setInteger");
    find(c.set_mip_start, "Cbc_setMIPStartI");
    find(c.set_maximum_seconds, "Cbc_setMaximumSeconds");
    find(c.set_log_level, "Cbc_setLogLevel");
    find(c.set_parameter, "Cbc_setParameter");
    find(c.solve, "Cbc_solve");
    find(c.column_solution, "Cbc_getColSolution");
    find(c.objective, "Cbc_getObjValue");
    find(c.best_possible, "Cbc_getBestPossibleObjValue");
    find(c.proven_optimal, "Cbc_isProvenOptimal");
    find(c.proven_infeasible, "Cbc_isProvenInfeasible");
    find(c.delete_model, "Cbc_deleteModel");
    return c;  // the library stays loaded for the process
  }();
  return loaded;
}

}  // namespace

void IntegerProgramme::write_lp(std::ostream& out) const {
  SPSD_CHECK(!columns.empty(), "IntegerProgramme::write_lp", "the programme has no columns");
  out.precision(17);
  if (!comment.empty()) out << "\\ " << comment << "\n";
  out << "Minimize\n obj:";
  std::vector<std::pair<int, double>> objective;
  for (size_t c = 0; c < columns.size(); ++c) objective.emplace_back(static_cast<int>(c), columns[c].cost);
  write_terms(out, objective, columns);
  out << "\nSubject To\n";
  for (const Row& r : rows) {
    out << " " << r.name << ":";
    write_terms(out, r.terms, columns);
    if (r.lower == r.upper) out << " = " << r.upper << "\n";
    else if (std::isinf(r.lower)) out << " <= " << r.upper << "\n";
    else out << " >= " << r.lower << "\n";
  }
  out << "Bounds\n";
  for (const Column& c : columns)
    if (!c.binary) {
      if (c.lower == c.upper) out << " " << c.name << " = " << c.lower << "\n";
      else out << " " << c.lower << " <= " << c.name << " <= " << c.upper << "\n";
    }
  out << "Binary\n";
  for (const Column& c : columns)
    if (c.binary) out << " " << c.name << "\n";
  out << "End\n";
}

void IntegerProgramme::add_row(std::string name, std::vector<std::pair<int, double>> terms, double lower, double upper) {
  // Kept in the order first named; a long row (the memory budget's) looks its columns up.
  std::unordered_map<int, size_t> at;
  size_t kept = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    size_t same = kept;
    if (terms.size() <= 16) {
      for (size_t k = 0; k < kept && same == kept; ++k) same = terms[k].first == terms[i].first ? k : kept;
    } else if (const auto [it, first] = at.try_emplace(terms[i].first, kept); !first) {
      same = it->second;
    }
    if (same == kept) terms[kept++] = terms[i];
    else terms[same].second += terms[i].second;
  }
  terms.resize(kept);
  rows.push_back({std::move(name), std::move(terms), lower, upper});
}

ExactSolution solve_exactly(const IntegerProgramme& p, const std::vector<std::pair<int, double>>& start, double seconds,
                            const char* op) {
  const Cbc& solver = cbc();
  SPSD_CHECK(solver.error.empty(), op, "the exact search needs COIN-OR CBC (libCbcSolver.so.3, Debian's coinor-libcbc3): ",
             solver.error);
  const auto begin = std::chrono::steady_clock::now();
  // The matrix by columns, as Cbc_loadProblem takes it.
  const int n = static_cast<int>(p.columns.size()), m = static_cast<int>(p.rows.size());
  std::vector<std::vector<std::pair<int, double>>> by_column(p.columns.size());
  for (size_t r = 0; r < p.rows.size(); ++r)
    for (const auto& [column, coefficient] : p.rows[r].terms)
      by_column[static_cast<size_t>(column)].emplace_back(static_cast<int>(r), coefficient);
  std::vector<int> starts{0}, index;
  std::vector<double> value, lower, upper, cost, row_lower, row_upper;
  for (size_t c = 0; c < p.columns.size(); ++c) {
    for (const auto& [row, coefficient] : by_column[c]) index.push_back(row), value.push_back(coefficient);
    starts.push_back(static_cast<int>(index.size()));
    lower.push_back(p.columns[c].lower), upper.push_back(p.columns[c].upper), cost.push_back(p.columns[c].cost);
  }
  // CBC's infinity is DBL_MAX.
  auto finite = [](double v) { return std::isinf(v) ? (v < 0 ? -1.0 : 1.0) * std::numeric_limits<double>::max() : v; };
  for (const IntegerProgramme::Row& r : p.rows) row_lower.push_back(finite(r.lower)), row_upper.push_back(finite(r.upper));
  void* model = solver.new_model();
  solver.load_problem(model, n, m, starts.data(), index.data(), value.data(), lower.data(), upper.data(), cost.data(),
                      row_lower.data(), row_upper.data());
  for (int c = 0; c < n; ++c)
    if (p.columns[static_cast<size_t>(c)].binary) solver.set_integer(model, c);
  if (!start.empty()) {
    std::vector<int> columns;
    std::vector<double> values;
    for (const auto& [column, v] : start) columns.push_back(column), values.push_back(v);
    solver.set_mip_start(model, static_cast<int>(columns.size()), columns.data(), values.data());
  }
  // "sec" bounds the whole solve, the root's linear programme included, as the cbc command's
  // does; the model's own maximum, the branch and bound.
  solver.set_parameter(model, "sec", std::to_string(seconds).c_str());
  solver.set_maximum_seconds(model, seconds);
  solver.set_log_level(model, 0);
  solver.solve(model);
  ExactSolution s;
  s.objective = solver.objective(model);
  s.found = s.objective < 1e40;  // CBC reports a huge objective when it has no solution
  s.optimal = s.found && solver.proven_optimal(model) != 0;
  s.bound = solver.best_possible(model);
  s.infeasible = !s.found && solver.proven_infeasible(model) != 0;
  if (const double* x = solver.column_solution(model); x && s.found) s.values.assign(x, x + n);
  solver.delete_model(model);
  s.found = s.found && !s.values.empty();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return s;
}

}  // namespace spsd::detail
