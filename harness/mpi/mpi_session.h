// The MPI side of a multi-process run (`mpirun -np P ppbench run ...`): initialisation once per
// process, errors returned rather than fatal (MPI_ERRORS_RETURN, each turned into a ppbench
// error naming the call), the communicators of a D-rank pipeline replicated R times, and the
// clock offset of each process from process 0, so that every process's trace lies on one clock.
//
// Process w runs pipeline rank p = w mod D of replica d = w / D: the ranks of one replica are
// neighbours in MPI's numbering (and so, with mpirun's default by-slot mapping, on one node
// where they fit), the replicas of a stage are D apart.
#pragma once

#include <chrono>
#include <string>

#include <mpi.h>

namespace ppbench::mpi {

// main's view of the job, without MPI's header (harness/mpi/job.h).

// Throws EnvironmentError "MPI: <what>: <MPI's error string>" unless rc is MPI_SUCCESS.
void check(int rc, const char* what);

// The process's MPI world: MPI_Init_thread at the first call.
class World {
 public:
  static World& get();
  static bool started();  // initialised by this process (and not finalised)
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among the processes of this node
  int local_size() const { return local_size_; }  // the processes of this node
  // The node this process runs on, named by the world rank of its first process: MPI's own view
  // of "node" (processes that share memory), which holds where host names coincide (containers,
  // several launch agents on one machine) and is what the shared-memory split decides.
  int node_leader() const { return node_leader_; }
  const std::string& host() const { return host_; }
  MPI_Comm comm() const { return MPI_COMM_WORLD; }
  // The processes of this node (MPI_COMM_TYPE_SHARED), ranked as in the world.
  MPI_Comm node_comm() const { return node_; }

  // At the end of main; a no-op when MPI was never started.
  static void finalize();
  // Ends every process of the job (a failure on one process that the others cannot see).
  [[noreturn]] static void abort(int code);

 private:
  World();
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, node_leader_ = 0;
  MPI_Comm node_ = MPI_COMM_NULL;  // freed by finalize()
  std::string host_;
};

// The communicators of P = D * R processes.
struct Grid {
  int pipeline_ranks = 1, replicas = 1;
  int pipeline_rank = 0, replica = 0;
  MPI_Comm pipeline = MPI_COMM_NULL;  // the D processes of this replica, by pipeline rank
  MPI_Comm data = MPI_COMM_NULL;      // the R processes holding this pipeline rank, by replica

  Grid(const World& world, int pipeline_ranks, int replicas);
  ~Grid();
  Grid(const Grid&) = delete;
  Grid& operator=(const Grid&) = delete;
};

// This process's steady clock against process 0's (Cristian's method: the midpoint of the
// shortest of a series of ping-pongs with process 0; 0 on process 0).
struct ClockOffset {
  double seconds = 0;  // to add to this process's clock to read process 0's
  // The true offset lies within seconds ± uncertainty: half the shortest round trip.
  double uncertainty = 0;
  int rounds = 0;  // ping-pongs taken
};

// Collective. One process at a time ping-pongs with process 0 while the others wait without
// holding a core, and it goes on while its shortest round trip still shortens (until 32 rounds
// in a row bring no shorter one; 1000 rounds or 0.2 s at most): where processes outnumber cores,
// a round trip that includes another process's time slice is long, and half of it is how far
// the offset may be off.
ClockOffset clock_offset_to_root(const World& world);

// How the job's processes sit on the cores they may run on (their CPU affinity masks, so
// mpirun's --bind-to, taskset and cgroups count). Collective.
struct CoreSharing {
  // Whether the processes of this process's node outnumber the cores they may use together
  // (the union of their masks): then a waiting process must not spin on a core another needs.
  bool node_oversubscribed = false;
  // Where the job runs on one node and its processes outnumber those cores, the cores: the
  // replay then shares them among the processes, as among rank threads (core/cpu_cores.h). 0
  // where every process has a core of its own, or where the job spans several nodes (each
  // node's processes would share their own node's cores, which one pool of cores does not
  // model).
  int replay_cores = 0;
};
CoreSharing core_sharing(const World& world);

// This process's steady clock in seconds.
double steady_seconds();

// Waits for a request to complete: spins for `spin` (0 where processes share cores), then naps
// between looks, as the transport's waits do. Not a blocking MPI wait, which polls without a
// pause: across TCP on a machine with few cores, processes polling so kept the kernel from
// moving their bytes, and each message took about one scheduler tick (docs/multi-process.md,
// "One clock, one record").
void wait_request(MPI_Request& request, std::chrono::microseconds spin, const char* what);

// The step's start, the same on every process: a barrier, then process 0's steady clock
// (steady_seconds) as it left it, broadcast, then a second barrier, each waited for as
// wait_request does. The second barrier keeps process 0 from starting its step while its
// broadcast has not yet left or been taken: without it the others began 3-12 ms after process 0
// in 5 of 30 runs across the development VM's emulated link (0 of 30 with it).
double start_step_together(MPI_Comm comm, std::chrono::microseconds spin);

}  // namespace ppbench::mpi
