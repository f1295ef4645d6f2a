// One rank of the CUDA backend: the stages placed on it built from the workload spec with the
// GPU layers of workloads/cuda (same seeds as the CPU model builder, so both backends hold the
// same parameters up to rounding), its micro-batches' data on its device, and the F, B, I and W
// passes the executor asks for. The GPU mirror of harness/backends/cpu/pipeline_rank.h.
//
// mlp, transformer and amoebanet; any other workload is a UsageError before anything is built.
// An AmoebaNet boundary after a cell is two tensors ({out, skip}, workloads/cpu/amoebanet_cells.h)
// but the executor moves one tensor per transfer: such a boundary travels packed into one flat
// buffer (out's elements, then skip's), activation and gradient alike, and the receiving stage
// unpacks it; stage_output_shapes gives the packed size. Single-tensor AmoebaNet boundaries
// arrive in the spec's [b, c, h, w] shape and are viewed as the kernels' NHWC.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "harness/backends/step_values.h"
#include "harness/executor/stage_work.h"
#include "schedules/placement.h"
#include "workloads/cuda/amoebanet_cells.h"
#include "workloads/cuda/context.h"
#include "workloads/cuda/cross_entropy.h"
#include "workloads/cuda/layer.h"
#include "workloads/layer_spec.h"
#include "workloads/partition.h"
#include "workloads/synthetic_data.h"

namespace ppbench::cuda {

// The dtype the GPU layers run a spec in; f64 is a UsageError naming the flag.
cuda::DType gpu_dtype(const WorkloadSpec& spec);
// UsageError for a spec the GPU layers cannot run: a workload without GPU layers, f64, or a
// vocabulary or class count past the int32 ids (workloads/index_range.h).
void require_gpu_workload(const WorkloadSpec& spec);

// What stage s sends on: the output shape of its last layer, or [total elements] when that is
// several tensors (empty for a chain's last stage).
std::vector<cuda::Shape> stage_output_shapes(const WorkloadSpec& spec, const PartitionPlan& plan,
                                             const Placement& p);

// Device bytes the parameters, gradients and data of `rank` take (for sizing its arena).
std::size_t rank_static_bytes(const WorkloadSpec& spec, const PartitionPlan& plan,
                              const Placement& p, int rank);

class GpuPipelineRank final : public StageWork<cuda::DTensor> {
 public:
  // Must be constructed with the rank's context current (GpuDevices::rank(r).make_current()):
  // the parameter arena, the data and the cuBLASLt handle belong to that device or partition.
  // A replica of a data-parallel job (harness/mpi/cuda_mpi_run.h) draws the data of micro-batches
  // first_microbatch .. + N - 1 and scales its losses by 1 / loss_microbatches (0: N), so that
  // the replicas' summed gradients equal one device's over all of their micro-batches.
  GpuPipelineRank(const WorkloadSpec& spec, const PartitionPlan& plan, const Placement& p, int rank,
                  std::uint64_t seed, cudaStream_t compute, std::size_t activation_arena_bytes,
                  int first_microbatch = 0, int loss_microbatches = 0);

  cuda::DTensor forward(int stage, int mb, cuda::DTensor input) override;
  cuda::DTensor backward(int stage, int mb, cuda::DTensor grad, bool split) override;
  void backward_weight(int stage, int mb) override;
  std::size_t saved_bytes(int stage) const override;

  cuda::DeviceArena& activations() { return *acts_; }
  // Zeroes every gradient on the compute stream and drops the last step's losses, unless
  // `keep_losses`: a CUDA graph replays into the loss buffers it was captured with, so between
  // replays they must stay allocated (and losses() then reads the latest replay's values).
  void zero_grad(bool keep_losses = false);
  // After the step (streams synchronised): global micro-batch -> loss (downloaded: one scalar
  // each), and the parameters of every stage by part and layer (their gradients stay on the
  // device: harness/cuda/grad_summary.h reads them).
  std::map<int, double> losses() const;
  std::vector<StageParams<cuda::Param>> params_by_layer();
  cuda::Context& context() { return *ctx_; }

 private:
  struct StageLayer {
    cuda::LayerPtr body;                     // for the loss layer: the head producing logits
    std::unique_ptr<cuda::AmoebaCell> cell;  // instead of body: a layer of several tensors
    bool loss = false;
    bool reads_data = false;
    std::vector<cuda::Param*> params() const;
  };
  struct Stage {
    int id = 0, part = 0, first_layer = 0;
    std::vector<StageLayer> layers;
    // The kernels' shapes of the tensors crossing into and out of the stage, when a boundary may
    // be more than one tensor (AmoebaNet); empty: the one tensor passes as it is.
    std::vector<cuda::Shape> in_shapes, out_shapes;
    std::vector<std::vector<cuda::Saved>> saved;         // [mb][layer]
    std::vector<std::vector<cuda::Shape>> logits_shape;  // [mb][layer], loss layers only
    std::size_t live = 0;
    std::vector<std::size_t> bytes;  // [mb]
  };
  Stage& find(int stage);
  // A micro-batch's inputs and targets, drawn on the device (workloads/synthetic_data.h).
  cuda::DTensor make_inputs(const WorkloadSpec& spec, const DataKeys& keys, cuda::DType dt);
  cuda::DTensor make_targets(const WorkloadSpec& spec, const DataKeys& keys);
  int global_mb(int stage, int mb) const;
  void account(Stage& s, int mb);
  // One received tensor -> the boundary's tensors, and back (see the top of this file).
  std::vector<cuda::DTensor> unpack(const cuda::DTensor& x, const std::vector<cuda::Shape>& shapes);
  cuda::DTensor pack(std::vector<cuda::DTensor> xs);

  const Placement& p_;
  int rank_;
  int microbatches_;
  std::unique_ptr<cuda::DeviceArena> params_;
  std::unique_ptr<cuda::DeviceArena> acts_;
  std::unique_ptr<cuda::Context> ctx_;
  cuda::SoftmaxCrossEntropy ce_;
  std::vector<Stage> stages_;
  std::map<int, cuda::DTensor> inputs_, targets_;  // global micro-batch -> its data
  std::map<int, cuda::DTensor> losses_;
};

}  // namespace ppbench::cuda
