// What main needs of an MPI job, without MPI's header: whether this process is one of several,
// the end of MPI at exit, and ending every process when one fails (the others may be waiting on
// it in a collective, which has no timeout).
#pragma once

namespace ppbench::mpi {

bool in_multi_process_job();  // MPI started here, with more than one process
int job_rank();               // this process in the job (0 outside one)
void finish_job();            // MPI_Finalize, when MPI was started
[[noreturn]] void abort_job(int code);

}  // namespace ppbench::mpi
