#pragma once
// Runs every selected Catch2 test case (defined in catch_impl.cpp); returns the failure count.
int run_catch_session(int argc, char** argv);
