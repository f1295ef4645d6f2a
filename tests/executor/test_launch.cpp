// How ppbench reads the launcher that started it (harness/launch.h): mpirun, srun with PMIx, and
// srun without it, whose tasks `run` refuses; a batch script's own environment is no launch.
#include <map>
#include <string>
#include <tuple>

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

// Everything a launch environment says, to compare in one expectation.
std::tuple<bool, int, int, std::string, std::string> facts(const LaunchEnvironment& l) {
  return {l.by_mpi, l.rank, l.size, l.launcher, l.command};
}

TEST(Launch, MpirunIsOpenMpisAndSaysItsSize) {
  EXPECT_EQ(facts(from({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}})),
            std::make_tuple(true, 2, 4, "OpenMPI", "mpirun"));
}

// The variables srun --mpi=pmix set on the development VM (Slurm 22.05): PMIx's rank, the step's.
TEST(Launch, SrunWithPmixIsAnMpiJobStartedBySrun) {
  EXPECT_EQ(facts(from({{"PMIX_RANK", "1"},
                        {"SLURM_PROCID", "1"},
                        {"SLURM_NTASKS", "2"},
                        {"SLURM_STEP_NUM_TASKS", "2"}})),
            std::make_tuple(true, 1, 2, "PMIx", "srun"));
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
  EXPECT_EQ(
      facts(from({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_NUM_TASKS", "4"}})),
      std::make_tuple(false, 3, 4, "Slurm", "srun"));
  // One task alone is an ordinary run.
  EXPECT_EQ(from({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}}).launcher, "");
}

// `sbatch -n 4 script.sh` runs the script once with SLURM_NTASKS=4 and SLURM_PROCID=0, and no
// step: a ppbench the script starts is an ordinary run (or mpirun's, inside it).
TEST(Launch, ABatchScriptsOwnEnvironmentIsNoLaunch) {
  EXPECT_EQ(facts(from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}})),
            std::make_tuple(false, 0, 1, "", ""));
  EXPECT_EQ(facts(from({})), std::make_tuple(false, 0, 1, "", ""));
}

TEST(Launch, MalformedVariablesCountAsUnset) {
  EXPECT_FALSE(from({{"OMPI_COMM_WORLD_RANK", "x1"}}).by_mpi);
  EXPECT_FALSE(from({{"OMPI_COMM_WORLD_RANK", ""}}).by_mpi);
  EXPECT_EQ(from({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "-3"}}).size, -1);
}

// Messages every process would print alike are left to process 0 only inside a launch of several
// that says so; a rank variable left in a plain shell is no such launch, and its process speaks.
TEST(Launch, OnlyALaunchOfSeveralLeavesMessagesToProcessZero) {
  const auto quiet = [](std::map<std::string, std::string> vars) {
    return from(std::move(vars)).leaves_messages_to_process_zero();
  };
  EXPECT_TRUE(quiet({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_FALSE(quiet({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_TRUE(quiet({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_NUM_TASKS", "4"}}));
  // Stray: no size, a size of one, or a rank past the size.
  EXPECT_FALSE(quiet({{"PMI_RANK", "1"}}));
  EXPECT_FALSE(quiet({{"PMI_RANK", "1"}, {"PMI_SIZE", "1"}}));
  EXPECT_FALSE(quiet({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "1"}}));
  EXPECT_FALSE(quiet({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
}

}  // namespace
}  // namespace ppbench
