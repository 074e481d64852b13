#pragma once
// Runs every selected Catch2 test case (defined in catch_impl.cpp). Returns 0 when all passed, 1
// when any assertion failed, the filter selected no test case, or assertions ran on threads
// that could race (never Catch's failure count: 77 of them would read as SKIP).
int run_catch_session(int argc, char** argv);
