// Catch2's implementation, compiled once at -O0 (it is large and slow to optimize). Catch2 v2
// declares Catch::Session only here, so the runners call run_catch_session instead.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_runner.hpp"

int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }
