// bench/communicators: what creating communicators costs, per rank (max over ranks), against raw
// MPI in the same run, and the creation handshake's messages per member.
//
//   tools/mpirun -np 9 build/bench/communicators [--reps R]     3x3 mesh and 1-d 9 (the world)
//   build/bench/communicators --simulate 64,256 [--reps R]      simulated ranks (8x8, 16x16 meshes)
//
// spsd creates each communicator at its first use (spsd::communicator), so every repetition takes
// fresh ordered rank sets: the mesh's ranks in a new random order (the same on every rank; a
// permutation that would give a rank set already seen is skipped). The baselines create the same
// rank sets without a handshake: MPI_Comm_create_group over the members only, and MPI_Comm_split
// over the whole world (one split per mesh axis creates all groups of that axis). Each entry is
// timed after a barrier; the table shows the median over repetitions of the max over ranks.
// Under --simulate the in-process backend creates a communicator without any exchange (the
// members meet at their first collective), so that table measures bookkeeping and thread wake-ups
// only; the handshake columns there are what MPI would send (spsd/comm/creation.hpp's formula).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "spsd/comm/creation.hpp"
#include "spsd/spsd.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using Ranks = std::vector<int64_t>;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// rows x cols with rows the largest divisor of n up to sqrt(n): 3x3 at 9, 8x8 at 64, 16x16 at 256.
spsd::Shape square_mesh(int64_t n) {
  int64_t rows = 1;
  for (int64_t r = 1; r * r <= n; ++r)
    if (n % r == 0) rows = r;
  return spsd::Shape{rows, n / rows};
}

// Every ordered rank set a placement over `order` with `mesh` gives: its groups along each axis
// and the whole. The same on every rank (computed from the order alone).
std::vector<Ranks> rank_sets(const Ranks& order, const spsd::Shape& mesh) {
  spsd::Placement p("cpu", order, mesh);
  std::vector<Ranks> sets{order};
  for (int64_t axis = 0; axis < mesh.ndim(); ++axis)
    for (int64_t r : order) sets.push_back(spsd::mesh_group(p, r, {axis}));
  return sets;
}

// Rank orders whose rank sets no earlier order gave: fresh communicators for every repetition.
class FreshOrders {
 public:
  FreshOrders(int64_t n, spsd::Shape mesh) : n_(n), mesh_(std::move(mesh)), rng_(2027) {}
  Ranks next() {
    Ranks order(n_);
    for (int64_t i = 0; i < n_; ++i) order[i] = i;
    for (;;) {
      std::shuffle(order.begin(), order.end(), rng_);
      const std::vector<Ranks> sets = rank_sets(order, mesh_);
      if (std::none_of(sets.begin(), sets.end(), [&](const Ranks& s) { return seen_.count(s) != 0; })) {
        seen_.insert(sets.begin(), sets.end());
        return order;
      }
    }
  }

 private:
  int64_t n_;
  spsd::Shape mesh_;
  std::mt19937_64 rng_;
  std::set<Ranks> seen_;
};

// What one row of the table creates, given a fresh rank order: the rank sets this rank is in.
struct Entry {
  const char* what;
  bool axes;  // the mesh-axis groups of this rank (else the whole placement)
};

void my_sets_of(const Entry& e, const Ranks& order, const spsd::Shape& mesh, int64_t me, std::vector<Ranks>& out) {
  spsd::Placement p("cpu", order, mesh);
  out.clear();
  if (!e.axes) return out.push_back(order);
  for (int64_t axis = 0; axis < mesh.ndim(); ++axis) out.push_back(spsd::mesh_group(p, me, {axis}));
}

struct Row {
  std::string mesh, what, exchange;
  int64_t members = 0, messages = 0;
  int64_t messages_all_pairs = 0;  // simulated rows: what the all-pairs exchange alone would send
  double spsd_us = 0, create_group_us = 0, split_us = 0;
  int reps = 0;
};

