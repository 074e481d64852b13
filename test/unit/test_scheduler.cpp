// The eager runtime's dependency rules on one buffer across the two streams (the rank's thread
// and its communication stream): read-after-write, write-after-read, write-after-write, reads
// that do not wait for reads, issue order, failures, buffers dropped while in flight, the
// inline policy, and a direct collective ordered after queued communication.
//
// Instructions here sleep before they touch their operands, so an access that failed to wait
// would see the old bytes; an instruction that must not be waited for blocks until the rank's
// thread lets it go (bounded), so a wrong wait shows as a timeout instead of a hang.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include <spsd/spsd.hpp>
#include <spsd/runtime/scheduler.hpp>

#include "error_matchers.hpp"

using namespace spsd;
using namespace std::chrono_literals;
using detail::Instruction;
using detail::issue_comm;

namespace {

using Buffer = std::shared_ptr<Storage>;

Buffer filled(int64_t n, float v) {
  Buffer b = Storage::allocate(n * static_cast<int64_t>(sizeof(float)), DeviceType::kCPU);
  auto* p = static_cast<float*>(b->data());
  for (int64_t i = 0; i < n; ++i) p[i] = v;
  return b;
}
float first(const Buffer& b) { return *static_cast<const float*>(std::as_const(*b).data()); }
float* raw(const Buffer& b) { return static_cast<float*>(b->data()); }  // on the worker: no wait

// Queued whatever its size (the stream would run small idle work inline otherwise).
void queue(Instruction ins) {
  ins.bytes = int64_t{1} << 40;
  issue_comm(std::move(ins));
}

// Released by the rank's thread; the instruction gives up after a bound and says so.
struct Gate {
  std::atomic<bool> open{false};
  std::atomic<bool> timed_out{false};
  void pass() {
    const auto until = std::chrono::steady_clock::now() + 3s;
    while (!open.load())
      if (std::chrono::steady_clock::now() > until) {
        timed_out = true;
        return;
      }
  }
};

}  // namespace

TEST_CASE("read after write: reading waits for the queued write", "[scheduler]") {
  simulate(1, [] {
    Buffer x = filled(1024, 0);
    queue({"write", {}, {x}, [x] {
             std::this_thread::sleep_for(50ms);
             for (int i = 0; i < 1024; ++i) raw(x)[i] = 7;
           }});
    CHECK(first(x) == 7);
    CHECK(comm_stream_stats().queued == 1);
  });
}

TEST_CASE("write after read: writing waits until the queued read is done", "[scheduler]") {
  simulate(1, [] {
    Buffer x = filled(1024, 1), y = filled(1024, 0);
    queue({"read x into y", {x}, {y}, [x, y] {
             std::this_thread::sleep_for(50ms);
             std::memcpy(raw(y), raw(x), 1024 * sizeof(float));
           }});
    raw(x)[0] = 2;  // must not land before the copy
    CHECK(first(y) == 1);
    CHECK(first(x) == 2);
  });
}

TEST_CASE("write after write: the later write wins", "[scheduler]") {
  simulate(1, [] {
    Buffer x = filled(1024, 0);
    queue({"write 1", {}, {x}, [x] {
             std::this_thread::sleep_for(50ms);
             raw(x)[0] = 1;
           }});
    raw(x)[0] = 2;
    synchronize();
    CHECK(first(x) == 2);
  });
}

TEST_CASE("independent work is not serialized: reads of a buffer being read, other buffers", "[scheduler]") {
  simulate(1, [] {
    Buffer x = filled(16, 3), z = filled(16, 0);
    Gate gate;
    queue({"read x until released", {x}, {}, [&gate] { gate.pass(); }});
    // Neither access may wait for the instruction, which waits for them.
    CHECK(first(x) == 3);
    raw(z)[0] = 4;
    gate.open = true;
    synchronize();
    CHECK_FALSE(gate.timed_out);
    CHECK(first(z) == 4);
  });
}

TEST_CASE("queued instructions run in issue order, on the worker thread", "[scheduler]") {
  simulate(1, [] {
    std::vector<int> order;
    const auto rank_thread = std::this_thread::get_id();
    std::atomic<bool> on_rank_thread{false};
    for (int i = 0; i < 50; ++i)
      queue({"step", {}, {}, [&, i] {
               order.push_back(i);
               if (std::this_thread::get_id() == rank_thread) on_rank_thread = true;
             }});
    synchronize();
    std::vector<int> expected(50);
    for (int i = 0; i < 50; ++i) expected[i] = i;
    CHECK(order == expected);
    CHECK_FALSE(on_rank_thread);
  });
}

