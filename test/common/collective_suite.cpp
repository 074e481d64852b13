#include "collective_suite.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <type_traits>

namespace spsd_test {
namespace {

using spsd::CollectiveKind;
using spsd::Communicator;
using spsd::ReduceOp;

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};

// Input keys: integers in [-50, 50], distinct across world ranks (17 is invertible mod 101) and
// across 101 consecutive indices. Sums over 8 ranks stay exact in every dtype.
int64_t key(int64_t seed, int64_t world_rank, int64_t index) {
  return (seed * 37 + world_rank * 17 + index * 13) % 101 - 50;
}
// Floating values get a fraction, so a backend that moved them as integers would be caught.
// A 16-bit value is the float one rounded once: sums of up to 8 keys reach 100, past 64 where
// bfloat16 steps by 0.5, so the results of its reductions round (and must round once).
template <class T>
T as_value(int64_t k) {
  if constexpr (spsd::is_half_v<T>) return T(static_cast<float>(k) * 0.25f);
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(k) * static_cast<T>(0.25);
  else return static_cast<T>(k);
}
template <class T>
T value(int64_t seed, int64_t world_rank, int64_t index) {
  return as_value<T>(key(seed, world_rank, index));
}
// Memory the call must not write (or has not written): no input or result can equal it.
template <class T>
const T kSentinel = static_cast<T>(-7777);

// The op-reduction of the members' keys at index, written out here rather than through the library.
int64_t reduce_keys(ReduceOp op, const std::vector<int64_t>& members, int64_t seed, int64_t index) {
  int64_t acc = key(seed, members[0], index);
  for (size_t m = 1; m < members.size(); ++m) {
    int64_t k = key(seed, members[m], index);
    acc = op == ReduceOp::kSum ? acc + k : op == ReduceOp::kMax ? std::max(acc, k) : std::min(acc, k);
  }
  return acc;
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}
std::vector<int64_t> offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> d(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

// A buffer with sentinel guards on both sides: a write outside [0, n) shows up as a broken guard.
template <class T>
class Guarded {
 public:
  explicit Guarded(int64_t n) : v_(n + 2 * kGuard, kSentinel<T>) {}
  T* data() { return v_.data() + kGuard; }
  T& operator[](int64_t i) { return data()[i]; }
  bool guards_intact() const {
    auto is_sentinel = [](T x) { return x == kSentinel<T>; };
    return std::all_of(v_.begin(), v_.begin() + kGuard, is_sentinel) &&
           std::all_of(v_.end() - kGuard, v_.end(), is_sentinel);
  }

 private:
  static constexpr int64_t kGuard = 4;
  std::vector<T> v_;
};

template <class T>
void expect_guards(Failures& f, const std::string& what, const Guarded<T>& buffer) {
  if (!buffer.guards_intact()) f.add(what + ": wrote outside its buffer");
}

// Names one call for failure lines: op and arguments, dtype, communicator, world rank.
struct Where {
  std::string comm;  // "world reversed communicator(world ranks [1, 0], rank 1), world rank 0"
  template <class T>
  std::string of(const std::string& call) const {
    return call + " " + std::string(spsd::to_string(spsd::dtype_of<T>)) + " on " + comm;
  }
};

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
std::string op_name(ReduceOp op) { return std::string(spsd::to_string(op)); }

// Per-member counts for the v-variants: uneven with zeros, all zero, one member holding all.
struct Counts {
  std::vector<int64_t> counts;
  bool uniform;  // use the non-v call with counts[0]
};
std::vector<Counts> count_cases(int64_t n) {
  std::vector<int64_t> uneven(n), zeros(n, 0), last_only(n, 0);
  for (int64_t m = 0; m < n; ++m) uneven[m] = (m * 3 + 1) % 4;  // 1, 0, 3, 2, 1, 0, ...
  last_only[n - 1] = 5;
  return {{std::vector<int64_t>(n, 3), true}, {uneven, false}, {zeros, false}, {last_only, false}};
}

template <class T>
void all_reduce_cases(Communicator& c, const Where& where, Failures& f) {
  const int64_t n = c.size(), r = c.rank(), me = c.world_ranks()[r], elem = sizeof(T);
  for (int64_t count : {0, 1, 7, 33})
    for (ReduceOp op : kOps)
      for (bool in_place : {false, true}) {
        const int64_t seed = count + 3 * static_cast<int64_t>(op) + 11 * in_place;
        std::vector<T> send(count);
        for (int64_t i = 0; i < count; ++i) send[i] = value<T>(seed, me, i);
        Guarded<T> recv(count);
        if (in_place) std::copy(send.begin(), send.end(), recv.data());
        // Null buffers are legal when nothing moves.
        const T* s = in_place ? recv.data() : count ? send.data() : nullptr;
        T* d = in_place || count ? recv.data() : nullptr;
        spsd::reset_comm_stats();
        c.all_reduce(s, d, count, spsd::dtype_of<T>, op);

        std::string what = where.of<T>("all_reduce(" + op_name(op) + ", count " + std::to_string(count) +
                                               (in_place ? ", in place)" : ")"));
        std::vector<T> expected(count);
        for (int64_t i = 0; i < count; ++i) expected[i] = as_value<T>(reduce_keys(op, c.world_ranks(), seed, i));
        expect_elements(f, what, recv.data(), expected);
        expect_guards(f, what, recv);
        const int64_t chunk = count / n + (r < count % n ? 1 : 0);
        const int64_t bytes = (count + (n - 2) * chunk) * elem;
        expect_stats(f, what, one_call(CollectiveKind::kAllReduce, bytes, bytes));
      }
}

template <class T>
void reduce_scatter_cases(Communicator& c, const Where& where, Failures& f) {
  const int64_t n = c.size(), r = c.rank(), me = c.world_ranks()[r], elem = sizeof(T);
  int64_t case_index = 0;
  for (const Counts& cc : count_cases(n))
    for (ReduceOp op : kOps)
      for (bool in_place : {false, true}) {
        const std::vector<int64_t>& counts = cc.counts;
        const int64_t total = sum(counts), mine = counts[r], offset = offsets(counts)[r];
        const int64_t seed = ++case_index;
        std::vector<T> send(total);
        for (int64_t i = 0; i < total; ++i) send[i] = value<T>(seed, me, i);
        // In place: the input is the whole buffer and the result lands at its start.
        Guarded<T> recv(in_place ? total : mine);
        if (in_place) std::copy(send.begin(), send.end(), recv.data());
        const T* s = total == 0 ? nullptr : in_place ? recv.data() : send.data();
        T* d = total == 0 ? nullptr : recv.data();
        spsd::reset_comm_stats();
        if (cc.uniform) c.reduce_scatter(s, d, counts[0], spsd::dtype_of<T>, op);
        else c.reduce_scatter_v(s, d, counts, spsd::dtype_of<T>, op);

        std::string what = where.of<T>(std::string(cc.uniform ? "reduce_scatter(" : "reduce_scatter_v(") +
                                               op_name(op) + ", counts " + list(counts) +
                                               (in_place ? ", in place)" : ")"));
        std::vector<T> expected(mine);
        for (int64_t j = 0; j < mine; ++j)
          expected[j] = as_value<T>(reduce_keys(op, c.world_ranks(), seed, offset + j));
        expect_elements(f, what, recv.data(), expected);
        expect_guards(f, what, recv);
        expect_stats(f, what, one_call(CollectiveKind::kReduceScatter, (total - mine) * elem, (n - 1) * mine * elem));
      }
}

template <class T>
void all_gather_cases(Communicator& c, const Where& where, Failures& f) {
  const int64_t n = c.size(), r = c.rank(), me = c.world_ranks()[r], elem = sizeof(T);
  int64_t case_index = 0;
  for (const Counts& cc : count_cases(n))
    for (bool in_place : {false, true}) {
      const std::vector<int64_t>& counts = cc.counts;
      const std::vector<int64_t> displs = offsets(counts);
      const int64_t total = sum(counts), mine = counts[r];
      const int64_t seed = ++case_index;
      std::vector<T> send(mine);
      for (int64_t j = 0; j < mine; ++j) send[j] = value<T>(seed, me, j);
      Guarded<T> recv(total);
      // In place: the rank's own block already sits at its place inside recv.
      if (in_place) std::copy(send.begin(), send.end(), recv.data() + displs[r]);
      const T* s = total == 0 ? nullptr : in_place ? recv.data() + displs[r] : send.data();
      T* d = total == 0 ? nullptr : recv.data();
      spsd::reset_comm_stats();
      if (cc.uniform) c.all_gather(s, d, counts[0], spsd::dtype_of<T>);
      else c.all_gather_v(s, d, counts, spsd::dtype_of<T>);

      std::string what = where.of<T>(std::string(cc.uniform ? "all_gather(" : "all_gather_v(") + "counts " +
                                             list(counts) + (in_place ? ", in place)" : ")"));
      std::vector<T> expected;
      for (int64_t m = 0; m < n; ++m)
        for (int64_t j = 0; j < counts[m]; ++j) expected.push_back(value<T>(seed, c.world_ranks()[m], j));
      expect_elements(f, what, recv.data(), expected);
      expect_guards(f, what, recv);
      expect_stats(f, what, one_call(CollectiveKind::kAllGather, (n - 1) * mine * elem, (total - mine) * elem));
    }
}

template <class T>
void all_to_all_cases(Communicator& c, const Where& where, Failures& f) {
  const int64_t n = c.size(), r = c.rank(), me = c.world_ranks()[r], elem = sizeof(T);
  struct Pattern {
    std::string name;
    int64_t uniform;  // >= 0: all_to_all with this count per peer
    int64_t (*count)(int64_t from, int64_t to);
  };
  const Pattern patterns[] = {
      {"2 per peer", 2, nullptr},
      {"0 per peer", 0, nullptr},
      {"uneven (from + 2 to + 1) % 4", -1, [](int64_t a, int64_t b) { return (a + 2 * b + 1) % 4; }},
      {"self only", -1, [](int64_t a, int64_t b) -> int64_t { return a == b ? 3 : 0; }},
  };
  int64_t seed = 0;
  for (const Pattern& p : patterns) {
    ++seed;
    auto count = [&](int64_t a, int64_t b) { return p.uniform >= 0 ? p.uniform : p.count(a, b); };
    std::vector<int64_t> send_counts(n), recv_counts(n);
    for (int64_t m = 0; m < n; ++m) send_counts[m] = count(r, m), recv_counts[m] = count(m, r);
    // Element j of the block from a to b is value(seed, world rank of a, b * 100 + j).
    std::vector<T> send;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t j = 0; j < send_counts[b]; ++j) send.push_back(value<T>(seed, me, b * 100 + j));
    const int64_t recv_total = sum(recv_counts);
    Guarded<T> recv(recv_total);
    const T* s = send.empty() ? nullptr : send.data();
    T* d = recv_total == 0 ? nullptr : recv.data();
    spsd::reset_comm_stats();
    if (p.uniform >= 0) c.all_to_all(s, d, p.uniform, spsd::dtype_of<T>);
    else c.all_to_all_v(s, send_counts, d, recv_counts, spsd::dtype_of<T>);

    std::string what = where.of<T>(std::string(p.uniform >= 0 ? "all_to_all(" : "all_to_all_v(") + p.name +
                                           ", send counts " + list(send_counts) + ")");
    std::vector<T> expected;
    for (int64_t a = 0; a < n; ++a)
      for (int64_t j = 0; j < recv_counts[a]; ++j) expected.push_back(value<T>(seed, c.world_ranks()[a], r * 100 + j));
    expect_elements(f, what, recv.data(), expected);
    expect_guards(f, what, recv);
    expect_stats(f, what,
                 one_call(CollectiveKind::kAllToAll, (sum(send_counts) - send_counts[r]) * elem,
                          (recv_total - recv_counts[r]) * elem));
  }
}

template <class T>
void broadcast_cases(Communicator& c, const Where& where, Failures& f) {
  const int64_t n = c.size(), r = c.rank(), elem = sizeof(T);
  for (int64_t root = 0; root < n; ++root)
    for (int64_t count : {0, 6, 33}) {
      const int64_t seed = root * 5 + count, root_world = c.world_ranks()[root];
      Guarded<T> buffer(count);
      if (r == root)
        for (int64_t i = 0; i < count; ++i) buffer[i] = value<T>(seed, root_world, i);
      spsd::reset_comm_stats();
      c.broadcast(count ? buffer.data() : nullptr, count, spsd::dtype_of<T>, root);

      std::string what =
          where.of<T>("broadcast(count " + std::to_string(count) + ", root " + std::to_string(root) + ")");
      std::vector<T> expected(count);
      for (int64_t i = 0; i < count; ++i) expected[i] = value<T>(seed, root_world, i);
      expect_elements(f, what, buffer.data(), expected);
      expect_guards(f, what, buffer);
      // A chain from the root: everyone but the root receives, everyone but the root's predecessor sends.
      const bool last = n == 1 || r == (root + n - 1) % n;
      expect_stats(f, what, one_call(CollectiveKind::kBroadcast, last ? 0 : count * elem, r == root ? 0 : count * elem));
    }
}

// One message of a send_recv pattern, between member indices.
struct Transfer {
  int64_t src, dst, count;
};
struct SendRecvPattern {
  std::string name;
  std::vector<Transfer> plan;  // every message of every member, in each sender's order
};
std::vector<SendRecvPattern> send_recv_patterns(int64_t n) {
  std::vector<SendRecvPattern> out;
  auto next = [n](int64_t a) { return (a + 1) % n; };
  SendRecvPattern ring{"ring to the next member", {}};
  for (int64_t a = 0; a < n; ++a) ring.plan.push_back({a, next(a), a % 3 + 1});
  out.push_back(ring);
  SendRecvPattern ordered{"three messages to the next member and one to self", {}};
  for (int64_t a = 0; a < n; ++a)
    for (Transfer t : {Transfer{a, next(a), 2}, Transfer{a, a, 2}, Transfer{a, next(a), 0}, Transfer{a, next(a), 3}})
      ordered.plan.push_back(t);
  out.push_back(ordered);
  out.push_back({"first to last member only, the others idle", {{0, n - 1, 4}}});
  SendRecvPattern dense{"every pair, self included", {}};
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < n; ++b) dense.plan.push_back({a, b, (a + b) % 3});
  out.push_back(dense);
  out.push_back({"nothing at all", {}});
  return out;
}

