#include "checkpoint_suite.hpp"

#include <filesystem>
#include <fstream>
#include <optional>

namespace spsd_test {

using namespace spsd;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kChunkBytes = 64 * 1024;  // docs/checkpoints.md

struct Reference {
  std::string name;
  DType dtype;
  Shape shape;
  std::optional<ReduceOp> partial = {};  // saved as (P(op), S(0)): the op over the rows of kReducedShape
};

// Saved as (S(0), S(1)) on the 2x2 mesh, except the partial ones: (P(sum|max), S(0)), the sums
// and maxima over the rows of an (8, 6) tensor. Uneven: 7 rows, 5 columns; i32's one column
// leaves half the ranks empty; big spans several checksum chunks per box.
const std::vector<Reference>& references() {
  static const std::vector<Reference> r = {
      {"big", DType::kFloat32, Shape{1024, 512}},
      {"bf16", DType::kBFloat16, Shape{7, 5}},
      {"bf16_psum", DType::kBFloat16, Shape{6}, ReduceOp::kSum},
      {"f16", DType::kFloat16, Shape{5, 3, 2}},
      {"f16_pmax", DType::kFloat16, Shape{6}, ReduceOp::kMax},
      {"f32", DType::kFloat32, Shape{7, 5}},
      {"f64", DType::kFloat64, Shape{5, 3, 2}},
      {"i32", DType::kInt32, Shape{3, 1}},
      {"i64", DType::kInt64, Shape{6, 4}},
      {"pmax", DType::kInt64, Shape{6}, ReduceOp::kMax},
      {"psum", DType::kInt64, Shape{6}, ReduceOp::kSum}};  // last in name order: the "flipped" damage hits it
  return r;
}
const Shape kReducedShape{8, 6};

// Deterministic values with every bit of the mantissa in use (thirds, rounded once) for floats.
template <class T>
std::vector<T> values(const std::string& name, const Shape& shape) {
  uint64_t seed = 0;
  for (char c : name) seed = seed * 131 + static_cast<unsigned char>(c);
  std::vector<T> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i) {
    const uint64_t h = i * 2654435761ull + seed * 40503ull;
    const int64_t k = static_cast<int64_t>(h % 2001) - 1000;
    if constexpr (is_half_v<T>) v[i] = T(static_cast<float>(k) / 3.0f);
    else if constexpr (std::is_floating_point_v<T>) v[i] = static_cast<T>(k) / T(3);
    else v[i] = static_cast<T>(static_cast<int64_t>(h % 200001) - 100000);
  }
  return v;
}

// a op b, computed as the communicator and the kernels do: in compute_t<T>, rounded once.
template <class T>
T combined(ReduceOp op, T a, T b) {
  using C = compute_t<T>;
  return op == ReduceOp::kSum ? static_cast<T>(static_cast<C>(a) + static_cast<C>(b)) : std::max(a, b);
}

// A partial reference is saved from explicit pieces: mesh position (a, b) of the 2x2 grid holds
// the op over rows 4a..4a+3 of kReducedShape's values, in columns 3b..3b+2 (the S(0) of mesh axis
// 1), each rounded once: the pieces a sum(src, {0}) of the (S(0), S(1)) tensor would leave.
template <class T>
std::vector<T> partial_piece(const Reference& r, int64_t a, int64_t b) {
  const std::vector<T> src = values<T>("reduced", kReducedShape);
  std::vector<T> piece(3);
  for (int64_t j = 0; j < 3; ++j) {
    compute_t<T> acc = src[4 * a * 6 + 3 * b + j];
    for (int64_t i = 4 * a + 1; i < 4 * a + 4; ++i) {
      const compute_t<T> x = src[i * 6 + 3 * b + j];
      acc = *r.partial == ReduceOp::kSum ? acc + x : std::max(acc, x);
    }
    piece[j] = static_cast<T>(acc);
  }
  return piece;
}

