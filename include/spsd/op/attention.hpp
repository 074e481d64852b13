#pragma once
// scaled_dot_product_attention(q, k, v, causal): softmax(q k^T / sqrt(head_dim) [+ mask]) v for
// q (batch, heads, seq_q, head_dim), k and v (batch, heads, seq_k, head_dim), floating types.
// causal is PyTorch's is_causal (query i sees key j iff j <= i, top-left aligned) on GLOBAL
// positions: a piece of the queries is offset by its box's begin, so the mask is right under
// any split.
//
// One op with a fused local kernel (kernel/cpu/attention.hpp, kernel/cuda/attention.hpp: online
// softmax over key blocks, no (seq_q, seq_k) matrix). 1-d table, inputs (q, k, v):
//     S(0), S(0), S(0) -> S(0)    batch split (data parallel), local
//     S(1), S(1), S(1) -> S(1)    heads split (tensor parallel), local
//     S(2), B,    B    -> S(2)    query-sequence split: each rank its queries against all keys
//     B,    B,    P(sum) -> P(sum) out is linear in v (e.g. v from a row-parallel projection)
//     B,    B,    B    -> B
// No partial q or k (softmax is not linear in its scores) and no head_dim split: S(3) on q and k
// gives partial scores, which a softmax cannot take before they are summed, so the resolver
// boxes such inputs (and a key-sequence split) to one of the rows above. For the query split, k and v
// are all-gathered by the resolver's boxing: (k-1)/k * 2 * batch * heads * seq_k * head_dim
// elements received per rank on k ranks (docs/operators.md).
//
// Backward (src/autograd/attention_rules.cpp): the probabilities are recomputed per key block
// from the per-row log-sum-exp lse (FlashAttention-2): the forward, when an input requires
// grad, also runs attention_lse (q, k) -> lse (batch, heads, seq_q) in compute_t<T>, recorded as
// the node's fourth input (the dispatch runs single-output ops). On the CPU a training forward's
// kernel (attr keep_lse) computes lse in the same pass (its row maxima and sums are lse's) and hands it to the
// attention_lse kernel that follows on the thread, which copies it instead of computing the
// scores again when its pieces are the forward's (LseHandoff); otherwise it computes them.
// Then two fused ops on (q, k, v, out, g, lse):
//     attention_grad_q  -> dq (batch, heads, seq_q, head_dim)
//     attention_grad_kv -> dk and dv stacked on a new leading axis, (2, batch, heads, seq_k,
//                          head_dim), then sliced apart
// with the table (q-grad output / kv-grad output):
//     S(0) x 6                      -> S(0) / S(1)
//     S(1) x 6                      -> S(1) / S(2)
//     S(2), B, B, S(2), S(2), S(2)  -> S(2) / P(sum)   each rank's queries add to every key's
//                                                      gradient: dk, dv are partial sums
//     B, B, B, B, P(sum), B         -> P(sum)          linear in g
//     B x 6                         -> B
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/dispatch.hpp"
#include "spsd/op/shape_ops.hpp"

