#include "spsd/runtime/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_set>

#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

int LogConfig::level(std::string_view topic) const {
  if (topic == "dispatch") return dispatch;
  if (topic == "boxing") return boxing;
  return 0;
}

LogConfig parse_log_config(std::string_view value) {
  LogConfig c;
  for (size_t begin = 0; begin <= value.size();) {
    const size_t end = std::min(value.find(',', begin), value.size());
    const std::string_view item = value.substr(begin, end - begin);
    begin = end + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    const std::string_view name = item.substr(0, colon);
    const std::string_view level = colon == std::string_view::npos ? "" : item.substr(colon + 1);
    SPSD_CHECK(name == "all" || name == "dispatch" || name == "boxing", "SPSD_LOG",
               "must be a comma-separated list of \"dispatch\", \"dispatch:candidates\", \"boxing\" or \"all\", got \"",
               value, "\" (\"", name, "\" is no topic)");
    SPSD_CHECK(colon == std::string_view::npos || (level == "candidates" && name != "boxing"), "SPSD_LOG",
               "the only level is \"candidates\", of \"dispatch\" or \"all\", got \"", value, "\" (\"", item,
               "\" is no topic:level)");
    const int dispatch = level.empty() ? 1 : 2;
    if (name != "boxing") c.dispatch = std::max(c.dispatch, dispatch);
    if (name != "dispatch") c.boxing = 1;
  }
  return c;
}

namespace {
// The environment's configuration, or the tests' (set_log_for_testing).
LogConfig test_config;
std::atomic<const LogConfig*> test_override{nullptr};
std::function<void(const std::string&)> test_sink;

// The messages printed so far, by topic and text; bounded (a program whose shapes keep changing
// prints a message again after the memory starts over).
constexpr size_t kMaxRemembered = 4096;
std::mutex printed_mutex;
std::unordered_set<std::string> printed;
}  // namespace

int log_level(std::string_view topic) {
  if (const LogConfig* c = test_override.load(std::memory_order_acquire)) return c->level(topic);
  static const LogConfig env = [] {
    const char* value = std::getenv("SPSD_LOG");
    return parse_log_config(value ? value : "");
  }();
  return env.level(topic);
}

void log_line(std::string_view topic, const std::string& text) {
  const std::string line = "[spsd " + std::string(topic) + " rank " + std::to_string(rank()) + "] " + text + "\n";
  // Held while printing too: ranks' lines do not interleave, and a test's sink sees one at a time.
  std::lock_guard lock(printed_mutex);
  if (printed.size() >= kMaxRemembered) printed.clear();
  if (!printed.insert(std::string(topic) + "\n" + text).second) return;
  if (test_sink) return test_sink(line);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

void set_log_for_testing(std::string_view value, std::function<void(const std::string& line)> sink) {
  test_config = parse_log_config(value);
  test_sink = std::move(sink);
  {
    std::lock_guard lock(printed_mutex);
    printed.clear();
  }
  test_override.store(&test_config, std::memory_order_release);
}

void reset_log_for_testing() {
  test_override.store(nullptr, std::memory_order_release);
  test_sink = nullptr;
  std::lock_guard lock(printed_mutex);
  printed.clear();
}

}  // namespace spsd::detail
