#include "harness/mpi/launch_check.h"

#include <exception>
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
