// Which GPU a process of an mpirun job takes, from its local rank (harness/cuda/local_gpu.h).
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/local_gpu.h"

namespace ppbench {
namespace {

auto env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(LocalGpu, LocalRankComesFromTheLaunchersVariableOpenMpiFirst) {
  EXPECT_EQ(local_rank_from_env(env({})).rank, -1);
  EXPECT_EQ(local_rank_from_env(env({{"SLURM_LOCALID", "3"}})).rank, 3);
  EXPECT_EQ(local_rank_from_env(env({{"SLURM_LOCALID", "3"}})).source, "SLURM_LOCALID");
  EXPECT_EQ(local_rank_from_env(env({{"MPI_LOCALRANKID", "2"}})).rank, 2);
  const LocalRank both =
      local_rank_from_env(env({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"SLURM_LOCALID", "5"}}));
  EXPECT_EQ(both.rank, 1);
  EXPECT_EQ(both.source, "OMPI_COMM_WORLD_LOCAL_RANK");
  // an empty variable is not set
  EXPECT_EQ(
      local_rank_from_env(env({{"OMPI_COMM_WORLD_LOCAL_RANK", ""}, {"SLURM_LOCALID", "0"}})).rank,
      0);
}

TEST(LocalGpu, AMalformedLocalRankIsNamed) {
  for (const char* bad : {"-1", "x", "1x", "99999999"}) {
    try {
      local_rank_from_env(env({{"SLURM_LOCALID", bad}}));
      ADD_FAILURE() << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("SLURM_LOCALID="), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(LocalGpu, EachLocalRankTakesItsOwnGpu) {
  EXPECT_EQ(gpu_of_local_rank(0, 1, 1), 0);
  EXPECT_EQ(gpu_of_local_rank(3, 4, 8), 3);
  EXPECT_EQ(gpu_of_local_rank(7, 8, 8), 7);
}

TEST(LocalGpu, FewerGpusThanLocalProcessesIsRefusedInOneLine) {
  for (int visible : {0, 1, 3}) {
    try {
      gpu_of_local_rank(0, 4, visible);
      ADD_FAILURE() << visible;
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("a GPU count that does not match"), std::string::npos) << m;
      EXPECT_NE(m.find("runs 4 processes"), std::string::npos) << m;
      EXPECT_NE(m.find("shows " + std::to_string(visible) + " GPU"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
  EXPECT_THROW(gpu_of_local_rank(4, 4, 8), std::logic_error);
}

}  // namespace
}  // namespace ppbench
