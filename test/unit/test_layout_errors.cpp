// Error catalogue for layouts, local tensors and the runtime's placement check: each misuse
// throws spsd::Error whose message names the operation, the argument and the offending values.
#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

#include "error_matchers.hpp"

#include <initializer_list>
#include <string>
#include <vector>

using namespace spsd;

namespace {

const Placement kSquare("cpu", {{0, 1}, {2, 3}});
constexpr const char* kSquareText = R"(placement(type="cpu", ranks=[[0, 1], [2, 3]]))";

}  // namespace

TEST_CASE("errors: Placement construction", "[errors][placement]") {
  CHECK_THAT(ERROR_OF(Placement("cpu", std::vector<int64_t>{})), ContainsAll({"Placement", "ranks must not be empty"}));
  CHECK_THAT(ERROR_OF(Placement("cpu", {0, 1, 1})), ContainsAll({"Placement", "rank 1 appears more than once", "[0, 1, 1]"}));
  CHECK_THAT(ERROR_OF(Placement("cpu", {{0, 2}, {2, 3}})), ContainsAll({"Placement", "rank 2", "[0, 2, 2, 3]"}));
  CHECK_THAT(ERROR_OF(Placement("cpu", {0, -1})), ContainsAll({"Placement", "non-negative", "[0, -1]"}));
  CHECK_THAT(ERROR_OF(Placement("cpu", {0, 1, 2}, Shape{2, 2})),
             ContainsAll({"Placement", "mesh (2, 2)", "4 ranks", "3 ranks", "[0, 1, 2]"}));
  CHECK_THAT(ERROR_OF(Placement("cpu", {0, 1, 2, 3}, Shape{3})), ContainsAll({"Placement", "mesh (3,)", "[0, 1, 2, 3]"}));
  CHECK_THAT(ERROR_OF(Placement("cpu", {0}, Shape{})), ContainsAll({"Placement", "at least one axis", "()"}));
  CHECK_THAT(ERROR_OF(Placement("cpu", {{0, 1}, {2}})), ContainsAll({"Placement", "same length", "rows of 2 and 1"}));
  CHECK_THAT(ERROR_OF(Placement("gpu", {0})), ContainsAll({"Placement", "device type", "\"gpu\"", "cpu", "cuda"}));
  CHECK_THAT(ERROR_OF(Placement("CPU", {0})), ContainsAll({"Placement", "\"CPU\""}));  // names are lower case
}

TEST_CASE("errors: Placement queries", "[errors][placement]") {
  CHECK_THAT(ERROR_OF(kSquare.coords(4)), ContainsAll({"Placement::coords", "rank 4", kSquareText}));
  CHECK_THAT(ERROR_OF(kSquare.rank_at({0})), ContainsAll({"Placement::rank_at", "[0]", "(2, 2)"}));
  CHECK_THAT(ERROR_OF(kSquare.rank_at({0, 0, 0})), ContainsAll({"Placement::rank_at", "[0, 0, 0]", "(2, 2)"}));
  CHECK_THAT(ERROR_OF(kSquare.rank_at({0, 2})), ContainsAll({"Placement::rank_at", "[0, 2]", "outside", "(2, 2)"}));
  CHECK_THAT(ERROR_OF(kSquare.rank_at({-1, 0})), ContainsAll({"Placement::rank_at", "[-1, 0]", "outside"}));
  CHECK_THAT(ERROR_OF(mesh_group(kSquare, 0, {2})), ContainsAll({"mesh_group", "mesh axis 2", "(2, 2)"}));
  CHECK_THAT(ERROR_OF(mesh_group(kSquare, 9, {0})), ContainsAll({"rank 9", kSquareText}));
}

TEST_CASE("errors: Sbp and NdSbp", "[errors][sbp]") {
  CHECK_THAT(ERROR_OF(sbp::broadcast.axis()), ContainsAll({"Sbp::axis", "B", "not a split"}));
  CHECK_THAT(ERROR_OF(sbp::partial_max.axis()), ContainsAll({"Sbp::axis", "P(max)", "not a split"}));
  CHECK_THAT(ERROR_OF(sbp::split(0).reduce_op()), ContainsAll({"Sbp::reduce_op", "S(0)", "not partial"}));
  CHECK_THAT(ERROR_OF(sbp::broadcast.reduce_op()), ContainsAll({"Sbp::reduce_op", "B", "not partial"}));
  // A negative axis counts from the end (normalize_axes); beyond the first axis it is an error
  // naming the axis as written.
  CHECK_THAT(ERROR_OF(box_of(Shape{4, 6}, kSquare, {sbp::split(-3), sbp::broadcast}, 0)),
             ContainsAll({"box_of", "(S(-3), B)", "splits axis -3", "(4, 6)", "2 axes"}));
  CHECK_THAT(ERROR_OF(NdSbp(std::vector<Sbp>{})), ContainsAll({"NdSbp", "at least one Sbp"}));
  CHECK_THAT(ERROR_OF(NdSbp{}), ContainsAll({"NdSbp", "at least one Sbp"}));
  NdSbp two{sbp::split(0), sbp::broadcast};
  CHECK_THAT(ERROR_OF(two[2]), ContainsAll({"NdSbp", "mesh axis 2", "(S(0), B)"}));
}

