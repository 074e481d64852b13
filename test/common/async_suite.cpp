#include "async_suite.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <sstream>
#include <type_traits>
#include <variant>

namespace spsd_test {

using namespace spsd;

void AsyncSummary::merge(const AsyncSummary& o) {
  programs += o.programs;
  steps += o.steps;
  reads += o.reads;
  read_bytes += o.read_bytes;
  queued += o.queued;
  inline_run += o.inline_run;
  async_s += o.async_s;
  sync_s += o.sync_s;
}

std::string AsyncSummary::to_string() const {
  std::ostringstream s;
  s.precision(3);
  s << programs << " programs, " << steps << " steps, " << reads << " host reads (" << read_bytes
    << " B) compared; comm stream (async runs): " << queued << " queued, " << inline_run << " inline; "
    << async_s << " s async, " << sync_s << " s sync";
  return s.str();
}

namespace {

// Tensors stay small: thousands of programs run in well under a minute.
constexpr int64_t kMaxNumel = 4096;

// The set_inline_bytes() of the asynchronous runs, drawn uniformly.
const std::vector<int64_t> kInlineChoices = {0, 0, 0, 0, 64, 256, 1024, kDefaultInlineBytes, kDefaultInlineBytes,
                                             int64_t{1} << 20};

enum class DT { kF32, kF64, kI64 };

const char* dt_name(DT d) { return d == DT::kF32 ? "float" : d == DT::kF64 ? "double" : "int64"; }

template <class T>
constexpr DT dt_of() {
  if constexpr (std::is_same_v<T, float>) return DT::kF32;
  else if constexpr (std::is_same_v<T, double>) return DT::kF64;
  else return DT::kI64;
}

enum class Op {
  kCreate,         // out = factory(shape, placement, sbp)
  kBinary,         // out = a (+ - *) b, numpy broadcasting
  kAxpy,           // out = a * s1 + s2, or s2 - a * s1
  kUnary,          // out = tanh / relu / neg (a)
  kMatmul,         // out = matmul(a, b)
  kReduce,         // out = sum / max (a, {axis}, keepdim)
  kSoftmax,        // out = softmax(a, axis)
  kToGlobal,       // out = a.to_global(placement, sbp) (out -1: result dropped at once); maybe drop a
  kCopy,           // a.copy_(b)
  kSgd,            // a.copy_(a - b * s1), an optimizer step
  kDrop,           // erase a
  kReadLocal,      // host read of a's local piece
  kReadFull,       // host read of a.full()
  kSync,           // synchronize()
  kRewrap,         // out = to_global(a.to_local(), a's layout, a.shape())
  kHostAllReduce,  // all_reduce on the world communicator of a digest of this rank's reads so far
  kInlineBytes,    // set_inline_bytes(bytes) (asynchronous run only)
  kToggleSync,     // set_synchronous(!synchronous()) (asynchronous run only)
};

enum Factory { kRandn, kRand, kFull, kArange, kFromHost, kOnes };
const char* const kFactoryNames[] = {"randn", "rand", "full", "arange", "from_host", "ones"};
const char* const kBinaryNames[] = {"add", "sub", "mul"};
const char* const kUnaryNames[] = {"tanh", "relu", "neg"};
const char* const kReduceNames[] = {"sum", "max"};

struct Step {
  Op op;
  DT dt = DT::kF32;  // of the tensors the step touches
  int out = -1, a = -1, b = -1;
  int variant = 0;
  Shape shape;           // kCreate
  int placement = -1;    // kCreate, kToGlobal
  std::vector<Sbp> sbp;  // kCreate, kToGlobal
  int64_t axis = 0;      // kReduce, kSoftmax
  bool keepdim = false;  // kReduce
  double s1 = 0, s2 = 0;
  uint64_t seed = 0;         // kCreate
  bool drop_source = false;  // kToGlobal
  int64_t bytes = 0;         // kInlineBytes
};

struct Program {
  uint64_t seed = 0;
  int64_t world = 1;
  int64_t inline_bytes = kDefaultInlineBytes;
  std::vector<Placement> placements;
  std::vector<Step> steps;
};

std::string sbp_text(const std::vector<Sbp>& s) { return NdSbp(s).to_string(); }

std::string scalar_text(DT dt, double v) {
  std::ostringstream s;
  if (dt == DT::kI64) s << static_cast<int64_t>(v);
  else s << v;
  return s.str();
}

std::string step_text(const Program& p, const Step& s) {
  auto t = [](int id) { return "t" + std::to_string(id); };
  std::ostringstream o;
  switch (s.op) {
    case Op::kCreate:
      o << t(s.out) << " = " << kFactoryNames[s.variant] << "<" << dt_name(s.dt) << ">(" << s.shape.to_string();
      if (s.variant == kFull) o << ", " << scalar_text(s.dt, s.s1);
      if (s.variant == kRandn || s.variant == kRand || s.variant == kFromHost) o << ", seed " << s.seed;
      o << ", " << p.placements[s.placement].to_string() << ", " << sbp_text(s.sbp) << ")";
      break;
    case Op::kBinary: o << t(s.out) << " = " << kBinaryNames[s.variant] << "(" << t(s.a) << ", " << t(s.b) << ")"; break;
    case Op::kAxpy:
      if (s.variant == 0)
        o << t(s.out) << " = " << t(s.a) << " * " << scalar_text(s.dt, s.s1) << " + " << scalar_text(s.dt, s.s2);
      else o << t(s.out) << " = " << scalar_text(s.dt, s.s2) << " - " << t(s.a) << " * " << scalar_text(s.dt, s.s1);
      break;
    case Op::kUnary: o << t(s.out) << " = " << kUnaryNames[s.variant] << "(" << t(s.a) << ")"; break;
    case Op::kMatmul: o << t(s.out) << " = matmul(" << t(s.a) << ", " << t(s.b) << ")"; break;
    case Op::kReduce:
      o << t(s.out) << " = " << kReduceNames[s.variant] << "(" << t(s.a) << ", {" << s.axis << "}, keepdim "
        << (s.keepdim ? "true" : "false") << ")";
      break;
    case Op::kSoftmax: o << t(s.out) << " = softmax(" << t(s.a) << ", " << s.axis << ")"; break;
    case Op::kToGlobal:
      o << (s.out >= 0 ? t(s.out) : std::string("(dropped)")) << " = " << t(s.a) << ".to_global("
        << p.placements[s.placement].to_string() << ", " << sbp_text(s.sbp) << ")";
      if (s.drop_source) o << "; drop " << t(s.a);
      break;
    case Op::kCopy: o << t(s.a) << ".copy_(" << t(s.b) << ")"; break;
    case Op::kSgd: o << t(s.a) << ".copy_(" << t(s.a) << " - " << t(s.b) << " * " << scalar_text(s.dt, s.s1) << ")"; break;
    case Op::kDrop: o << "drop " << t(s.a); break;
    case Op::kReadLocal: o << "read " << t(s.a) << ".to_local().to_vector()"; break;
    case Op::kReadFull: o << "read " << t(s.a) << ".full().to_vector()"; break;
    case Op::kSync: o << "synchronize()"; break;
    case Op::kRewrap: o << t(s.out) << " = to_global(" << t(s.a) << ".to_local(), its layout and shape)"; break;
    case Op::kHostAllReduce: o << "world_communicator().all_reduce(digest of this rank's reads so far)"; break;
    case Op::kInlineBytes: o << "set_inline_bytes(" << s.bytes << ")  (asynchronous run only)"; break;
    case Op::kToggleSync: o << "set_synchronous(!synchronous())  (asynchronous run only)"; break;
  }
  if (s.op != Op::kSync && s.op != Op::kHostAllReduce && s.op != Op::kInlineBytes && s.op != Op::kToggleSync &&
      s.op != Op::kCreate)
    o << "  [" << dt_name(s.dt) << "]";
  return o.str();
}

std::string program_text(const Program& p) {
  std::ostringstream o;
  o << "program seed " << p.seed << " on " << p.world << " rank(s), " << p.steps.size()
    << " steps, set_inline_bytes(" << p.inline_bytes << ") in the asynchronous run (alone: SPSD_ASYNC_SEED="
    << p.seed << " SPSD_ASYNC_PROGRAMS=1):\n";
  for (size_t i = 0; i < p.steps.size(); ++i) o << "  " << i << ": " << step_text(p, p.steps[i]) << "\n";
  return o.str();
}

// The placements a program on `world` ranks draws from: the world (index 0), 1-d and 2-d meshes,
// reordered ranks and sub-placements of fewer ranks.
std::vector<Placement> placements_of(int64_t world) {
  auto line = [](std::vector<int64_t> r) { return Placement("cpu", std::move(r)); };
  auto grid = [](std::vector<int64_t> r, int64_t rows) {
    const int64_t cols = static_cast<int64_t>(r.size()) / rows;
    return Placement("cpu", std::move(r), Shape{rows, cols});
  };
  std::vector<int64_t> all(world);
  std::iota(all.begin(), all.end(), 0);
  std::vector<Placement> p = {line(all)};
  switch (world) {
    case 1: p.push_back(grid({0}, 1)); break;
    case 2:
      p.insert(p.end(), {line({1, 0}), line({0}), line({1}), grid({0, 1}, 1), grid({0, 1}, 2)});
      break;
    case 3:
      p.insert(p.end(), {line({2, 0, 1}), line({0, 1}), line({1, 2}), line({2}), grid({0, 1, 2}, 1), grid({0, 2}, 2)});
      break;
    case 4:
      p.insert(p.end(), {grid({0, 1, 2, 3}, 2), grid({0, 2, 1, 3}, 2), line({3, 2, 1, 0}), line({0, 1}), line({2, 3}),
                         line({1, 2, 3}), line({3}), grid({1, 2}, 2)});
      break;
    default: {
      std::vector<int64_t> reversed(all.rbegin(), all.rend()), half(all.begin(), all.begin() + world / 2);
      p.insert(p.end(), {line(reversed), line(half), line({world - 1})});
      if (world % 2 == 0) p.push_back(grid(all, 2));
    }
  }
  return p;
}

int64_t numel_of(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// numpy broadcasting; false when the shapes do not broadcast.
bool broadcast(const Shape& a, const Shape& b, Shape* out) {
  const int64_t n = std::max(a.ndim(), b.ndim());
  std::vector<int64_t> d(n);
  for (int64_t i = 1; i <= n; ++i) {
    const int64_t x = i <= a.ndim() ? a[a.ndim() - i] : 1, y = i <= b.ndim() ? b[b.ndim() - i] : 1;
    if (x != y && x != 1 && y != 1) return false;
    d[n - i] = x == 1 ? y : x;
  }
  if (out) *out = Shape(d);
  return true;
}

// Writes the program of a seed. It tracks dtype, shape and placement of every live tensor (the
// layouts ops choose do not matter to it) and only writes valid steps; it never looks at a rank.
class Generator {
 public:
  Generator(uint64_t seed, int64_t world) : state_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {
    p_.seed = seed;
    p_.world = world;
    p_.placements = placements_of(world);
  }

  Program write(int steps) {
    // 40% of the programs force every communication with traffic onto the stream; thresholds
    // among the sizes the programs move make ranks of one collective decide differently.
    p_.inline_bytes = one_of(kInlineChoices);
    const int initial = 3 + pick(3);
    for (int i = 0; i < initial; ++i) create_random();
    while (static_cast<int>(p_.steps.size()) < steps) draw();
    return std::move(p_);
  }

 private:
  struct Meta {
    DT dt;
    Shape shape;
    int placement;
  };

  uint64_t next() {  // splitmix64: the same sequence with every standard library
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int pick(size_t n) { return static_cast<int>(next() % n); }
  bool chance(int percent) { return pick(100) < percent; }
  template <class V>
  const typename V::value_type& one_of(const V& v) {
    return v[pick(v.size())];
  }

  DT random_dt() {
    const int r = pick(100);
    return r < 70 ? DT::kF32 : r < 85 ? DT::kF64 : DT::kI64;
  }
  int64_t random_dim() {
    const int r = pick(100);
    if (r < 6) return 0;
    if (r < 22) return 1;
    if (r < 88) return 2 + pick(8);
    return 10 + pick(55);
  }
  static void cap(std::vector<int64_t>& d) {
    while (numel_of(d) > kMaxNumel) {
      auto it = std::max_element(d.begin(), d.end());
      *it = (*it + 1) / 2;
    }
  }
  Shape random_shape(int ndim) {
    std::vector<int64_t> d(ndim);
    for (int64_t& x : d) x = random_dim();
    cap(d);
    return Shape(d);
  }
  int random_ndim() {
    const int r = pick(100);
    return r < 5 ? 0 : r < 35 ? 1 : r < 85 ? 2 : 3;
  }
  int random_placement() {
    if (chance(30)) return 0;                      // the world
    if (p_.world == 4 && chance(30)) return 1;     // the 2x2 mesh
    return pick(p_.placements.size());
  }
  std::vector<Sbp> random_sbp(int placement, int64_t ndim) {
    std::vector<Sbp> s;
    for (int64_t a = 0; a < p_.placements[placement].mesh().ndim(); ++a) {
      const int r = pick(10);
      if (r < 4 && ndim > 0) s.push_back(sbp::split(pick(ndim)));
      else if (r < 7) s.push_back(sbp::broadcast);
      else if (r == 7) s.push_back(sbp::partial_sum);
      else if (r == 8) s.push_back(sbp::partial_max);
      else s.push_back(sbp::partial_min);
    }
    return s;
  }
  // A shape that broadcasts into s (a suffix of it with some axes 1), now and then with a new
  // leading axis (the result then grows).
  Shape partner_of(const Shape& s, bool may_grow) {
    const int64_t n = s.ndim();
    const int64_t k = chance(70) ? n : pick(n + 1);
    std::vector<int64_t> d(s.dims().end() - k, s.dims().end());
    for (int64_t& x : d)
      if (chance(25)) x = 1;
    if (may_grow && k == n && n < 3 && chance(10)) {
      const int64_t lead = 1 + pick(4);
      if (lead * s.numel() <= kMaxNumel) d.insert(d.begin(), lead);
    }
    return Shape(d);
  }
  double float_scalar() {
    static const double v[] = {0.5, -1.25, 2.0, 0.1, -3.0, 1e-3};
    return v[pick(6)];
  }
  double int_scalar() {
    static const double v[] = {2, -1, 3, 1, -7};
    return v[pick(5)];
  }
  double scalar(DT dt) { return dt == DT::kI64 ? int_scalar() : float_scalar(); }

  int emit_new(Step s, Meta m) {
    s.out = next_id_++;
    live_.emplace(s.out, std::move(m));
    p_.steps.push_back(std::move(s));
    return p_.steps.back().out;
  }
  const Meta& meta(int id) const { return live_.at(id); }
  // A step of `op` on tensor `a`, in a's dtype.
  static Step step_on(Op op, int a, const Meta& m) {
    Step s{op};
    s.dt = m.dt;
    s.a = a;
    return s;
  }
  int random_live() {
    auto it = live_.begin();
    std::advance(it, pick(live_.size()));
    return it->first;
  }
  template <class Pred>
  std::vector<int> live_where(Pred pred) const {
    std::vector<int> ids;
    for (const auto& [id, m] : live_)
      if (pred(m)) ids.push_back(id);
    return ids;
  }
  template <class Pred>
  int random_live_where(Pred pred) {
    std::vector<int> ids = live_where(pred);
    return ids.empty() ? -1 : one_of(ids);
  }

  int create(DT dt, const Shape& shape, int placement) {
    Step s{Op::kCreate};
    s.dt = dt;
    s.shape = shape;
    s.placement = placement;
    s.sbp = random_sbp(placement, shape.ndim());
    s.seed = next() % 100000;
    const int r = pick(100);
    if (dt == DT::kI64) {
      s.variant = r < 45 ? kFromHost : r < 65 ? kFull : r < 85 ? kArange : kOnes;
    } else {
      s.variant = r < 40 ? kRandn : r < 55 ? kRand : r < 65 ? kFull : r < 75 ? kArange : kFromHost;
    }
    if (s.variant == kArange && shape.ndim() != 1) s.variant = kFromHost;
    if (s.variant == kFull) s.s1 = scalar(dt);
    return emit_new(std::move(s), {dt, shape, placement});
  }
  int create_random() { return create(random_dt(), random_shape(random_ndim()), random_placement()); }

  void draw() {
    if (live_.size() < 2) {
      create_random();
      return;
    }
    if (live_.size() > 12 && chance(50)) {
      drop(random_live());
      return;
    }
    static const int weights[] = {14, 5, 4, 8, 6, 4, 16, 6, 8, 4, 6, 6, 3, 3, 2, 5, 1, 1};
    int r = pick(std::accumulate(std::begin(weights), std::end(weights), 0)), k = 0;
    while (r >= weights[k]) r -= weights[k++];
    switch (k) {
      case 0: return binary();
      case 1: return axpy();
      case 2: return unary();
      case 3: return matmul();
      case 4: return reduce();
      case 5: return softmax();
      case 6: return to_global();
      case 7: return copy();
      case 8: return sgd(random_live());
      case 9: return drop(random_live());
      case 10: return read(Op::kReadLocal);
      case 11: return read(Op::kReadFull);
      case 12: return bare(Op::kSync);
      case 13: return rewrap();
      case 14: return bare(Op::kHostAllReduce);
      case 15: create_random(); return;
      case 16: {
        Step s{Op::kInlineBytes};
        s.bytes = one_of(kInlineChoices);
        p_.steps.push_back(s);
        return;
      }
      default: return bare(Op::kToggleSync);
    }
  }

  void bare(Op op) { p_.steps.push_back(Step{op}); }

  void binary() {
    int a = random_live();
    const Meta ma = meta(a);
    auto fits = [&](const Meta& m) {
      Shape out;
      return m.dt == ma.dt && m.placement == ma.placement && broadcast(ma.shape, m.shape, &out) &&
             out.numel() <= kMaxNumel;
    };
    std::vector<int> c = live_where(fits);
    int b = !c.empty() && chance(60) ? one_of(c) : create(ma.dt, partner_of(ma.shape, true), ma.placement);
    if (chance(50)) std::swap(a, b);
    Shape out;
    broadcast(meta(a).shape, meta(b).shape, &out);
    Step s = step_on(Op::kBinary, a, ma);
    s.b = b;
    s.variant = pick(3);
    emit_new(std::move(s), {ma.dt, out, ma.placement});
  }

  void axpy() {
    const int a = random_live();
    const Meta m = meta(a);
    Step s = step_on(Op::kAxpy, a, m);
    s.variant = pick(2);
    s.s1 = scalar(m.dt);
    s.s2 = scalar(m.dt);
    emit_new(std::move(s), m);
  }

  void unary() {
    const int a = random_live();
    const Meta m = meta(a);
    Step s = step_on(Op::kUnary, a, m);
    s.variant = m.dt == DT::kI64 ? 1 + pick(2) : pick(3);
    emit_new(std::move(s), m);
  }

  void matmul() {
    int a = random_live_where([](const Meta& m) { return m.shape.ndim() >= 2; });
    if (a < 0) a = create(random_dt(), random_shape(2 + (chance(20) ? 1 : 0)), random_placement());
    const Meta ma = meta(a);
    const int64_t na = ma.shape.ndim(), k = ma.shape[na - 1], m = ma.shape[na - 2];
    const int64_t batch = na == 3 ? ma.shape[0] : 1;
    auto out_of = [&](const Shape& b) {
      std::vector<int64_t> d;
      const int64_t bb = b.ndim() == 3 ? b[0] : 1;
      if (na == 3 || b.ndim() == 3) d.push_back(batch == 1 ? bb : batch);  // numpy: 0 with 1 is 0
      d.insert(d.end(), {m, b[b.ndim() - 1]});
      return Shape(d);
    };
    auto fits = [&](const Meta& c) {
      const int64_t nb = c.shape.ndim();
      if (c.dt != ma.dt || c.placement != ma.placement || nb < 2 || nb > 3 || c.shape[nb - 2] != k) return false;
      if (nb == 3 && na == 3 && c.shape[0] != batch && c.shape[0] != 1 && batch != 1) return false;
      return out_of(c.shape).numel() <= kMaxNumel;
    };
    std::vector<int> c = live_where(fits);
    int b;
    if (!c.empty() && chance(50)) {
      b = one_of(c);
    } else {
      std::vector<int64_t> d = {k, random_dim()};
      if (chance(25)) d.insert(d.begin(), na == 3 ? (chance(50) ? batch : 1) : 1 + pick(3));
      while (out_of(Shape(d)).numel() > kMaxNumel || numel_of(d) > kMaxNumel) d.back() /= 2;
      b = create(ma.dt, Shape(d), ma.placement);
    }
    Step s = step_on(Op::kMatmul, a, ma);
    s.b = b;
    emit_new(std::move(s), {ma.dt, out_of(meta(b).shape), ma.placement});
  }

  void reduce() {
    int a = random_live_where([](const Meta& m) { return m.shape.ndim() >= 1; });
    if (a < 0) a = create(random_dt(), random_shape(1 + pick(3)), random_placement());
    const Meta m = meta(a);
    Step s = step_on(Op::kReduce, a, m);
    s.axis = pick(m.shape.ndim());
    s.keepdim = chance(30);
    s.variant = m.shape[s.axis] > 0 && chance(30) ? 1 : 0;  // max of nothing has no value
    std::vector<int64_t> d = m.shape.dims();
    if (s.keepdim) d[s.axis] = 1;
    else d.erase(d.begin() + s.axis);
    emit_new(std::move(s), {m.dt, Shape(d), m.placement});
  }

  void softmax() {
    int a = random_live_where([](const Meta& m) { return m.dt != DT::kI64 && m.shape.ndim() >= 1; });
    if (a < 0) a = create(chance(80) ? DT::kF32 : DT::kF64, random_shape(1 + pick(3)), random_placement());
    const Meta m = meta(a);
    Step s = step_on(Op::kSoftmax, a, m);
    s.axis = pick(m.shape.ndim());
    emit_new(std::move(s), m);
  }

  void to_global() {
    const int a = random_live();
    const Meta m = meta(a);
    Step s = step_on(Op::kToGlobal, a, m);
    s.placement = chance(60) ? m.placement : random_placement();
    s.sbp = random_sbp(s.placement, m.shape.ndim());
    s.drop_source = chance(30);
    const bool keep = chance(80);
    if (s.drop_source) live_.erase(a);
    const int placement = s.placement;
    const int out = keep ? emit_new(std::move(s), {m.dt, m.shape, placement}) : -1;
    if (!keep) p_.steps.push_back(std::move(s));
    // Write after read: the source updated in place while the boxing may still read it.
    if (!p_.steps.back().drop_source && chance(30)) chance(50) ? sgd(a) : copy_into(a);
    // Write after write: the result overwritten while the boxing may still write it.
    if (out >= 0 && chance(15)) chance(50) ? sgd(out) : copy_into(out);
  }

  void copy() { copy_into(random_live()); }

  void copy_into(int p) {
    const Meta m = meta(p);
    std::vector<int> c = live_where([&](const Meta& x) { return x.dt == m.dt && x.shape == m.shape; });
    c.erase(std::remove(c.begin(), c.end(), p), c.end());
    const int src = !c.empty() && chance(60) ? one_of(c) : create(m.dt, m.shape, random_placement());
    Step s = step_on(Op::kCopy, p, m);
    s.b = src;
    p_.steps.push_back(std::move(s));
  }

  void sgd(int p) {
    const Meta m = meta(p);
    auto fits = [&](const Meta& x) {
      Shape out;
      return x.dt == m.dt && x.placement == m.placement && broadcast(m.shape, x.shape, &out) && out == m.shape;
    };
    std::vector<int> c = live_where(fits);
    const int g = !c.empty() && chance(60) ? one_of(c) : create(m.dt, partner_of(m.shape, false), m.placement);
    Step s = step_on(Op::kSgd, p, m);
    s.b = g;
    static const double lr[] = {0.1, 0.01, 0.5};
    s.s1 = m.dt == DT::kI64 ? 1 + pick(3) : lr[pick(3)];
    p_.steps.push_back(std::move(s));
  }

  void drop(int a) {
    Step s = step_on(Op::kDrop, a, meta(a));
    live_.erase(a);
    p_.steps.push_back(std::move(s));
  }

  void read(Op op) {
    Step s{op};
    s.a = random_live();
    s.dt = meta(s.a).dt;
    p_.steps.push_back(std::move(s));
  }

  void rewrap() {
    const int a = random_live();
    const Meta m = meta(a);
    Step s = step_on(Op::kRewrap, a, m);
    emit_new(std::move(s), m);
  }

  uint64_t state_;
  Program p_;
  std::map<int, Meta> live_;
  int next_id_ = 0;
};

Program generate(uint64_t seed, int64_t world, int steps) { return Generator(seed, world).write(steps); }

// ---------------------------------------------------------------------------------------------
// Running a program on this rank.

struct Read {
  std::string label;  // "step 12" or "final full t7"
  DT dt;
  std::string bytes;
};

using AnyTensor = std::variant<GlobalTensor<float>, GlobalTensor<double>, GlobalTensor<int64_t>>;

uint64_t fnv(const std::string& bytes, uint64_t h) {
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

class Runner {
 public:
  Runner(const Program& p, bool synchronous_run) : p_(p), sync_run_(synchronous_run) {}

  std::vector<Read> run() {
    set_synchronous(sync_run_);
    set_inline_bytes(p_.inline_bytes);
    for (size_t i = 0; i < p_.steps.size(); ++i) step(i, p_.steps[i]);
    for (const auto& [id, t] : pool_)
      std::visit([&, id = id](const auto& g) {
        record("final full t" + std::to_string(id), g.full().to_vector());
        record("final local piece of t" + std::to_string(id), g.to_local().to_vector());
      }, t);
    pool_.clear();
    synchronize();
    return std::move(reads_);
  }

 private:
  template <class T>
  GlobalTensor<T>& get(int id) {
    return std::get<GlobalTensor<T>>(pool_.at(id));
  }
  template <class T>
  void put(int id, GlobalTensor<T> t) {
    pool_.insert_or_assign(id, AnyTensor(std::move(t)));
  }
  template <class T>
  void record(std::string label, const std::vector<T>& v) {
    std::string bytes(v.size() * sizeof(T), '\0');
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
    digest_ = fnv(bytes, digest_);
    reads_.push_back({std::move(label), dt_of<T>(), std::move(bytes)});
  }

  void step(size_t i, const Step& s) {
    switch (s.op) {
      case Op::kSync: synchronize(); return;
      case Op::kHostAllReduce: {
        const int64_t mine = static_cast<int64_t>(digest_ >> 24);  // 40 bits: the sum cannot overflow
        int64_t sum = 0;
        world_communicator().all_reduce(&mine, &sum, 1, DType::kInt64, ReduceOp::kSum);
        record("step " + std::to_string(i), std::vector<int64_t>{sum});
        return;
      }
      case Op::kInlineBytes:
        if (!sync_run_) set_inline_bytes(s.bytes);
        return;
      case Op::kToggleSync:
        if (!sync_run_) set_synchronous(!synchronous());
        return;
      default: break;
    }
    switch (s.dt) {
      case DT::kF32: return typed<float>(i, s);
      case DT::kF64: return typed<double>(i, s);
      case DT::kI64: return typed<int64_t>(i, s);
    }
  }

  template <class T>
  GlobalTensor<T> make(const Step& s) {
    const Placement& pl = p_.placements[s.placement];
    const NdSbp nd(s.sbp);
    switch (s.variant) {
      case kRandn:
      case kRand:
        if constexpr (std::is_floating_point_v<T>)
          return s.variant == kRandn ? randn<T>(s.shape, pl, nd, s.seed) : rand<T>(s.shape, pl, nd, s.seed);
        break;
      case kFull: return full<T>(s.shape, static_cast<T>(s.s1), pl, nd);
      case kArange: return arange<T>(s.shape[0], pl, nd);
      case kOnes: return ones<T>(s.shape, pl, nd);
      case kFromHost: {
        std::vector<T> v(static_cast<size_t>(s.shape.numel()));
        uint64_t h = s.seed * 0x9E3779B97F4A7C15ull + 1;
        for (T& x : v) {
          h = h * 6364136223846793005ull + 1442695040888963407ull;
          const int64_t r = static_cast<int64_t>((h >> 33) % 2001) - 1000;
          if constexpr (std::is_floating_point_v<T>) x = static_cast<T>(r) / T(256);
          else x = r % 10;
        }
        return from_host(Tensor<T>::from_vector(s.shape, std::move(v)), pl, nd);
      }
    }
    throw Error("async suite: factory " + std::string(kFactoryNames[s.variant]) + " for " + dt_name(s.dt));
  }

  template <class T>
  void typed(size_t i, const Step& s) {
    const T s1 = static_cast<T>(s.s1), s2 = static_cast<T>(s.s2);
    switch (s.op) {
      case Op::kCreate: return put(s.out, make<T>(s));
      case Op::kBinary: {
        const GlobalTensor<T>&a = get<T>(s.a), &b = get<T>(s.b);
        return put(s.out, s.variant == 0 ? a + b : s.variant == 1 ? a - b : a * b);
      }
      case Op::kAxpy: {
        const GlobalTensor<T>& a = get<T>(s.a);
        return put(s.out, s.variant == 0 ? a * s1 + s2 : s2 - a * s1);
      }
      case Op::kUnary: {
        const GlobalTensor<T>& a = get<T>(s.a);
        if (s.variant == 1) return put(s.out, relu(a));
        if (s.variant == 2) return put(s.out, neg(a));
        if constexpr (std::is_floating_point_v<T>) return put(s.out, tanh(a));
        break;
      }
      case Op::kMatmul: return put(s.out, matmul(get<T>(s.a), get<T>(s.b)));
      case Op::kReduce: {
        const GlobalTensor<T>& a = get<T>(s.a);
        return put(s.out, s.variant == 0 ? sum(a, {s.axis}, s.keepdim) : max(a, {s.axis}, s.keepdim));
      }
      case Op::kSoftmax:
        if constexpr (std::is_floating_point_v<T>) return put(s.out, softmax(get<T>(s.a), s.axis));
        break;
      case Op::kToGlobal: {
        GlobalTensor<T> y = get<T>(s.a).to_global(p_.placements[s.placement], NdSbp(s.sbp));
        if (s.drop_source) pool_.erase(s.a);  // the only reference to the source goes while the boxing may run
        if (s.out >= 0) put(s.out, std::move(y));
        return;  // else the result goes too
      }
      case Op::kCopy: return get<T>(s.a).copy_(get<T>(s.b));
      case Op::kSgd: {
        GlobalTensor<T>& p = get<T>(s.a);
        return p.copy_(p - get<T>(s.b) * s1);
      }
      case Op::kDrop: pool_.erase(s.a); return;
      case Op::kReadLocal: return record("step " + std::to_string(i), get<T>(s.a).to_local().to_vector());
      case Op::kReadFull: return record("step " + std::to_string(i), get<T>(s.a).full().to_vector());
      case Op::kRewrap: {
        const GlobalTensor<T>& a = get<T>(s.a);
        return put(s.out, spsd::to_global(a.to_local(), a.placement(), a.nd_sbp(), a.shape()));
      }
      default: break;
    }
    throw Error("async suite: step " + std::to_string(i) + " (" + step_text(p_, s) + ") has no " + dt_name(s.dt) +
                " form");
  }

  const Program& p_;
  const bool sync_run_;
  std::map<int, AnyTensor> pool_;
  std::vector<Read> reads_;
  uint64_t digest_ = 0xCBF29CE484222325ull;
};

template <class T>
std::string element_text(const std::string& bytes, size_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  std::ostringstream s;
  s.precision(17);
  s << v;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  s << " (bits 0x" << std::hex << bits << ")";
  return s.str();
}

std::string element_text(DT dt, const std::string& bytes, size_t i) {
  switch (dt) {
    case DT::kF32: return element_text<float>(bytes, i);
    case DT::kF64: return element_text<double>(bytes, i);
    default: return element_text<int64_t>(bytes, i);
  }
}

size_t element_size(DT dt) { return dt == DT::kF32 ? 4 : 8; }

// The first difference between the two runs' reads, or "".
std::string first_difference(const Program& p, const std::vector<Read>& async, const std::vector<Read>& sync) {
  const size_t n = std::min(async.size(), sync.size());
  for (size_t r = 0; r < n; ++r) {
    const Read &a = async[r], &s = sync[r];
    std::string where = "read #" + std::to_string(r) + " (" + a.label;
    if (a.label.rfind("step ", 0) == 0) where += ": " + step_text(p, p.steps[std::stoul(a.label.substr(5))]);
    where += ")";
    if (a.label != s.label) return where + ": the synchronous run's read #" + std::to_string(r) + " is " + s.label;
    if (a.bytes.size() != s.bytes.size())
      return where + ": " + std::to_string(a.bytes.size()) + " bytes asynchronously, " +
             std::to_string(s.bytes.size()) + " synchronously";
    if (a.bytes == s.bytes) continue;  // bit-identical (NaN included)
    const size_t size = element_size(a.dt), count = a.bytes.size() / size;
    size_t first = count, differing = 0;
    for (size_t i = 0; i < count; ++i)
      if (std::memcmp(a.bytes.data() + i * size, s.bytes.data() + i * size, size) != 0) {
        first = std::min(first, i);
        ++differing;
      }
    return where + ": " + std::to_string(differing) + " of " + std::to_string(count) + " elements differ; element " +
           std::to_string(first) + " is " + element_text(a.dt, a.bytes, first) + " asynchronously, " +
           element_text(a.dt, s.bytes, first) + " synchronously";
  }
  if (async.size() != sync.size())
    return std::to_string(async.size()) + " reads asynchronously, " + std::to_string(sync.size()) + " synchronously";
  return "";
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

std::string async_program_text(uint64_t seed, int64_t world_size, int steps) {
  return program_text(generate(seed, world_size, steps));
}

AsyncSummary check_async_programs(uint64_t first_seed, int count, int steps, Failures& failures) {
  AsyncSummary summary;
  const int64_t world = world_size(), me = rank();
  const bool was_synchronous = synchronous();
  const int64_t was_inline = inline_bytes();
  for (int n = 0; n < count; ++n) {
    const uint64_t seed = first_seed + static_cast<uint64_t>(n);
    const Program p = generate(seed, world, steps);
    const std::string who = "seed " + std::to_string(seed) + " on " + std::to_string(world) + " rank(s), rank " +
                            std::to_string(me);
    std::vector<Read> async_reads, sync_reads;
    bool in_async = false;
    try {
      // Alternate which mode runs first, so neither always finds the other's leftovers.
      for (int round = 0; round < 2; ++round) {
        in_async = (round == 0) == (seed % 2 == 0);
        reset_comm_stream_stats();
        const auto start = std::chrono::steady_clock::now();
        std::vector<Read> reads = Runner(p, !in_async).run();
        const CommStreamStats st = comm_stream_stats();
        if (in_async) {
          summary.async_s += seconds_since(start);
          summary.queued += st.queued;
          summary.inline_run += st.inline_run;
          async_reads = std::move(reads);
        } else {
          summary.sync_s += seconds_since(start);
          if (st.queued != 0)
            failures.add(who + ": the synchronous run queued " + std::to_string(st.queued) +
                         " instructions on the communication stream\n" + program_text(p));
          sync_reads = std::move(reads);
        }
      }
    } catch (const std::exception& e) {
      const std::string line = who + ": the " + (in_async ? "asynchronous" : "synchronous") + " run threw: " +
                               e.what() + "\n" + program_text(p);
      std::fprintf(stderr, "async suite: %s", line.c_str());
      failures.add(line);
      throw;
    }
    const std::string diff = first_difference(p, async_reads, sync_reads);
    if (!diff.empty()) failures.add(who + ": asynchronous and synchronous runs differ at " + diff + "\n" + program_text(p));
    ++summary.programs;
    summary.steps += static_cast<int64_t>(p.steps.size());
    summary.reads += static_cast<int64_t>(sync_reads.size());
    for (const Read& r : sync_reads) summary.read_bytes += static_cast<int64_t>(r.bytes.size());
  }
  set_synchronous(was_synchronous);
  set_inline_bytes(was_inline);
  return summary;
}

int async_program_count(int fallback) {
  const char* v = std::getenv("SPSD_ASYNC_PROGRAMS");
  if (v == nullptr || *v == '\0') return fallback;
  const long n = std::strtol(v, nullptr, 10);
  return n > 0 ? static_cast<int>(n) : fallback;
}

uint64_t async_first_seed(uint64_t fallback) {
  const char* v = std::getenv("SPSD_ASYNC_SEED");
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 10);
}

}  // namespace spsd_test
