#include "harness/cuda/grad_summary.h"

#include <algorithm>

#include "workloads/cuda/check.h"
#include "workloads/cuda/reduce.h"

namespace ppbench::cuda {

namespace {

using Stages = std::vector<std::vector<StageParams<cuda::Param>>>;

Stages stages_of(const std::vector<std::unique_ptr<GpuPipelineRank>>& ranks) {
  Stages out;
  for (const auto& r : ranks) out.push_back(r->params_by_layer());
  return out;
}

void summarize_on_device(const GpuDevices& devices,
                         const std::vector<std::unique_ptr<GpuPipelineRank>>& ranks,
                         const Stages& by_rank, int parts, StepValues& out) {
  out.parts.assign(static_cast<std::size_t>(parts), {});
  for (int part = 0; part < parts; ++part) {
    PartGradients& stats = out.parts[static_cast<std::size_t>(part)];
    stats.part = part;
    std::vector<const StageParams<cuda::Param>*> copies;
    for (const auto& stages : by_rank)
      for (const auto& s : stages)
        if (s.part == part) copies.push_back(&s);
    if (copies.empty()) continue;
    const StageParams<cuda::Param>& first = *copies.front();
    devices.rank(first.rank).make_current();
    GpuPipelineRank& home = *ranks[static_cast<std::size_t>(first.rank)];
    cuda::Context& ctx = home.context();
    DeviceGradientStats reduce(home);
    std::int64_t largest = 0;
    for (const auto& [layer, params] : first.layers)
      for (const cuda::Param* p : params) largest = std::max(largest, p->grad.numel());
    cuda::DTensor sum, other;
    if (copies.size() > 1) {
      sum =
          cuda::DTensor(home.activations(), {largest}, cuda::DType::kF32, "summed gradient copies");
      other = cuda::DTensor(home.activations(), {largest}, cuda::DType::kF32, "gradient copy");
    }
    for (std::size_t l = 0; l < first.layers.size(); ++l)
      for (std::size_t k = 0; k < first.layers[l].second.size(); ++k) {
        const cuda::DTensor& g = first.layers[l].second[k]->grad;
        const auto bytes = static_cast<std::size_t>(g.bytes());
        const float* x = g.as<float>();
        if (copies.size() > 1) {
          // cudaMemcpyDefault: the copies may live in other green contexts or on other GPUs.
          CUDA_CHECK(cudaMemcpyAsync(sum.data(), g.data(), bytes, cudaMemcpyDefault, ctx.stream));
          for (std::size_t c = 1; c < copies.size(); ++c) {
            const cuda::DTensor& gc = copies[c]->layers.at(l).second.at(k)->grad;
            CUDA_CHECK(
                cudaMemcpyAsync(other.data(), gc.data(), bytes, cudaMemcpyDefault, ctx.stream));
            cuda::add_f32(ctx, sum.as<float>(), other.as<float>(), g.numel());
          }
          x = sum.as<float>();
        }
        reduce.add(stats, x, g.numel());
      }
  }
}

}  // namespace

// 2 * kStatsBlocks doubles of scratch, held as twice as many f32 elements.
DeviceGradientStats::DeviceGradientStats(GpuPipelineRank& home)
    : ctx_(home.context()),
      partials_(home.activations(), {2 * cuda::kStatsBlocks * 2}, cuda::DType::kF32,
                "gradient statistics") {}

void DeviceGradientStats::add(PartGradients& stats, const float* grad, std::int64_t n) {
  const cuda::VectorStats v = cuda::vector_stats(ctx_, grad, n, partials_.as<double>());
  stats.sum_squares += v.sum_squares;
  stats.sum += v.sum;
  stats.elements += n;
}

void summarize_gradients(const WorkloadSpec& spec, const GpuDevices& devices,
                         const std::vector<std::unique_ptr<GpuPipelineRank>>& ranks, int parts,
                         bool keep, StepValues& out) {
  const Stages by_rank = stages_of(ranks);
  if (!keep) {
    out.tensors.clear();
    summarize_on_device(devices, ranks, by_rank, parts, out);
    devices.release_current();
    return;
  }
  summarize_gradients_on_host(
      spec, by_rank, parts, true, out,
      [&](const StageParams<cuda::Param>& s, const cuda::Param* p, std::vector<double>& sum) {
        devices.rank(s.rank).make_current();
        const std::vector<float> g = cuda::download_cpu_layout(*p, p->grad);
        if (sum.empty()) sum.assign(g.size(), 0.0);
        for (std::size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
      });
  devices.release_current();
}

double mean_loss(const GpuDevices& devices,
                 const std::vector<std::unique_ptr<GpuPipelineRank>>& ranks) {
  double loss = 0;
  std::size_t n = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    devices.rank(static_cast<int>(r)).make_current();
    for (auto [g, l] : ranks[r]->losses()) loss += l, ++n;
  }
  devices.release_current();
  return loss / static_cast<double>(std::max<std::size_t>(n, 1));
}

}  // namespace ppbench::cuda
