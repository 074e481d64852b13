#pragma once
// The MPI backend has no 16-bit datatype yet ("mpi: no MPI datatype for bfloat16" at 8ea9e2b;
// issue 24's comm work adds bfloat16/float16 and reductions in float32). Until then the shared
// suites run their 16-bit cases under simulate only, and "mpi 16-bit: the backend matches
// kMpiHas16Bit" (test_boxing.cpp) fails as soon as the backend has them: set this to true then.
namespace spsd_test {
inline constexpr bool kMpiHas16Bit = false;
}  // namespace spsd_test
