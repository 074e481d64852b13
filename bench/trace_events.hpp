#pragma once
// Reading a rank's SPSD_TRACE file (docs/trace.md) back in a benchmark: the writer puts each
// event on its own line, so a line is one event and a field is found by its key. Shared by
// bench/train --per-op (each op's boxing) and bench/trace_reader.hpp (the events that
// bench/pipeline and bench/gpu_train --profile read).
#include <cstdint>
#include <string>
#include <vector>

namespace bench_trace {

// The value after "key": in one event line of the trace: a string's text without its quotes,
// or a number's digits ("" when the line has no such key; the first occurrence counts).
inline std::string field(const std::string& line, const char* key) {
  const std::string k = std::string("\"") + key + "\":";
  const size_t at = line.find(k);
  if (at == std::string::npos) return "";
  size_t from = at + k.size(), to = from;
  if (line[from] == '"') return line.substr(from + 1, line.find('"', from + 1) - from - 1);
  while (to < line.size() && line[to] != ',' && line[to] != '}') ++to;
  return line.substr(from, to - from);
}

// The strings of a list field ("inputs":["a","b"]); empty when the line has none. The trace's
// texts here (shapes, layouts) hold no quotes or escapes.
inline std::vector<std::string> string_list(const std::string& line, const char* key) {
  std::vector<std::string> out;
  const std::string k = std::string("\"") + key + "\":[";
  size_t at = line.find(k);
  if (at == std::string::npos) return out;
  at += k.size();
  while (at < line.size() && line[at] == '"') {
    const size_t close = line.find('"', at + 1);
    out.push_back(line.substr(at + 1, close - at - 1));
    at = close + 1;
    if (at < line.size() && line[at] == ',') ++at;
  }
  return out;
}

// A time field ("ts", "dur": microseconds with three decimals) as integer nanoseconds, exactly.
inline int64_t nanoseconds(const std::string& micros) {
  const size_t dot = micros.find('.');
  if (dot == std::string::npos) return std::stoll(micros) * 1000;
  std::string frac = micros.substr(dot + 1, 3);
  frac.resize(3, '0');
  return std::stoll(micros.substr(0, dot)) * 1000 + std::stoll(frac);
}

}  // namespace bench_trace