namespace spsd {

namespace detail {

namespace attention_ops {

// Shape and dtype checks shared by the forward and backward ops: q (B, H, Sq, D) and k (and v
// when given) (B, H, Sk, D), one floating dtype.
inline void check_qkv(std::string_view op, const TensorMeta& q, const TensorMeta& k, const TensorMeta* v) {
  SPSD_CHECK(is_floating(q.dtype), op, "is defined for floating tensors only, q is ", q.to_string());
  SPSD_CHECK(k.dtype == q.dtype && (!v || v->dtype == q.dtype), op, "needs q, k and v of one dtype, got q ",
             q.dtype, ", k ", k.dtype, v ? ", v " : "", v ? to_string(v->dtype) : std::string_view{});
  for (const auto& [arg, m] : {std::pair{"q", &q}, std::pair{"k", &k}, std::pair{"v", v}})
    SPSD_CHECK(!m || m->shape.ndim() == 4, op, "needs 4-d (batch, heads, seq, head_dim) tensors, ", arg, " is ",
               m->shape);
  SPSD_CHECK(k.shape[0] == q.shape[0] && k.shape[1] == q.shape[1], op,
             "needs q and k of the same batch and heads, q is ", q.shape, ", k is ", k.shape);
  SPSD_CHECK(k.shape[3] == q.shape[3], op, "needs q and k of the same head_dim, q is ", q.shape, ", k is ", k.shape);
  SPSD_CHECK(!v || v->shape == k.shape, op, "needs k and v of the same shape (one seq_k and head_dim), k is ",
             k.shape, ", v is ", v ? v->shape : Shape{});
}

// The 1-d table of the header comment for inputs of which query_side[i] run along the queries
// (S(2) in the query split; the others are B there). Outputs: S(axis_offset) for the batch
// split, S(axis_offset + 1) for the heads split, query_split_out for the query split; with a
// linear_input, also B... P(sum) (that input) ... -> P(sum).
inline std::vector<Signature> attention_table(std::initializer_list<bool> query_side, int64_t axis_offset,
                                              const Sbp& query_split_out, int64_t linear_input = -1) {
  const size_t n = query_side.size();
  std::vector<Signature> t = {{std::vector<Sbp>(n, sbp::split(0)), sbp::split(axis_offset)},
                              {std::vector<Sbp>(n, sbp::split(1)), sbp::split(axis_offset + 1)}};
  Signature query{{}, query_split_out};
  for (bool q : query_side) query.inputs.push_back(q ? sbp::split(2) : sbp::broadcast);
  t.push_back(std::move(query));
  if (linear_input >= 0) {
    Signature linear = uniform_signature(n, sbp::broadcast);
    linear.inputs[linear_input] = linear.output = sbp::partial_sum;
    t.push_back(std::move(linear));
  }
  t.push_back(uniform_signature(n, sbp::broadcast));
  return t;
}

// The local problem of a kernel call: inputs 0 and 1 are this rank's q and k pieces.
inline kernel::AttentionDims local_dims(const KernelArgs& a) {
  const LocalInput &q = a.inputs[0], &k = a.inputs[1];
  return {q.shape[0] * q.shape[1], q.shape[2], k.shape[2],  q.shape[3],
          q.box.begin[2],          k.box.begin[2], a.attrs[0] != 0, 1 / std::sqrt(static_cast<double>(q.global->shape[3]))};
}

inline void check_causal_attr(std::string_view op, const OpAttrs& attrs) {
  SPSD_CHECK(attrs.size() == 1 && (attrs[0] == 0 || attrs[0] == 1), op, "attrs must be [causal] with 0 or 1, got ",
             attrs.size(), " values");
}

inline std::string causal_text(const OpAttrs& attrs) { return attrs[0] ? "causal" : ""; }

// The type lse is kept in: float for the 16-bit types, the type itself otherwise.
inline DType lse_dtype(DType t) { return t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32; }

// A 64-bit fingerprint of bytes (four multiply-xor lanes, so that it runs near memory speed):
// what tells the hand-off below that a piece at a known address still holds what it held.
inline uint64_t fingerprint(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h[4] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull, 0x27D4EB2F165667C5ull};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32)
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      h[l] = (h[l] ^ w) * 0x100000001B3ull;
    }
  for (; i < bytes; ++i) h[0] = (h[0] ^ p[i]) * 0x100000001B3ull;
  return (h[0] ^ (h[1] >> 7) ^ (h[2] << 11) ^ (h[3] >> 3)) + bytes;
}

// The lse of the last CPU attention forward on this thread, for the attention_lse kernel: the
// same q and k pieces give the same lse bit for bit, since the row maxima and sums do not depend
// on v. Same pieces: the same addresses, local problem and fingerprints (another tensor may come
// to a freed piece's address: a boxed copy freed after the forward, a validator's trial). One
// entry; the next forward replaces it.
struct LseHandoff {
  const void* q = nullptr;
  const void* k = nullptr;
  uint64_t q_print = 0, k_print = 0;
  kernel::AttentionDims dims;
  DType dtype = DType::kFloat32;
  std::vector<std::byte> lse;
  static size_t q_bytes(const kernel::AttentionDims& d, DType t) {
    return static_cast<size_t>(d.batch_heads * d.seq_q * d.head_dim * size_of(t));
  }
  static size_t k_bytes(const kernel::AttentionDims& d, DType t) {
    return static_cast<size_t>(d.batch_heads * d.seq_k * d.head_dim * size_of(t));
  }
  void keep(const void* q_piece, const void* k_piece, const kernel::AttentionDims& d, DType t) {
    q = q_piece, k = k_piece, dims = d, dtype = t;
    q_print = q_piece ? fingerprint(q_piece, q_bytes(d, t)) : 0;
    k_print = k_piece ? fingerprint(k_piece, k_bytes(d, t)) : 0;
  }
  bool matches(const void* q_piece, const void* k_piece, const kernel::AttentionDims& d, DType t) const {
    return q != nullptr && q == q_piece && k == k_piece && dtype == t && dims.batch_heads == d.batch_heads &&
           dims.seq_q == d.seq_q && dims.seq_k == d.seq_k && dims.head_dim == d.head_dim &&
           dims.q_begin == d.q_begin && dims.k_begin == d.k_begin && dims.causal == d.causal &&
           dims.scale == d.scale && fingerprint(q_piece, q_bytes(d, t)) == q_print &&
           (k_piece == nullptr ? k_print == 0 : fingerprint(k_piece, k_bytes(d, t)) == k_print);
  }
};
inline thread_local LseHandoff lse_handoff;

