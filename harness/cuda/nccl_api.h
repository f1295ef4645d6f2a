// NCCL, loaded at run time and only by a run that needs it (`--gpus` with more than one GPU).
// ppbench does not link libnccl: a single-GPU run, virtual devices, and every command that is
// not `run --backend cuda` start and work on a machine without NCCL. nccl.h gives the types at
// build time (PPBENCH_HAVE_NCCL_H); without it the NCCL transport is not compiled in.
//
// The library is looked for, in order: $PPBENCH_NCCL_LIBRARY (a path), "libnccl.so.2" through the
// dynamic loader (LD_LIBRARY_PATH, the system's cache), then the library CMake found at build time.
#pragma once

#include <string>

#if PPBENCH_HAVE_NCCL_H
#include <nccl.h>
#endif

namespace ppbench::cuda {

#if PPBENCH_HAVE_NCCL_H
// The NCCL calls ppbench makes, as nccl.h declares them.
struct NcclApi {
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitAll) CommInitAll = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
};

// Loads NCCL on first use. Throws ppbench::EnvironmentError (exit code 3) naming where it looked
// and what the loader said.
const NcclApi& nccl();

// Lets a communicator go: ncclCommDestroy, or ncclCommAbort where a step failed with work still
// posted on it (destroy would wait for peers that may never come). Null: nothing. Either one
// waits until every CUDA graph that captured work on the communicator is destroyed (NCCL 2.26
// and newer): destroy those graphs first.
void release_comm(ncclComm_t comm, bool failed);

// Throws where `r` is not ncclSuccess, naming `call` and NCCL's own words: std::logic_error for
// an invalid argument or usage (ppbench's bug), EnvironmentError for the rest.
void nccl_check(ncclResult_t r, const char* call);

// Runs `post` (ncclSend, ncclRecv, ncclAllReduce calls, each checked) between ncclGroupStart and
// ncclGroupEnd. A throw inside still closes the group before it goes on: a group left open on a
// thread swallows that thread's later NCCL calls, ncclCommAbort's clean-up included.
template <class Post>
void nccl_group(Post&& post) {
  nccl_check(nccl().GroupStart(), "ncclGroupStart");
  try {
    post();
  } catch (...) {
    nccl().GroupEnd();
    throw;
  }
  nccl_check(nccl().GroupEnd(), "ncclGroupEnd");
}
#endif

// Whether this build can use NCCL at all (nccl.h was found), and whether this process has loaded
// it; neither call loads anything.
bool nccl_compiled_in();
bool nccl_loaded();
// Loads NCCL if it is not loaded yet; false (and `why`) when it cannot be (tests skip on it).
bool try_load_nccl(std::string* why = nullptr);
// The loaded library's version ("2.28.9") and path, or why there is none ("not loaded",
// "not built"): for records, without loading it.
std::string nccl_version_text();
std::string nccl_library_path();

}  // namespace ppbench::cuda