TEST_CASE("a buffer dropped while in flight lives until the stream passed it", "[scheduler]") {
  simulate(1, [] {
    Buffer y = filled(4096, 0);
    {
      Buffer x = filled(4096, 5);
      queue({"copy", {x}, {y}, [x, y] {
               std::this_thread::sleep_for(20ms);
               std::memcpy(raw(y), raw(x), 4096 * sizeof(float));
             }});
    }  // the program's last reference to x goes here
    CHECK(first(y) == 5);
  });
}

TEST_CASE("a failed instruction: its outputs and those skipped after it throw; the stream recovers", "[scheduler]") {
  simulate(1, [] {
    Buffer x = filled(8, 0), y = filled(8, 0), z = filled(8, 0);
    Gate gate;  // both are queued before the first fails (queuing after a failure throws it)
    queue({"fails", {}, {x}, [&gate] {
             gate.pass();
             throw Error("boom: the collective timed out");
           }});
    queue({"skipped", {}, {y}, [y] { raw(y)[0] = 1; }});
    gate.open = true;
    CHECK_THAT(test::ERROR_OF(first(x)), Catch::Contains("boom"));
    CHECK_THAT(test::ERROR_OF(first(y)), Catch::Contains("boom"));
    CHECK_THAT(test::ERROR_OF(synchronize()), Catch::Contains("boom"));
    synchronize();  // seen once: the stream runs again
    queue({"runs", {}, {z}, [z] { raw(z)[0] = 9; }});
    CHECK(first(z) == 9);
    CHECK_THAT(test::ERROR_OF(first(y)), Catch::Contains("boom"));  // still never written
  });
}

TEST_CASE("synchronous mode and small idle work run on the rank's thread", "[scheduler]") {
  simulate(1, [] {
    const auto rank_thread = std::this_thread::get_id();
    std::thread::id ran_on;
    auto where = [&] { ran_on = std::this_thread::get_id(); };

    set_synchronous(true);
    CHECK(synchronous());
    queue({"sync", {}, {}, where});
    CHECK(ran_on == rank_thread);
    set_synchronous(false);

    issue_comm({"small", {}, {}, where, inline_bytes()});
    CHECK(ran_on == rank_thread);
    issue_comm({"large", {}, {}, where, inline_bytes() + 1});
    synchronize();
    CHECK(ran_on != rank_thread);
    issue_comm({"needed now", {}, {}, where, inline_bytes() + 1}, detail::Urgency::kNow);
    CHECK(ran_on == rank_thread);
    CHECK_THAT(test::ERROR_OF(set_inline_bytes(-1)), Catch::Contains("set_inline_bytes") && Catch::Contains("-1"));
  });
}

TEST_CASE("a collective called directly comes after the communication queued before it", "[scheduler]") {
  // Catch2 assertions are not thread-safe: ranks record, the test thread checks.
  std::vector<std::vector<float>> seen(2);
  simulate(2, [&] {
    Communicator& comm = world_communicator();
    Buffer a = filled(1, static_cast<float>(rank() + 1));
    queue({"all_reduce a", {a}, {a}, [a, &comm] {
             std::this_thread::sleep_for(30ms);
             comm.all_reduce(raw(a), raw(a), 1, DType::kFloat32, ReduceOp::kSum);
           }});
    float b[2] = {10.0f * (rank() + 1), 1};
    comm.all_reduce(b, b, 2, DType::kFloat32, ReduceOp::kSum);  // waits for the queued one
    seen[rank()] = {first(a), b[0], b[1]};
  });
  for (const auto& s : seen) CHECK(s == std::vector<float>{3, 30, 2});
}

TEST_CASE("to_global queues its collective and the result waits for it", "[scheduler]") {
  std::vector<int64_t> queued(2);
  std::vector<std::vector<float>> values(2);
  simulate(2, [&] {
    set_inline_bytes(0);
    Placement p("cpu", {0, 1});
    auto x = arange<float>(512, p, NdSbp{sbp::split(0)});
    auto y = x.to_global(p, NdSbp{sbp::broadcast});
    x.copy_(x * 2.0f);  // must wait until the all-gather has read x
    values[rank()] = y.to_local().to_vector();
    queued[rank()] = comm_stream_stats().queued;
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(queued[r] >= 1);
    REQUIRE(values[r].size() == 512);
    for (int i = 0; i < 512; ++i) CHECK(values[r][i] == static_cast<float>(i));
  }
}
