#pragma once
// SPSD_LOG: what the library prints of what it decides, read once per process. A comma-separated
// list of topics, each with an optional level after a colon:
//   dispatch             each op's resolution: the call, the chosen signature, and the boxing of
//                        its inputs (one line, a second when an input is boxed)
//   dispatch:candidates  the same with every candidate signature, its cost and bytes
//   boxing               the plan of each to_global (printed under dispatch too)
//   all                  dispatch and boxing (all:candidates: with the candidates)
// Each distinct message is printed once per process, the first time: a training loop repeats
// its resolutions (cached) and prints them in its first step only.
#include <functional>
#include <string>
#include <string_view>

namespace spsd::detail {

// The level of each topic: 0 off, 1 on, 2 with detail (dispatch's candidates).
struct LogConfig {
  int dispatch = 0;
  int boxing = 0;
  int level(std::string_view topic) const;
};
// Parses an SPSD_LOG value; throws spsd::Error naming SPSD_LOG and the value otherwise.
LogConfig parse_log_config(std::string_view value);

// The level SPSD_LOG gives topic (parsed at the first call; an invalid value throws there).
int log_level(std::string_view topic);
inline bool log_enabled(std::string_view topic) { return log_level(topic) > 0; }

// Prints "[spsd <topic> rank R] text" on stdout as one write, so ranks' lines do not interleave,
// unless the same topic and text were printed before by this process.
void log_line(std::string_view topic, const std::string& text);

// Tests: log under this SPSD_LOG value instead of the environment's and hand each printed line
// to sink instead of stdout, with an empty memory of printed messages; reset_log_for_testing
// goes back to the environment and stdout. Not to be called while ops run.
void set_log_for_testing(std::string_view value, std::function<void(const std::string& line)> sink);
void reset_log_for_testing();

}  // namespace spsd::detail
