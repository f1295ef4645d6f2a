// One rank of the CUDA backend: the stages placed on it built from the workload spec with the
// GPU layers of workloads/cuda (same seeds as the CPU model builder, so both backends hold the
// same parameters up to rounding), its micro-batches' data on its device, and the F, B, I and W
// passes the executor asks for. The GPU mirror of harness/backends/cpu/pipeline_rank.h.
//
// mlp and transformer only: AmoebaNet's GPU cells are not in workloads/cuda yet, and asking for
// them is a UsageError rather than a missing-kernel failure halfway through a step.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "harness/executor/stage_work.h"
#include "schedules/placement.h"
#include "workloads/cuda/context.h"
#include "workloads/cuda/cross_entropy.h"
#include "workloads/cuda/layer.h"
#include "workloads/layer_spec.h"
#include "workloads/partition.h"

namespace ppbench::gpu {

// The dtype the GPU layers run a spec in; f64 and AmoebaNet are UsageErrors naming the flag.
cuda::DType gpu_dtype(const WorkloadSpec& spec);
void require_gpu_workload(const WorkloadSpec& spec);

// What stage s sends on: the output shape of its last layer (empty for a chain's last stage).
std::vector<cuda::Shape> stage_output_shapes(const WorkloadSpec& spec, const PartitionPlan& plan,
                                             const Placement& p);

// Device bytes the parameters, gradients and data of `rank` take (for sizing its arena).
std::size_t rank_static_bytes(const WorkloadSpec& spec, const PartitionPlan& plan,
                              const Placement& p, int rank);

class GpuPipelineRank final : public StageWork<cuda::DTensor> {
 public:
  // Must be constructed with the rank's context current (GpuDevices::rank(r).make_current()):
  // the parameter arena, the data and the cuBLASLt handle belong to that device or partition.
  GpuPipelineRank(const WorkloadSpec& spec, const PartitionPlan& plan, const Placement& p,
                  int rank, std::uint64_t seed, cudaStream_t compute,
                  std::size_t activation_arena_bytes);

  cuda::DTensor forward(int stage, int mb, cuda::DTensor input) override;
  cuda::DTensor backward(int stage, int mb, cuda::DTensor grad, bool split) override;
  void backward_weight(int stage, int mb) override;
  std::size_t saved_bytes(int stage) const override;

  cuda::DeviceArena& activations() { return *acts_; }
  // Zeroes every gradient on the compute stream and drops the last step's losses.
  void zero_grad();
  // After the step (streams synchronised): global micro-batch -> loss, and each stage's
  // gradients by model part, downloaded.
  std::map<int, double> losses() const;
  std::vector<std::pair<int, std::vector<float>>> grads_by_part();

 private:
  struct StageLayer {
    cuda::LayerPtr body;  // for the loss layer: the head producing logits
    bool loss = false;
    bool reads_data = false;
  };
  struct Stage {
    int id = 0, part = 0;
    std::vector<StageLayer> layers;
    std::vector<std::vector<cuda::Saved>> saved;  // [mb][layer]
    std::vector<std::vector<cuda::Shape>> logits_shape;  // [mb][layer], loss layers only
    std::size_t live = 0;
    std::vector<std::size_t> bytes;  // [mb]
  };
  Stage& find(int stage);
  int global_mb(int stage, int mb) const;
  void account(Stage& s, int mb);

  const Placement& p_;
  int microbatches_;
  std::unique_ptr<cuda::DeviceArena> params_;
  std::unique_ptr<cuda::DeviceArena> acts_;
  std::unique_ptr<cuda::Context> ctx_;
  cuda::SoftmaxCrossEntropy ce_;
  std::vector<Stage> stages_;
  std::map<int, cuda::DTensor> inputs_, targets_;  // global micro-batch -> its data
  std::map<int, cuda::DTensor> losses_;
};

}  // namespace ppbench::gpu
