// Runtime lifetime, the thread-local context, and the free functions that read it.
#include "spsd/runtime/runtime.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include "context.hpp"
#include "spsd/runtime/host_block_cache.hpp"
#include "cuda_probe.hpp"
#include "../comm/dry_backend.hpp"
#include "../comm/local_backend.hpp"
#include "spsd/core/config.hpp"
#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/runtime/device.hpp"
#include "spsd/runtime/scheduler.hpp"
#include "spsd/runtime/trace.hpp"
#if SPSD_HAVE_MPI
#include "../comm/mpi_backend.hpp"
#endif

namespace spsd {

namespace detail {

namespace {
thread_local Context* tls_context = nullptr;

int64_t env_local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"}) {
    const char* v = std::getenv(name);
    if (v == nullptr) continue;
    char* end = nullptr;
    const long long local = std::strtoll(v, &end, 10);
    SPSD_CHECK(end != v && *end == '\0' && local >= 0, name, "must be a non-negative integer, got \"", v, "\"");
    return local;
  }
  return 0;
}

// Runs in the constructor of a Runtime or a simulated rank: one context per rank.
std::unique_ptr<Context> make_thread_context(int64_t rank, int64_t world_size, int64_t local_rank) {
  auto ctx = std::make_unique<Context>();
  ctx->rank = rank;
  ctx->world_size = world_size;
  ctx->local_rank = local_rank;
  ctx->timeout = default_timeout();
  configure_host_block_cache_from_env();
  ctx->synchronous = synchronous_from_env();
  ctx->inline_bytes = inline_bytes_from_env();
  ctx->trace = trace_recorder_from_env(rank);
  return ctx;
}

std::unique_ptr<Context> make_local_context(std::shared_ptr<LocalWorld> world, int64_t rank, int64_t local_rank) {
  auto ctx = make_thread_context(rank, world->size(), local_rank);
  ctx->backend = std::make_unique<LocalBackend>(std::move(world), &ctx->timeout);
  return ctx;
}
}  // namespace

Context* current_context() { return tls_context; }
void set_current_context(Context* ctx) {
  tls_context = ctx;
  // Collectives called on a rank's thread come after what it queued (the comm layer's one hook).
  set_collective_hook(ctx ? &before_host_communication : nullptr);
  set_thread_trace_recorder(ctx ? ctx->trace.get() : nullptr);
}

Context& context(std::string_view op) {
  SPSD_CHECK(tls_context != nullptr, op,
             "no spsd::Runtime is active on this thread (construct spsd::Runtime in main, or run inside spsd::simulate)");
  return *tls_context;
}

std::chrono::milliseconds default_timeout() {
  // SPSD_TIMEOUT_S wins; SPSD_TIMEOUT is the name older scripts use.
  for (const char* name : {"SPSD_TIMEOUT_S", "SPSD_TIMEOUT"}) {
    const char* v = std::getenv(name);
    if (!v) continue;
    char* end = nullptr;
    double seconds = std::strtod(v, &end);
    SPSD_CHECK(end != v && seconds > 0 && seconds < 1e9, name,
               "must be a positive number of seconds, got \"", v, "\"");
    return std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(seconds * 1000)));
  }
  return std::chrono::milliseconds(30'000);
}

}  // namespace detail

struct Runtime::Impl {
#if SPSD_HAVE_MPI
  std::unique_ptr<boost::mpi::environment> environment;  // only when we initialized MPI
#endif
  std::unique_ptr<detail::Context> context;
  // Exceptions in flight when the Runtime began: more at its end means one is unwinding past it.
  int uncaught_at_start = std::uncaught_exceptions();
};

Runtime::Runtime() : impl_(std::make_unique<Impl>()) { init(nullptr, nullptr); }
Runtime::Runtime(int& argc, char**& argv) : impl_(std::make_unique<Impl>()) { init(&argc, &argv); }

