// layout_diagram: the grid for 1-d and 2-d tensors, notes for partial axes and empty pieces,
// and the box list for other ranks. The grid is parsed back into cells, so spacing may change.
#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

using namespace spsd;

namespace {

using Cells = std::vector<std::vector<std::string>>;

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Fields separated by '|' (grid rows), or by runs of two or more spaces (the column header).
std::vector<std::string> fields(const std::string& line, bool by_bars) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    out.push_back(trim(cur));
    cur.clear();
  };
  for (size_t i = 0; i < line.size(); ++i) {
    if (by_bars ? line[i] == '|' : (line[i] == ' ' && i + 1 < line.size() && line[i + 1] == ' ')) {
      if (by_bars || !trim(cur).empty()) flush();
      continue;
    }
    cur += line[i];
  }
  if (!trim(cur).empty()) flush();
  if (!by_bars) out.erase(std::remove(out.begin(), out.end(), ""), out.end());
  return out;
}

// A diagram split into its parts: title line, other text lines, and the grid if there is one.
struct Diagram {
  std::string title;
  std::vector<std::string> lines;    // every line after the title, verbatim
  std::vector<std::string> columns;  // column header labels
  Cells rows;                        // per grid row: label (empty for 1-d) then cells
};

Diagram parse(const std::string& text) {
  Diagram d;
  std::istringstream in(text);
  std::string line;
  std::getline(in, d.title);
  while (std::getline(in, line)) {
    d.lines.push_back(line);
    if (line.find('|') != std::string::npos) {
      d.rows.push_back(fields(line, true));
    } else if (d.rows.empty() && line.find(':') != std::string::npos && line.rfind("  mesh axis", 0) != 0 &&
               line.rfind("  rank ", 0) != 0) {
      d.columns = fields(line, false);
    }
  }
  return d;
}

bool has_line(const Diagram& d, const std::string& line) {
  return std::find(d.lines.begin(), d.lines.end(), line) != d.lines.end();
}

bool has_note(const Diagram& d) {
  return std::any_of(d.lines.begin(), d.lines.end(), [](const std::string& l) { return l.rfind("  mesh axis", 0) == 0; });
}

const Placement kLine("cpu", {0, 1, 2, 3});
const Placement kSquare("cpu", {{0, 1}, {2, 3}});

}  // namespace

TEST_CASE("layout_diagram: 1-d tensor on 4 ranks", "[diagram]") {
  std::string text = layout_diagram(Shape{10}, kLine, sbp::split(0));
  Diagram d = parse(text);
  INFO(text);
  CHECK(d.title == R"(shape (10,) as (S(0)) on placement(type="cpu", ranks=[0, 1, 2, 3]))");
  CHECK(d.columns == std::vector<std::string>{"0:3", "3:6", "6:8", "8:10"});  // uneven: 3, 3, 2, 2
  CHECK(d.rows == Cells{{"", "r0", "r1", "r2", "r3"}});
  CHECK_FALSE(has_note(d));
  CHECK(text.back() == '\n');
}

TEST_CASE("layout_diagram: 2-d tensor on a 2x2 mesh", "[diagram]") {
  SECTION("(S(0), S(1)): one rank per quarter") {
    std::string text = layout_diagram(Shape{4, 6}, kSquare, {sbp::split(0), sbp::split(1)});
    Diagram d = parse(text);
    INFO(text);
    CHECK(d.title == R"(shape (4, 6) as (S(0), S(1)) on placement(type="cpu", ranks=[[0, 1], [2, 3]]))");
    CHECK(d.columns == std::vector<std::string>{"cols 0:3", "cols 3:6"});
    CHECK(d.rows == Cells{{"rows 0:2", "r0", "r1"}, {"rows 2:4", "r2", "r3"}});
  }
  SECTION("(B, S(0)): rows split along mesh axis 1, copies along mesh axis 0") {
    std::string text = layout_diagram(Shape{4, 6}, kSquare, {sbp::broadcast, sbp::split(0)});
    Diagram d = parse(text);
    INFO(text);
    CHECK(d.columns == std::vector<std::string>{"cols 0:6"});
    CHECK(d.rows == Cells{{"rows 0:2", "r0 r2"}, {"rows 2:4", "r1 r3"}});
    CHECK_FALSE(has_note(d));
  }
  SECTION("world ranks label the cells, in the placement's order") {
    Placement scrambled("cpu", {{3, 1}, {0, 2}});
    Diagram d = parse(layout_diagram(Shape{4, 6}, scrambled, {sbp::split(0), sbp::split(1)}));
    CHECK(d.rows == Cells{{"rows 0:2", "r3", "r1"}, {"rows 2:4", "r0", "r2"}});
  }
}