struct AttentionDef {
  static constexpr std::string_view name = "scaled_dot_product_attention";

  // inputs (q, k, v); attrs [causal] or [causal, keep_lse]: keep_lse 1 when an attention_lse
  // follows (training), so that the cpu kernel keeps its lse for it (inference pays nothing).
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    SPSD_CHECK((attrs.size() == 1 || attrs.size() == 2) && (attrs[0] == 0 || attrs[0] == 1) &&
                   (attrs.size() == 1 || attrs[1] == 0 || attrs[1] == 1),
               name, "attrs must be [causal] or [causal, keep_lse] with 0 or 1, got ", attrs.size(), " values");
    check_qkv(name, in[0], in[1], &in[2]);
    return in[0];
  }
  static std::vector<Signature> signatures(std::span<const TensorMeta>, const OpAttrs&) {
    return attention_table({true, false, false}, 0, sbp::split(2), /*linear_input=*/2);
  }
  static std::string attrs_text(const OpAttrs& attrs) { return causal_text(attrs); }
  template <Element T>
  static void kernel(const KernelArgs& a) {
    if constexpr (FloatingElement<T>) {
      const kernel::AttentionDims d = local_dims(a);
      compute_t<T>* lse = nullptr;
      if (!a.target.on_device() && a.attrs.size() == 2 && a.attrs[1] != 0) {  // for the attention_lse that follows
        LseHandoff& h = lse_handoff;
        h.q = nullptr;  // kept below, once lse is written
        h.lse.resize(static_cast<size_t>(d.batch_heads * d.seq_q) * sizeof(compute_t<T>));
        lse = reinterpret_cast<compute_t<T>*>(h.lse.data());
      }
      kernel::attention_forward<T>(a.target, a.in<T>(0), a.in<T>(1), a.in<T>(2), d, a.out_as<T>(), lse);
      if (lse) lse_handoff.keep(a.in<T>(0), a.in<T>(1), d, a.inputs[0].global->dtype);
    }
  }
};

// lse (batch, heads, seq_q) in lse_dtype(q): the forward's row statistics, for backward.
struct AttentionLseDef {
  static constexpr std::string_view name = "attention_lse";

  // inputs (q, k); attrs [causal].
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    check_causal_attr(name, attrs);
    check_qkv(name, in[0], in[1], nullptr);
    const Shape& q = in[0].shape;
    return {Shape{q[0], q[1], q[2]}, lse_dtype(in[0].dtype)};
  }
  static std::vector<Signature> signatures(std::span<const TensorMeta>, const OpAttrs&) {
    return attention_table({true, false}, 0, sbp::split(2));
  }
  static std::string attrs_text(const OpAttrs& attrs) { return causal_text(attrs); }
  // L: the output's element type; the inputs' is read from their metadata.
  template <Element L>
  static void kernel(const KernelArgs& a) {
    visit_dtype(a.inputs[0].global->dtype, [&]<class T>() {
      if constexpr (FloatingElement<T> && std::is_same_v<compute_t<T>, L>) {
        const kernel::AttentionDims d = local_dims(a);
        LseHandoff& h = lse_handoff;
        if (!a.target.on_device() && h.matches(a.in<T>(0), a.in<T>(1), d, a.inputs[0].global->dtype)) {
          std::memcpy(a.out_as<L>(), h.lse.data(), h.lse.size());
          h.q = h.k = nullptr;  // taken
          return;
        }
        kernel::attention_forward<T>(a.target, a.in<T>(0), a.in<T>(1), static_cast<const T*>(nullptr), d,
                                     static_cast<T*>(nullptr), a.out_as<L>());
      }
    });
  }
};

// dq (KV false) or dk and dv stacked (KV true) from (q, k, v, out, g, lse).
template <bool KV>
struct AttentionGradDef {
  static constexpr std::string_view name = KV ? "attention_grad_kv" : "attention_grad_q";