template <class T>
void send_recv_cases(Communicator& c, const Where& where, Failures& f) {
  const int64_t r = c.rank(), me = c.world_ranks()[r], elem = sizeof(T);
  int64_t seed = 0;
  for (const SendRecvPattern& p : send_recv_patterns(c.size())) {
    ++seed;
    const std::vector<Transfer>& plan = p.plan;
    // Element j of plan entry t is value(seed, world rank of its sender, t * 100 + j).
    std::vector<std::vector<T>> send_data(plan.size());
    std::vector<spsd::SendSpec> sends;
    std::vector<size_t> mine_in;  // plan entries this member receives
    int64_t sent = 0, received = 0, messages = 0;
    for (size_t t = 0; t < plan.size(); ++t) {
      if (plan[t].src == r) {
        for (int64_t j = 0; j < plan[t].count; ++j) send_data[t].push_back(value<T>(seed, me, t * 100 + j));
        sends.push_back({plan[t].dst, plan[t].count ? send_data[t].data() : nullptr, plan[t].count});
        if (plan[t].dst != r) sent += plan[t].count, messages += 1;
      }
      if (plan[t].dst == r) {
        mine_in.push_back(t);
        if (plan[t].src != r) received += plan[t].count;
      }
    }
    // Receives are listed by descending sender, unlike the senders' order; per-pair order is kept.
    std::stable_sort(mine_in.begin(), mine_in.end(), [&](size_t x, size_t y) { return plan[x].src > plan[y].src; });
    std::vector<Guarded<T>> recv_data;
    recv_data.reserve(mine_in.size());
    std::vector<spsd::RecvSpec> recvs;
    for (size_t t : mine_in) {
      recv_data.emplace_back(plan[t].count);
      recvs.push_back({plan[t].src, plan[t].count ? recv_data.back().data() : nullptr, plan[t].count});
    }
    spsd::reset_comm_stats();
    c.send_recv(sends, recvs, spsd::dtype_of<T>);

    for (size_t k = 0; k < mine_in.size(); ++k) {
      const Transfer& t = plan[mine_in[k]];
      std::string what = where.of<T>("send_recv(" + p.name + ": message " + std::to_string(mine_in[k]) +
                                             " from member " + std::to_string(t.src) + ")");
      std::vector<T> expected(t.count);
      for (int64_t j = 0; j < t.count; ++j)
        expected[j] = value<T>(seed, c.world_ranks()[t.src], static_cast<int64_t>(mine_in[k]) * 100 + j);
      expect_elements(f, what, recv_data[k].data(), expected);
      expect_guards(f, what, recv_data[k]);
    }
    expect_stats(f, where.of<T>("send_recv(" + p.name + ")"),
                 one_call(CollectiveKind::kSendRecv, sent * elem, received * elem, messages));
  }
}

