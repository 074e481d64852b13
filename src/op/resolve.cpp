// Signature resolution: enumerate the per-mesh-axis products of an op's 1-d table, keep the
// valid ones, price each by the planner, pick the cheapest; cache the answer.
#include "spsd/op/resolve.hpp"

#include <cstdio>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "../layout/cache_key.hpp"
#include "spsd/boxing/planner.hpp"
#include "spsd/core/error.hpp"
#include "spsd/layout/split.hpp"

namespace spsd {

namespace {

// Boxing an input into a partial layout it does not have (B -> P keeps one copy, S -> P pads)
// is free but only ever adds a reduction later; such candidates are priced but never chosen.
bool needs_new_partial(const NdSbp& from, const NdSbp& to) {
  for (size_t a = 0; a < to.size(); ++a)
    if (to[a].is_partial() && !(from[a] == to[a])) return true;
  return false;
}

Candidate price(const NdSignature& sig, const Placement& placement, std::span<const TensorMeta> inputs,
                std::span<const NdSbp> layouts, std::vector<std::shared_ptr<const Plan>>* plans) {
  Candidate c{sig};
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::shared_ptr<const Plan> plan;
    if (!(layouts[i] == sig.inputs[i])) {
      if (needs_new_partial(layouts[i], sig.inputs[i])) c.viable = false;
      plan = plan_boxing(inputs[i].shape, inputs[i].dtype, placement, layouts[i], placement, sig.inputs[i]);
      c.cost_us += plan->cost_us;
      for (const Step& s : plan->steps) c.bytes += s.max_bytes();
    }
    if (plans) plans->push_back(std::move(plan));
  }
  return c;
}

// "S(0) on (4, 5)": why the inputs could not take any signature.
std::string layouts_text(std::span<const TensorMeta> inputs, std::span<const NdSbp> layouts) {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i)
    s += (i ? ", " : "") + layouts[i].to_string() + " on " + inputs[i].shape.to_string();
  return s;
}

std::shared_ptr<const Resolution> compute(const OpSchema& op, const OpAttrs& attrs, const Placement& placement,
                                          std::span<const TensorMeta> inputs, std::span<const NdSbp> layouts) {
  auto r = std::make_shared<Resolution>(Resolution{
      .op = std::string(op.name),
      .inputs = {inputs.begin(), inputs.end()},
      .input_layouts = {layouts.begin(), layouts.end()},
      .placement = placement,
      .output = op.infer(inputs, attrs),
  });
  const Shape& mesh = placement.mesh();
  const std::vector<Signature> table = op.signatures(inputs, attrs);
  SPSD_CHECK(!table.empty(), op.name, "has no signature for inputs ", layouts_text(inputs, layouts));
  if (!allows_partial(r->output.dtype))
    for (const Signature& s : table)
      SPSD_CHECK(!s.output.is_partial(), op.name, "declares the signature ", s, " for a ", r->output.dtype,
                 " output, which cannot be partial");

  // Every product table[choice[0]] x ... x table[choice[D-1]], mesh axis 0 most significant.
  std::vector<size_t> choice(mesh.ndim(), 0);
  int64_t best = -1;
  for (;;) {
    NdSignature sig = nd_signature(table, choice);
    bool ok = fits(r->output.shape, mesh, sig.output);
    for (size_t i = 0; ok && i < inputs.size(); ++i) ok = fits(inputs[i].shape, mesh, sig.inputs[i]);
    if (ok && op.valid) ok = op.valid(inputs, attrs, mesh, sig);
    if (ok) {
      r->candidates.push_back(price(sig, placement, inputs, layouts, nullptr));
      const Candidate& c = r->candidates.back();
      if (c.viable) {
        const Candidate* b = best < 0 ? nullptr : &r->candidates[best];
        // Strictly cheaper wins; on equal cost, no communication wins; else the earlier one stays.
        if (!b || c.cost_us < b->cost_us || (c.cost_us == b->cost_us && c.bytes == 0 && b->bytes > 0))
          best = static_cast<int64_t>(r->candidates.size()) - 1;
      }
    }
    int64_t a = mesh.ndim() - 1;
    while (a >= 0 && ++choice[a] == table.size()) choice[a--] = 0;
    if (a < 0) break;
  }
  if (best < 0) {
    std::string valid;
    for (const Signature& s : table) valid += "\n  " + s.to_string();
    detail::throw_error(op.name, "no valid signature for inputs ", layouts_text(inputs, layouts), " on ", placement,
                        "; its 1-d signatures are:", valid);
  }
  r->chosen = static_cast<size_t>(best);
  price(r->candidates[r->chosen].signature, placement, inputs, layouts, &r->plans);
  r->identity = std::make_shared<const detail::OpIdentity>(detail::describe_call(op, attrs, placement, inputs, layouts));
  return r;
}

