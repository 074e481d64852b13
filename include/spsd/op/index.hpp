#pragma once
// Gathers by int64 indices: embedding (rows of a table) and pick (one element per row).
//
// embedding(weight (V, E), indices (...)) -> (..., E): out[..., :] = weight[indices[...], :],
// weight floating, indices any shape (0-d included). 1-d signature table (weight, indices):
//   (B, S(i))     -> S(i)        data parallel, for every axis i of indices
//   (S(0), B)     -> P(sum)      vocabulary parallel: each rank gathers the rows it holds
//                                (weight piece rows [box.begin[0], box.end[0])), zeros elsewhere
//   (S(1), B)     -> S(last)     embedding-dim parallel: each rank gathers its columns
//   (P(sum), B)   -> P(sum)      a gather is linear in the weight
//   (P(max), B)   -> P(max)      and commutes with max and min (it only selects elements)
//   (P(min), B)   -> P(min)
//   (B, B)        -> B
//
// pick(x (..., C), labels (...)) -> (...): out[r] = x[r, labels[r]] for every row r of the
// leading axes (a (B, T, V) language model's logits with (B, T) targets), x floating. Table
// (x, labels), for every leading axis d:
//   (S(d), S(d))  -> S(d)        batch (or sequence) parallel
//   (S(last), B)  -> P(sum)      class parallel: the rank holding column labels[r] gives it,
//                                the others 0
//   (P(sum), B)   -> P(sum)      linear in x
//   (P(max), B)   -> P(max)      selection commutes with max and min
//   (P(min), B)   -> P(min)
//   (B, B)        -> B
//
// Out-of-range indices (outside [0, V) for embedding, [0, C) for pick) are an spsd::Error on
// every rank of the placement, naming the op and the first bad value (op/index_check.hpp: at
// once where every rank holds all the indices, else at the placement's next consistency check).
// Until it is raised the output element (the whole row of E values for embedding) is NaN, never a
// plausible number: it is written as NaN by the ranks whose weight (x) piece starts at row
// (column) 0, and as 0 by the others, so every layout of the result reduces to NaN there: for a
// P(sum) output one NaN is added; for P(max)/P(min) (whose inputs are not split) every rank of
// the group writes NaN.
#include <limits>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd {

namespace detail {

struct EmbeddingDef {
  static constexpr std::string_view name = "embedding";

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    const TensorMeta &w = in[0], &idx = in[1];
    SPSD_CHECK(w.shape.ndim() == 2, name, "weight must be a matrix (V, E), weight is ", w.shape, ", indices are ",
               idx.shape);
    SPSD_CHECK(is_floating(w.dtype), name, "weight must be floating, weight is ", w.dtype);
    SPSD_CHECK(idx.dtype == DType::kInt64, name, "indices must be int64, indices are ", idx.dtype);
    std::vector<int64_t> dims = idx.shape.dims();
    dims.push_back(w.shape[1]);
    return {Shape(std::move(dims)), w.dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    const Sbp &B = sbp::broadcast, &P = sbp::partial_sum;
    const int64_t ni = in[1].shape.ndim();
    std::vector<Signature> t;
    for (int64_t i = 0; i < ni; ++i) t.push_back({{B, sbp::split(i)}, sbp::split(i)});
    t.push_back({{sbp::split(0), B}, P});
    t.push_back({{sbp::split(1), B}, sbp::split(ni)});
    t.push_back({{P, B}, P});
    t.push_back({{sbp::partial_max, B}, sbp::partial_max});
    t.push_back({{sbp::partial_min, B}, sbp::partial_min});
    t.push_back({{B, B}, B});
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    const LocalInput &w = k.inputs[0], &idx = k.inputs[1];
    const int64_t rows = w.shape[0], dim = w.shape[1], row_begin = w.box.begin[0];
    const int64_t n = idx.shape.numel();
    const int64_t* indices = idx.as<int64_t>();
    T* out = k.out_as<T>();
    kernel::embedding<T>(k.target, w.as<T>(), row_begin, rows, dim, indices, n, out);
    // Out-of-range indices give NaN rows until their error is raised (op/index_check.hpp),
    // written by the rank holding the first rows only, so the NaN survives a P(sum) of the pieces.
    if (row_begin == 0) kernel::mark_out_of_range<T>(k.target, indices, n, w.global->shape[0], dim, out);
  }