// The logical value of a reference tensor; a partial one's is its two pieces combined once (the
// save's all-reduce: for 16-bit sums the float32 sum rounded once).
template <class T>
std::vector<T> expected(const Reference& r) {
  if (!r.partial) return values<T>(r.name, r.shape);
  std::vector<T> out(6);
  for (int64_t j = 0; j < 6; ++j)
    out[j] = combined(*r.partial, partial_piece<T>(r, 0, j / 3)[j % 3], partial_piece<T>(r, 1, j / 3)[j % 3]);
  return out;
}

// The elements of box in a row-major tensor of this shape.
template <class T>
std::vector<T> piece(const std::vector<T>& whole, const Shape& shape, const Box& box) {
  std::vector<T> out;
  out.reserve(box.numel());
  if (box.empty()) return out;
  const std::vector<int64_t> strides = contiguous_strides(shape);
  std::vector<int64_t> idx(box.begin);
  for (int64_t n = 0; n < box.numel(); ++n) {
    int64_t g = 0;
    for (int64_t k = 0; k < shape.ndim(); ++k) g += idx[k] * strides[k];
    out.push_back(whole[g]);
    for (int64_t k = shape.ndim() - 1; k >= 0 && ++idx[k] == box.end[k]; --k) idx[k] = box.begin[k];
  }
  return out;
}

std::vector<int64_t> first_ranks(int64_t n) {
  std::vector<int64_t> r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = i;
  return r;
}

// Every NdSbp of S(0..ndim-1) and B per mesh axis, and P(sum) on mesh axis 0.
std::vector<NdSbp> layouts(int64_t ndim, int64_t mesh_ndim) {
  std::vector<std::vector<Sbp>> all = {{}};
  for (int64_t a = 0; a < mesh_ndim; ++a) {
    std::vector<Sbp> options = {sbp::broadcast};
    for (int64_t i = 0; i < ndim; ++i) options.push_back(sbp::split(i));
    if (a == 0) options.push_back(sbp::partial_sum);
    std::vector<std::vector<Sbp>> next;
    for (const std::vector<Sbp>& prefix : all)
      for (const Sbp& s : options) {
        next.push_back(prefix);
        next.back().push_back(s);
      }
    all = std::move(next);
  }
  std::vector<NdSbp> out;
  for (std::vector<Sbp>& axes : all) out.emplace_back(std::move(axes));
  return out;
}

// The 1-d mesh of the world and each 2-d mesh (a, world / a).
std::vector<Placement> placements(int64_t world) {
  std::vector<Placement> p = {Placement("cpu", first_ranks(world))};
  for (int64_t a = 1; a <= world; ++a)
    if (world % a == 0) p.emplace_back("cpu", first_ranks(world), Shape{a, world / a});
  return p;
}

template <class T>
void load_and_compare(Failures& failures, const std::string& dir, const Reference& r, const Placement& p,
                      const NdSbp& nd_sbp) {
  const std::string what = "load " + r.name + " as " + nd_sbp.to_string() + " on " + p.to_string() + " (rank " +
                           std::to_string(rank()) + ")";
  const GlobalTensor<T> t = load_checkpoint<T>(dir, r.name, p, nd_sbp);
  if (t.shape() != r.shape || !(t.nd_sbp() == nd_sbp) || !(t.placement() == p))
    return failures.add(what + ": got " + t.describe());
  const std::vector<T> want = expected<T>(r);
  if (nd_sbp.has_partial()) {
    const std::vector<T> got = t.full().to_vector();
    return expect_elements(failures, what + ", full()", got.data(), want);
  }
  const std::vector<T> mine = piece(want, r.shape, box_of(r.shape, p, nd_sbp, rank()));
  if (t.to_local().numel() != static_cast<int64_t>(mine.size()))
    return failures.add(what + ": local piece has " + std::to_string(t.to_local().numel()) + " elements, expected " +
                        std::to_string(mine.size()));
  expect_elements(failures, what, t.to_local().to_vector().data(), mine);
}

