// Philox-4x32-10 against the published known-answer vectors (Random123's kat_vectors), and the
// uniform/normal transforms' ranges.
#include <catch2/catch.hpp>
#include <spsd/spsd.hpp>

using namespace spsd;

TEST_CASE("philox4x32-10 known-answer vectors", "[random]") {
  auto check = [](philox::Block ctr, uint32_t k0, uint32_t k1, philox::Block expected) {
    philox::Block got = philox::philox4x32_10(ctr, k0, k1);
    for (int i = 0; i < 4; ++i) CHECK(got.v[i] == expected.v[i]);
  };
  check({{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  check({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
        {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
  check({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
        {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

TEST_CASE("uniform and normal transforms", "[random]") {
  for (uint64_t i = 0; i < 10000; ++i) {
    float uf = philox::uniform<float>(7, i);
    double ud = philox::uniform<double>(7, i);
    CHECK((uf >= 0.0f && uf < 1.0f));
    CHECK((ud >= 0.0 && ud < 1.0));
    CHECK(std::isfinite(philox::normal<double>(7, i)));
  }
  // Different seeds and indices give different streams.
  CHECK(philox::uniform<double>(1, 0) != philox::uniform<double>(2, 0));
  CHECK(philox::uniform<double>(1, 0) != philox::uniform<double>(1, 1));
}
