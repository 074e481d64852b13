#pragma once
// bench/trace_reader.hpp: a benchmark's own trace (SPSD_TRACE, docs/trace.md) read back after
// spsd::flush_trace(), and the per-op profile that bench/gpu_train --profile prints from it.
// The writer (src/runtime/trace.cpp) puts each event on a line of its own, so a scan of lines is
// enough: no JSON library in the benchmarks. Header-only: bench/pipeline, bench/gpu_train and the
// unit test of the profile (test/unit/test_trace.cpp) share it.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "trace_events.hpp"

namespace spsd_bench {

// A complete event ("ph":"X") of the trace; times in microseconds on the steady clock, as written.
struct TraceEvent {
  std::string name, cat;
  int lane = 0;               // tid: 0 host thread, 1 communication stream, 2 cuda compute stream, ...
  double begin = 0, end = 0;  // ts, ts + dur
  double host_ts = -1;        // a cuda compute span's host start (args.host_ts); -1 on other lanes
};

// Now on the trace's clock (std::chrono::steady_clock), in its unit: to mark a window of the run.
inline double trace_now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Every complete event of a trace file, in the file's order (start order).
inline std::vector<TraceEvent> read_trace_events(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read the trace file " + file);
  std::vector<TraceEvent> events;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"ph\":\"X\"") == std::string::npos) continue;
    using bench_trace::field;
    TraceEvent e{field(line, "name"), field(line, "cat"), std::stoi(field(line, "tid"))};
    e.begin = std::stod(field(line, "ts"));
    e.end = e.begin + std::stod(field(line, "dur"));
    if (const std::string h = field(line, "host_ts"); !h.empty()) e.host_ts = std::stod(h);
    events.push_back(std::move(e));
  }
  return events;
}

// One op kind of a profile: an op name within one phase.
struct OpProfileRow {
  std::string op, phase;
  int64_t calls = 0;
  double total_us = 0;
};

struct OpProfile {
  std::vector<OpProfileRow> rows;                      // largest total first
  std::vector<std::pair<std::string, double>> phases;  // us in ops per phase, in order of appearance
  int64_t calls = 0;
  double ops_us = 0;           // the sum of the rows: the lane's time in ops
  double first = 0, last = 0;  // the first op's start and the last one's end on the lane (us)
};

// The ops ("op" spans) of one lane whose host start (a device span's host_ts, else its own start)
// lies in [from, to), grouped by name and phase: the host thread's innermost "phase" span
// (backward, Adam.step, ...) around that host start, "forward" outside any (a training step's
// forward and loss). Each op counts its own time: an op whose span lies inside another op's on the
// lane (one op run by another) is taken out of the outer one, so the totals add up to the lane's
// busy time without counting anything twice.
inline OpProfile op_profile(const std::vector<TraceEvent>& events, int lane, double from, double to) {
  std::vector<const TraceEvent*> phases, ops;
  for (const TraceEvent& e : events) {
    if (e.lane == 0 && e.cat == "phase") phases.push_back(&e);
    const double host = e.host_ts >= 0 ? e.host_ts : e.begin;
    if (e.lane == lane && e.cat == "op" && host >= from && host < to) ops.push_back(&e);
  }
  // Start order, the outer span first on a tie (as the writer sorts them).
  std::stable_sort(ops.begin(), ops.end(), [](const TraceEvent* a, const TraceEvent* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end > b->end;
  });
  std::vector<double> own(ops.size());
  std::vector<size_t> open;  // indexes of the spans that contain the current one, innermost last
  for (size_t i = 0; i < ops.size(); ++i) {
    own[i] = ops[i]->end - ops[i]->begin;
    while (!open.empty() && ops[open.back()]->end <= ops[i]->begin) open.pop_back();
    if (!open.empty() && ops[i]->end <= ops[open.back()]->end) own[open.back()] -= own[i];
    open.push_back(i);
  }
  OpProfile p;
  std::map<std::pair<std::string, std::string>, size_t> row_of;
  for (size_t i = 0; i < ops.size(); ++i) {
    const TraceEvent& e = *ops[i];
    const double host = e.host_ts >= 0 ? e.host_ts : e.begin;
    const TraceEvent* phase = nullptr;
    for (const TraceEvent* ph : phases)
      if (ph->begin <= host && host < ph->end && (!phase || ph->begin >= phase->begin)) phase = ph;
    const std::string phase_name = phase ? phase->name : "forward";
    auto [it, added] = row_of.emplace(std::make_pair(e.name, phase_name), p.rows.size());
    if (added) p.rows.push_back({e.name, phase_name});
    p.rows[it->second].calls += 1;
    p.rows[it->second].total_us += own[i];
    auto ph = std::find_if(p.phases.begin(), p.phases.end(), [&](const auto& x) { return x.first == phase_name; });
    if (ph == p.phases.end()) p.phases.emplace_back(phase_name, own[i]);
    else ph->second += own[i];
    p.calls += 1;
    p.ops_us += own[i];
    p.first = i == 0 ? e.begin : std::min(p.first, e.begin);
    p.last = std::max(p.last, e.end);
  }
  std::stable_sort(p.rows.begin(), p.rows.end(),
                   [](const OpProfileRow& a, const OpProfileRow& b) { return a.total_us > b.total_us; });
  return p;
}

// The profile as a markdown table (op, phase, calls, total ms, % of the time in ops, mean us), at
// most max_rows rows and a line for the rest, then the time per phase.
inline void print_op_profile(const OpProfile& p, const char* title, size_t max_rows) {
  std::printf("| %s | phase | calls | total ms | %% of ops | mean us |\n|---|---|--:|--:|--:|--:|\n", title);
  double rest_us = 0;
  int64_t rest_calls = 0;
  for (size_t i = 0; i < p.rows.size(); ++i) {
    const OpProfileRow& r = p.rows[i];
    if (i >= max_rows) {
      rest_us += r.total_us, rest_calls += r.calls;
      continue;
    }
    std::printf("| %s | %s | %lld | %.3f | %.1f | %.1f |\n", r.op.c_str(), r.phase.c_str(),
                static_cast<long long>(r.calls), r.total_us / 1e3, p.ops_us > 0 ? 100 * r.total_us / p.ops_us : 0.0,
                r.total_us / static_cast<double>(r.calls));
  }
  if (p.rows.size() > max_rows)
    std::printf("| (%zu more) | | %lld | %.3f | %.1f | |\n", p.rows.size() - max_rows,
                static_cast<long long>(rest_calls), rest_us / 1e3, p.ops_us > 0 ? 100 * rest_us / p.ops_us : 0.0);
  std::printf("| all ops | | %lld | %.3f | 100.0 | |\n", static_cast<long long>(p.calls), p.ops_us / 1e3);
  std::printf("by phase:");
  for (const auto& [phase, us] : p.phases) std::printf(" %s %.3f ms;", phase.c_str(), us / 1e3);
  std::printf("\n");
}

}  // namespace spsd_bench