void barrier_case(Communicator& c, const Where& where, Failures& f) {
  spsd::reset_comm_stats();
  c.barrier();
  expect_stats(f, "barrier on " + where.comm, one_call(CollectiveKind::kBarrier, 0, 0));
}

template <class F>
void for_each_type(F&& f) {
  f.template operator()<float>();
  f.template operator()<double>();
  f.template operator()<int32_t>();
  f.template operator()<int64_t>();
  f.template operator()<spsd::bfloat16>();
  f.template operator()<spsd::float16>();
}

// A random 16-bit piece: random sign and mantissa, magnitude in [2^-20, 2^20) for bfloat16 and
// [2^-14, 2^12) for float16 (sums of 4 stay finite), so float32 sums of pieces are not always
// exact (splitmix64 of the arguments: every rank computes every member's pieces).
template <class T>
T random_piece(int64_t seed, int64_t world_rank, int64_t index) {
  uint64_t z = static_cast<uint64_t>(seed) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(world_rank) * 0xbf58476d1ce4e5b9ull +
               static_cast<uint64_t>(index) * 0x94d049bb133111ebull + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const float mantissa = 1.0f + static_cast<float>(z & 0xffffff) / 16777216.0f;
  const int low = std::is_same_v<T, spsd::bfloat16> ? -20 : -14, high = std::is_same_v<T, spsd::bfloat16> ? 20 : 12;
  const int exponent = low + static_cast<int>((z >> 24) % static_cast<uint64_t>(high - low));
  return T(std::ldexp((z >> 40) & 1 ? -mantissa : mantissa, exponent));
}

