#include "misuse_catalogue.hpp"

#include <chrono>
#include <exception>
#include <thread>

namespace spsd_test {

namespace {

struct Case {
  std::string name;
  std::function<void()> call;
  std::vector<std::string> fragments;  // the message must contain each
};

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Runs f on a new thread, where no Runtime is active, and rethrows what it threw.
void on_fresh_thread(const std::function<void()>& f) {
  std::exception_ptr error;
  std::thread([&] {
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  }).join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

int run_misuse_catalogue(Failures& failures) {
  using spsd::DType;
  using spsd::ReduceOp;
  using std::to_string;
  const int64_t n = spsd::world_size(), r = spsd::rank();
  spsd::Communicator& c = spsd::world_communicator();
  const std::string N = to_string(n), R = to_string(r);
  const DType f32 = DType::kFloat32;
  const ReduceOp sum = ReduceOp::kSum;
  std::vector<float> in(64, 1.0f), out(64, 0.0f);
  const float* x = in.data();
  float* y = out.data();
  std::vector<int64_t> ones(n, 1), too_many(n + 1, 1), too_few(n - 1, 1), negative(n, 1);
  negative.back() = -2;
  const std::string per_member = "one entry per member (" + N + ")";
  const std::vector<int64_t> outside = {0, n}, duplicate = {r, r};

  std::vector<Case> cases = {
      // Negative counts.
      {"all_reduce count -1", [&] { c.all_reduce(x, y, -1, f32, sum); }, {"all_reduce", "count", "-1"}},
      {"reduce_scatter recv_count -2", [&] { c.reduce_scatter(x, y, -2, f32, sum); },
       {"reduce_scatter", "recv_count", "-2"}},
      {"all_gather send_count -3", [&] { c.all_gather(x, y, -3, f32); }, {"all_gather", "send_count", "-3"}},
      {"all_to_all count_per_peer -1", [&] { c.all_to_all(x, y, -1, f32); }, {"all_to_all", "count_per_peer", "-1"}},
      {"broadcast count -4", [&] { c.broadcast(y, -4, f32, 0); }, {"broadcast", "count", "-4"}},
      {"send_recv send count -1", [&] { c.send_recv(std::vector<spsd::SendSpec>{{r, x, -1}}, {}, f32); },
       {"send_recv", "send count", "-1"}},
      {"send_recv recv count -5", [&] { c.send_recv({}, std::vector<spsd::RecvSpec>{{r, y, -5}}, f32); },
       {"send_recv", "recv count", "-5"}},
      // Count vectors of the wrong length.
      {"reduce_scatter_v with n + 1 counts", [&] { c.reduce_scatter_v(x, y, too_many, f32, sum); },
       {"reduce_scatter", "recv_counts", per_member, "got " + to_string(n + 1) + " entries"}},
      {"all_gather_v with n - 1 counts", [&] { c.all_gather_v(x, y, too_few, f32); },
       {"all_gather", "recv_counts", per_member, "got " + to_string(n - 1) + " entries"}},
      {"all_to_all_v with n + 1 send counts", [&] { c.all_to_all_v(x, too_many, y, ones, f32); },
       {"all_to_all", "send_counts", per_member, "got " + to_string(n + 1) + " entries"}},
      {"all_to_all_v with n - 1 recv counts", [&] { c.all_to_all_v(x, ones, y, too_few, f32); },
       {"all_to_all", "recv_counts", per_member, "got " + to_string(n - 1) + " entries"}},
      // A negative entry in a counts vector.
      {"reduce_scatter_v negative entry", [&] { c.reduce_scatter_v(x, y, negative, f32, sum); },
       {"reduce_scatter", "recv_counts", "non-negative", list(negative)}},
      {"all_gather_v negative entry", [&] { c.all_gather_v(x, y, negative, f32); },
       {"all_gather", "recv_counts", "non-negative", list(negative)}},
      {"all_to_all_v negative send entry", [&] { c.all_to_all_v(x, negative, y, ones, f32); },
       {"all_to_all", "send_counts", "non-negative", list(negative)}},
      {"all_to_all_v negative recv entry", [&] { c.all_to_all_v(x, ones, y, negative, f32); },
       {"all_to_all", "recv_counts", "non-negative", list(negative)}},
      // Roots and peers outside the communicator.
      {"broadcast root n", [&] { c.broadcast(y, 1, f32, n); }, {"broadcast", "root " + N, "not a member"}},
      {"broadcast root -1", [&] { c.broadcast(y, 1, f32, -1); }, {"broadcast", "root -1", "not a member"}},
      {"send_recv send peer n", [&] { c.send_recv(std::vector<spsd::SendSpec>{{n, x, 1}}, {}, f32); },
       {"send_recv", "send peer " + N, "not a member"}},
      {"send_recv recv peer -1", [&] { c.send_recv({}, std::vector<spsd::RecvSpec>{{-1, y, 1}}, f32); },
       {"send_recv", "recv peer -1", "not a member"}},
      // Null buffers with elements to move.
      {"all_reduce null send", [&] { c.all_reduce(nullptr, y, 3, f32, sum); },
       {"all_reduce", "send is null", "3 elements"}},
      {"all_reduce null recv", [&] { c.all_reduce(x, nullptr, 3, f32, sum); },
       {"all_reduce", "recv is null", "3 elements"}},
      {"reduce_scatter null send", [&] { c.reduce_scatter(nullptr, y, 1, f32, sum); },
       {"reduce_scatter", "send is null", N + " elements"}},
      {"reduce_scatter null recv", [&] { c.reduce_scatter(x, nullptr, 1, f32, sum); },
       {"reduce_scatter", "recv is null", "1 elements"}},
      {"all_gather null send", [&] { c.all_gather(nullptr, y, 2, f32); }, {"all_gather", "send is null", "2 elements"}},
      {"all_gather null recv", [&] { c.all_gather(x, nullptr, 2, f32); },
       {"all_gather", "recv is null", to_string(2 * n) + " elements"}},
      {"all_to_all null send", [&] { c.all_to_all(nullptr, y, 1, f32); },
       {"all_to_all", "send is null", N + " elements"}},
      {"all_to_all null recv", [&] { c.all_to_all(x, nullptr, 1, f32); },
       {"all_to_all", "recv is null", N + " elements"}},
      {"broadcast null buffer", [&] { c.broadcast(nullptr, 2, f32, 0); }, {"broadcast", "buffer is null", "2 elements"}},
      {"send_recv null send data", [&] { c.send_recv(std::vector<spsd::SendSpec>{{r, nullptr, 2}}, {}, f32); },
       {"send_recv", "send data is null", "2 elements"}},
      {"send_recv null recv data", [&] { c.send_recv({}, std::vector<spsd::RecvSpec>{{r, nullptr, 2}}, f32); },
       {"send_recv", "recv data is null", "2 elements"}},
      // communicator() over bad rank lists.
      {"communicator with a rank outside the world", [&] { spsd::communicator(outside); },
       {"communicator", list(outside), "rank " + N, "world has " + N + " ranks"}},
      {"communicator with a negative rank", [&] { spsd::communicator(std::vector<int64_t>{-1, r}); },
       {"communicator", "rank -1"}},
      {"communicator with duplicate ranks", [&] { spsd::communicator(duplicate); },
       {"communicator", list(duplicate), "rank " + R + " more than once"}},
      {"communicator with no ranks", [&] { spsd::communicator(std::vector<int64_t>{}); }, {"communicator", "empty"}},
      // Runtime misuse.
      {"set_timeout 0", [&] { spsd::set_timeout(std::chrono::milliseconds(0)); }, {"set_timeout", "positive", "0 ms"}},
      {"set_timeout -5 ms", [&] { spsd::set_timeout(std::chrono::milliseconds(-5)); },
       {"set_timeout", "positive", "-5 ms"}},
      {"a second Runtime on this thread", [] { spsd::Runtime second; }, {"Runtime", "already active"}},
      {"simulate(0)", [] { spsd::simulate(0, [] {}); }, {"simulate", "world_size", "got 0"}},
      {"simulate(-3)", [] { spsd::simulate(-3, [] {}); }, {"simulate", "world_size", "got -3"}},
      {"rank() without a Runtime", [] { on_fresh_thread([] { spsd::rank(); }); }, {"rank", "no spsd::Runtime"}},
      {"world_size() without a Runtime", [] { on_fresh_thread([] { spsd::world_size(); }); },
       {"world_size", "no spsd::Runtime"}},
      {"comm_stats() without a Runtime", [] { on_fresh_thread([] { spsd::comm_stats(); }); },
       {"comm_stats", "no spsd::Runtime"}},
      {"world_communicator() without a Runtime", [] { on_fresh_thread([] { spsd::world_communicator(); }); },
       {"world_communicator", "no spsd::Runtime"}},
      {"communicator() without a Runtime",
       [] { on_fresh_thread([] { spsd::communicator(std::vector<int64_t>{0}); }); },
       {"communicator", "no spsd::Runtime"}},
  };
  if (n >= 2) {
    const std::vector<int64_t> others = {(r + 1) % n};
    cases.push_back({"communicator without the caller", [&, others] { spsd::communicator(others); },
                     {"communicator", "rank " + R, "not among", list(others)}});
  }

  for (const Case& k : cases) {
    const std::string what = "misuse \"" + k.name + "\" on world rank " + R;
    spsd::reset_comm_stats();
    expect_error(failures, what, k.call, k.fragments);
    expect_stats(failures, what + " (a rejected call moves and counts nothing)", spsd::CommStats{});
  }

  // Nothing above may have broken the runtime or the world communicator.
  if (spsd::rank() != r) failures.add("after the misuse catalogue: rank() is " + to_string(spsd::rank()) + ", not " + R);
  int64_t mine = r + 1, total = 0;
  c.all_reduce(&mine, &total, 1, DType::kInt64, sum);
  if (total != n * (n + 1) / 2)
    failures.add("after the misuse catalogue, world rank " + R + ": all_reduce gave " + to_string(total) +
                 ", expected " + to_string(n * (n + 1) / 2));
  return static_cast<int>(cases.size());
}

}  // namespace spsd_test
