#pragma once
// spsd::Error and the check macro every layer uses to report bad input.
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace spsd {

namespace detail {
// The text of the last spsd::Error made in this process (src/core/error.cpp). ~Runtime prints it
// when an MPI wait timed out and the error is unwinding past the Runtime: MPI_Abort then ends
// the job before the program's own handler, outside the Runtime's scope, could print it.
void note_error(const char* what) noexcept;
std::string last_error();
}  // namespace detail

// Every error the library reports. The message reads "operation: what is wrong, with values".
class Error : public std::runtime_error {
 public:
  // An error whose message is what; the process keeps the last one's text (detail::last_error).
  explicit Error(const std::string& what) : std::runtime_error(what) { detail::note_error(this->what()); }
  explicit Error(const char* what) : std::runtime_error(what) { detail::note_error(this->what()); }
};

namespace detail {

template <class... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

// Formats "op: part part part" and throws spsd::Error.
template <class... Parts>
[[noreturn]] void throw_error(std::string_view op, Parts&&... parts) {
  throw Error(concat(op, ": ", std::forward<Parts>(parts)...));
}

}  // namespace detail
}  // namespace spsd

// SPSD_CHECK(cond, "op", "argument ", name, " is ", value, ...): throws spsd::Error unless cond.
#define SPSD_CHECK(cond, ...)                            \
  do {                                                   \
    if (!(cond)) [[unlikely]]                            \
      ::spsd::detail::throw_error(__VA_ARGS__);          \
  } while (0)
