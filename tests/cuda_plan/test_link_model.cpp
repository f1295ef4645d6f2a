#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/link_model.h"

namespace ppbench {
namespace {

std::string rejection(std::optional<double> bw, std::optional<double> lat) {
  try {
    make_link_model(bw, lat);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(LinkModel, LatencyPlusBytesOverBandwidth) {
  const auto m = make_link_model(50.0, 2.0);  // e.g. a PCIe-5-like link
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->transfer_seconds(0), 2e-6);
  // 100 MB at 50 GB/s: 2 ms, plus 2 us.
  EXPECT_NEAR(m->transfer_seconds(100'000'000), 2e-3 + 2e-6, 1e-15);
  EXPECT_EQ(m->describe(), "50 GB/s, 2 us");
}

TEST(LinkModel, MissingFlagsMeanNoModelOrNoCost) {
  EXPECT_FALSE(make_link_model(std::nullopt, std::nullopt));
  const auto latency_only = make_link_model(std::nullopt, 5.0);
  ASSERT_TRUE(latency_only);
  EXPECT_DOUBLE_EQ(latency_only->transfer_seconds(1'000'000'000), 5e-6);
  EXPECT_EQ(latency_only->describe(), "unlimited bandwidth, 5 us");
  const auto bandwidth_only = make_link_model(450.0, std::nullopt);
  ASSERT_TRUE(bandwidth_only);
  EXPECT_NEAR(bandwidth_only->transfer_seconds(450'000'000), 1e-3, 1e-15);
}

TEST(LinkModel, RejectsBadValuesNamingFlagAndValue) {
  EXPECT_EQ(rejection(0.0, std::nullopt),
            "--link-bandwidth must be a positive number of GB/s, got 0");
  EXPECT_EQ(rejection(-3.0, 1.0), "--link-bandwidth must be a positive number of GB/s, got -3");
  EXPECT_NE(rejection(INFINITY, 1.0).find("--link-bandwidth"), std::string::npos);
  EXPECT_EQ(rejection(10.0, -1.0),
            "--link-latency must be a non-negative number of microseconds, got -1");
  EXPECT_NE(rejection(10.0, NAN).find("--link-latency"), std::string::npos);
  EXPECT_EQ(rejection(10.0, 0.0), "");
}

}  // namespace
}  // namespace ppbench
