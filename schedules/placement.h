// Where stages live and how micro-batches flow (docs/schedules.md).
//
// A model is one or more chains of stages; a micro-batch flows through one
// chain, stage by stage. Stage ids of a chain are contiguous. Each stage lives
// on exactly one rank.
#pragma once

#include <string>
#include <vector>

namespace ppbench {

struct Placement {
  int ranks = 0;
  std::vector<int> stage_rank;          // stage -> rank
  std::vector<int> stage_chain;         // stage -> chain
  std::vector<int> chain_begin;         // chain -> first stage id (chains are contiguous ranges)
  std::vector<int> chain_end;           // chain -> one past the last stage id
  std::vector<int> chain_microbatches;  // chain -> micro-batches it carries per step

  int stages() const { return static_cast<int>(stage_rank.size()); }
  int chains() const { return static_cast<int>(chain_begin.size()); }
  bool is_first(int stage) const { return stage == chain_begin[stage_chain[stage]]; }
  bool is_last(int stage) const { return stage + 1 == chain_end[stage_chain[stage]]; }
  int chain_length(int chain) const { return chain_end[chain] - chain_begin[chain]; }
  int microbatches_of(int stage) const { return chain_microbatches[stage_chain[stage]]; }
  // Stages per chain, the same for every layout here; the unit of the
  // "fraction of one whole-model micro-batch activation" figures.
  int stages_per_chain() const { return chain_length(0); }
  // The model part a stage computes: its position in its chain (stage k of every chain runs the
  // partition's part k).
  int part(int stage) const { return stage - chain_begin[stage_chain[stage]]; }
  // How many copies of each part the layout holds: 2 where two chains run the same model in
  // opposite directions (Chimera, DualPipe), else 1. The copies' gradients are summed before
  // their update, so that every copy stays the same.
  int copies_per_part() const { return stages_per_chain() > 0 ? stages() / stages_per_chain() : 0; }
  // The rank holding another copy of `stage`'s part, or -1 where no other rank holds one.
  int twin_rank(int stage) const;

  // 1 stage per rank: stage r on rank r (naive, GPipe, 1F1B, ZB-H1, ZB-H2).
  static Placement linear(int ranks, int microbatches);
  // Megatron's interleaving: stage c*D + r on rank r, for chunks c in [0, v).
  static Placement interleaved(int ranks, int chunks, int microbatches);
  // V shape (ZB-V, DualPipeV): rank r holds stages r and 2D-1-r of one chain.
  static Placement v_shape(int ranks, int microbatches);
  // Two directions (Chimera, DualPipe): chain 0 is stages 0..D-1 with stage s
  // on rank s; chain 1 is stages D..2D-1 with stage D+j on rank D-1-j.
  static Placement bidirectional(int ranks, int microbatches_down, int microbatches_up);
  // One chain with stage s on stage_rank[s], any mapping (a schedule read from a file).
  static Placement single_chain(int ranks, std::vector<int> stage_rank, int microbatches);

  friend bool operator==(const Placement&, const Placement&) = default;
};

}  // namespace ppbench
