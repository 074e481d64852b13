// test_nn (sim): written by the issue-26 branch that owns it.
#include <catch2/catch.hpp>
