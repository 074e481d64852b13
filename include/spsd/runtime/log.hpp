#pragma once
// SPSD_LOG: comma-separated topics ("dispatch", "boxing") that make the library print what it
// decides. Read once per process.
#include <string>
#include <string_view>

namespace spsd::detail {

// Whether SPSD_LOG names topic (or "all").
bool log_enabled(std::string_view topic);

// Prints "[spsd <topic> rank R] text" on stdout as one write, so ranks' lines do not interleave.
void log_line(std::string_view topic, const std::string& text);

}  // namespace spsd::detail
