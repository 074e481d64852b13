#pragma once
// spsd::Error and the check macro every layer uses to report bad input.
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace spsd {

// Every error the library reports. The message reads "operation: what is wrong, with values".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