// Every floating reference but big loaded into every other floating dtype, as (S(0)) on a line of
// the world: each element must be static_cast<U> of the stored value read exactly (through float
// for a 16-bit one), i.e. what cast<U> gives. Returns the loads done.
int check_conversions(Failures& failures, const std::string& dir) {
  const Placement line("cpu", first_ranks(world_size()));
  int loads = 0;
  for (const Reference& r : references()) {
    if (!is_floating(r.dtype) || r.name == "big") continue;
    visit_dtype(r.dtype, [&]<class T>() {
      if constexpr (FloatingElement<T>) {
        const std::vector<T> stored = expected<T>(r);
        const Box mine = box_of(r.shape, line, sbp::split(0), rank());
        auto into = [&]<class U>() {
          if constexpr (!std::is_same_v<U, T>) {
            std::vector<U> want;
            for (T x : piece(stored, r.shape, mine)) want.push_back(static_cast<U>(static_cast<compute_t<T>>(x)));
            const GlobalTensor<U> t = load_checkpoint<U>(dir, r.name, line, sbp::split(0));
            expect_elements(failures,
                            "load " + r.name + " (" + std::string(to_string(r.dtype)) + ") as " +
                                std::string(to_string(dtype_of<U>)) + ", (S(0)) on rank " + std::to_string(rank()),
                            t.to_local().to_vector().data(), want);
            ++loads;
          }
        };
        into.template operator()<float>();
        into.template operator()<double>();
        into.template operator()<spsd::bfloat16>();
        into.template operator()<spsd::float16>();
      }
    });
  }
  return loads;
}

// big, loaded S(0) on a line of the world: each rank reads its rows, plus at most one partial
// chunk at either end of each stored box it meets, and opens only the files of those boxes.
void check_bytes_read(Failures& failures, const std::string& dir) {
  const Reference& big = references()[0];
  const Placement line("cpu", first_ranks(world_size()));
  const std::vector<Box> stored = boxes_of(big.shape, Placement("cpu", {{0, 1}, {2, 3}}), {sbp::split(0), sbp::split(1)});
  const Box mine = box_of(big.shape, line, sbp::split(0), rank());
  int64_t touched = 0;
  for (const Box& s : stored) touched += overlap(s, mine) > 0;
  reset_checkpoint_io_stats();
  (void)load_checkpoint<float>(dir, "big", line, sbp::split(0));
  const CheckpointIoStats got = checkpoint_io_stats();
  const int64_t needed = mine.numel() * 4, bound = needed + 2 * kChunkBytes * touched;
  const std::string what = "load big as (S(0)) on " + std::to_string(world_size()) + " ranks, rank " + std::to_string(rank());
  if (got.bytes_read < needed || got.bytes_read > bound)
    failures.add(what + ": read " + std::to_string(got.bytes_read) + " bytes, needs " + std::to_string(needed) +
                 ", at most " + std::to_string(bound) + " with whole chunks");
  if (world_size() > 1 && got.bytes_read >= big.shape.numel() * 4)
    failures.add(what + ": read the whole tensor (" + std::to_string(got.bytes_read) + " bytes)");
  if (got.files_read != touched)
    failures.add(what + ": opened " + std::to_string(got.files_read) + " data files, its rows are in " +
                 std::to_string(touched));
}

// The data file rank r wrote.
std::string data_file(const std::string& dir, int r) {
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.path().filename().string().ends_with("-r" + std::to_string(r) + ".bin")) return e.path().string();
  return dir + "/<no data file of rank " + std::to_string(r) + ">";
}

void flip_byte(const std::string& path, int64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(at);
  f.write(&c, 1);
}

}  // namespace

void save_reference_checkpoint(const std::string& dir) {
  const Placement grid("cpu", {{0, 1}, {2, 3}});
  const NdSbp quarters{sbp::split(0), sbp::split(1)};
  StateDict state;
  for (const Reference& r : references()) {
    visit_dtype(r.dtype, [&]<class T>() {
      if constexpr (!std::is_same_v<T, bool>) {  // the references are numeric
      if (r.partial) {
        const NdSbp layout{sbp::partial(*r.partial), sbp::split(0)};
        const Tensor<T> mine = grid.contains(rank())
                                   ? Tensor<T>::from_vector(Shape{3}, partial_piece<T>(r, rank() / 2, rank() % 2))
                                   : Tensor<T>();
        state.insert(r.name, to_global(mine, grid, layout, r.shape));
      } else {
        state.insert(r.name, from_host(Tensor<T>::from_vector(r.shape, values<T>(r.name, r.shape)), grid, quarters));
      }
      }
    });
  }
  save_checkpoint(state, dir);
  save_checkpoint(state.at<float>("f32"), dir + "/single");
}

