// test_custom_ops (sim): written by the issue-26 branch that owns it.
#include <catch2/catch.hpp>
