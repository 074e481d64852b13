// gpu-probe: the runtime sees the CUDA devices and an NCCL version. Exits 77 (meson: SKIP) only
// where the machine has no CUDA device (../common/cuda_devices.hpp); runtime_info() must then
// agree with the CUDA runtime's count.
#include <iostream>
#include <regex>
#include <string>

#include <spsd/spsd.hpp>

#include "../common/cuda_devices.hpp"

int main(int argc, char** argv) {
  const spsd_test::CudaDevices found = spsd_test::find_cuda_devices("gpu-probe");
  if (found.count == 0) return found.exit_code;
  spsd::Runtime runtime(argc, argv);
  const std::string info = spsd::runtime_info();
  std::cout << info << "\n";
  // runtime_info() reads "...; N CUDA device(s), NCCL a.b.c" or "...; <why no device>[, NCCL a.b.c]".
  std::smatch devices, nccl;
  if (!std::regex_search(info, devices, std::regex(R"((\d+) CUDA device\(s\))")) ||
      std::stoi(devices[1]) != found.count) {
    std::cout << "FAIL: the CUDA runtime counts " << found.count << " device(s), runtime_info() does not say so\n";
    return 1;
  }
  if (!std::regex_search(info, nccl, std::regex(R"(NCCL (\d+)\.(\d+)\.(\d+))"))) {
    std::cout << "FAIL: " << devices[1] << " CUDA device(s) but no NCCL version reported\n";
    return 1;
  }
  std::cout << "OK: " << devices[1] << " CUDA device(s), " << nccl[0] << "\n";
  return 0;
}