TEST_CASE("errors: box_of, local_shape and layout_diagram reject bad layouts", "[errors][split]") {
  CHECK_THAT(ERROR_OF(box_of(Shape{4, 6}, kSquare, sbp::split(0), 0)),
             ContainsAll({"box_of", "(S(0))", "1 entries", "(2, 2)", "2 axes"}));
  CHECK_THAT(ERROR_OF(box_of(Shape{4}, Placement("cpu", {0, 1}), {sbp::split(0), sbp::broadcast}, 0)),
             ContainsAll({"box_of", "(S(0), B)", "2 entries", "(2,)", "1 axes"}));
  CHECK_THAT(ERROR_OF(box_of(Shape{4, 6}, kSquare, {sbp::split(0), sbp::split(2)}, 0)),
             ContainsAll({"box_of", "(S(0), S(2))", "splits axis 2", "(4, 6)"}));
  CHECK_THAT(ERROR_OF(box_of(Shape{}, Placement("cpu", {0}), sbp::split(0), 0)),
             ContainsAll({"box_of", "splits axis 0", "shape ()"}));
  CHECK_THAT(ERROR_OF(box_of(Shape{4, 6}, kSquare, {sbp::split(0), sbp::split(1)}, 9)),
             ContainsAll({"box_of", "rank 9", kSquareText}));
  CHECK_THAT(ERROR_OF(local_shape(Shape{4, 6}, kSquare, {sbp::split(0), sbp::split(1)}, -1)),
             ContainsAll({"rank -1", kSquareText}));
  CHECK_THAT(ERROR_OF(layout_diagram(Shape{4}, kSquare, {sbp::split(0), sbp::split(1)})),
             ContainsAll({"layout_diagram", "(S(0), S(1))", "splits axis 1", "(4,)"}));
}

TEST_CASE("errors: balanced_split arguments", "[errors][split]") {
  CHECK_THAT(ERROR_OF(balanced_split(-1, 2)), ContainsAll({"balanced_split", "-1 elements", "2 parts"}));
  CHECK_THAT(ERROR_OF(balanced_split(4, 0)), ContainsAll({"balanced_split", "4 elements", "0 parts"}));
  CHECK_THAT(ERROR_OF(balanced_split(4, -2)), ContainsAll({"balanced_split", "4 elements", "-2 parts"}));
  CHECK_THAT(ERROR_OF(balanced_range(4, 2, 2)), ContainsAll({"balanced_range", "part 2", "4 elements", "2 parts"}));
  CHECK_THAT(ERROR_OF(balanced_range(4, 2, -1)), ContainsAll({"balanced_range", "part -1"}));
}

TEST_CASE("errors: Shape", "[errors][shape]") {
  CHECK_THAT(ERROR_OF(Shape{3, -2}), ContainsAll({"Shape", "non-negative", "[3, -2]"}));
  CHECK_THAT(ERROR_OF(Shape(std::vector<int64_t>{-1})), ContainsAll({"Shape", "non-negative", "[-1]"}));
  CHECK_THAT(ERROR_OF(Shape{4, 5}[-1]), ContainsAll({"Shape", "axis -1", "(4, 5)"}));
  CHECK_THAT(ERROR_OF(Shape({3, 6148914691236517206, 4})),
             ContainsAll({"Shape", "[3, 6148914691236517206, 4]", "2^63 - 1"}));
  // No elements, but the strides (6148914691236517206 * 4) would still overflow.
  CHECK_THAT(ERROR_OF(Shape({0, 6148914691236517206, 4})), ContainsAll({"Shape", "2^63 - 1"}));
  CHECK_NOTHROW(Shape({0, 6148914691236517206, 1}));
}

TEST_CASE("errors: Tensor", "[errors][tensor]") {
  CHECK_THAT(ERROR_OF(Tensor<float>::from_vector(Shape{2, 3}, std::vector<float>(5))),
             ContainsAll({"Tensor::from_vector", "(2, 3)", "6 values", "got 5"}));
  CHECK_THAT(ERROR_OF(Tensor<int64_t>::from_vector(Shape{}, {})), ContainsAll({"Tensor::from_vector", "1 values", "got 0"}));
  // Device memory belongs to a rank's device: none without a Runtime (or without CUDA in the build).
  const char* why = SPSD_HAVE_CUDA ? "Runtime" : "built with CUDA";
  CHECK_THAT(ERROR_OF(Tensor<float>(Shape{2}, DeviceType::kCUDA)), ContainsAll({"Storage::allocate", "cuda tensors", why}));
  CHECK_THAT(ERROR_OF(Tensor<double>::from_vector(Shape{1}, {1.0}, DeviceType::kCUDA)),
             ContainsAll({"Storage::allocate", "cuda tensors", why}));
}

TEST_CASE("errors: runtime queries without a Runtime", "[errors][runtime]") {
  CHECK_THAT(ERROR_OF(spsd::rank()), ContainsAll({"rank", "Runtime"}));
  CHECK_THAT(ERROR_OF(spsd::world_size()), ContainsAll({"world_size", "Runtime"}));
  CHECK_THAT(ERROR_OF(check_placement("my_op", Placement("cpu", {0}))), ContainsAll({"my_op", "Runtime"}));
}

TEST_CASE("errors: check_placement names ranks outside the world", "[errors][runtime]") {
  // Catch2 v2 assertions are not thread-safe: each simulated rank records its message, and
  // the main thread checks them after simulate returns.
  std::vector<std::string> messages(2), accepted(2);
  simulate(2, [&] {
    int r = spsd::rank();
    messages[r] = ERROR_OF(check_placement("my_op", Placement("cpu", {0, 1, 2})));
    accepted[r] = ERROR_OF(check_placement("my_op", Placement("cpu", {1, 0})));
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK_THAT(messages[r], ContainsAll({"my_op", R"(placement(type="cpu", ranks=[0, 1, 2]))", "names rank 2",
                                         "world has 2 ranks"}));
    CHECK(accepted[r] == "<no exception>");
  }
}
