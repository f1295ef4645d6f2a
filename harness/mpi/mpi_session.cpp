#include "harness/mpi/mpi_session.h"

#include <unistd.h>

#include <chrono>
#include <limits>
#include <string>

#include "core/cpu_cores.h"
#include "core/error.h"
#include "harness/executor/naps.h"
#include "harness/mpi/job.h"

namespace ppbench::mpi {

namespace {
bool g_started = false;
// Whether World's constructor finished. Until it has, World::get() would run it again, and with
// it MPI_Init_thread, which MPI allows once: a constructor that failed after MPI started (a
// library without MPI_THREAD_SERIALIZED) must still let the error's report and the exit ask MPI
// what they need without get().
bool g_constructed = false;
}  // namespace

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw EnvironmentError(std::string("MPI: ") + what + ": " + std::string(text, len));
}

World::World() {
  int provided = 0;
  int argc = 0;
  char** argv = nullptr;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    throw EnvironmentError("MPI: MPI_Init_thread failed (is this process started by mpirun?)");
  g_started = true;
  // Errors come back as return codes, which check() turns into ppbench errors, instead of
  // ending the job inside MPI with its own message.
  check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  // Only one rank thread calls MPI at a time (the executor walks one rank per process), but
  // the data-parallel hooks and the walk may alternate: SERIALIZED is the least we rely on.
  if (provided < MPI_THREAD_SERIALIZED)
    throw EnvironmentError("MPI: the library provides thread level " + std::to_string(provided) +
                           ", ppbench needs MPI_THREAD_SERIALIZED or higher");
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_),
        "MPI_Comm_split_type");
  check(MPI_Comm_set_errhandler(node_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler (node)");
  check(MPI_Comm_rank(node_, &local_rank_), "MPI_Comm_rank (node)");
  check(MPI_Comm_size(node_, &local_size_), "MPI_Comm_size (node)");
  node_leader_ = rank_;
  check(MPI_Bcast(&node_leader_, 1, MPI_INT, 0, node_), "MPI_Bcast (node)");
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
  host_.assign(name, static_cast<std::size_t>(len));
  g_constructed = true;
}

World& World::get() {
  static World world;
  return world;
}

bool World::started() { return g_started; }

void World::finalize() {
  if (!g_started) return;
  g_started = false;
  if (g_constructed) {
    World& w = get();
    if (w.node_ != MPI_COMM_NULL) MPI_Comm_free(&w.node_);
  }
  MPI_Finalize();
}

void World::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  _exit(code);  // MPI_Abort does not return; if it did, nothing may run on
}

Grid::Grid(const World& world, int d, int r) : pipeline_ranks(d), replicas(r) {
  pipeline_rank = world.rank() % d;
  replica = world.rank() / d;
  check(MPI_Comm_split(world.comm(), replica, pipeline_rank, &pipeline), "MPI_Comm_split");
  check(MPI_Comm_split(world.comm(), pipeline_rank, replica, &data), "MPI_Comm_split");
  check(MPI_Comm_set_errhandler(pipeline, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler (pipeline)");
  check(MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler (data)");
}

Grid::~Grid() {
  if (!World::started()) return;
  if (pipeline != MPI_COMM_NULL) MPI_Comm_free(&pipeline);
  if (data != MPI_COMM_NULL) MPI_Comm_free(&data);
}

// MPI's own answers, not World's: these report a failure, which may be World's constructor's.
bool in_multi_process_job() {
  int size = 1;
  return World::started() && MPI_Comm_size(MPI_COMM_WORLD, &size) == MPI_SUCCESS && size > 1;
}
int job_rank() {
  int rank = 0;
  if (World::started()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}
void finish_job() { World::finalize(); }
void abort_job(int code) { World::abort(code); }

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

CoreSharing core_sharing(const World& world) {
  int leaders[2] = {world.node_leader(), -world.node_leader()};  // min and -max in one call
  check(MPI_Allreduce(MPI_IN_PLACE, leaders, 2, MPI_INT, MPI_MIN, world.comm()),
        "MPI_Allreduce (nodes of the job)");
  CpuMask mask = available_cpu_mask();
  check(MPI_Allreduce(MPI_IN_PLACE, mask.data(), static_cast<int>(mask.size()), MPI_BYTE, MPI_BOR,
                      world.node_comm()),
        "MPI_Allreduce (the node's cores)");
  const int cores = cpus_in(mask);
  CoreSharing sharing;
  sharing.node_oversubscribed = world.local_size() > cores;
  const bool one_node = leaders[0] == -leaders[1];
  if (one_node && sharing.node_oversubscribed) sharing.replay_cores = cores;
  return sharing;
}

void wait_request(MPI_Request& request, std::chrono::microseconds spin, const char* what) {
  SpinThenNap pause(spin);
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done != 0) return;
    pause.pause(SpinThenNap::Clock::now());
  }
}

double start_step_together(MPI_Comm comm, std::chrono::microseconds spin) {
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm, &request), "MPI_Ibarrier (step start)");
  wait_request(request, spin, "MPI_Test (step start)");
  double root_origin = steady_seconds();
  check(MPI_Ibcast(&root_origin, 1, MPI_DOUBLE, 0, comm, &request), "MPI_Ibcast (step clock)");
  wait_request(request, spin, "MPI_Test (step clock)");
  check(MPI_Ibarrier(comm, &request), "MPI_Ibarrier (step clock taken)");
  wait_request(request, spin, "MPI_Test (step clock taken)");
  return root_origin;
}