void Runtime::init(int* argc, char*** argv) {
  SPSD_CHECK(detail::current_context() == nullptr, "Runtime", "a Runtime is already active on this thread");
#if SPSD_HAVE_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  // abort_on_exception = false: Boost would call MPI_Abort(-1) when the Runtime ends during
  // unwinding, so an spsd::Error the program catches outside the Runtime's scope (a bad
  // SPSD_* value thrown right here, an op's error) would end the job before the program could
  // print it. MPI_Finalize runs instead; a job whose ranks diverged is still ended by the
  // ranks whose bounded waits time out (~Runtime below).
  if (!initialized)
    impl_->environment =
        argc ? std::make_unique<boost::mpi::environment>(*argc, *argv, boost::mpi::threading::serialized, false)
             : std::make_unique<boost::mpi::environment>(boost::mpi::threading::serialized, false);
  impl_->context = std::make_unique<detail::Context>();
  auto backend = std::make_unique<detail::MpiBackend>(&impl_->context->timeout, &impl_->context->creation);
  impl_->context->rank = backend->rank();
  impl_->context->world_size = backend->size();
  impl_->context->local_rank = detail::env_local_rank();
  impl_->context->timeout = detail::default_timeout();
  detail::configure_host_block_cache_from_env();
  // The communication stream calls MPI from its worker thread (never two threads at once):
  // an MPI initialized by the program with less than MPI_THREAD_SERIALIZED keeps it inline.
  int threading = MPI_THREAD_SINGLE;
  MPI_Query_thread(&threading);
  impl_->context->async_allowed = threading >= MPI_THREAD_SERIALIZED;
  impl_->context->synchronous = detail::synchronous_from_env() || !impl_->context->async_allowed;
  impl_->context->inline_bytes = detail::inline_bytes_from_env();
  impl_->context->trace = detail::trace_recorder_from_env(impl_->context->rank);
  impl_->context->backend = std::move(backend);
#else
  (void)argc, (void)argv;
  impl_->context = detail::make_local_context(std::make_shared<detail::LocalWorld>(1), 0, detail::env_local_rank());
#endif
  detail::set_current_context(impl_->context.get());
}

