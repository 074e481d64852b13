// StateDict (tensor/state_dict.hpp): named global tensors of any element type.
#include "spsd/tensor/state_dict.hpp"

namespace spsd {

void StateDict::check_name(const std::string& name) {
  SPSD_CHECK(!name.empty(), "StateDict::insert", "a name must not be empty");
  for (char c : name)
    SPSD_CHECK(c > ' ' && c < 127, "StateDict::insert", "name \"", name,
               "\" must be printable ASCII without spaces (it is a word of the checkpoint manifest)");
}

void StateDict::merge(const StateDict& other) {
  for (const auto& [name, d] : other.entries_)
    SPSD_CHECK(!entries_.count(name), "StateDict::merge", "both state dicts hold a tensor named \"", name,
               "\" (give one of them a prefix: model.state_dict(\"model.\"), optimizer.state_dict(\"optim.\"))");
  entries_.insert(other.entries_.begin(), other.entries_.end());
}

std::vector<std::string> StateDict::names() const {
  std::vector<std::string> n;
  for (const auto& [name, d] : entries_) n.push_back(name);
  return n;
}

const detail::GlobalData& StateDict::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it != entries_.end()) return it->second;
  std::string all;
  for (const auto& [n, d] : entries_) all += (all.empty() ? "" : ", ") + n;
  detail::throw_error("StateDict::at", "no tensor named \"", name, "\" (it holds: ", all, ")");
}

}  // namespace spsd
