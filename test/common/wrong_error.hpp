#pragma once
// For the test programs without a test framework (gpu-comm, fake-cuda-runtime): whether body
// throws the spsd::Error expected.
#include <exception>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include <spsd/core/error.hpp>

namespace spsd_test {

// Empty when body throws spsd::Error saying every needle; else what went wrong instead.
inline std::string wrong_error(std::initializer_list<std::string_view> needles, const std::function<void()>& body) {
  try {
    body();
  } catch (const spsd::Error& e) {
    const std::string_view message = e.what();
    for (std::string_view needle : needles)
      if (message.find(needle) == std::string_view::npos)
        return spsd::detail::concat("the error does not say '", needle, "': ", message);
    return {};
  } catch (const std::exception& e) {
    return spsd::detail::concat("not an spsd::Error: ", e.what());
  }
  return "no error";
}

}  // namespace spsd_test
