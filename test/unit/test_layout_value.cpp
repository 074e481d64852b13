// The Layout value and its free functions (layout/layout.hpp, layout/split.hpp), and the boxing
// primitives' records as the public side sees them (boxing/plan.hpp, boxing/cost.hpp).
#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

using namespace spsd;

TEST_CASE("layout: without_partial, on_device and equality", "[layout]") {
  const Placement grid("cpu", {0, 1, 2, 3}, Shape{2, 2});
  const Layout l{grid, {sbp::partial_max, sbp::split(1)}};
  CHECK(without_partial(l.nd_sbp) == NdSbp{sbp::broadcast, sbp::split(1)});
  CHECK(without_partial(l) == Layout{grid, {sbp::broadcast, sbp::split(1)}});
  CHECK(without_partial(NdSbp{sbp::split(0), sbp::broadcast}) == NdSbp{sbp::split(0), sbp::broadcast});
  const Layout gpu = on_device(l, DeviceType::kCUDA);
  CHECK(gpu.placement.device_type() == DeviceType::kCUDA);
  CHECK(gpu.placement.ranks() == grid.ranks());
  CHECK(gpu.placement.mesh() == grid.mesh());
  CHECK(gpu.nd_sbp == l.nd_sbp);
  CHECK_FALSE(gpu == l);
  CHECK(on_device(gpu, DeviceType::kCPU) == l);
  CHECK(l.to_string() == "(P(max), S(1)) on " + grid.to_string());
}

TEST_CASE("layout: one validity rule, named in the errors", "[layout]") {
  const Shape mesh{2, 2};
  CHECK(fits(Shape{4, 5}, mesh, {sbp::split(0), sbp::split(1)}));
  CHECK(layout_problem(Shape{4, 5}, mesh, {sbp::split(0), sbp::split(1)}).empty());
  CHECK_FALSE(fits(Shape{4, 5}, mesh, NdSbp(sbp::split(0))));
  CHECK_FALSE(fits(Shape{4, 5}, mesh, {sbp::split(0), sbp::split(2)}));
  CHECK(layout_problem(Shape{4, 5}, mesh, NdSbp(sbp::split(0))) ==
        "nd_sbp (S(0)) has 1 entries but the mesh (2, 2) has 2 axes");
  CHECK_THROWS_WITH(check_layout("my_op", Shape{4, 5}, mesh, {sbp::split(0), sbp::split(2)}),
                    "my_op: nd_sbp (S(0), S(2)) splits axis 2 but the tensor of shape (4, 5) has 2 axes");
}

TEST_CASE("layout: piece_numel is box_at's numel, nested and uneven splits included", "[layout]") {
  const std::vector<Shape> shapes = {Shape{7}, Shape{6, 5}, Shape{0, 3}, Shape{3, 1, 4}, Shape{}};
  const std::vector<Shape> meshes = {Shape{4}, Shape{2, 3}, Shape{2, 2, 2}};
  for (const Shape& shape : shapes)
    for (const Shape& mesh : meshes) {
      std::vector<Sbp> options = {sbp::broadcast, sbp::partial_sum};
      for (int64_t i = 0; i < shape.ndim(); ++i) options.push_back(sbp::split(i));
      std::vector<size_t> pick(mesh.ndim(), 0);
      for (;;) {
        std::vector<Sbp> axes;
        for (size_t k : pick) axes.push_back(options[k]);
        const NdSbp nd(axes);
        std::vector<int64_t> coords(mesh.ndim(), 0);
        for (;;) {
          INFO(shape << " " << nd << " on mesh " << mesh << " at " << detail::join(coords));
          CHECK(piece_numel(shape, mesh, nd, coords) == box_at(shape, mesh, nd, coords).numel());
          int64_t a = mesh.ndim() - 1;
          while (a >= 0 && ++coords[a] == mesh[a]) coords[a--] = 0;
          if (a < 0) break;
        }
        int64_t a = mesh.ndim() - 1;
        while (a >= 0 && ++pick[a] == options.size()) pick[a--] = 0;
        if (a < 0) break;
      }
    }
  CHECK_THROWS_AS(piece_numel(Shape{4}, Shape{2}, NdSbp(sbp::split(0)), std::vector<int64_t>{2}), Error);
  CHECK_THROWS_AS(piece_numel(Shape{4}, Shape{2, 2}, NdSbp(sbp::split(0)), std::vector<int64_t>{0}), Error);
}

TEST_CASE("boxing primitives: every step kind has its record, in the list's order", "[boxing]") {
  // latency_rounds asks the record of each kind (src/boxing/primitive_table.cpp): 4 members, 3 messages.
  CHECK(latency_rounds(StepKind::kAllReduce, 4, 3) == 4);
  CHECK(latency_rounds(StepKind::kReduceScatter, 4, 3) == 2);
  CHECK(latency_rounds(StepKind::kAllGather, 4, 3) == 2);
  CHECK(latency_rounds(StepKind::kAllToAll, 4, 3) == 3);
  CHECK(latency_rounds(StepKind::kLocal, 4, 3) == 0);
  CHECK(latency_rounds(StepKind::kExchange, 4, 3) == 3);
  CHECK(latency_rounds(StepKind::kDeviceCopy, 4, 3) == 0);
  CHECK(to_string(StepKind::kReduceScatter) == "reduce_scatter");
  CHECK(to_string(StepKind::kDeviceCopy) == "device_copy");
  CHECK_THROWS_AS(latency_rounds(static_cast<StepKind>(99), 4, 3), Error);
}
