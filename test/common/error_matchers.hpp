#pragma once
// Asserting on spsd::Error messages: error_of(f) is the message f throws, ContainsAll the
// fragments it must name.
#include <catch2/catch.hpp>

#include <initializer_list>
#include <string>
#include <vector>

#include <spsd/core/error.hpp>

namespace spsd::test {

// The message of the spsd::Error that f throws, or a description of what happened instead
// (so a failed CHECK_THAT shows it).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const spsd::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not spsd::Error> ") + e.what();
  } catch (...) {
    return "<not a std::exception>";
  }
  return "<no exception>";
}
#define ERROR_OF(...) error_of([&] { (void)(__VA_ARGS__); })

// Matches a string containing every fragment.
class ContainsAll : public Catch::MatcherBase<std::string> {
 public:
  ContainsAll(std::initializer_list<std::string> fragments) : fragments_(fragments) {}
  bool match(const std::string& s) const override {
    for (const std::string& f : fragments_)
      if (s.find(f) == std::string::npos) return false;
    return true;
  }
  std::string describe() const override {
    std::string d = "contains all of";
    for (const std::string& f : fragments_) d += " \"" + f + "\"";
    return d;
  }

 private:
  std::vector<std::string> fragments_;
};

}  // namespace spsd::test

using spsd::test::ContainsAll;
using spsd::test::error_of;
