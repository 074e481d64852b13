// bench/planning: what a boxing plan costs to compute (a miss of the plan cache: the first
// to_global of a conversion, and every candidate conversion the resolver prices for a new
// signature) and to find again (a hit). One process, no communication: plan_boxing is a pure
// function of the shape, dtype and both layouts, so meshes of any size are planned here without
// running their ranks.
//   planning [--quick]
// For each case, every NdSbp of the source to every NdSbp of the target, for three shapes and
// (unless --quick) four dtypes, so that every call is a miss; then the last plan asked for again
// 100000 times (hits). Prints a markdown table: plans, microseconds per miss and per hit.
//   planning --ranks 256,1024,4096,16384 [--extent 65600]
// Cluster scale (issue 27): for each rank count n, a 65536 x 65536 float tensor (or extent x
// extent: 65600 makes every split uneven) on n/8 x 8 and
// n/64 x 8 x 8 meshes: the three conversions of docs/benchmarks.md's scale table (one plan miss
// each), a matmul's first-call resolution for every pair of their 2-d layouts, the memory a
// cached plan holds, and explain_boxing of each conversion (its plan cached): time and text. Each measurement uses ranks no earlier one used, so every call misses.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
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

// Ranks first .. first + n - 1 on a mesh: a fresh rank range misses every cache.
spsd::Placement mesh_of(int64_t first, const spsd::Shape& mesh) {
  std::vector<int64_t> ranks(mesh.numel());
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = first + static_cast<int64_t>(i);
  return spsd::Placement("cpu", std::move(ranks), mesh);
}

std::vector<int64_t> parse_counts(const char* text) {
  std::vector<int64_t> counts;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    counts.push_back(std::strtoll(p, &end, 10));
    if (end == p || counts.back() < 64 || counts.back() % 64 != 0) {
      std::fprintf(stderr, "planning: --ranks takes multiples of 64 separated by commas, got %s\n", text);
      std::exit(2);
    }
    p = *end == ',' ? end + 1 : end;
  }
  return counts;
}

// The scale sweep: milliseconds per plan miss and per resolution, bytes per cached plan.
int sweep(const std::vector<int64_t>& counts, int64_t extent) {
  using spsd::NdSbp;
  using spsd::Shape;
  namespace sbp = spsd::sbp;
  const Shape shape{extent, extent};
  const NdSbp s0s1{sbp::split(0), sbp::split(1)}, s1s0{sbp::split(1), sbp::split(0)}, s1b{sbp::split(1), sbp::broadcast};
  std::printf("| ranks | (S(0),S(1)) -> (S(1),S(0)) on 2-d | 3-d (S(0),P,S(1)) -> 1-d S(1) | "
              "3-d (S(0),S(1),B) -> 2-d (S(1),B) | matmul resolution, worst of 9 layout pairs | "
              "bytes per cached plan, largest | explain_boxing of a cached plan, slowest of the three | "
              "its text, longest |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  int64_t first = 0;
  for (int64_t n : counts) {
    const Shape mesh2{n / 8, 8}, mesh3{n / 64, 8, 8}, mesh1{n};
    double ms[3];
    int64_t plan_bytes = 0, explain_bytes = 0;
    double explain_ms = 0;
    const auto time_plan = [&](int i, const Shape& from_mesh, const NdSbp& from, const Shape& to_mesh, const NdSbp& to) {
      const spsd::Placement a = mesh_of(first, from_mesh), b = mesh_of(first, to_mesh);
      first += n;
      const Clock::time_point start = Clock::now();
      auto plan = spsd::plan_boxing(shape, spsd::DType::kFloat32, {a, from}, {b, to});
      ms[i] = micros_since(start) / 1000;
      plan_bytes = std::max(plan_bytes, plan->footprint_bytes());
      // explain_boxing of the plan just cached: its traffic lines, per rank or grouped, are its cost.
      const Clock::time_point explained = Clock::now();
      const std::string text = spsd::explain_boxing(shape, spsd::DType::kFloat32, a, from, b, to);
      explain_ms = std::max(explain_ms, micros_since(explained) / 1000);
      explain_bytes = std::max(explain_bytes, static_cast<int64_t>(text.size()));
    };
    time_plan(0, mesh2, s0s1, mesh2, s1s0);
    time_plan(1, mesh3, NdSbp{sbp::split(0), sbp::partial_sum, sbp::split(1)}, mesh1, NdSbp{sbp::split(1)});
    time_plan(2, mesh3, NdSbp{sbp::split(0), sbp::split(1), sbp::broadcast}, mesh2, s1b);
    double worst_resolution_ms = 0;
    for (const NdSbp& x : {s0s1, s1s0, s1b})
      for (const NdSbp& w : {s0s1, s1s0, s1b}) {
        const spsd::Placement p = mesh_of(first, mesh2);
        first += n;
        const std::vector<spsd::TensorMeta> metas{{shape, spsd::DType::kFloat32}, {shape, spsd::DType::kFloat32}};
        const Clock::time_point start = Clock::now();
        spsd::resolve(spsd::op_schema<spsd::detail::MatmulDef>(), {}, p, metas, std::vector<NdSbp>{x, w});
        worst_resolution_ms = std::max(worst_resolution_ms, micros_since(start) / 1000);
      }
    std::printf("| %lld | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %lld | %.2f ms | %lld |\n", static_cast<long long>(n),
                ms[0], ms[1], ms[2], worst_resolution_ms, static_cast<long long>(plan_bytes), explain_ms,
                static_cast<long long>(explain_bytes));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--ranks") == 0) {
    const bool extent_given = argc > 4 && std::strcmp(argv[3], "--extent") == 0;
    const int64_t extent = extent_given ? std::strtoll(argv[4], nullptr, 10) : 65536;
    if (extent < 1) {
      std::fprintf(stderr, "planning: --extent takes a positive number of elements, got %s\n", argv[4]);
      return 2;
    }
    return sweep(parse_counts(argv[2]), extent);
  }
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
