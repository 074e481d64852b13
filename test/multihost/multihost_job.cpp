// The rank side of the multi-host tests (check_multihost.sh, check_faults.sh; docs/testing.md,
// "Several hosts"), run by tools/multihost across network namespaces:
//
//   multihost_job hosts                every rank's host name and local_rank(): local ranks count
//                                      from 0 on each host, equal Open MPI's, and a cuda placement
//                                      binds device local_rank % device count (checked where a
//                                      device exists)
//   multihost_job train                a 2x2 data x tensor ("2d") training run of the MLP: the
//                                      single-process losses and first gradients (rank 0 compares)
//   multihost_job collectives          all-reduces of 1 MiB, results checked, until one fails:
//                                      the script cuts a link or freezes a host meanwhile
//   multihost_job checkpoints DIR      save_checkpoint(DIR/ckpt-K) for K = 0, 1, ... until one fails
//   multihost_job verify DIR           (one process) every DIR/ckpt-K either loads with exactly
//                                      save K's values or is absent (load throws); none is torn
//
// The looping modes print "ready" once the first round passed on every rank, and on the error
// "multihost_job rank R on HOST: spsd::Error at T ms: ..." (T: CLOCK_REALTIME, for the script's
// time to error), also into $MULTIHOST_REPORT/rank-R.txt where that is set. Exit status: 0 when
// every check passed, 1 otherwise.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <spsd/spsd.hpp>

#include "../common/cuda_devices.hpp"
#include "train_suite.hpp"

using namespace spsd;

namespace {

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<int64_t> world() {
  std::vector<int64_t> all(world_size());
  for (int r = 0; r < world_size(); ++r) all[r] = r;
  return all;
}

// The checks' verdict on every rank: non-zero when any rank found something wrong.
int verdict(bool ok) {
  int64_t mine = ok ? 0 : 1, any = 0;
  world_communicator().all_reduce(&mine, &any, 1, DType::kInt64, ReduceOp::kMax);
  return static_cast<int>(any);
}

int check_hosts() {
  // Every rank's host name, in fixed 64-byte records.
  constexpr int kName = 64;
  std::string mine = host_name();
  mine.resize(kName, '\0');
  std::vector<char> names(static_cast<size_t>(kName) * world_size());
  world_communicator().all_gather(mine.data(), names.data(), kName, DType::kBool);
  std::vector<int64_t> locals(world_size());
  const int64_t me = local_rank();
  world_communicator().all_gather(&me, locals.data(), 1, DType::kInt64);
  bool ok = true;
  const char* ompi = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (!ompi || std::atoll(ompi) != me) {
    std::fprintf(stderr, "multihost_job rank %d: local_rank() %lld, OMPI_COMM_WORLD_LOCAL_RANK %s\n", rank(),
                 static_cast<long long>(me), ompi ? ompi : "unset");
    ok = false;
  }
  // On each host the local ranks are 0, 1, ... in world-rank order (Open MPI maps by slot).
  std::vector<std::string> hosts;
  for (int r = 0; r < world_size(); ++r) {
    const std::string h(names.data() + static_cast<size_t>(r) * kName);
    int64_t before = 0;
    for (int q = 0; q < r; ++q) before += std::string(names.data() + static_cast<size_t>(q) * kName) == h;
    if (locals[r] != before) {
      if (rank() == 0)
        std::fprintf(stderr, "multihost_job: rank %d on %s has local rank %lld, expected %lld\n", r, h.c_str(),
                     static_cast<long long>(locals[r]), static_cast<long long>(before));
      ok = false;
    }
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  }
  if (hosts.size() < 2) {
    if (rank() == 0) std::fprintf(stderr, "multihost_job: every rank ran on %s\n", hosts[0].c_str());
    ok = false;
  }
  // The binding the local rank implies: device local_rank % count, on every host from device 0.
  if (cuda_available()) {
    const spsd_test::CudaDevices devices = spsd_test::find_cuda_devices("multihost_job");
    if (devices.count > 0 && device() != me % devices.count) {
      std::fprintf(stderr, "multihost_job rank %d: bound to device %d, expected %lld %% %d\n", rank(), device(),
                   static_cast<long long>(me), devices.count);
      ok = false;
    }
  }
  std::printf("multihost_job rank %d on %s: local rank %lld, %s\n", rank(), host_name().c_str(),
              static_cast<long long>(me),
              cuda_available() ? ("device " + std::to_string(device())).c_str() : "no CUDA device");
  return verdict(ok);
}

int check_train() {
  spsd_test::Failures f;
  const spsd_test::TrainTrace single = spsd_test::train_trace<double>("data", {0}, 3);
  const spsd_test::TrainTrace two_d = spsd_test::train_trace<double>("2d", world(), 3);
  if (rank() == 0)
    spsd_test::expect_same_training<double>(f, "2d on " + std::to_string(world_size()) + " ranks", two_d, single);
  if (!f.empty()) std::fprintf(stderr, "multihost_job rank %d:\n%s", rank(), f.report().c_str());
  if (rank() == 0 && f.empty())
    std::printf("multihost_job: 3 steps of 2d training on %d ranks equal one process's (losses %.6f .. %.6f)\n",
                world_size(), two_d.losses.front(), two_d.losses.back());
  return verdict(f.empty());
}

// Also into $MULTIHOST_REPORT/rank-R.txt (the hosts share the file system): a host cut off
// cannot forward its ranks' output to mpirun.
void report_error(const Error& e) {
  const std::string line = "multihost_job rank " + std::to_string(rank()) + " on " + host_name() +
                           ": spsd::Error at " + std::to_string(now_ms()) + " ms: " + e.what() + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  if (const char* dir = std::getenv("MULTIHOST_REPORT")) {
    const std::string path = std::string(dir) + "/rank-" + std::to_string(rank()) + ".txt";
    if (std::FILE* f = std::fopen(path.c_str(), "a")) {
      std::fputs(line.c_str(), f);
      std::fclose(f);
    }
  }
}

void ready(int round) {
  if (round == 0 && rank() == 0) {
    std::printf("multihost_job: ready at %lld ms\n", now_ms());
    std::fflush(stdout);
  }
}

int loop_collectives() {
  constexpr int64_t kCount = 1 << 18;  // 1 MiB of float32
  std::vector<float> buffer(kCount);
  try {
    for (int round = 0;; ++round) {
      for (int64_t i = 0; i < kCount; ++i) buffer[i] = static_cast<float>((i + rank() + round) % 1000);
      world_communicator().all_reduce(buffer.data(), buffer.data(), kCount, DType::kFloat32, ReduceOp::kSum);
      const int n = world_size();
      for (int64_t i = 0; i < kCount; i += 4099) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += static_cast<float>((i + r + round) % 1000);
        if (buffer[i] != want) {
          std::fprintf(stderr, "multihost_job rank %d: round %d element %lld is %g, expected %g\n", rank(), round,
                       static_cast<long long>(i), buffer[i], want);
          return 1;
        }
      }
      ready(round);
    }
  } catch (const Error& e) {
    report_error(e);
  }
  return 1;
}

