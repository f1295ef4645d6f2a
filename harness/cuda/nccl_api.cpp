#include "harness/cuda/nccl_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"

namespace ppbench::cuda {

#if PPBENCH_HAVE_NCCL_H

namespace {

struct Loaded {
  NcclApi api;
  std::string path;     // where it came from
  std::string failure;  // why it could not be loaded ("" when loaded)
};

std::atomic<bool> g_loaded{false};

void* open_first(std::string& path, std::string& tried) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("PPBENCH_NCCL_LIBRARY"); env && *env) candidates.push_back(env);
  candidates.push_back("libnccl.so.2");
#ifdef PPBENCH_NCCL_BUILD_LIBRARY
  candidates.push_back(PPBENCH_NCCL_BUILD_LIBRARY);
#endif
  for (const std::string& c : candidates) {
    // RTLD_LOCAL: NCCL's symbols stay out of the global namespace; they are reached through
    // the table only.
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      path = c;
      return h;
    }
    const char* err = dlerror();
    tried += (tried.empty() ? "" : "; ") + c + ": " + (err ? err : "not found");
  }
  return nullptr;
}

template <class Fn>
bool bind(void* handle, const char* symbol, Fn& fn, std::string& failure) {
  fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (!fn)
    failure = std::string("the NCCL library has no ") + symbol + " (NCCL 2.19 or newer is needed)";
  return fn != nullptr;
}

const Loaded& load() {
  static Loaded l;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    void* h = open_first(l.path, tried);
    if (!h) {
      l.failure = "NCCL could not be loaded (tried " + tried +
                  "); --gpus with more than one GPU needs libnccl.so.2: put its folder (the system "
                  "CUDA's lib64, or the nvidia-nccl wheel's nvidia/nccl/lib) on LD_LIBRARY_PATH or "
                  "name the file in PPBENCH_NCCL_LIBRARY";
      return;
    }
    NcclApi& a = l.api;
    const bool ok =
        bind(h, "ncclGetVersion", a.GetVersion, l.failure) &&
        bind(h, "ncclGetErrorString", a.GetErrorString, l.failure) &&
        bind(h, "ncclGetUniqueId", a.GetUniqueId, l.failure) &&
        bind(h, "ncclCommInitAll", a.CommInitAll, l.failure) &&
        bind(h, "ncclCommInitRank", a.CommInitRank, l.failure) &&
        bind(h, "ncclCommDestroy", a.CommDestroy, l.failure) &&
        bind(h, "ncclCommAbort", a.CommAbort, l.failure) &&
        bind(h, "ncclCommGetAsyncError", a.CommGetAsyncError, l.failure) &&
        bind(h, "ncclGroupStart", a.GroupStart, l.failure) &&
        bind(h, "ncclGroupEnd", a.GroupEnd, l.failure) && bind(h, "ncclSend", a.Send, l.failure) &&
        bind(h, "ncclRecv", a.Recv, l.failure) && bind(h, "ncclAllReduce", a.AllReduce, l.failure);
    if (ok)
      g_loaded = true;
    else
      l.failure += " (" + l.path + ")";
  });
  return l;
}

}  // namespace

const NcclApi& nccl() {
  const Loaded& l = load();
  if (!l.failure.empty()) throw EnvironmentError(l.failure);
  return l.api;
}

bool nccl_compiled_in() { return true; }
bool nccl_loaded() { return g_loaded; }

bool try_load_nccl(std::string* why) {
  const Loaded& l = load();
  if (why) *why = l.failure;
  return l.failure.empty();
}

void release_comm(ncclComm_t comm, bool failed) {
  if (comm == nullptr) return;
  failed ? nccl().CommAbort(comm) : nccl().CommDestroy(comm);
}

void nccl_check(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return;
  const std::string what = std::string("NCCL: ") + call + ": " + nccl().GetErrorString(r);
  // A call NCCL finds malformed is ppbench's own bug (exit 1); anything else is the machine's:
  // the library, a driver, the network or a peer that failed (exit 3).
  if (r == ncclInvalidArgument || r == ncclInvalidUsage) throw std::logic_error(what);
  throw EnvironmentError(what);
}

std::string nccl_version_text() {
  if (!g_loaded) return "not loaded";
  int v = 0;
  if (nccl().GetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

std::string nccl_library_path() { return g_loaded ? load().path : ""; }

#else

bool nccl_compiled_in() { return false; }
bool nccl_loaded() { return false; }
bool try_load_nccl(std::string* why) {
  if (why) *why = "this build has no NCCL (nccl.h was not found by CMake)";
  return false;
}
std::string nccl_version_text() { return "not built"; }
std::string nccl_library_path() { return ""; }

#endif

}  // namespace ppbench::cuda
