// bench/planning: what a boxing plan costs to compute (a miss of the plan cache: the first
// to_global of a conversion, and every candidate conversion the resolver prices for a new
// signature) and to find again (a hit). One process, no communication: plan_boxing is a pure
// function of the shape, dtype and both layouts.
//   planning [--quick]
// For each case, every NdSbp of the source to every NdSbp of the target, for three shapes and
// (unless --quick) four dtypes, so that every call is a miss; then the last plan asked for again
// 100000 times (hits). Prints a markdown table: plans, microseconds per miss and per hit.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <spsd/spsd.hpp>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Every NdSbp on a mesh of mesh_ndim axes for a tensor of tensor_ndim axes.
std::vector<spsd::NdSbp> all_nd_sbps(int64_t mesh_ndim, int64_t tensor_ndim) {
  std::vector<spsd::Sbp> options;
  for (int64_t i = 0; i < tensor_ndim; ++i) options.push_back(spsd::sbp::split(i));
  options.insert(options.end(), {spsd::sbp::broadcast, spsd::sbp::partial_sum, spsd::sbp::partial_max,
                                 spsd::sbp::partial_min});
  std::vector<spsd::NdSbp> out;
  std::vector<size_t> digit(mesh_ndim, 0);
  for (;;) {
    std::vector<spsd::Sbp> axes;
    for (size_t d : digit) axes.push_back(options[d]);
    out.emplace_back(std::move(axes));
    size_t a = 0;
    while (a < digit.size() && ++digit[a] == options.size()) digit[a++] = 0;
    if (a == digit.size()) return out;
  }
}

struct Case {
  const char* name;
  spsd::Placement from, to;
};

double micros_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  using spsd::Placement;
  using spsd::Shape;
  const std::vector<Case> cases = {
      {"4 ranks -> same", Placement("cpu", {0, 1, 2, 3}), Placement("cpu", {0, 1, 2, 3})},
      {"2x2 -> same", Placement("cpu", {0, 1, 2, 3}, Shape{2, 2}), Placement("cpu", {0, 1, 2, 3}, Shape{2, 2})},
      {"2x3 -> same", Placement("cpu", {0, 1, 2, 3, 4, 5}, Shape{2, 3}),
       Placement("cpu", {0, 1, 2, 3, 4, 5}, Shape{2, 3})},
      {"2x2 -> 4 other ranks", Placement("cpu", {0, 1, 2, 3}, Shape{2, 2}), Placement("cpu", {4, 5, 6, 7})},
      {"2x2x2 -> same", Placement("cpu", {0, 1, 2, 3, 4, 5, 6, 7}, Shape{2, 2, 2}),
       Placement("cpu", {0, 1, 2, 3, 4, 5, 6, 7}, Shape{2, 2, 2})},
  };
  const std::vector<Shape> shapes = {Shape{7}, Shape{5, 3}, Shape{6, 4}};
  std::vector<spsd::DType> dtypes = {spsd::DType::kFloat32};
  if (!quick) dtypes.insert(dtypes.end(), {spsd::DType::kFloat64, spsd::DType::kInt32, spsd::DType::kInt64});

  std::printf("| case | shapes | plans | us per plan (miss) | us per plan (hit) |\n|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    // The 2x2x2 mesh with 2-d tensors has 216 x 216 pairs per dtype: keep it to 1-d tensors.
    const std::vector<Shape> used = c.from.mesh().ndim() == 3 ? std::vector<Shape>{Shape{7}} : shapes;
    int64_t misses = 0;
    double miss_us = 0;
    for (spsd::DType dtype : dtypes)
      for (const Shape& shape : used) {
        const auto sources = all_nd_sbps(c.from.mesh().ndim(), shape.ndim());
        const auto targets = all_nd_sbps(c.to.mesh().ndim(), shape.ndim());
        const Clock::time_point start = Clock::now();
        for (const spsd::NdSbp& x : sources)
          for (const spsd::NdSbp& y : targets) spsd::plan_boxing(shape, dtype, {c.from, x}, {c.to, y});
        miss_us += micros_since(start);
        misses += static_cast<int64_t>(sources.size() * targets.size());
      }
    // A hit costs the same whatever the key: the last plan computed, asked for again.
    const Shape& shape = used.back();
    const spsd::Layout from{c.from, all_nd_sbps(c.from.mesh().ndim(), shape.ndim()).back()};
    const spsd::Layout to{c.to, all_nd_sbps(c.to.mesh().ndim(), shape.ndim()).back()};
    const int64_t hits = quick ? 1000 : 100000;
    const Clock::time_point start = Clock::now();
    for (int64_t i = 0; i < hits; ++i) spsd::plan_boxing(shape, dtypes.back(), from, to);
    const double hit_us = micros_since(start);
    std::string shape_list;
    for (const Shape& s : used) shape_list += (shape_list.empty() ? "" : ", ") + s.to_string();
    std::printf("| %s | %s | %lld | %.1f | %.2f |\n", c.name, shape_list.c_str(), static_cast<long long>(misses),
                miss_us / static_cast<double>(misses), hit_us / static_cast<double>(hits));
  }
}