void print_rows(const std::vector<Row>& rows, bool with_mpi) {
  if (with_mpi) {
    std::printf("| mesh | rank sets created per rank | members | handshake | spsd (us) | MPI_Comm_create_group (us) | "
                "MPI_Comm_split (us) | spsd / create_group | handshake messages sent per member | reps |\n");
    std::printf("|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
    for (const Row& r : rows)
      std::printf("| %s | %s | %lld | %s | %.0f | %.0f | %.0f | %.2f | %lld | %d |\n", r.mesh.c_str(), r.what.c_str(),
                  static_cast<long long>(r.members), r.exchange.c_str(), r.spsd_us, r.create_group_us, r.split_us,
                  r.create_group_us > 0 ? r.spsd_us / r.create_group_us : 0.0, static_cast<long long>(r.messages),
                  r.reps);
    return;
  }
  std::printf("| simulated ranks | mesh | rank sets created per rank | members | spsd (us) | "
              "MPI handshake messages sent per member: before (all pairs) / now | reps |\n");
  std::printf("|---:|---|---|---:|---:|---:|---:|\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %s | %lld | %.1f | %lld / %lld | %d |\n", r.exchange.c_str(), r.mesh.c_str(),
                r.what.c_str(), static_cast<long long>(r.members), r.spsd_us,
                static_cast<long long>(r.messages_all_pairs), static_cast<long long>(r.messages), r.reps);
}

std::string mesh_label(const spsd::Shape& mesh) {
  return mesh.ndim() == 1 ? "1-d " + std::to_string(mesh[0])
                          : std::to_string(mesh[0]) + "x" + std::to_string(mesh[1]);
}

// ---- under mpirun ----

double max_over_ranks(double mine, MPI_Comm comm) {
  double all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_MAX, comm);
  return all;
}

int64_t max_over_ranks(int64_t mine, MPI_Comm comm) {
  int64_t all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT64_T, MPI_MAX, comm);
  return all;
}

// Seconds this rank spent in f, started together after a barrier; the max over ranks.
double timed(MPI_Comm comm, const std::function<void()>& f) {
  MPI_Barrier(comm);
  const Clock::time_point t0 = Clock::now();
  f();
  return max_over_ranks(std::chrono::duration<double>(Clock::now() - t0).count(), comm);
}

Row measure_mpi(MPI_Comm comm, const spsd::Shape& mesh, const Entry& e, int64_t all_pairs_limit, int reps,
                FreshOrders& orders) {
  const int64_t me = spsd::rank();
  spsd::detail::set_handshake_all_pairs_limit(all_pairs_limit);
  std::vector<double> t_spsd, t_group, t_split;
  int64_t messages = 0;
  std::vector<Ranks> sets;
  for (int rep = 0; rep < reps; ++rep) {
    const Ranks order = orders.next();
    my_sets_of(e, order, mesh, me, sets);
    const spsd::CreationStats before = spsd::creation_stats();
    t_spsd.push_back(timed(comm, [&] {
      for (const Ranks& s : sets) spsd::communicator(s);
    }));
    messages = max_over_ranks(spsd::creation_stats().handshake_messages_sent - before.handshake_messages_sent, comm);
    // The same rank sets without the handshake, on the world: a communicator per set, freed after.
    MPI_Group world_group;
    MPI_Comm_group(comm, &world_group);
    std::vector<MPI_Comm> created(sets.size(), MPI_COMM_NULL);
    t_group.push_back(timed(comm, [&] {
      for (size_t i = 0; i < sets.size(); ++i) {
        std::vector<int> ranks(sets[i].begin(), sets[i].end());
        MPI_Group group;
        MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &group);
        MPI_Comm_create_group(comm, group, 31, &created[i]);
        MPI_Group_free(&group);
      }
    }));
    for (MPI_Comm& c : created) MPI_Comm_free(&c);
    MPI_Group_free(&world_group);
    // MPI_Comm_split: collective over the world; color = which group of the axis, key = my place in it.
    t_split.push_back(timed(comm, [&] {
      for (size_t i = 0; i < sets.size(); ++i) {
        const int color = static_cast<int>(*std::min_element(sets[i].begin(), sets[i].end()));
        const int key = static_cast<int>(std::find(sets[i].begin(), sets[i].end(), me) - sets[i].begin());
        MPI_Comm_split(comm, color, key, &created[i]);
      }
    }));
    for (MPI_Comm& c : created) MPI_Comm_free(&c);
  }
  spsd::detail::set_handshake_all_pairs_limit(spsd::detail::kAllPairsHandshakeMembers);
  Row row;
  row.mesh = mesh_label(mesh);
  row.what = e.what;
  row.members = static_cast<int64_t>(sets.front().size());
  row.exchange = row.members <= all_pairs_limit ? "all pairs" : "rounds";
  row.messages = messages;
  row.spsd_us = median(t_spsd) * 1e6;
  row.create_group_us = median(t_group) * 1e6;
  row.split_us = median(t_split) * 1e6;
  row.reps = reps;
  return row;
}

