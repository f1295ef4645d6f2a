// Pins the v-half and v-min orders over a broad range of (D, N), so that a
// change to the squeeze's bookkeeping (v_memory.cpp's RankMemory: a tree over
// each rank's slots instead of a replay of the changed stretch) cannot change
// an order unnoticed. The fingerprints are FNV-1a over the concatenated
// to_text of every size below, printed by the replaying implementation, whose
// orders scripts/v_memory_reference_orders.py --compare matched against the
// authors' generator for D <= 12, N <= 30.
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sim_helpers.h"

namespace ppbench {
namespace {

std::vector<std::pair<int, int>> sizes() {
  std::vector<std::pair<int, int>> out;
  for (int d = 1; d <= 24; ++d)
    for (int n : std::set<int>{1, 2, d, d + 1, 2 * d, 3 * d}) out.push_back({d, n});
  for (int d : {32, 64, 128}) out.push_back({d, d + 1});
  return out;
}

std::uint64_t fingerprint(const char* name) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& [d, n] : sizes())
    for (const char c : to_text(generate({name, d, n, 0, 0}))) {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ULL;
    }
  return h;
}

TEST(VMemory, OrdersMatchTheirFingerprints) {
  EXPECT_EQ(sizes().size(), 143U);
  EXPECT_EQ(fingerprint("v-half"), 0xe6d4291454d763a9ULL);
  EXPECT_EQ(fingerprint("v-min"), 0xef7d2ac375038621ULL);
}

}  // namespace
}  // namespace ppbench
