#pragma once
// Failures: what one rank found wrong, as readable lines. Rank-side suites record here instead
// of calling Catch macros (Catch2 v2 assertions are not thread-safe, and simulated ranks are
// threads); the test then asserts emptiness on one thread and prints the lines.
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <spsd/spsd.hpp>

namespace spsd_test {

class Failures {
 public:
  // Bounded, so a systematically broken collective does not flood the report.
  static constexpr size_t kMaxLines = 40;

  void add(std::string line) {
    if (lines_.size() < kMaxLines) lines_.push_back(std::move(line));
    else ++dropped_;
  }
  bool empty() const { return lines_.empty(); }
  size_t size() const { return lines_.size() + dropped_; }
  void merge(const Failures& other) {
    for (const std::string& l : other.lines_) add(l);
    dropped_ += other.dropped_;
  }
  std::string report() const {
    std::string s;
    for (const std::string& l : lines_) s += l + "\n";
    if (dropped_) s += "... and " + std::to_string(dropped_) + " more failures\n";
    return s;
  }

 private:
  std::vector<std::string> lines_;
  size_t dropped_ = 0;
};

template <class T>
std::string show(T v) {
  std::ostringstream s;
  s << +v;  // + prints small integer types as numbers
  return s.str();
}

// The name of a checked case: a string, or a function that builds one, called only when the case
// failed (the sweeps check thousands of cases: building every name was 6 % of the instructions
// of the 1-d boxing sweep, callgrind).
template <class What>
std::string name_of(const What& what) {
  if constexpr (std::is_invocable_v<const What&>) return what();
  else return std::string(what);
}

// Compares got[0..n) with expected element by element; records the first few mismatches.
template <class T, class What>
void expect_elements(Failures& f, const What& what, const T* got, const std::vector<T>& expected) {
  int64_t bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (got[i] == expected[i]) continue;
    if (bad++ < 3)
      f.add(name_of(what) + ": element " + std::to_string(i) + ": got " + show(got[i]) + ", expected " +
            show(expected[i]));
  }
  if (bad > 3) f.add(name_of(what) + ": " + std::to_string(bad - 3) + " more mismatching elements");
}

// The counters of this rank since the last reset_comm_stats() must equal expected.
inline void expect_stats(Failures& f, const std::string& what, const spsd::CommStats& expected) {
  spsd::CommStats got = spsd::comm_stats();
  if (!(got == expected)) f.add(what + ": counters: got {" + got.to_string() + "}, expected {" + expected.to_string() + "}");
}

// One call of kind moving these bytes (messages: send_recv only).
inline spsd::CommStats one_call(spsd::CollectiveKind kind, int64_t sent_bytes, int64_t received_bytes,
                                int64_t messages = 0) {
  spsd::CommStats s;
  s.bytes_sent = sent_bytes;
  s.bytes_received = received_bytes;
  s.messages = messages;
  s.collectives = 1;
  s.calls[static_cast<int>(kind)] = 1;
  return s;
}

// f must throw spsd::Error whose message contains every fragment.
inline void expect_error(Failures& failures, const std::string& what, const std::function<void()>& f,
                         const std::vector<std::string>& fragments) {
  try {
    f();
  } catch (const spsd::Error& e) {
    std::string msg = e.what();
    for (const std::string& frag : fragments)
      if (msg.find(frag) == std::string::npos) failures.add(what + ": message \"" + msg + "\" lacks \"" + frag + "\"");
    return;
  } catch (const std::exception& e) {
    failures.add(what + ": threw a non-spsd exception: " + e.what());
    return;
  }
  failures.add(what + ": did not throw");
}

}  // namespace spsd_test
