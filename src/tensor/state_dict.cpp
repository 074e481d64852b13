// StateDict (io/checkpoint.hpp): named global tensors of any element type.
#include "spsd/io/checkpoint.hpp"

namespace spsd {

void StateDict::check_name(const std::string& name) {
  SPSD_CHECK(!name.empty(), "StateDict::insert", "a name must not be empty");
  for (char c : name)
    SPSD_CHECK(c > ' ' && c < 127, "StateDict::insert", "name \"", name,
               "\" must be printable ASCII without spaces (it is a word of the checkpoint manifest)");
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