Runtime::~Runtime() {
  // Taken first: finishing the queue below may raise (and note) errors of its own.
  const bool unwinding = std::uncaught_exceptions() > impl_->uncaught_at_start;
  const std::string in_flight = unwinding ? detail::last_error() : std::string();
  // The queued communication finishes (or times out) before anything it uses goes away.
  if (impl_->context) impl_->context->comm_stream.reset();
  detail::set_current_context(nullptr);
#if SPSD_HAVE_MPI
  // A timed-out MPI wait leaves requests pending that no rank will complete: MPI_Finalize (and
  // freeing the communicators) could hang, so the job ends here (docs/communicators.md).
  if (impl_->context && detail::mpi_wait_timed_out()) {
    const long long me = static_cast<long long>(impl_->context->rank);
    // An error unwinding past the Runtime would be caught only after MPI_Abort ended the job:
    // its text is printed here, or the user would never see it.
    if (!in_flight.empty()) std::fprintf(stderr, "spsd: rank %lld: spsd::Error: %s\n", me, in_flight.c_str());
    std::fprintf(stderr, "spsd: rank %lld: aborting the MPI job at exit: a wait timed out earlier (%s)\n", me,
                 in_flight.empty() ? "see the error it raised" : "the error above");
    std::fflush(stderr);
    // The other ranks whose waits timed out alike get to print theirs before the launcher ends them.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
#endif
  impl_->context.reset();  // communicators go before MPI is finalized
}

int rank() { return static_cast<int>(detail::context("rank").rank); }
int world_size() { return static_cast<int>(detail::context("world_size").world_size); }
int local_rank() { return static_cast<int>(detail::context("local_rank").local_rank); }
void synchronize() {
  detail::Context& ctx = detail::context("synchronize");
  detail::before_host_communication();
  if (!ctx.device) return;
  ctx.device->synchronize();
  detail::note_device_synchronization();
  detail::poll_value_checks(true);
}

CommStats comm_stats() {
  detail::Context& ctx = detail::context("comm_stats");
  detail::before_host_communication();  // counts what was issued, not what the worker reached yet
  return ctx.stats;
}
void reset_comm_stats() {
  detail::Context& ctx = detail::context("reset_comm_stats");
  detail::before_host_communication();
  ctx.stats = CommStats{};
}

CreationStats creation_stats() {
  detail::Context& ctx = detail::context("creation_stats");
  detail::before_host_communication();  // boxing queued on the communication stream creates there
  return ctx.creation;
}

void set_timeout(std::chrono::milliseconds t) {
  SPSD_CHECK(t.count() > 0, "set_timeout", "timeout must be positive, got ", t.count(), " ms");
  detail::context("set_timeout").timeout = t;
}
std::chrono::milliseconds timeout() { return detail::context("timeout").timeout; }

void check_placement(std::string_view op, const Placement& placement) {
  int64_t world = detail::context(op).world_size;
  for (int64_t r : placement.ranks())
    SPSD_CHECK(r < world, op, placement, " names rank ", r, " but the world has ", world, " ranks (0..", world - 1, ")");
  // Before anything is gathered or moved: without a usable device (a CPU-only build, no driver)
  // a cuda placement fails here, naming op and why, not after a collective.
  if (placement.device_type() == DeviceType::kCUDA && placement.contains(rank())) {
    SPSD_CHECK(!detail::context(op).dry, op, placement,
               " is a cuda placement, which a dry run cannot take (its kernels need the device): plan on cpu "
               "placements of the same mesh");
    detail::device_runtime(op);
  }
}

Communicator& communicator(const std::vector<int64_t>& world_ranks) {
  detail::Context& ctx = detail::context("communicator");
  detail::before_host_communication();  // creation is collective; the caller's use comes after the queue
  auto it = ctx.communicators.find(world_ranks);
  if (it != ctx.communicators.end()) return *it->second;
  // Checked here, not through Placement, so that the message names communicator() and the list given.
  SPSD_CHECK(!world_ranks.empty(), "communicator", "world ranks must not be empty");
  for (int64_t r : world_ranks)
    SPSD_CHECK(r >= 0 && r < ctx.world_size, "communicator", "world ranks ", detail::join(world_ranks), " name rank ", r,
               " but the world has ", ctx.world_size, " ranks (0..", ctx.world_size - 1, ")");
  std::vector<int64_t> sorted = world_ranks;
  std::sort(sorted.begin(), sorted.end());
  auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  SPSD_CHECK(dup == sorted.end(), "communicator", "world ranks ", detail::join(world_ranks), " name rank ",
             dup == sorted.end() ? 0 : *dup, " more than once");
  int64_t me = std::find(world_ranks.begin(), world_ranks.end(), ctx.rank) - world_ranks.begin();
  SPSD_CHECK(me < static_cast<int64_t>(world_ranks.size()), "communicator", "rank ", ctx.rank,
             " is not among the world ranks ", detail::join(world_ranks));
  auto comm = ctx.backend->create(world_ranks, me, &ctx.stats);
  ++ctx.creation.communicators;
  return *ctx.communicators.emplace(world_ranks, std::move(comm)).first->second;
}

Communicator& communicator(const Placement& placement) { return communicator(placement.ranks()); }

Communicator& world_communicator() {
  std::vector<int64_t> all(detail::context("world_communicator").world_size);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return communicator(all);
}

std::string runtime_info() {
  detail::Context& ctx = detail::context("runtime_info");
  static const detail::CudaProbe probe = detail::probe_cuda();
  std::string cuda = probe.device_count > 0 ? std::to_string(probe.device_count) + " CUDA device(s)" : probe.problem;
  if (probe.nccl_version)
    cuda += ", NCCL " + std::to_string(probe.nccl_version / 10000) + "." + std::to_string(probe.nccl_version / 100 % 100) +
            "." + std::to_string(probe.nccl_version % 100);
  return detail::concat("spsd ", SPSD_VERSION, ": rank ", ctx.rank, " of ", ctx.world_size, " (local rank ",
                        ctx.local_rank, "), backend ", ctx.backend->name(), "; ", cuda);
}

void simulate(int world_size, const std::function<void()>& body) {
  SPSD_CHECK(world_size >= 1, "simulate", "world_size must be at least 1, got ", world_size);
  SPSD_CHECK(static_cast<bool>(body), "simulate", "body is empty (a default-constructed std::function)");
  auto world = std::make_shared<detail::LocalWorld>(world_size);
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<detail::Context> ctx;
      try {
        ctx = detail::make_local_context(world, r, r);
        detail::set_current_context(ctx.get());
        struct Reset { ~Reset() { detail::set_current_context(nullptr); } } reset;
        body();
        detail::before_host_communication();  // an error of queued communication fails this rank too
      } catch (...) {
        std::string what = "an exception";
        try { throw; } catch (const std::exception& e) { what = e.what(); } catch (...) {}
        {
          std::lock_guard lock(mutex);
          if (!first) first = std::current_exception();
        }
        world->abort("simulated rank " + std::to_string(r) + " failed: " + what);
      }
      ctx.reset();  // after the abort: this rank's queued collectives then end at once
    });
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

void dry_run(int64_t world_size, const std::function<void()>& body) {
  SPSD_CHECK(world_size >= 1, "dry_run", "world_size must be at least 1, got ", world_size);
  SPSD_CHECK(static_cast<bool>(body), "dry_run", "body is empty (a default-constructed std::function)");
  std::exception_ptr error;
  // Its own thread, as a simulated rank: the caller's runtime (if any) stays as it is.
  std::thread rank0([&] {
    try {
      std::unique_ptr<detail::Context> ctx = detail::make_thread_context(0, world_size, 0);
      ctx->trace.reset();  // SPSD_TRACE is the job's: a dry run must not write rank 0's trace file
      ctx->backend = std::make_unique<detail::DryBackend>();
      ctx->dry = true;
      detail::set_current_context(ctx.get());
      struct Reset { ~Reset() { detail::set_current_context(nullptr); } } reset;
      body();
      detail::before_host_communication();
    } catch (...) {
      error = std::current_exception();
    }
  });
  rank0.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace spsd
