#include <algorithm>
#include <map>
#include <memory>

#include "harness/cuda/sm_probe.h"
#include "workloads/cuda/check.h"

namespace ppbench::cuda {

namespace {

__global__ void record_smid(int* out) {
  unsigned int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  // Stay resident a little, so that the scheduler spreads the grid instead of reusing one SM.
  const long long start = clock64();
  while (clock64() - start < 20000) {
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int>(id);
}

}  // namespace

std::vector<int> sms_used(cudaStream_t stream, int blocks) {
  int* raw = nullptr;
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&raw),
                             sizeof(int) * static_cast<std::size_t>(blocks), stream));
  // Freed on every way out, a failed launch or copy included (cudaFree waits for the stream).
  const std::unique_ptr<int, decltype(&cudaFree)> d(raw, &cudaFree);
  record_smid<<<blocks, 32, 0, stream>>>(d.get());
  CUDA_CHECK_LAUNCH();
  std::vector<int> ids(static_cast<std::size_t>(blocks));
  CUDA_CHECK(cudaMemcpyAsync(ids.data(), d.get(), sizeof(int) * ids.size(), cudaMemcpyDeviceToHost,
                             stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

SmProbeReport judge_sm_probe(std::vector<std::vector<int>> per_rank,
                             const std::vector<int>& granted) {
  SmProbeReport r;
  std::map<int, int> owner;
  std::string clash;
  for (std::size_t k = 0; k < per_rank.size(); ++k) {
    std::sort(per_rank[k].begin(), per_rank[k].end());
    per_rank[k].erase(std::unique(per_rank[k].begin(), per_rank[k].end()), per_rank[k].end());
    for (int sm : per_rank[k]) {
      auto [it, fresh] = owner.emplace(sm, static_cast<int>(k));
      if (!fresh && clash.empty())
        clash = "SM " + std::to_string(sm) + " ran work of ranks " + std::to_string(it->second) +
                " and " + std::to_string(k);
      r.disjoint = r.disjoint && fresh;
    }
    if (k < granted.size() && static_cast<int>(per_rank[k].size()) > granted[k]) {
      r.within_grant = false;
      if (clash.empty())
        clash = "rank " + std::to_string(k) + " ran on " + std::to_string(per_rank[k].size()) +
                " SMs, granted " + std::to_string(granted[k]);
    }
  }
  std::string counts;
  for (std::size_t k = 0; k < per_rank.size(); ++k)
    counts += (k ? "/" : "") + std::to_string(per_rank[k].size());
  r.summary = r.disjoint && r.within_grant
                  ? "each rank's kernels ran on its own SMs (" + counts + " SMs seen per rank)"
                  : "partitions overlap: " + clash;
  r.per_rank = std::move(per_rank);
  return r;
}

}  // namespace ppbench::cuda