TEST_CASE("layout_diagram: partial axes get a note line", "[diagram]") {
  std::string text = layout_diagram(Shape{4, 6}, kSquare, {sbp::partial_sum, sbp::split(1)});
  Diagram d = parse(text);
  INFO(text);
  CHECK(has_line(d, "  mesh axis 0 is P(sum): the ranks along it hold partial values; the tensor is their sum"));
  CHECK(d.rows == Cells{{"rows 0:4", "r0 r2", "r1 r3"}});

  Diagram both = parse(layout_diagram(Shape{4, 6}, kSquare, {sbp::partial_min, sbp::partial_max}));
  CHECK(has_line(both, "  mesh axis 0 is P(min): the ranks along it hold partial values; the tensor is their min"));
  CHECK(has_line(both, "  mesh axis 1 is P(max): the ranks along it hold partial values; the tensor is their max"));
  CHECK(both.rows == Cells{{"rows 0:4", "r0 r1 r2 r3"}});
}

TEST_CASE("layout_diagram: uneven and empty pieces", "[diagram]") {
  SECTION("1-d: 3 elements over 4 ranks leave rank 3 empty") {
    std::string text = layout_diagram(Shape{3}, kLine, sbp::split(0));
    Diagram d = parse(text);
    INFO(text);
    CHECK(d.columns == std::vector<std::string>{"0:1", "1:2", "2:3"});
    CHECK(d.rows == Cells{{"", "r0", "r1", "r2"}});
    CHECK(has_line(d, "  empty pieces: r3"));
  }
  SECTION("2-d: nested (S(0), S(0)) splits 5 rows as 2, 1, 1, 1") {
    std::string text = layout_diagram(Shape{5, 3}, kSquare, {sbp::split(0), sbp::split(0)});
    Diagram d = parse(text);
    INFO(text);
    CHECK(d.rows == Cells{{"rows 0:2", "r0"}, {"rows 2:3", "r1"}, {"rows 3:4", "r2"}, {"rows 4:5", "r3"}});
    CHECK_FALSE(text.find("empty") != std::string::npos);
  }
  SECTION("2-d: one row over two mesh rows leaves ranks 2 and 3 empty") {
    Diagram d = parse(layout_diagram(Shape{1, 6}, kSquare, {sbp::split(0), sbp::split(1)}));
    CHECK(d.rows == Cells{{"rows 0:1", "r0", "r1"}});
    CHECK(has_line(d, "  empty pieces: r2 r3"));
  }
  SECTION("no elements at all: a box list with every piece marked empty") {
    Diagram d = parse(layout_diagram(Shape{0, 3}, kSquare, {sbp::split(0), sbp::split(1)}));
    CHECK(d.rows.empty());
    CHECK(has_line(d, "  rank 0: [0:0, 0:2] (empty)"));
    CHECK(has_line(d, "  rank 3: [0:0, 2:3] (empty)"));
  }
}

TEST_CASE("layout_diagram: 3-d and 0-d tensors are box lists", "[diagram]") {
  Placement scrambled("cpu", {{3, 1}, {0, 2}});
  std::string text = layout_diagram(Shape{2, 3, 4}, scrambled, {sbp::split(0), sbp::split(2)});
  Diagram d = parse(text);
  INFO(text);
  CHECK(d.title == R"(shape (2, 3, 4) as (S(0), S(2)) on placement(type="cpu", ranks=[[3, 1], [0, 2]]))");
  CHECK(d.rows.empty());
  CHECK(d.lines == std::vector<std::string>{"  rank 3: [0:1, 0:3, 0:2]", "  rank 1: [0:1, 0:3, 2:4]",
                                            "  rank 0: [1:2, 0:3, 0:2]", "  rank 2: [1:2, 0:3, 2:4]"});

  Diagram scalar = parse(layout_diagram(Shape{}, kLine, sbp::partial_max));
  CHECK(has_line(scalar, "  mesh axis 0 is P(max): the ranks along it hold partial values; the tensor is their max"));
  CHECK(has_line(scalar, "  rank 2: []"));
}
