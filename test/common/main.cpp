// Runner for single-process suites (unit, simulate).
#include "catch_runner.hpp"

int main(int argc, char** argv) { return run_catch_session(argc, argv); }
