// gpu-probe: the runtime sees CUDA devices and an NCCL version. Exits 77 (meson: SKIP) where
// no CUDA device is usable; runtime_info() says why.
#include <iostream>
#include <regex>
#include <string>

#include <spsd/spsd.hpp>

int main(int argc, char** argv) {
  spsd::Runtime runtime(argc, argv);
  const std::string info = spsd::runtime_info();
  std::cout << info << "\n";
  // runtime_info() reads "...; N CUDA device(s), NCCL a.b.c" or "...; <why no device>[, NCCL a.b.c]".
  std::smatch devices, nccl;
  if (!std::regex_search(info, devices, std::regex(R"((\d+) CUDA device\(s\))")) || std::stoi(devices[1]) == 0) {
    std::cout << "SKIP: no usable CUDA device\n";
    return 77;
  }
  if (!std::regex_search(info, nccl, std::regex(R"(NCCL (\d+)\.(\d+)\.(\d+))"))) {
    std::cout << "FAIL: " << devices[1] << " CUDA device(s) but no NCCL version reported\n";
    return 1;
  }
  std::cout << "OK: " << devices[1] << " CUDA device(s), " << nccl[0] << "\n";
  return 0;
}
