// One rank of the CPU backend: the stages placed on it, each a contiguous
// run of the workload's layers, and the F, B, I and W passes the executor
// asks for (StageWork). Every stage keeps one Saved per (layer, micro-batch);
// what it keeps is what the activation arena records.
//
// Stages of different chains that hold the same model part (Chimera and
// DualPipe keep two copies) are separate replicas built from the same seed;
// the run sums their gradients after the step.
//
// `loss_microbatches`: the micro-batches the step's loss averages over, when more than `data`
// holds (data parallelism: R replicas of N each average over R * N).
//
// With recompute (GPipe's re-materialisation) F keeps only the stage's input
// and drops everything else; the backward first runs the forward again, and
// that rebuilt stage is the rank's peak within the pass (transient_peak_bytes).
#pragma once

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "harness/backends/cpu/model_builder.h"
#include "harness/backends/step_values.h"
#include "harness/executor/stage_work.h"
#include "schedules/placement.h"
#include "workloads/partition.h"

namespace ppbench::cpu {

template <typename T>
class PipelineRank final : public StageWork<Tensors<T>> {
 public:
  PipelineRank(const WorkloadSpec& spec, const PartitionPlan& plan, const Placement& p, int rank,
               const std::vector<MicroBatch<T>>& data, std::uint64_t seed, bool recompute,
               int loss_microbatches = 0)
      : p_(p),
        data_(data),
        recompute_(recompute),
        rank_(rank),
        loss_scale_(T(1) / static_cast<T>(loss_microbatches > 0 ? loss_microbatches
                                                                : static_cast<int>(data.size()))) {
    for (int st = 0; st < p.stages(); ++st) {
      if (p.stage_rank[st] != rank) continue;
      Stage stage;
      stage.id = st;
      stage.part = p.part(st);
      const StageSpec& part = plan.stages[stage.part];
      stage.first_layer = part.first_layer;
      for (int l = part.first_layer; l < part.first_layer + part.num_layers; ++l)
        stage.layers.push_back(make_pipeline_layer<T>(spec, static_cast<std::size_t>(l), seed));
      const int n = p.microbatches_of(st);
      stage.saved.resize(n, std::vector<Saved<T>>(stage.layers.size()));
      stage.kept_input.resize(n);
      stage.bytes.assign(n, 0);
      stages_.push_back(std::move(stage));
    }
  }

  Tensors<T> forward(int stage, int mb, Tensors<T> input) override {
    Stage& s = find(stage);
    const MicroBatchData<T> md = data_of(stage, mb);
    Tensors<T> x = run_forward(s, mb, std::move(input), md, /*keep_input=*/recompute_);
    if (p_.is_last(stage)) losses[global_mb(stage, mb)] = x.front().data.front();
    if (recompute_) {
      // Until the forward ends it holds the stage's whole activations: this pass's peak.
      account(s, mb);
      note_transient_peak();
      for (auto& sv : s.saved[mb]) sv.clear();
      s.kept_input[mb] = std::move(input_copy_);
    }
    account(s, mb);
    return x;
  }

  Tensors<T> backward(int stage, int mb, Tensors<T> grad, bool split) override {
    Stage& s = find(stage);
    const MicroBatchData<T> md = data_of(stage, mb);
    if (recompute_) {
      run_forward(s, mb, std::move(s.kept_input[mb]), md, /*keep_input=*/false);
      s.kept_input[mb].clear();
      // The rebuilt activations are this pass's peak: the layers free them as they go back.
      account(s, mb);
      note_transient_peak();
    }
    for (std::size_t l = s.layers.size(); l-- > 0;) {
      grad = s.layers[l]->backward_input(std::move(grad), s.saved[mb][l], md);
      if (!split) s.layers[l]->backward_weight(s.saved[mb][l]);
    }
    account(s, mb);
    return grad;
  }

  void backward_weight(int stage, int mb) override {
    Stage& s = find(stage);
    for (std::size_t l = 0; l < s.layers.size(); ++l) s.layers[l]->backward_weight(s.saved[mb][l]);
    account(s, mb);
  }

  std::size_t transient_peak_bytes() override { return std::exchange(transient_peak_, 0); }

