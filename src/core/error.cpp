// The last spsd::Error's text (core/error.hpp), kept for ~Runtime's report after a timed-out
// MPI wait. Errors are rare: a lock and a copy per error cost nothing on the ordinary path.
#include "spsd/core/error.hpp"

#include <mutex>

namespace spsd::detail {

namespace {
std::mutex last_mutex;
std::string& last_text() {
  static std::string text;
  return text;
}
}  // namespace

void note_error(const char* what) noexcept {
  try {
    const std::lock_guard lock(last_mutex);
    last_text() = what;
  } catch (...) {  // out of memory for the copy: the report then shows an older text, or none
  }
}

std::string last_error() {
  const std::lock_guard lock(last_mutex);
  return last_text();
}

}  // namespace spsd::detail
