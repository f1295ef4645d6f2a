// How ppbench reads the launcher that started it (harness/launch.h): mpirun, srun with PMIx, and
// srun without it, whose tasks `run` refuses; a batch script's own environment is no launch.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "harness/launch.h"

namespace ppbench {
namespace {

LaunchEnvironment from(std::map<std::string, std::string> vars) {
  return launch_environment_from([&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(Launch, MpirunIsOpenMpisAndSaysItsSize) {
  const LaunchEnvironment l = from({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_TRUE(l.by_mpi);
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.launcher, "OpenMPI");
  EXPECT_EQ(l.command, "mpirun");
}

// The variables srun --mpi=pmix set on the development VM (Slurm 22.05): PMIx's rank, the step's.
TEST(Launch, SrunWithPmixIsAnMpiJobStartedBySrun) {
  const LaunchEnvironment l = from({{"PMIX_RANK", "1"},
                                    {"SLURM_PROCID", "1"},
                                    {"SLURM_NTASKS", "2"},
                                    {"SLURM_STEP_NUM_TASKS", "2"}});
  EXPECT_TRUE(l.by_mpi);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.size, 2);
  EXPECT_EQ(l.launcher, "PMIx");
  EXPECT_EQ(l.command, "srun");
  // PMIx from another launcher (no Slurm step) is named as a launcher, not as srun
  EXPECT_EQ(from({{"PMIX_RANK", "0"}}).command, "the launcher");
  // A step of 2 tasks inside an allocation of 4: the step's count
  EXPECT_EQ(from({{"PMIX_RANK", "0"},
                  {"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "4"},
                  {"SLURM_STEP_NUM_TASKS", "2"}})
                .size,
            2);
}

TEST(Launch, SrunWithoutPmiStartsCopiesNotAnMpiJob) {
  const LaunchEnvironment l =
      from({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_NUM_TASKS", "4"}});
  EXPECT_FALSE(l.by_mpi);
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.launcher, "Slurm");
  EXPECT_EQ(l.command, "srun");
  // One task alone is an ordinary run.
  EXPECT_EQ(from({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}}).launcher, "");
}

// `sbatch -n 4 script.sh` runs the script once with SLURM_NTASKS=4 and SLURM_PROCID=0, and no
// step: a ppbench the script starts is an ordinary run (or mpirun's, inside it).
TEST(Launch, ABatchScriptsOwnEnvironmentIsNoLaunch) {
  const LaunchEnvironment l = from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}});
  EXPECT_FALSE(l.by_mpi);
  EXPECT_EQ(l.rank, 0);
  EXPECT_EQ(l.size, 1);
  EXPECT_EQ(l.launcher, "");
  EXPECT_EQ(from({}).launcher, "");
}

TEST(Launch, MalformedVariablesCountAsUnset) {
  EXPECT_FALSE(from({{"OMPI_COMM_WORLD_RANK", "x1"}}).by_mpi);
  EXPECT_FALSE(from({{"OMPI_COMM_WORLD_RANK", ""}}).by_mpi);
  EXPECT_EQ(from({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "-3"}}).size, -1);
}

}  // namespace
}  // namespace ppbench