// u of the 16-bit type: half its precision's spacing at 1 (2^-8 for bfloat16, 2^-11 for float16).
template <class T>
constexpr double unit_roundoff() {
  return std::is_same_v<T, spsd::bfloat16> ? 0x1p-8 : 0x1p-11;
}

// Checks element i of a 16-bit reduction of the members' pieces p_0..p_{n-1} (member order).
template <class T>
void check_half_result(Failures& f, const std::function<std::string()>& what, ReduceOp op, const std::vector<T>& pieces,
                       T got, bool native) {
  float in_order = pieces[0];  // the float32 sum (or max, min) in member order
  double exact = pieces[0], magnitudes = std::fabs(static_cast<float>(pieces[0]));
  for (size_t m = 1; m < pieces.size(); ++m) {
    const float p = pieces[m];
    in_order = op == ReduceOp::kSum ? in_order + p : op == ReduceOp::kMax ? std::max(in_order, p) : std::min(in_order, p);
    exact = op == ReduceOp::kSum ? exact + p : op == ReduceOp::kMax ? std::max<double>(exact, p) : std::min<double>(exact, p);
    magnitudes += std::fabs(p);
  }
  const T rounded_once(in_order);
  if (native && got.bits != rounded_once.bits) {
    f.add(what() + ": got " + show(got) + ", the float32 sum in member order rounded once is " + show(rounded_once));
    return;
  }
  // |got - S| <= u16 |S| + (1 + u16) gamma_{n-1} sum |p_i| + eta, gamma_k = k u32 / (1 - k u32),
  // eta = half the least subnormal (results below the normal range); max and min are exact.
  const double k = static_cast<double>(pieces.size() - 1), gamma = k * 0x1p-24 / (1 - k * 0x1p-24);
  const double eta = std::is_same_v<T, spsd::float16> ? 0x1p-25 : 0x1p-134;
  const double bound = op != ReduceOp::kSum ? 0.0
                                            : unit_roundoff<T>() * std::fabs(exact) +
                                                  (1 + unit_roundoff<T>()) * gamma * magnitudes + eta;
  const double error = std::fabs(static_cast<double>(static_cast<float>(got)) - exact);
  if (!(error <= bound))
    f.add(what() + ": got " + show(got) + ", the exact result is " + show(exact) + ": error " + show(error) +
          " above the bound " + show(bound));
}

