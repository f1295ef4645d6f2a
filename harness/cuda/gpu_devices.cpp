#include "harness/cuda/gpu_devices.h"

#include "core/error.h"
#include "harness/cuda/driver_api.h"
#include "harness/cuda/nvtx.h"
#include "schedules/registry.h"
#include "workloads/cuda/check.h"

namespace ppbench::cuda {

void check_driver(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = "unknown";
  driver_api().cuGetErrorName(r, &name);
  throw cuda::CudaError(std::string(call) + " failed: " + name);
}

#define DRV_CHECK(call) check_driver((call), #call)

void RankDevice::make_current() const {
  if (context)
    DRV_CHECK(driver_api().cuCtxSetCurrent(context));
  else
    CUDA_CHECK(cudaSetDevice(device));
}

// A function-try-block: any driver or runtime failure while the devices are set up (an old
// driver without green contexts, a GPU held in exclusive-process mode, fewer partitions than
// asked) is this machine's problem, exit code 3, not an internal error. `out` is released
// before the handler runs.
std::unique_ptr<GpuDevices> GpuDevices::open(const GpuPlacement& placement, int partition_sms) try {
  std::unique_ptr<GpuDevices> out(new GpuDevices());
  out->placement_ = placement;
  int visible = 0;
  CUDA_CHECK(cudaGetDeviceCount(&visible));
  for (int g : placement.gpus)
    ppbench::require(g < visible, "GPU " + std::to_string(g) + " is not visible (this node shows " +
                                      std::to_string(visible) + ")");
  auto name_of = [](int dev) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    return std::make_pair(std::string(prop.name), prop.multiProcessorCount);
  };
  if (placement.kind == GpuPlacement::Kind::Gpus) {
    for (int r = 0; r < placement.ranks(); ++r) {
      // Listed before its streams are made, so that the destructor releases what a failure
      // part-way leaves behind.
      RankDevice& rd = out->ranks_.emplace_back();
      rd.rank = r;
      rd.device = placement.device_of(r);
      CUDA_CHECK(cudaSetDevice(rd.device));
      CUDA_CHECK(cudaFree(nullptr));  // creates the primary context now, not inside the step
      auto [name, sms] = name_of(rd.device);
      rd.sms = sms;
      out->gpu_names.push_back(name);
      CUDA_CHECK(cudaStreamCreateWithFlags(&rd.compute, cudaStreamNonBlocking));
      CUDA_CHECK(cudaStreamCreateWithFlags(&rd.comm, cudaStreamNonBlocking));
    }
  } else {
    out->virtual_devices = true;
    const int dev_ordinal = placement.gpus.at(0);
    const DriverApi& d = driver_api();
    CUDA_CHECK(cudaSetDevice(dev_ordinal));
    CUDA_CHECK(cudaFree(nullptr));
    CUdevice dev = dev_ordinal;  // a CUdevice is the ordinal
    CUdevResource whole{};
    DRV_CHECK(d.cuDeviceGetDevResource(dev, &whole, CU_DEV_RESOURCE_TYPE_SM));
    out->granularity = {static_cast<int>(whole.sm.minSmPartitionSize),
                        static_cast<int>(whole.sm.smCoscheduledAlignment)};
    out->partition_plan = plan_sm_partitions(static_cast<int>(whole.sm.smCount), out->granularity,
                                             placement.virtual_devices, partition_sms);
    // One split call for all partitions: groups of one split are disjoint and symmetrical,
    // which successive splits of remainders do not promise. The driver may cut fewer groups of
    // k SMs than k divides into the GPU (cluster and GPC layout), so without an explicit size
    // k steps down by the alignment until the split yields D groups; an explicit size is kept
    // (the scaling comparison needs exactly that k) and the shortfall is reported below.
    std::vector<CUdevResource> groups(static_cast<std::size_t>(placement.virtual_devices));
    const int first_k = out->partition_plan.sms_per_partition;
    unsigned int count = 0;
    for (;;) {
      count = static_cast<unsigned int>(groups.size());
      CUdevResource remaining{};
      const CUresult r = d.cuDevSmResourceSplitByCount(
          groups.data(), &count, &whole, &remaining, 0,
          static_cast<unsigned int>(out->partition_plan.sms_per_partition));
      // A size the GPU's layout cannot cut may also be refused outright (what the structured
      // split, cuDevSmResourceSplit, answers): a smaller size may still do.
      const bool refused = r == CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
      const bool enough = r == CUDA_SUCCESS && static_cast<int>(count) >= placement.virtual_devices;
      if (enough || (r != CUDA_SUCCESS && !refused) || partition_sms != 0 ||
          !shrink_partitions(out->partition_plan, out->granularity)) {
        check_driver(r, "cuDevSmResourceSplitByCount");
        break;
      }
    }
    std::vector<int> granted;
    for (unsigned int i = 0; i < count; ++i)
      granted.push_back(static_cast<int>(groups[i].sm.smCount));
    out->grant = compare_grant(out->partition_plan, granted);
    if (out->partition_plan.sms_per_partition != first_k)
      out->grant.summary = "the driver could not cut " + std::to_string(placement.virtual_devices) +
                           " partitions of " + std::to_string(first_k) + " SMs; " +
                           out->grant.summary;
    if (static_cast<int>(count) < placement.virtual_devices)
      throw cuda::CudaError("green contexts: the driver granted " + std::to_string(count) +
                            " partitions, the run needs " +
                            std::to_string(placement.virtual_devices) + ": " + out->grant.summary);
    const std::string name = name_of(dev_ordinal).first;
    for (int r = 0; r < placement.virtual_devices; ++r) {
      CUdevResourceDesc desc{};
      DRV_CHECK(d.cuDevResourceGenerateDesc(&desc, &groups[static_cast<std::size_t>(r)], 1));
      CUgreenCtx g{};
      DRV_CHECK(d.cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
      out->green_.push_back(g);
      CUcontext ctx{};
      DRV_CHECK(d.cuCtxFromGreenCtx(&ctx, g));
      // Listed before its streams are made: the destructor must destroy a stream made here
      // before the green context, or cuGreenCtxDestroy leaks it (cuda.h).
      RankDevice& rd = out->ranks_.emplace_back();
      rd.rank = r;
      rd.device = dev_ordinal;
      rd.context = ctx;
      rd.sms = granted[static_cast<std::size_t>(r)];
      out->gpu_names.push_back(name);
      CUstream s{};
      DRV_CHECK(d.cuGreenCtxStreamCreate(&s, g, CU_STREAM_NON_BLOCKING, 0));
      rd.compute = reinterpret_cast<cudaStream_t>(s);
      DRV_CHECK(d.cuGreenCtxStreamCreate(&s, g, CU_STREAM_NON_BLOCKING, 0));
      rd.comm = reinterpret_cast<cudaStream_t>(s);
    }
  }
  for (const RankDevice& rd : out->ranks_) {
    name_stream(rd.compute, "rank " + std::to_string(rd.rank) + " compute");
    name_stream(rd.comm, "rank " + std::to_string(rd.rank) + " comm");
  }
  return out;
} catch (const CudaError& e) {
  throw EnvironmentError(std::string("--backend cuda: cannot set up the GPUs: ") + e.what());
}

void GpuDevices::release_current() const {
  if (!ranks_.empty()) CUDA_CHECK(cudaSetDevice(ranks_.front().device));
}

GpuDevices::~GpuDevices() {
  // Errors are ignored on the way out: a failed step must still release what it can.
  for (const RankDevice& rd : ranks_) {
    try {
      rd.make_current();
    } catch (...) {
      continue;
    }
    // A stream left null by a failed open() is not the legacy default stream to wait on.
    for (cudaStream_t s : {rd.compute, rd.comm}) {
      if (s == nullptr) continue;
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
  }
  // Not current on this thread while destroyed: a later runtime call here would use it.
  if (!ranks_.empty()) cudaSetDevice(ranks_.front().device);
  for (CUgreenCtx g : green_) driver_api().cuGreenCtxDestroy(g);
}

}  // namespace ppbench::cuda