int check_reference_loads(Failures& failures, const std::string& dir) {
  int loads = 0;
  for (const Reference& r : references()) {
    visit_dtype(r.dtype, [&]<class T>() {
      if constexpr (!std::is_same_v<T, bool>) {  // the references are numeric
      for (const Placement& p : placements(world_size()))
        for (const NdSbp& nd_sbp : layouts(r.shape.ndim(), p.mesh().ndim())) {
          // big (2 MiB) in the 1-d layouts only: the others add time, not cases.
          if (r.name == "big" && p.mesh().ndim() > 1) continue;
          load_and_compare<T>(failures, dir, r, p, nd_sbp);
          ++loads;
        }
      }
    });
  }
  loads += check_conversions(failures, dir);
  const Reference single{"f32", DType::kFloat32, Shape{7, 5}};
  const Placement line("cpu", first_ranks(world_size()));
  const GlobalTensor<float> t = load_checkpoint<float>(dir + "/single", line, sbp::split(1));
  expect_elements(failures, "load the single tensor as (S(1))", t.to_local().to_vector().data(),
                  piece(expected<float>(single), single.shape, box_of(single.shape, line, sbp::split(1), rank())));
  check_bytes_read(failures, dir);
  return loads + 2;
}

void check_corruption_detected(Failures& failures, const std::string& dir, const std::string& scratch) {
  const Placement line("cpu", first_ranks(world_size()));
  struct Damage {
    std::string name;  // of the damaged copy's folder
    int data_rank;     // the writer of the damaged data file; -1: the manifest is damaged
    std::function<void(const std::string&)> apply;
    std::string tensor;  // loaded as (S(0)) on the world: not every rank reads the damage
    std::vector<std::string> fragments;
  };
  // i64's rows 0:3 are in files r0, r1; psum's first box (the last bytes of r0) is read by one rank.
  const std::vector<Damage> cases = {
      {"truncated", 1, [](const std::string& f) { fs::resize_file(f, fs::file_size(f) - 1); }, "i64", {"is truncated"}},
      {"flipped", 0, [](const std::string& f) { flip_byte(f, fs::file_size(f) - 2); }, "psum",
       {"is corrupt", "CRC32", "tensor \"psum\""}},
      {"missing", 2, [](const std::string& f) { fs::remove(f); }, "i64", {"cannot open"}},
      {"manifest-flipped", -1, [](const std::string& f) { flip_byte(f, fs::file_size(f) / 2); }, "i64", {"is corrupt"}},
      {"manifest-truncated", -1, [](const std::string& f) { fs::resize_file(f, fs::file_size(f) - 5); }, "i64",
       {"is corrupt"}},
  };
  const std::string root = scratch + "/corrupt";
  if (rank() == 0) {
    fs::remove_all(root);
    for (const Damage& d : cases) {
      const std::string folder = root + "/" + d.name;
      fs::create_directories(folder);
      fs::copy(dir, folder, fs::copy_options::recursive);
      d.apply(d.data_rank < 0 ? folder + "/manifest" : data_file(folder, d.data_rank));
    }
  }
  world_communicator().barrier();
  for (const Damage& d : cases) {
    const std::string folder = root + "/" + d.name;
    std::vector<std::string> fragments = d.fragments;
    if (d.data_rank < 0) fragments.push_back(folder + "/manifest");
    else fragments.insert(fragments.end(), {folder + "/data-", "-r" + std::to_string(d.data_rank) + ".bin"});
    expect_error(failures, d.name + " (rank " + std::to_string(rank()) + ")",
                 [&] { (void)load_checkpoint<int64_t>(folder, d.tensor, line, sbp::split(0)); }, fragments);
  }
  world_communicator().barrier();
  if (rank() == 0) fs::remove_all(root);
}

}  // namespace spsd_test
