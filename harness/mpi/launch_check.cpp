#include "harness/mpi/launch_check.h"

#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <string>

#include "core/error.h"
#include "harness/launch.h"
#include "harness/mpi/mpi_run.h"
#include "schedules/validate.h"

namespace ppbench::mpi {

void require_process_count(const World& world, int pipeline_ranks, int replicas) {
  if (world.size() != pipeline_ranks * replicas)
    throw UsageError(launch_environment().command + " started " + std::to_string(world.size()) +
                     " processes, but --pp " + std::to_string(pipeline_ranks) + " x --dp " +
                     std::to_string(replicas) + " needs " +
                     std::to_string(pipeline_ranks * replicas) +
                     " (one process per pipeline rank of each replica)");
}

void require_messages_fit(const PartitionPlan& plan) {
  // Room for the message's header (cpu_codec.h: its send time, tensor count and shapes).
  constexpr std::int64_t kHeader = 4096;
  constexpr std::int64_t kLargest = std::numeric_limits<int>::max() - kHeader;
  for (std::size_t k = 0; k < plan.stages.size(); ++k) {
    const std::int64_t bytes = plan.stages[k].boundary_bytes_out;
    if (bytes > kLargest)
      throw UsageError("stage " + std::to_string(k) + " hands " + std::to_string(bytes) +
                       " bytes per micro-batch to the next, more than one MPI message carries (" +
                       std::to_string(kLargest) +
                       "): split the model into more stages or make the micro-batch smaller");
  }
}

void agree_to_start(const World& world, const std::function<void()>& checks) {
  int code = 0;
  std::string message;
  try {
    checks();
  } catch (const UsageError& e) {
    code = 2, message = e.what();
  } catch (const InvalidSchedule& e) {
    code = 2, message = e.what();
  } catch (const EnvironmentError& e) {
    code = 3, message = e.what();
  } catch (const std::bad_alloc& e) {
    code = 3, message = std::string("out of host memory: ") + e.what();  // the machine's limit
  } catch (const std::exception& e) {
    code = 1, message = e.what();
  }
  // MPI_MAXLOC: the largest code, and the lowest rank holding it.
  int worst[2] = {code, world.rank()};
  check(MPI_Allreduce(MPI_IN_PLACE, worst, 1, MPI_2INT, MPI_MAXLOC, world.comm()),
        "MPI_Allreduce (launch check)");
  if (worst[0] != 0) throw JobRefused{worst[0], world.rank() == worst[1] ? message : std::string()};
}

}  // namespace ppbench::mpi
