// Placement: construction forms, rank order, coordinates, printing, equality, mesh groups.
#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

#include <sstream>
#include <vector>

using namespace spsd;

namespace {

std::vector<int64_t> iota_ranks(int64_t n) {
  std::vector<int64_t> r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = i;
  return r;
}

// rank_at inverts coords for every rank, and coords never leave the mesh.
void check_round_trip(const Placement& p) {
  for (int64_t r : p.ranks()) {
    INFO(p << ", rank " << r);
    std::vector<int64_t> c = p.coords(r);
    REQUIRE(static_cast<int64_t>(c.size()) == p.mesh().ndim());
    for (int64_t a = 0; a < p.mesh().ndim(); ++a) CHECK((c[a] >= 0 && c[a] < p.mesh()[a]));
    CHECK(p.rank_at(c) == r);
  }
}

}  // namespace

TEST_CASE("Placement 1-d", "[placement]") {
  Placement p("cpu", {0, 1, 2, 3});
  CHECK(p.device_type() == DeviceType::kCPU);
  CHECK(p.mesh() == Shape{4});
  CHECK(p.size() == 4);
  CHECK(p.ranks() == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(p.contains(3));
  CHECK_FALSE(p.contains(4));
  CHECK_FALSE(p.contains(-1));
  CHECK(p.coords(2) == std::vector<int64_t>{2});
  CHECK(p.rank_at({3}) == 3);
  CHECK(Placement("cpu", {0, 1}).to_string() == R"(placement(type="cpu", ranks=[0, 1]))");
  CHECK(Placement("cuda", {5}).to_string() == R"(placement(type="cuda", ranks=[5]))");
  check_round_trip(p);
}

TEST_CASE("Placement 2-d keeps the rank order given", "[placement]") {
  Placement p("cuda", {{3, 1}, {0, 2}});
  CHECK(p.device_type() == DeviceType::kCUDA);
  CHECK(p.mesh() == Shape{2, 2});
  CHECK(p.ranks() == std::vector<int64_t>{3, 1, 0, 2});
  CHECK(p.coords(3) == std::vector<int64_t>{0, 0});
  CHECK(p.coords(1) == std::vector<int64_t>{0, 1});
  CHECK(p.coords(0) == std::vector<int64_t>{1, 0});
  CHECK(p.rank_at({1, 1}) == 2);
  CHECK(p.position(0) == 2);
  CHECK(p.position(7) == -1);
  CHECK(p.to_string() == R"(placement(type="cuda", ranks=[[3, 1], [0, 2]]))");
  CHECK(Placement("cuda", {{0, 1}, {2, 3}}).to_string() == R"(placement(type="cuda", ranks=[[0, 1], [2, 3]]))");
  // 2x3 and 3x2 are different meshes over the same ranks.
  Placement wide("cpu", {{0, 1, 2}, {3, 4, 5}}), tall("cpu", {{0, 1}, {2, 3}, {4, 5}});
  CHECK(wide.mesh() == Shape{2, 3});
  CHECK(tall.mesh() == Shape{3, 2});
  CHECK(wide.coords(4) == std::vector<int64_t>{1, 1});
  CHECK(tall.coords(4) == std::vector<int64_t>{2, 0});
  CHECK(wide.to_string() == R"(placement(type="cpu", ranks=[[0, 1, 2], [3, 4, 5]]))");
  CHECK(tall.to_string() == R"(placement(type="cpu", ranks=[[0, 1], [2, 3], [4, 5]]))");
  for (const Placement& q : {p, wide, tall}) check_round_trip(q);
}

TEST_CASE("Placement 3-d from ranks and a mesh shape", "[placement]") {
  Placement p("cpu", iota_ranks(8), Shape{2, 2, 2});
  CHECK(p.mesh() == Shape{2, 2, 2});
  CHECK(p.coords(5) == std::vector<int64_t>{1, 0, 1});
  CHECK(p.rank_at({0, 1, 1}) == 3);
  CHECK(p.to_string() == R"(placement(type="cpu", ranks=[[[0, 1], [2, 3]], [[4, 5], [6, 7]]]))");
  check_round_trip(p);
  check_round_trip(Placement("cpu", {7, 6, 5, 4, 3, 2, 1, 0}, Shape{2, 4}));
  check_round_trip(Placement("cpu", {9, 2, 4, 0, 11, 6}, Shape{3, 1, 2}));
}

TEST_CASE("Placement equality and printing", "[placement]") {
  Placement square("cpu", {{0, 1}, {2, 3}});
  CHECK(square == Placement("cpu", {0, 1, 2, 3}, Shape{2, 2}));
  CHECK(Placement("cpu", std::vector<int64_t>{0, 1}) == Placement("cpu", {0, 1}));
  CHECK_FALSE(square == Placement("cuda", {{0, 1}, {2, 3}}));   // device type
  CHECK_FALSE(square == Placement("cpu", {{0, 2}, {1, 3}}));    // rank order
  CHECK_FALSE(square == Placement("cpu", {0, 1, 2, 3}));        // mesh shape
  CHECK_FALSE(square == Placement("cpu", {{0, 1, 2, 3}}));      // 1x4 is not 4
  std::ostringstream os;
  os << square;
  CHECK(os.str() == square.to_string());
  CHECK(to_string(DeviceType::kCUDA) == "cuda");
}

TEST_CASE("mesh_group: rows, columns and sub-meshes", "[placement]") {
  Placement square("cpu", {{0, 1}, {2, 3}});
  CHECK(mesh_group(square, 2, {1}) == std::vector<int64_t>{2, 3});  // row of rank 2
  CHECK(mesh_group(square, 3, {0}) == std::vector<int64_t>{1, 3});  // column of rank 3
  CHECK(mesh_group(square, 0, {0, 1}) == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(mesh_group(square, 1, {}) == std::vector<int64_t>{1});

  // World ranks come back in mesh order, not sorted.
  Placement wide("cpu", {{5, 3, 1}, {4, 2, 0}});
  CHECK(mesh_group(wide, 2, {1}) == std::vector<int64_t>{4, 2, 0});
  CHECK(mesh_group(wide, 2, {0}) == std::vector<int64_t>{3, 2});
  CHECK(mesh_group(wide, 5, {0}) == std::vector<int64_t>{5, 4});

  Placement cube("cpu", iota_ranks(8), Shape{2, 2, 2});  // rank 5 sits at (1, 0, 1)
  CHECK(mesh_group(cube, 5, {2}) == std::vector<int64_t>{4, 5});
  CHECK(mesh_group(cube, 5, {1}) == std::vector<int64_t>{5, 7});
  CHECK(mesh_group(cube, 5, {0}) == std::vector<int64_t>{1, 5});
  CHECK(mesh_group(cube, 5, {0, 2}) == std::vector<int64_t>{0, 1, 4, 5});
  CHECK(mesh_group(cube, 5, {1, 2}) == std::vector<int64_t>{4, 5, 6, 7});
  CHECK(mesh_group(cube, 5, {0, 1, 2}) == iota_ranks(8));
}
