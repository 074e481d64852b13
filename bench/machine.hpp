#pragma once
// What a benchmark prints about the machine it ran on: the load average and the environment
// variables that change its figures (a run on a busy 2-core machine reads differently).
#include <cstdlib>
#include <fstream>
#include <string>

namespace bench_machine {

// The variable's value, or fallback when it is unset.
inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// "1.02 0.88 0.75": /proc/loadavg's 1-, 5- and 15-minute averages.
inline std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace bench_machine