namespace {

// A round trip's receive. It spins a little, for an answer that comes at once: in a blocking
// MPI_Recv, across the development VM's emulated link, every round trip took 7.9 ms instead of
// 0.07, and the offsets were known only to within 4 ms.
void receive_answer(void* buffer, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                    const char* what) {
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Irecv(buffer, count, type, peer, tag, comm, &request), what);
  wait_request(request, std::chrono::microseconds(50), what);
}

}  // namespace

ClockOffset clock_offset_to_root(const World& world) {
  constexpr int kTurnTag = 7000, kPingTag = 7001;
  constexpr int kMaxRounds = 1000;
  constexpr int kPatience = 32;     // rounds in a row without a shorter round trip: it stops
  constexpr double kBudgetS = 0.2;  // per process
  ClockOffset mine;
  const MPI_Comm comm = world.comm();
  if (world.rank() == 0) {
    for (int peer = 1; peer < world.size(); ++peer) {
      int turn = 1;
      check(MPI_Send(&turn, 1, MPI_INT, peer, kTurnTag, comm), "MPI_Send (clock offsets)");
      for (;;) {
        double ping[2] = {0, 0};  // the peer's reading, and whether it wants an answer
        receive_answer(ping, 2, MPI_DOUBLE, peer, kPingTag, comm, "MPI_Irecv (clock offsets)");
        if (ping[1] == 0) break;
        const double t = steady_seconds();
        check(MPI_Send(&t, 1, MPI_DOUBLE, peer, kPingTag, comm), "MPI_Send (clock offsets)");
      }
    }
  } else {
    int turn = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Irecv(&turn, 1, MPI_INT, 0, kTurnTag, comm, &request), "MPI_Irecv (clock offsets)");
    wait_request(request, std::chrono::microseconds(0), "MPI_Test (clock offsets)");
    double best_rtt = std::numeric_limits<double>::infinity();
    const double begun = steady_seconds();
    for (int since_shorter = 0;;) {
      const double ping[2] = {steady_seconds(), 1};
      check(MPI_Send(ping, 2, MPI_DOUBLE, 0, kPingTag, comm), "MPI_Send (clock offsets)");
      double root = 0;
      receive_answer(&root, 1, MPI_DOUBLE, 0, kPingTag, comm, "MPI_Irecv (clock offsets)");
      const double back = steady_seconds();
      ++mine.rounds;
      if (back - ping[0] < best_rtt) {
        best_rtt = back - ping[0];
        mine.seconds = root - (ping[0] + back) / 2;
        since_shorter = 0;
      } else {
        ++since_shorter;
      }
      if (since_shorter >= kPatience || mine.rounds >= kMaxRounds || back - begun >= kBudgetS)
        break;
    }
    mine.uncertainty = best_rtt / 2;
    const double done[2] = {0, 0};
    check(MPI_Send(done, 2, MPI_DOUBLE, 0, kPingTag, comm), "MPI_Send (clock offsets)");
  }
  // The later processes' turns, waited out the same way.
  MPI_Request all = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm, &all), "MPI_Ibarrier (clock offsets)");
  wait_request(all, std::chrono::microseconds(0), "MPI_Test (clock offsets)");
  return mine;
}

}  // namespace ppbench::mpi
