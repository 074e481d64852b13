#include "spsd/runtime/log.hpp"

#include <cstdio>
#include <cstdlib>

#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

bool log_enabled(std::string_view topic) {
  static const std::string topics = [] {
    const char* env = std::getenv("SPSD_LOG");
    return "," + std::string(env ? env : "") + ",";
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