int run_mpi(int reps) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const int64_t n = spsd::world_size();
  std::vector<Row> rows;
  const spsd::Shape grid = square_mesh(n), line{n};
  FreshOrders grid_orders(n, grid), line_orders(n, line);
  const Entry axes{"its mesh-axis groups", true}, whole{"the placement (all ranks)", false};
  if (grid[0] > 1) {
    rows.push_back(measure_mpi(comm, grid, axes, spsd::detail::kAllPairsHandshakeMembers, reps, grid_orders));
    rows.push_back(measure_mpi(comm, grid, axes, 1, reps, grid_orders));
  }
  rows.push_back(measure_mpi(comm, line, whole, 1, reps, line_orders));
  rows.push_back(measure_mpi(comm, line, whole, n, reps, line_orders));
  if (spsd::rank() == 0) {
    std::printf("%s\n", spsd::runtime_info().c_str());
    std::printf("%lld ranks; creating fresh communicators; median over repetitions of the max over ranks\n\n",
                static_cast<long long>(n));
    print_rows(rows, true);
  }
  MPI_Comm_free(&comm);
  return 0;
}

// ---- under simulate ----

Row measure_simulated(int64_t n, const Entry& e, int reps) {
  const spsd::Shape mesh = e.axes ? square_mesh(n) : spsd::Shape{n};
  std::vector<double> times(reps);
  int64_t members = 0, before = 0, now = 0;
  spsd::simulate(static_cast<int>(n), [&] {
    FreshOrders orders(n, mesh);  // the same sequence on every simulated rank
    spsd::Communicator& world = spsd::world_communicator();
    std::vector<Ranks> sets;
    for (int rep = 0; rep < reps; ++rep) {
      const Ranks order = orders.next();
      my_sets_of(e, order, mesh, spsd::rank(), sets);
      world.barrier();
      const Clock::time_point t0 = Clock::now();
      for (const Ranks& s : sets) spsd::communicator(s);
      double mine = std::chrono::duration<double>(Clock::now() - t0).count(), all = 0;
      world.all_reduce(&mine, &all, 1, spsd::DType::kFloat64, spsd::ReduceOp::kMax);
      if (spsd::rank() == 0) {
        times[rep] = all;
        members = static_cast<int64_t>(sets.front().size());
        before = now = 0;
        for (const Ranks& r : sets) {
          const int64_t m = static_cast<int64_t>(r.size());
          before += spsd::detail::handshake_messages(m, m);
          now += spsd::detail::handshake_messages(m);
        }
      }
    }
  });
  Row row;
  row.exchange = std::to_string(n);
  row.mesh = mesh_label(mesh);
  row.what = e.what;
  row.members = members;
  row.messages_all_pairs = before;
  row.messages = now;
  row.spsd_us = median(times) * 1e6;
  row.reps = reps;
  return row;
}

int run_simulated(const std::vector<int64_t>& sizes, int reps) {
  std::vector<Row> rows;
  for (int64_t n : sizes) {
    rows.push_back(measure_simulated(n, {"its mesh-axis groups", true}, reps));
    rows.push_back(measure_simulated(n, {"the placement (all ranks)", false}, reps));
  }
  std::printf("simulated ranks (threads, in-process backend); median over repetitions of the max over ranks\n\n");
  print_rows(rows, false);
  std::printf("\nMPI creation handshake, messages each member sends (and receives) for one communicator of n members:\n"
              "n - 1 all pairs (n <= %lld), ceil(log2 n) in rounds (n > %lld)\n\n",
              static_cast<long long>(spsd::detail::kAllPairsHandshakeMembers),
              static_cast<long long>(spsd::detail::kAllPairsHandshakeMembers));
  std::printf("| members | before (all pairs) | now |\n|---:|---:|---:|\n");
  for (int64_t n : {4, 9, 16, 64, 256, 1024, 16384})
    std::printf("| %lld | %lld | %lld |\n", static_cast<long long>(n),
                static_cast<long long>(spsd::detail::handshake_messages(n, n)),
                static_cast<long long>(spsd::detail::handshake_messages(n)));
  return 0;
}

std::vector<int64_t> parse_sizes(const char* text) {
  std::vector<int64_t> sizes;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    const long long v = std::strtoll(p, &end, 10);
    if (end == p || v < 1) return {};
    sizes.push_back(v);
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return {};
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 15;
  std::vector<int64_t> simulated;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--simulate") == 0 && i + 1 < argc) {
      simulated = parse_sizes(argv[++i]);
      if (simulated.empty()) reps = 0;
    } else {
      reps = 0;
    }
  }
  if (reps < 1) {
    std::fprintf(stderr, "usage: %s [--simulate N[,N...]] [--reps R]\n", argv[0]);
    return 2;
  }
  if (!simulated.empty()) return run_simulated(simulated, reps);
  spsd::Runtime runtime(argc, argv);
  return run_mpi(reps);
}