template <class T>
void half_reduction_cases(Communicator& c, const Where& where, Failures& f) {
  const int64_t n = c.size(), r = c.rank(), me = c.world_ranks()[r];
  const bool native = spsd::half_reduction() == spsd::HalfReduction::kNative;
  const int64_t elem = native ? 2 : 4;
  const std::vector<int64_t>& members = c.world_ranks();
  auto pieces_at = [&](int64_t seed, int64_t index) {
    std::vector<T> p(n);
    for (int64_t m = 0; m < n; ++m) p[m] = random_piece<T>(seed, members[m], index);
    return p;
  };
  for (ReduceOp op : kOps)
    for (bool in_place : {false, true}) {
      // all_reduce: 301 elements, not a multiple of any member count, so the blocks are uneven.
      const int64_t count = 301, seed = 1000 + 7 * static_cast<int64_t>(op) + in_place;
      std::vector<T> send(count);
      for (int64_t i = 0; i < count; ++i) send[i] = random_piece<T>(seed, me, i);
      Guarded<T> recv(count);
      if (in_place) std::copy(send.begin(), send.end(), recv.data());
      spsd::reset_comm_stats();
      c.all_reduce(in_place ? recv.data() : send.data(), recv.data(), count, spsd::dtype_of<T>, op);
      const std::string call = where.of<T>("random all_reduce(" + op_name(op) + (in_place ? ", in place)" : ")"));
      for (int64_t i = 0; i < count; ++i)
        check_half_result<T>(f, [&] { return call + ": element " + std::to_string(i); }, op, pieces_at(seed, i), recv[i],
                             native);
      expect_guards(f, call, recv);
      const int64_t chunk = count / n + (r < count % n ? 1 : 0), moved = (count + (n - 2) * chunk) * elem;
      expect_stats(f, call, one_call(CollectiveKind::kAllReduce, moved, moved));

      // reduce_scatter_v with uneven counts (member m gets 5 m + 3 elements).
      std::vector<int64_t> counts(n);
      for (int64_t m = 0; m < n; ++m) counts[m] = 5 * m + 3;
      const int64_t total = sum(counts), mine = counts[r], offset = offsets(counts)[r], rs_seed = seed + 500;
      std::vector<T> rs_send(total);
      for (int64_t i = 0; i < total; ++i) rs_send[i] = random_piece<T>(rs_seed, me, i);
      Guarded<T> rs_recv(in_place ? total : mine);
      if (in_place) std::copy(rs_send.begin(), rs_send.end(), rs_recv.data());
      spsd::reset_comm_stats();
      c.reduce_scatter_v(in_place ? rs_recv.data() : rs_send.data(), rs_recv.data(), counts, spsd::dtype_of<T>, op);
      const std::string rs_call = where.of<T>("random reduce_scatter_v(" + op_name(op) + ", counts " + list(counts) +
                                              (in_place ? ", in place)" : ")"));
      for (int64_t j = 0; j < mine; ++j)
        check_half_result<T>(f, [&] { return rs_call + ": element " + std::to_string(j); }, op,
                             pieces_at(rs_seed, offset + j), rs_recv[j], native);
      expect_guards(f, rs_call, rs_recv);
      expect_stats(f, rs_call, one_call(CollectiveKind::kReduceScatter, (total - mine) * elem, (n - 1) * mine * elem));
    }
  // Member order is part of the result: pieces 1024, 1024 u16, 2^-15, 2^-14 sum to 1024 + 1024 u16
  // in float32 in this order (the last two fall below float32's precision one at a time), a 16-bit
  // tie that rounds to 1024; the reverse order (or the exact sum) rounds to 1024 + 2048 u16.
  if (native && n == 4) {
    const float u = static_cast<float>(unit_roundoff<T>());
    const T mine(std::array<float, 4>{1024.0f, 1024.0f * u, 0x1p-15f, 0x1p-14f}[r]);
    T got(-1.0f);
    c.all_reduce(&mine, &got, 1, spsd::dtype_of<T>, ReduceOp::kSum);
    if (got.bits != T(1024.0f).bits)
      f.add(where.of<T>("all_reduce of 1024, 1024 u16, 2^-15, 2^-14") + ": got " + show(got) +
            ", the float32 sum in member order rounded once is 1024");
  }
}

}  // namespace

