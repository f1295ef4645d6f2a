// The emulated thread block itself (simt.h): barriers, warp-wide exchanges, and the errors it
// gives for a kernel a GPU would leave undefined.
#include <vector>

#include <gtest/gtest.h>

#include "tests/simt/simt.h"

namespace ppbench::simt {
namespace {

// Every thread writes, the barrier, then every thread reads its neighbour's value: without the
// barrier's wait a thread would read before its neighbour wrote.
TEST(Simt, ABarrierHoldsEveryThreadUntilAllHaveArrived) {
  std::vector<int> slot(64, -1), seen(64, -2);
  std::vector<unsigned> blocks_seen;
  launch(
      2, 64,
      [&] {
        const unsigned t = thread_idx().x;
        slot[t] = static_cast<int>(t + 100 * block_idx().x);
        sync_threads();
        seen[t] = slot[(t + 1) % 64];
        sync_threads();
      },
      [&](unsigned b) { blocks_seen.push_back(b); });
  for (unsigned t = 0; t < 64; ++t) EXPECT_EQ(seen[t], static_cast<int>((t + 1) % 64 + 100)) << t;
  EXPECT_EQ(blocks_seen, (std::vector<unsigned>{0, 1}));
}

// A butterfly exchange: lane l receives lane l ^ mask's value.
TEST(Simt, AWarpCollectiveSeesEveryLanesOperand) {
  std::vector<int> got(64, -1);
  launch(1, 64, [&] {
    const int lane = lane_id();
    const int warp = static_cast<int>(thread_idx().x) / kWarpSize;
    got[thread_idx().x] =
        warp_collective<int>("xor3", lane + 1000 * warp, [](const auto& in, const auto& out) {
          for (int l = 0; l < kWarpSize; ++l) *out[l] = *in[l ^ 3];
        });
  });
  for (int t = 0; t < 64; ++t) EXPECT_EQ(got[t], ((t % 32) ^ 3) + 1000 * (t / 32)) << t;
}

// Lane 0 skips the exchange that the rest of its warp waits at: undefined on a GPU, an error
// naming the warp here (not a hang).
TEST(Simt, AWarpInstructionFromDivergentCodeIsAnError) {
  auto body = [] {
    if (lane_id() == 0) return;
    warp_collective<int>("shfl", 1, [](const auto&, const auto& out) {
      for (int l = 0; l < kWarpSize; ++l) *out[l] = 0;
    });
  };
  try {
    launch(1, 32, body);
    FAIL() << "no error";
  } catch (const SimtError& e) {
    EXPECT_NE(std::string(e.what()).find("warp 0: 31 of 32 lanes at shfl"), std::string::npos)
        << e.what();
  }
}

TEST(Simt, LanesAtDifferentWarpInstructionsAreAnError) {
  auto body = [] {
    const char* name = lane_id() == 7 ? "ldmatrix" : "mma";
    warp_collective<int>(name, 1, [](const auto&, const auto& out) {
      for (int l = 0; l < kWarpSize; ++l) *out[l] = 0;
    });
  };
  EXPECT_THROW(launch(1, 32, body), SimtError);
}

TEST(Simt, AThreadsExceptionNamesTheThreadAndBlock) {
  try {
    launch(3, 32, [] {
      if (block_idx().x == 2 && thread_idx().x == 5) throw std::runtime_error("out of range");
    });
    FAIL() << "no error";
  } catch (const SimtError& e) {
    EXPECT_STREQ(e.what(), "thread 5 of block 2: out of range");
  }
}

const Interleaving kOrders[] = {
    {Order::kInOrder, 0}, {Order::kReversed, 0}, {Order::kShuffled, 1}, {Order::kShuffled, 2}};

// A race: thread 0 of each warp publishes a value that its warp's other lanes read after a
// warp-wide exchange, which orders no shared memory (the race a GPU's racecheck found in the
// fused attention forward). What the lanes read depends on the order the emulation runs them,
// so the orders disagree, and the same kernel with a barrier does not.
std::vector<int> publish(const Interleaving& interleaving, bool barrier) {
  std::vector<int> shared(2, 0), seen(64, -1);
  launch(
      1, 64,
      [&] {
        const unsigned t = thread_idx().x, warp = t / kWarpSize;
        warp_collective<int>("shfl", 0, [](const auto&, const auto& out) {
          for (int l = 0; l < kWarpSize; ++l) *out[l] = 0;
        });
        if (lane_id() == 0) shared[warp] = 7;
        if (barrier) sync_threads();
        seen[t] = shared[warp];
      },
      {}, interleaving);
  return seen;
}

TEST(Simt, TheOrderOfThreadsExposesARaceAndLeavesABarrierAlone) {
  std::vector<std::vector<int>> racy;
  for (const Interleaving& i : kOrders) {
    racy.push_back(publish(i, false));
    EXPECT_EQ(publish(i, true), std::vector<int>(64, 7)) << to_string(i);
  }
  // Lanes that run before lane 0 in a pass read 0; which lanes those are depends on the order.
  // (In order and reversed are fixed orders; the shuffled ones follow the library's shuffle.)
  EXPECT_NE(racy[0], racy[1]);
}

TEST(Simt, EveryOrderRunsEveryThreadOfEveryBlock) {
  for (const Interleaving& i : kOrders) {
    std::vector<int> ran(3 * 96, 0);
    launch(
        3, 96, [&] { ++ran[block_idx().x * 96 + thread_idx().x]; }, {}, i);
    EXPECT_EQ(ran, std::vector<int>(3 * 96, 1)) << to_string(i);
  }
}

TEST(Simt, ABlockMustBeWholeWarps) {
  EXPECT_THROW(launch(1, 48, [] {}), SimtError);
}

}  // namespace
}  // namespace ppbench::simt