// Save K's state: two tensors on a 2x2 mesh (or the world's line), values from seed K.
StateDict checkpoint_state(int k, const Placement& placement, const NdSbp& a, const NdSbp& b) {
  StateDict state;
  state.insert("a", randn<float>({256, 512}, placement, a, 2 * k + 1));
  state.insert("b", randn<double>({1024}, placement, b, 2 * k + 2));
  return state;
}

Placement job_placement() {
  return world_size() == 4 ? Placement("cpu", {{0, 1}, {2, 3}}) : Placement("cpu", world());
}

int loop_checkpoints(const std::string& dir) {
  const Placement p = job_placement();
  const NdSbp a = p.mesh().ndim() == 2 ? NdSbp{sbp::split(0), sbp::split(1)} : NdSbp{sbp::split(0)};
  const NdSbp b = p.mesh().ndim() == 2 ? NdSbp{sbp::broadcast, sbp::split(0)} : NdSbp{sbp::split(0)};
  try {
    for (int k = 0;; ++k) {
      save_checkpoint(checkpoint_state(k, p, a, b), dir + "/ckpt-" + std::to_string(k));
      ready(k);
    }
  } catch (const Error& e) {
    report_error(e);
  }
  return 1;
}

template <class T>
bool equal(const GlobalTensor<T>& x, const GlobalTensor<T>& y) {
  const std::vector<T> a = x.full().to_vector(), b = y.full().to_vector();
  return a == b;
}

int verify_checkpoints(const std::string& dir) {
  const Placement one("cpu", {0});
  int complete = 0, absent = 0, bad = 0;
  for (int k = 0; std::filesystem::exists(dir + "/ckpt-" + std::to_string(k)); ++k) {
    const std::string ckpt = dir + "/ckpt-" + std::to_string(k);
    const bool has_manifest = std::filesystem::exists(ckpt + "/manifest");
    const StateDict want = checkpoint_state(k, one, {sbp::broadcast}, {sbp::broadcast});
    StateDict got = checkpoint_state(k + 1000, one, {sbp::broadcast}, {sbp::broadcast});
    try {
      load_checkpoint(ckpt, got);
      if (equal(got.at<float>("a"), want.at<float>("a")) && equal(got.at<double>("b"), want.at<double>("b"))) {
        ++complete;
      } else {
        std::fprintf(stderr, "multihost_job: %s loads, with other values than save %d wrote\n", ckpt.c_str(), k);
        ++bad;
      }
    } catch (const Error& e) {
      if (has_manifest) {
        std::fprintf(stderr, "multihost_job: %s has a manifest but does not load: %s\n", ckpt.c_str(), e.what());
        ++bad;
      } else {
        std::printf("multihost_job: %s is absent: %s\n", ckpt.c_str(), e.what());
        ++absent;
      }
    }
  }
  std::printf("multihost_job: %d checkpoints complete, %d absent, %d torn\n", complete, absent, bad);
  return complete > 0 && bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "hosts" && argc == 2) return check_hosts();
  if (mode == "train" && argc == 2) return check_train();
  if (mode == "collectives" && argc == 2) return loop_collectives();
  if (mode == "checkpoints" && argc == 3) return loop_checkpoints(argv[2]);
  if (mode == "verify" && argc == 3) return verify_checkpoints(argv[2]);
  std::fprintf(stderr, "usage: multihost_job hosts | train | collectives | checkpoints DIR | verify DIR\n");
  return 2;
}
