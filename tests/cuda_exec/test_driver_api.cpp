// The driver entry points of harness/cuda/driver_api.h against the toolkit's cudaTypedefs.h: each
// is asked for at a version whose PFN_<symbol>_v<version> typedef exists (asking for an older
// ABI than a symbol's first release returns nothing, which broke every virtual-device run when
// cuGreenCtxStreamCreate, new in 12.5, was asked for at 12.4), and each member's type is the
// signature cuda.h declares. Host-only: no driver is loaded.
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>

#include <gtest/gtest.h>

#include "harness/cuda/driver_api.h"

namespace ppbench::cuda {
namespace {

// The typedef each member is declared with is the function cuda.h declares.
#define PPBENCH_SAME_SIGNATURE(symbol, version)                                 \
  static_assert(std::is_same_v<decltype(&::symbol), PFN_##symbol##_v##version>, \
                #symbol ": cuda.h's declaration differs from PFN_" #symbol "_v" #version);
PPBENCH_DRIVER_ENTRY_POINTS(PPBENCH_SAME_SIGNATURE)
#undef PPBENCH_SAME_SIGNATURE

std::string typedefs_h() {
  std::ifstream in(PPBENCH_CUDA_TYPEDEFS_H);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(DriverApi, EveryEntryPointIsAskedForAtTheVersionOfItsTypedef) {
  const std::string header = typedefs_h();
  ASSERT_NE(header.find("PFN_cuGetErrorName"), std::string::npos)
      << "could not read " << PPBENCH_CUDA_TYPEDEFS_H;
  ASSERT_FALSE(driver_entry_points().empty());
  for (const DriverEntryPoint& e : driver_entry_points())
    EXPECT_EQ(check_entry_point(e, header), "") << e.symbol;
}

TEST(DriverApi, AVersionOlderThanTheSymbolIsRejected) {
  const std::string header = typedefs_h();
  const std::string why = check_entry_point({"cuGreenCtxStreamCreate", 12040}, header);
  EXPECT_NE(why.find("PFN_cuGreenCtxStreamCreate_v12040"), std::string::npos) << why;
  EXPECT_NE(why.find("12050"), std::string::npos) << why;  // names the versions that exist
  EXPECT_NE(check_entry_point({"cuNoSuchCall", 12000}, header).find("no typedef"),
            std::string::npos);
}

TEST(DriverApi, EntryPointsAreListedOnce) {
  std::set<std::string> seen;
  for (const DriverEntryPoint& e : driver_entry_points())
    EXPECT_TRUE(seen.insert(e.symbol).second) << e.symbol;
}

}  // namespace
}  // namespace ppbench::cuda