  std::size_t saved_bytes(int stage) const override {
    for (const Stage& s : stages_)
      if (s.id == stage) return s.live;
    return 0;
  }

  void zero_grad() {
    for (Stage& s : stages_)
      for (auto& layer : s.layers)
        for (Param<T>* prm : layer->params())
          std::fill(prm->grad.data.begin(), prm->grad.data.end(), T(0));
    losses.clear();
  }

  // The bytes this rank's parameters and their gradients hold.
  std::pair<double, double> param_and_grad_bytes() {
    double params = 0, grads = 0;
    for (Stage& s : stages_)
      for (auto& layer : s.layers)
        for (const Param<T>* p : layer->params()) {
          params += static_cast<double>(p->value.bytes());
          grads += static_cast<double>(p->grad.bytes());
        }
    return {params, grads};
  }

  // Parameters of every stage on this rank, by model part and layer.
  std::vector<StageParams<Param<T>>> params_by_layer() {
    std::vector<StageParams<Param<T>>> out;
    for (Stage& s : stages_) {
      StageParams<Param<T>> sp;
      sp.rank = rank_;
      sp.part = s.part;
      for (std::size_t l = 0; l < s.layers.size(); ++l)
        sp.layers.emplace_back(s.first_layer + static_cast<int>(l), s.layers[l]->params());
      out.push_back(std::move(sp));
    }
    return out;
  }

  std::map<int, T> losses;  // global micro-batch -> its loss (last stages only)

 private:
  struct Stage {
    int id = 0, part = 0, first_layer = 0;
    std::vector<PipelineLayerPtr<T>> layers;
    std::vector<std::vector<Saved<T>>> saved;  // [mb][layer]
    std::vector<Tensors<T>> kept_input;        // [mb], recompute only
    std::vector<std::size_t> bytes;            // [mb], as last accounted
    std::size_t live = 0;
  };

  // keep_input: a recomputing F keeps a copy of its input for the backward to rebuild from; the
  // backward's own rebuild does not (a copy there would outlive it, counted nowhere).
  Tensors<T> run_forward(Stage& s, int mb, Tensors<T> x, const MicroBatchData<T>& md,
                         bool keep_input) {
    if (keep_input) input_copy_ = x;
    for (std::size_t l = 0; l < s.layers.size(); ++l)
      x = s.layers[l]->forward(std::move(x), s.saved[mb][l], md);
    return x;
  }

  // The rank's kept bytes now, a moment within a pass (transient_peak_bytes).
  void note_transient_peak() {
    std::size_t live = 0;
    for (const Stage& other : stages_) live += other.live;
    transient_peak_ = std::max(transient_peak_, live);
  }

  void account(Stage& s, int mb) {
    std::size_t b = 0;
    for (const auto& sv : s.saved[mb]) b += static_cast<std::size_t>(sv.bytes());
    for (const auto& t : s.kept_input[mb]) b += static_cast<std::size_t>(t.bytes());
    s.live = s.live - s.bytes[mb] + b;
    s.bytes[mb] = b;
  }

  Stage& find(int stage) {
    for (Stage& s : stages_)
      if (s.id == stage) return s;
    throw std::logic_error("stage " + std::to_string(stage) + " is not on this rank");
  }

  int global_mb(int stage, int mb) const {
    int base = 0;
    for (int c = 0; c < p_.stage_chain[stage]; ++c) base += p_.chain_microbatches[c];
    return base + mb;
  }

  MicroBatchData<T> data_of(int stage, int mb) const {
    const MicroBatch<T>& d = data_[static_cast<std::size_t>(global_mb(stage, mb))];
    return {&d.inputs, &d.targets, loss_scale_};
  }

  const Placement& p_;
  const std::vector<MicroBatch<T>>& data_;
  bool recompute_;
  std::size_t transient_peak_ = 0;  // since transient_peak_bytes() last read it
  int rank_;
  T loss_scale_;  // 1 / micro-batches of the whole step (every data-parallel replica's)
  std::vector<Stage> stages_;
  Tensors<T> input_copy_;
};

}  // namespace ppbench::cpu