// The cache key: every integer the resolution depends on.
detail::CacheKey make_key(const OpSchema& op, const OpAttrs& attrs, const Placement& placement,
                          std::span<const detail::ResolveInput> inputs) {
  detail::CacheKey k;
  k.words.reserve(12 + attrs.size() + inputs.size() * 12);
  k.add(static_cast<int64_t>(reinterpret_cast<intptr_t>(&op)));
  k.add(static_cast<int64_t>(attrs.size()));
  k.words.insert(k.words.end(), attrs.begin(), attrs.end());
  k.add(placement);
  for (const detail::ResolveInput& in : inputs) {
    k.add(static_cast<int64_t>(in.dtype));
    k.add(*in.shape);
    k.add(*in.layout);
  }
  return k;
}

}  // namespace

bool Resolution::communicates() const {
  for (const auto& p : plans)
    if (p && p->communicates()) return true;
  return false;
}

std::string Resolution::to_string() const {
  std::string s = op + " on " + placement.to_string() + ": chose " + signature().to_string() + "\n  candidates:";
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    char cost[32];
    std::snprintf(cost, sizeof cost, "%.2f", c.cost_us);
    s += "\n    " + std::string(i == chosen ? "* " : "  ") + c.signature.to_string() + "  cost " + cost + " us, " +
         std::to_string(c.bytes) + " B" +
         (c.viable ? "" : " (not taken: boxes an input into a new partial)");
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    s += "\n  input " + std::to_string(i) + ": ";
    s += plans[i] ? plans[i]->to_string() : input_layouts[i].to_string() + " already in place";
  }
  return s;
}

std::shared_ptr<const Resolution> resolve(const OpSchema& op, const OpAttrs& attrs, const Placement& placement,
                                          std::span<const TensorMeta> inputs, std::span<const NdSbp> layouts) {
  SPSD_CHECK(inputs.size() == layouts.size(), op.name, "got ", inputs.size(), " input metas but ", layouts.size(),
             " layouts");
  std::vector<detail::ResolveInput> refs;
  for (size_t i = 0; i < inputs.size(); ++i) refs.push_back({&inputs[i].shape, inputs[i].dtype, &layouts[i]});
  return detail::resolve(op, attrs, placement, refs);
}

namespace detail {

std::shared_ptr<const Resolution> resolve(const OpSchema& op, const OpAttrs& attrs, const Placement& placement,
                                          std::span<const ResolveInput> inputs) {
  static std::mutex mutex;
  static std::unordered_map<CacheKey, std::shared_ptr<const Resolution>, CacheKeyHash> cache;
  CacheKey key = make_key(op, attrs, placement, inputs);
  // Resolved under the lock, as the planner plans under its own (taken inside this one, never
  // the other way round): the ranks of a simulated world ask for the same resolution at once,
  // and one of them computing it while the others wait beats all of them computing it.
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::vector<TensorMeta> metas;
  std::vector<NdSbp> layouts;
  for (const ResolveInput& in : inputs) {
    metas.push_back({*in.shape, in.dtype});
    layouts.push_back(*in.layout);
  }
  std::shared_ptr<const Resolution> r = compute(op, attrs, placement, metas, layouts);
  // Bounded memory for programs whose shapes keep changing: when full, start over (holders of
  // a resolution keep it alive; a resolution computed again is the same on every rank).
  if (cache.size() >= kMaxCachedResolutions) cache.clear();
  return cache.try_emplace(std::move(key), std::move(r)).first->second;
}

std::string describe_call(const OpSchema& op, const OpAttrs& attrs, const Placement& placement,
                          std::span<const TensorMeta> inputs, std::span<const NdSbp> layouts) {
  std::string s = std::string(op.name) + "(";
  for (size_t i = 0; i < inputs.size(); ++i)
    s += (i ? ", " : "") + inputs[i].to_string() + " " + layouts[i].to_string();
  if (!attrs.empty()) s += "; " + attrs_description(op, attrs);
  return s + ") on " + placement.to_string();
}

std::string attrs_description(const OpSchema& op, const OpAttrs& attrs) {
  if (op.attrs_text) return op.attrs_text(attrs);
  std::string s = "attrs [";
  for (size_t i = 0; i < attrs.size(); ++i) s += (i ? ", " : "") + std::to_string(attrs[i]);
  return s + "]";
}

}  // namespace detail

}  // namespace spsd