std::string_view to_string(Family family) {
  constexpr std::string_view names[] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                                        "broadcast",  "send_recv",      "barrier"};
  return names[static_cast<int>(family)];
}

std::vector<SuiteComm> suite_communicators(int64_t rank, int64_t world_size) {
  std::vector<SuiteComm> out;
  // Every spec partitions (part of) the world, so members of one group agree on whether it
  // was listed before: skipping repeats keeps the ranks' call sequences matched.
  auto add = [&](std::string name, std::vector<int64_t> group) {
    if (std::find(group.begin(), group.end(), rank) == group.end()) return;
    for (const SuiteComm& s : out)
      if (s.world_ranks == group) return;
    out.push_back({std::move(name), std::move(group)});
  };
  std::vector<int64_t> all(world_size);
  for (int64_t i = 0; i < world_size; ++i) all[i] = i;
  add("world", all);
  add("world reversed", {all.rbegin(), all.rend()});
  if (world_size >= 2) {
    std::vector<int64_t> even;
    for (int64_t i = 0; i < world_size; i += 2) even.push_back(i);
    add("even ranks", even);
  }
  auto add_mesh = [&](spsd::Shape mesh, std::vector<std::vector<int64_t>> axes_list) {
    spsd::Placement p("cpu", all, mesh);
    for (const auto& axes : axes_list)
      add(mesh.to_string() + " mesh axes " + list(axes), spsd::mesh_group(p, rank, axes));
  };
  for (int64_t a = 2; a <= world_size / 2; ++a)
    if (world_size % a == 0) add_mesh(spsd::Shape{a, world_size / a}, {{0}, {1}});
  if (world_size == 8) add_mesh(spsd::Shape{2, 2, 2}, {{0}, {1}, {2}, {0, 2}});
  return out;
}