  static IndexCheck index_check(std::span<const TensorMeta> in) {
    return {1, in[0].shape[0], "indices", concat("the rows of the weight ", in[0].shape, " ", in[0].dtype)};
  }
  static void input_domains(std::span<ValidationInput> in, const OpAttrs&) {
    in[1].domain = InputDomain::kIndex;
    in[1].bound = in[0].meta.shape[0];
  }
};

struct PickDef {
  static constexpr std::string_view name = "pick";

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    const TensorMeta &x = in[0], &labels = in[1];
    SPSD_CHECK(x.shape.ndim() >= 1 && labels.shape.ndim() == x.shape.ndim() - 1, name,
               "needs x (..., C) and labels (...), x is ", x.shape, ", labels are ", labels.shape);
    for (int64_t d = 0; d < labels.shape.ndim(); ++d)
      SPSD_CHECK(x.shape[d] == labels.shape[d], name, "needs x (..., C) and labels (...), x is ", x.shape,
                 ", labels are ", labels.shape);
    SPSD_CHECK(is_floating(x.dtype), name, "x must be floating, x is ", x.dtype);
    SPSD_CHECK(labels.dtype == DType::kInt64, name, "labels must be int64, labels are ", labels.dtype);
    return {labels.shape, x.dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    const Sbp &B = sbp::broadcast, &P = sbp::partial_sum;
    const Sbp &Mx = sbp::partial_max, &Mn = sbp::partial_min;
    const int64_t last = in[0].shape.ndim() - 1;
    std::vector<Signature> t;
    for (int64_t d = 0; d < last; ++d) t.push_back(uniform_signature(2, sbp::split(d)));
    t.insert(t.end(), {{{sbp::split(last), B}, P}, {{P, B}, P}, {{Mx, B}, Mx}, {{Mn, B}, Mn}, {{B, B}, B}});
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    const LocalInput &x = k.inputs[0], &lab = k.inputs[1];
    const int64_t last = x.shape.ndim() - 1;
    // The piece holds whole rows of its leading box (only a split of the last axis cuts a row).
    const int64_t c = x.shape[last], n = lab.shape.numel(), c_begin = x.box.begin[last];
    const int64_t* labels = lab.as<int64_t>();
    T* out = k.out_as<T>();
    kernel::pick<T>(k.target, x.as<T>(), n, c_begin, c, labels, out);
    if (c_begin == 0) kernel::mark_out_of_range<T>(k.target, labels, n, x.global->shape[last], 1, out);
  }

  static IndexCheck index_check(std::span<const TensorMeta> in) {
    const Shape& x = in[0].shape;
    return {1, x[x.ndim() - 1], "labels", concat("the classes (the last axis of ", x, " ", in[0].dtype, ")")};
  }
  static void input_domains(std::span<ValidationInput> in, const OpAttrs&) {
    in[1].domain = InputDomain::kIndex;
    in[1].bound = in[0].meta.shape[in[0].meta.shape.ndim() - 1];
  }
};

}  // namespace detail

// The rows of weight (V, E) at indices (...): shape (..., E).
template <Element T>
GlobalTensor<T> embedding(const GlobalTensor<T>& weight, const GlobalTensor<int64_t>& indices) {
  const detail::InputRef refs[] = {detail::input_ref(weight), detail::input_ref(indices)};
  return detail::run_op<detail::EmbeddingDef, T>(refs);
}

// x[r, labels[r]] for every row r of x's leading axes.
template <Element T>
GlobalTensor<T> pick(const GlobalTensor<T>& x, const GlobalTensor<int64_t>& labels) {
  const detail::InputRef refs[] = {detail::input_ref(x), detail::input_ref(labels)};
  return detail::run_op<detail::PickDef, T>(refs);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_INDEX_INSTANCES(prefix, T)                                                               \
  prefix template GlobalTensor<T> embedding<T>(const GlobalTensor<T>&, const GlobalTensor<int64_t>&); \
  prefix template GlobalTensor<T> pick<T>(const GlobalTensor<T>&, const GlobalTensor<int64_t>&);
SPSD_FOR_EACH_ELEMENT(SPSD_INDEX_INSTANCES, extern)

}  // namespace spsd
