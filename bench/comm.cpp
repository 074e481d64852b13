// bench/comm: each communicator collective against the same raw MPI call, in the same run.
//
//   tools/mpirun -np 2 build-bench/bench/comm [--quick]
//
// Sizes follow nccl-tests: S is the whole array (all_reduce / broadcast buffer; all_gather
// output, reduce_scatter input, all_to_all send buffer; the message of each ring send_recv).
// spsd runs on spsd::world_communicator(), the baseline on its own duplicate of
// MPI_COMM_WORLD. Each repetition times both, alternating which goes first, with a barrier
// before each call; a call's time is the max over ranks, the table shows medians.
// Only the C API is used; OpenMPI's deprecated C++ bindings warn under -Wextra.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "spsd/spsd.hpp"

namespace {

constexpr int64_t kMinBytes = int64_t{1} << 10;
constexpr int64_t kMaxBytes = int64_t{64} << 20;

struct Env {
  spsd::Communicator* spsd;
  MPI_Comm mpi;
  int rank;
  int n;
};

[[noreturn]] void fail(const Env& env, const std::string& what) {
  std::fprintf(stderr, "bench/comm rank %d: %s\n", env.rank, what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this tells the compiler so
}

// The buffers are sized once for the largest case and shared by both sides, so neither
// pays for first-touch page faults the other does not.
struct Buffers {
  std::vector<float> send, recv;
};

// One collective: how to run it on either side for S bytes, and how busbw scales algbw.
struct Collective {
  const char* name;
  double busbw_factor;
  std::function<void(Env&, Buffers&, int64_t bytes)> spsd;
  std::function<void(Env&, Buffers&, int64_t bytes)> mpi;
};

int64_t floats(int64_t bytes) { return bytes / static_cast<int64_t>(sizeof(float)); }

std::vector<Collective> collectives(int n) {
  double nn = n;
  using spsd::DType;
  using spsd::ReduceOp;
  return {
      {"all_reduce", 2 * (nn - 1) / nn,
       [](Env& e, Buffers& b, int64_t s) {
         e.spsd->all_reduce(b.send.data(), b.recv.data(), floats(s), DType::kFloat32, ReduceOp::kSum);
       },
       [](Env& e, Buffers& b, int64_t s) {
         MPI_Allreduce(b.send.data(), b.recv.data(), static_cast<int>(floats(s)), MPI_FLOAT, MPI_SUM, e.mpi);
       }},
      {"reduce_scatter", (nn - 1) / nn,
       [](Env& e, Buffers& b, int64_t s) {
         e.spsd->reduce_scatter(b.send.data(), b.recv.data(), floats(s) / e.n, DType::kFloat32, ReduceOp::kSum);
       },
       [](Env& e, Buffers& b, int64_t s) {
         MPI_Reduce_scatter_block(b.send.data(), b.recv.data(), static_cast<int>(floats(s) / e.n), MPI_FLOAT, MPI_SUM,
                                  e.mpi);
       }},
      {"all_gather", (nn - 1) / nn,
       [](Env& e, Buffers& b, int64_t s) {
         e.spsd->all_gather(b.send.data(), b.recv.data(), floats(s) / e.n, DType::kFloat32);
       },
       [](Env& e, Buffers& b, int64_t s) {
         int c = static_cast<int>(floats(s) / e.n);
         MPI_Allgather(b.send.data(), c, MPI_FLOAT, b.recv.data(), c, MPI_FLOAT, e.mpi);
       }},
      {"all_to_all", (nn - 1) / nn,
       [](Env& e, Buffers& b, int64_t s) {
         e.spsd->all_to_all(b.send.data(), b.recv.data(), floats(s) / e.n, DType::kFloat32);
       },
       [](Env& e, Buffers& b, int64_t s) {
         int c = static_cast<int>(floats(s) / e.n);
         MPI_Alltoall(b.send.data(), c, MPI_FLOAT, b.recv.data(), c, MPI_FLOAT, e.mpi);
       }},
      {"broadcast", 1.0,
       [](Env& e, Buffers& b, int64_t s) { e.spsd->broadcast(b.recv.data(), floats(s), DType::kFloat32, 0); },
       [](Env& e, Buffers& b, int64_t s) {
         MPI_Bcast(b.recv.data(), static_cast<int>(floats(s)), MPI_FLOAT, 0, e.mpi);
       }},
      {"send_recv", 1.0,
       [](Env& e, Buffers& b, int64_t s) {
         spsd::SendSpec send{.peer = (e.rank + 1) % e.n, .data = b.send.data(), .count = floats(s)};
         spsd::RecvSpec recv{.peer = (e.rank + e.n - 1) % e.n, .data = b.recv.data(), .count = floats(s)};
         e.spsd->send_recv({&send, 1}, {&recv, 1}, DType::kFloat32);
       },
       [](Env& e, Buffers& b, int64_t s) {
         // The same receive-first Irecv/Isend/Waitall a hand-written ring would use.
         MPI_Request req[2];
         int c = static_cast<int>(floats(s));
         MPI_Irecv(b.recv.data(), c, MPI_FLOAT, (e.rank + e.n - 1) % e.n, 0, e.mpi, &req[0]);
         MPI_Isend(b.send.data(), c, MPI_FLOAT, (e.rank + 1) % e.n, 0, e.mpi, &req[1]);
         MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
       }},
  };
}

// Fills the inputs with small integers (exact in float, sums included), runs one side, and
// checks every output element against the formula for that collective.
void verify(Env& e, Buffers& b, const Collective& c, bool use_spsd, int64_t bytes) {
  const int64_t total = floats(bytes), block = total / e.n;
  const int r = e.rank, n = e.n;
  std::fill(b.recv.begin(), b.recv.end(), -1.0f);
  std::function<float(int64_t)> input, expected;
  int64_t out_count = total;
  std::string name = c.name;
  if (name == "all_reduce") {
    input = [r](int64_t i) { return static_cast<float>(r + 1 + i % 7); };
    expected = [n](int64_t i) { return static_cast<float>(n * (n + 1) / 2 + n * (i % 7)); };
  } else if (name == "reduce_scatter") {
    input = [r](int64_t i) { return static_cast<float>((r + 1) * (i % 5 + 1)); };
    expected = [n, r, block](int64_t j) { return static_cast<float>(n * (n + 1) / 2 * ((r * block + j) % 5 + 1)); };
    out_count = block;
  } else if (name == "all_gather") {
    input = [r](int64_t j) { return static_cast<float>(r * 1000 + j % 100); };
    expected = [block](int64_t i) { return static_cast<float>(i / block * 1000 + i % block % 100); };
  } else if (name == "all_to_all") {
    // The block for peer p carries (sender, p); the block from q must carry (q, me).
    input = [r, block](int64_t i) { return static_cast<float>(r * 100 + i / block + 10000 * (i % block % 3)); };
    expected = [r, block](int64_t i) { return static_cast<float>(i / block * 100 + r + 10000 * (i % block % 3)); };
  } else if (name == "broadcast") {
    expected = [](int64_t i) { return static_cast<float>(i % 13) + 0.5f; };
    if (r == 0)
      for (int64_t i = 0; i < total; ++i) b.recv[i] = expected(i);
  } else {  // send_recv ring
    input = [r](int64_t j) { return static_cast<float>(r + 16 * (j % 11)); };
    int from = (r + n - 1) % n;
    expected = [from](int64_t j) { return static_cast<float>(from + 16 * (j % 11)); };
  }
  if (input)
    for (int64_t i = 0; i < total; ++i) b.send[i] = input(i);
  (use_spsd ? c.spsd : c.mpi)(e, b, bytes);
  for (int64_t i = 0; i < out_count; ++i)
    if (b.recv[i] != expected(i))
      fail(e, std::string(use_spsd ? "spsd " : "MPI ") + c.name + " at " + std::to_string(bytes) + " bytes: element " +
                  std::to_string(i) + " is " + std::to_string(b.recv[i]) + ", expected " +
                  std::to_string(expected(i)));
}

// Repetitions by size: many where a call takes microseconds and one stray scheduler slice
// moves a sample a lot, few at 64 MiB. On a quiet 2-core machine the full run takes well under
// a minute per rank count at these counts; the time budget below keeps it bounded when the
// machine is busy and every call is many times slower.
int max_repetitions(int64_t bytes, bool quick) {
  int reps = bytes <= (int64_t{64} << 10) ? 1000
             : bytes <= (int64_t{1} << 20) ? 300
             : bytes <= (int64_t{4} << 20) ? 100
             : bytes <= (int64_t{16} << 20) ? 40
                                            : 25;
  return quick ? std::max(3, reps / 10) : reps;
}
// Seconds one (collective, size) entry may spend timing, and the fewest repetitions taken
// whatever that costs (9 sizes x 6 collectives = 54 entries).
double entry_budget_s(bool quick) { return quick ? 0.15 : 1.5; }
int min_repetitions(bool quick) { return quick ? 3 : 10; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::string size_label(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

int main(int argc, char** argv) {
  spsd::Runtime runtime(argc, argv);
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      if (spsd::rank() == 0) std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
      return 2;
    }
  }

  Env env{.spsd = &spsd::world_communicator(), .mpi = MPI_COMM_NULL, .rank = spsd::rank(), .n = spsd::world_size()};
  MPI_Comm_dup(MPI_COMM_WORLD, &env.mpi);
  Buffers buf{std::vector<float>(floats(kMaxBytes)), std::vector<float>(floats(kMaxBytes))};
  std::vector<Collective> list = collectives(env.n);

  // Correctness first, both sides, at an odd block size (15015 floats per rank) so that no
  // power-of-two chunking inside MPI divides it evenly.
  for (const Collective& c : list) {
    int64_t bytes = int64_t{4} * 3 * 5 * 7 * 11 * 13 * env.n;
    verify(env, buf, c, true, bytes);
    verify(env, buf, c, false, bytes);
  }

  if (env.rank == 0) {
    std::printf("%s\n", spsd::runtime_info().c_str());
    std::printf("%d ranks, float32, sum; median over repetitions of the max over ranks; repetitions by size, "
                "fewer where an entry would take over %.2f s%s\n\n",
                env.n, entry_budget_s(quick), quick ? " (--quick)" : "");
    std::printf("| collective | size | spsd median (us) | MPI median (us) | ratio MPI/spsd | spsd busbw (GB/s) | reps |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
    std::fflush(stdout);
  }

  for (Collective& c : list) {
    for (int64_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= 4) {
      // The warm-up, with the barriers of a timed repetition, also sizes the repetitions; the
      // max over ranks makes every rank choose the same count.
      const int warmup = bytes >= (int64_t{16} << 20) ? 1 : 3;
      MPI_Barrier(env.mpi);
      double w0 = MPI_Wtime();
      for (int w = 0; w < warmup; ++w) {
        MPI_Barrier(env.mpi);
        c.spsd(env, buf, bytes);
        MPI_Barrier(env.mpi);
        c.mpi(env, buf, bytes);
      }
      double per_repetition = (MPI_Wtime() - w0) / warmup;
      MPI_Allreduce(MPI_IN_PLACE, &per_repetition, 1, MPI_DOUBLE, MPI_MAX, env.mpi);
      const int reps = std::clamp(static_cast<int>(entry_budget_s(quick) / per_repetition), min_repetitions(quick),
                                  max_repetitions(bytes, quick));
      std::vector<double> t_spsd(reps), t_mpi(reps);
      auto timed = [&](bool use_spsd, int i) {
        MPI_Barrier(env.mpi);  // the same barrier before either side, on the baseline's communicator
        double t0 = MPI_Wtime();
        (use_spsd ? c.spsd : c.mpi)(env, buf, bytes);
        (use_spsd ? t_spsd : t_mpi)[i] = MPI_Wtime() - t0;
      };
      for (int i = 0; i < reps; ++i) {
        // Alternating the order keeps any first-or-second bias (cache, skew after the
        // barrier) out of the ratio.
        bool spsd_first = i % 2 == 0;
        timed(spsd_first, i);
        timed(!spsd_first, i);
      }
      // Max over ranks per call, gathered after the loop so it adds nothing to the timed calls.
      MPI_Allreduce(MPI_IN_PLACE, t_spsd.data(), reps, MPI_DOUBLE, MPI_MAX, env.mpi);
      MPI_Allreduce(MPI_IN_PLACE, t_mpi.data(), reps, MPI_DOUBLE, MPI_MAX, env.mpi);
      if (env.rank == 0) {
        double us_spsd = median(t_spsd) * 1e6, us_mpi = median(t_mpi) * 1e6;
        double busbw = static_cast<double>(bytes) / (us_spsd * 1e3) * c.busbw_factor;  // bytes/us/1e3 = GB/s
        // Two decimals below 100 us, where the per-call overhead is tens of nanoseconds.
        auto digits = [](double us) { return us < 100 ? 2 : 1; };
        std::printf("| %s | %s | %.*f | %.*f | %.2f | %.2f | %d |\n", c.name, size_label(bytes).c_str(), digits(us_spsd),
                    us_spsd, digits(us_mpi), us_mpi, us_mpi / us_spsd, busbw, reps);
        std::fflush(stdout);
      }
    }
  }

  MPI_Comm_free(&env.mpi);
  return 0;
}
