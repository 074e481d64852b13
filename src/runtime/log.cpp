#include "spsd/runtime/log.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

bool log_enabled(std::string_view topic) {
  // Parsed once; a name that is no topic is an error (at the first op), not a silent no-op.
  static const std::string topics = [] {
    const char* env = std::getenv("SPSD_LOG");
    const std::string list = env ? env : "";
    for (size_t begin = 0; begin <= list.size();) {
      const size_t end = std::min(list.find(',', begin), list.size());
      const std::string_view name = std::string_view(list).substr(begin, end - begin);
      SPSD_CHECK(name.empty() || name == "all" || name == "dispatch" || name == "boxing", "SPSD_LOG",
                 "must be a comma-separated list of \"dispatch\", \"boxing\" or \"all\", got \"", list,
                 "\" (\"", name, "\" is no topic)");
      begin = end + 1;
    }
    return "," + list + ",";
  }();
  if (topics == ",,") return false;
  return topics.find(",all,") != std::string::npos ||
         topics.find("," + std::string(topic) + ",") != std::string::npos;
}

void log_line(std::string_view topic, const std::string& text) {
  std::string line = "[spsd " + std::string(topic) + " rank " + std::to_string(rank()) + "] " + text + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace spsd::detail