  // inputs (q, k, v, out, g, lse); attrs [causal].
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    check_causal_attr(name, attrs);
    check_qkv(name, in[0], in[1], &in[2]);
    const Shape& q = in[0].shape;
    SPSD_CHECK(in[3] == in[0] && in[4] == in[0], name, "needs out and g of q's type ", in[0].to_string(),
               ", got ", in[3].to_string(), " and ", in[4].to_string());
    SPSD_CHECK(in[5].shape == (Shape{q[0], q[1], q[2]}) && in[5].dtype == lse_dtype(in[0].dtype), name,
               "needs lse (batch, heads, seq_q) in ", lse_dtype(in[0].dtype), ", got ", in[5].to_string());
    if (!KV) return in[0];
    const Shape& k = in[1].shape;
    return {Shape{2, k[0], k[1], k[2], k[3]}, in[0].dtype};
  }
  static std::vector<Signature> signatures(std::span<const TensorMeta>, const OpAttrs&) {
    return attention_table({true, false, false, true, true, true}, KV ? 1 : 0,
                           KV ? sbp::partial_sum : sbp::split(2), /*linear_input=*/4);
  }
  static std::string attrs_text(const OpAttrs& attrs) { return causal_text(attrs); }
  template <Element T>
  static void kernel(const KernelArgs& a) {
    if constexpr (FloatingElement<T>) {
      const auto* lse = a.in<compute_t<T>>(5);
      if constexpr (KV)
        kernel::attention_backward_kv<T>(a.target, a.in<T>(0), a.in<T>(1), a.in<T>(2), a.in<T>(3), a.in<T>(4), lse,
                                         local_dims(a), a.out_as<T>());
      else
        kernel::attention_backward_q<T>(a.target, a.in<T>(0), a.in<T>(1), a.in<T>(2), a.in<T>(3), a.in<T>(4), lse,
                                        local_dims(a), a.out_as<T>());
    }
  }
};

}  // namespace attention_ops

// The gradients of scaled_dot_product_attention (for its backward rule): dq, and dk and dv.
template <FloatingElement T>
struct AttentionGrads {
  std::optional<GlobalTensor<T>> dq, dk, dv;
};
template <FloatingElement T>
AttentionGrads<T> attention_grads(const GlobalTensor<T>& q, const GlobalTensor<T>& k, const GlobalTensor<T>& v,
                                  const GlobalTensor<T>& out, const GlobalTensor<T>& g,
                                  const GlobalTensor<compute_t<T>>& lse, bool causal, bool want_q, bool want_kv) {
  using namespace attention_ops;
  const OpAttrs attrs{causal ? 1 : 0};
  const InputRef refs[] = {input_ref(q), input_ref(k), input_ref(v), input_ref(out), input_ref(g), input_ref(lse)};
  AttentionGrads<T> r;
  if (want_q) r.dq = run_op<AttentionGradDef<false>, T>(refs, attrs);
  if (want_kv) {
    const GlobalTensor<T> dkv = run_op<AttentionGradDef<true>, T>(refs, attrs);
    r.dk = spsd::reshape(spsd::slice(dkv, 0, 0, 1), k.shape());
    r.dv = spsd::reshape(spsd::slice(dkv, 0, 1, 2), k.shape());
  }
  return r;
}

}  // namespace detail

// softmax(q k^T / sqrt(head_dim), causal mask when asked) v, per batch and head.
template <Element T>
GlobalTensor<T> scaled_dot_product_attention(const GlobalTensor<T>& q, const GlobalTensor<T>& k,
                                             const GlobalTensor<T>& v, bool causal = false) {
  using namespace detail;
  using namespace detail::attention_ops;
  const OpAttrs attrs{causal ? 1 : 0};
  // Run on detached inputs and recorded once below, with lse as a fourth (gradient-free) input.
  const bool training = FloatingElement<T> && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  const GlobalTensor<T> qd = q.detach(), kd = k.detach();
  GlobalTensor<T> out = call_op<AttentionDef>(OpAttrs{causal ? 1 : 0, training ? 1 : 0}, {}, qd, kd, v.detach());
  if constexpr (FloatingElement<T>) {
    if (training) {
      const InputRef qk[] = {input_ref(qd), input_ref(kd)};
      const GlobalTensor<compute_t<T>> lse = run_op<AttentionLseDef, compute_t<T>>(qk, attrs);
      const InputRef refs[] = {input_ref(q), input_ref(k), input_ref(v), input_ref(lse)};
      return recorded(AttentionDef::name, refs, attrs, {}, std::move(out));
    }
  }
  return out;
}

// Compiled into the library (core/instances.hpp).
#define SPSD_ATTENTION_INSTANCES(prefix, T)                                                               \
  prefix template GlobalTensor<T> scaled_dot_product_attention<T>(const GlobalTensor<T>&, const GlobalTensor<T>&, \
                                                                  const GlobalTensor<T>&, bool);
#define SPSD_ATTENTION_GRAD_INSTANCES(prefix, T)                                                                   \
  prefix template detail::AttentionGrads<T> detail::attention_grads<T>(                                            \
      const GlobalTensor<T>&, const GlobalTensor<T>&, const GlobalTensor<T>&, const GlobalTensor<T>&,               \
      const GlobalTensor<T>&, const GlobalTensor<compute_t<T>>&, bool, bool, bool);
SPSD_FOR_EACH_ELEMENT(SPSD_ATTENTION_INSTANCES, extern)
SPSD_FOR_EACH_FLOATING(SPSD_ATTENTION_GRAD_INSTANCES, extern)

}  // namespace spsd
