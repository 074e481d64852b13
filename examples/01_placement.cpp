// 01_placement: placements, SBP layouts and the box each rank holds.
//   tools/mpirun -np 4 build/examples/01_placement
#include <iostream>
#include <spsd/spsd.hpp>

int main(int argc, char** argv) {
  spsd::Runtime runtime(argc, argv);
  using namespace spsd;
  int world = world_size();
  std::vector<int64_t> all(world);
  for (int r = 0; r < world; ++r) all[r] = r;

  Placement line("cpu", all);
  Shape shape{6, 8};
  std::vector<std::pair<Placement, NdSbp>> layouts = {
      {line, sbp::split(0)}, {line, sbp::split(1)}, {line, sbp::broadcast}, {line, sbp::partial_sum}};
  if (world == 4) {
    Placement grid("cpu", {{0, 1}, {2, 3}});
    layouts.push_back({grid, {sbp::split(0), sbp::split(1)}});
    layouts.push_back({grid, {sbp::broadcast, sbp::split(0)}});
    layouts.push_back({grid, {sbp::split(0), sbp::split(0)}});
    layouts.push_back({grid, {sbp::partial_sum, sbp::split(1)}});
  }
  if (rank() == 0) std::cout << runtime_info() << "\n\n";
  for (const auto& [placement, nd_sbp] : layouts) {
    // Every rank computes its own box; rank 0 gathers them to print who holds what.
    Box mine = box_of(shape, placement, nd_sbp, rank());
    std::vector<int64_t> flat(mine.begin);
    flat.insert(flat.end(), mine.end.begin(), mine.end.end());
    std::vector<int64_t> all_boxes(flat.size() * world);
    world_communicator().all_gather(flat.data(), all_boxes.data(), static_cast<int64_t>(flat.size()), DType::kInt64);
    if (rank() != 0) continue;
    std::cout << layout_diagram(shape, placement, nd_sbp);
    for (int r = 0; r < world; ++r) {
      const int64_t* b = all_boxes.data() + r * flat.size();
      std::cout << "  rank " << r << " reports box [" << b[0] << ":" << b[2] << ", " << b[1] << ":" << b[3]
                << "], local shape " << box_of(shape, placement, nd_sbp, r).shape() << "\n";
    }
    std::cout << "\n";
  }
}