void run_half_reduction_suite(Failures& failures) {
  const int64_t rank = spsd::rank();
  for (const SuiteComm& sc : suite_communicators(rank, spsd::world_size())) {
    Communicator& c = spsd::communicator(sc.world_ranks);
    const Where where{sc.name + " " + c.to_string() + ", world rank " + std::to_string(rank) + ", " +
                      std::string(spsd::to_string(spsd::half_reduction()))};
    half_reduction_cases<spsd::bfloat16>(c, where, failures);
    half_reduction_cases<spsd::float16>(c, where, failures);
  }
}

void run_collective_suite(Family family, Failures& failures) {
  const int64_t rank = spsd::rank();
  for (const SuiteComm& sc : suite_communicators(rank, spsd::world_size())) {
    Communicator& c = sc.name == "world" ? spsd::world_communicator() : spsd::communicator(sc.world_ranks);
    Where where{sc.name + " " + c.to_string() + ", world rank " + std::to_string(rank)};
    // The communicator must be the one asked for, cached, with this rank at its position.
    const int64_t position = std::find(sc.world_ranks.begin(), sc.world_ranks.end(), rank) - sc.world_ranks.begin();
    if (c.world_ranks() != sc.world_ranks || c.rank() != position || &c != &spsd::communicator(sc.world_ranks))
      failures.add(where.comm + ": asked for world ranks " + list(sc.world_ranks) + " at position " +
                   std::to_string(position));
    if (family == Family::kBarrier) {
      barrier_case(c, where, failures);
      continue;
    }
    for_each_type([&]<class T>() {
      switch (family) {
        case Family::kAllReduce: all_reduce_cases<T>(c, where, failures); break;
        case Family::kReduceScatter: reduce_scatter_cases<T>(c, where, failures); break;
        case Family::kAllGather: all_gather_cases<T>(c, where, failures); break;
        case Family::kAllToAll: all_to_all_cases<T>(c, where, failures); break;
        case Family::kBroadcast: broadcast_cases<T>(c, where, failures); break;
        case Family::kSendRecv: send_recv_cases<T>(c, where, failures); break;
        case Family::kBarrier: break;
      }
    });
  }
}

}  // namespace spsd_test
