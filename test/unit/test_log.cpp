// SPSD_LOG's syntax (runtime/log.hpp): topics, the candidates level, and the errors.
#include <catch2/catch.hpp>

#include "spsd/core/error.hpp"
#include "spsd/runtime/log.hpp"

using spsd::detail::LogConfig;
using spsd::detail::parse_log_config;

TEST_CASE("SPSD_LOG: topics and levels", "[log]") {
  auto levels = [](const char* value) {
    const LogConfig c = parse_log_config(value);
    return std::pair{c.level("dispatch"), c.level("boxing")};
  };
  CHECK(levels("") == std::pair{0, 0});
  CHECK(levels("dispatch") == std::pair{1, 0});
  CHECK(levels("dispatch:candidates") == std::pair{2, 0});
  CHECK(levels("boxing") == std::pair{0, 1});
  CHECK(levels("boxing,dispatch") == std::pair{1, 1});
  CHECK(levels("dispatch,dispatch:candidates") == std::pair{2, 0});
  CHECK(levels("dispatch:candidates,dispatch") == std::pair{2, 0});  // the highest level wins
  CHECK(levels("all") == std::pair{1, 1});
  CHECK(levels("all:candidates") == std::pair{2, 1});
  CHECK(levels("dispatch,,boxing,") == std::pair{1, 1});  // empty items are skipped
  CHECK(parse_log_config("dispatch").level("trace") == 0);
}

TEST_CASE("SPSD_LOG: a value that does not parse is an error naming it", "[log]") {
  auto message = [](const char* value) {
    try {
      parse_log_config(value);
    } catch (const spsd::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string typo = message("dispach");
  CHECK(typo.find("SPSD_LOG") != std::string::npos);
  CHECK(typo.find("\"dispach\" is no topic") != std::string::npos);
  CHECK(typo.find("dispatch:candidates") != std::string::npos);
  const std::string level = message("dispatch:all");
  CHECK(level.find("SPSD_LOG") != std::string::npos);
  CHECK(level.find("\"candidates\"") != std::string::npos);
  CHECK(level.find("\"dispatch:all\"") != std::string::npos);
  CHECK(message("boxing:candidates").find("\"boxing:candidates\" is no topic:level") != std::string::npos);
  CHECK(message("dispatch=2").find("\"dispatch=2\" is no topic") != std::string::npos);
}
