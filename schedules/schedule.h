// A pipeline schedule: per-rank ordered actions over a placement.
//
// Generators write only compute actions; communication is derived by the
// lowering pass (lower.h) from the placement.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "schedules/action.h"
#include "schedules/placement.h"

namespace ppbench {

// The uniform per-stage costs a cost-aware generator plans for (the automatic zero-bubble
// search): forward, input-gradient and weight-gradient time of one stage and one micro-batch, and
// the delay of a transfer between ranks. Families with a fixed order ignore them.
struct PlanningCosts {
  double f = 1, i = 1, w = 1, comm = 0;
};

struct ScheduleParams {
  std::string name;       // registry name, e.g. "1f1b"
  int devices = 0;        // D: pipeline ranks
  int microbatches = 0;   // N: micro-batches per step, over all chains
  int chunks = 0;         // v: model chunks per rank for interleaving (0: not given)
  int group_size = 0;     // Megatron's micro-batch group size per virtual stage (0: default)
  PlanningCosts costs{};  // what a cost-aware generator plans for
  // Peak activations a rank may hold, in units of M_B: the activations one micro-batch leaves on
  // 1/D of the model (1F1B's rank 0 peaks at D M_B). 0: the family's default.
  double memory_limit = 0;
  // M_W / M_B: the share of a micro-batch's activations that only W still needs once I has run.
  // F holds 1, I frees 1 - w_memory, W frees w_memory (the Zero Bubble paper's Table 1: M_W =
  // 32sbh of M_B = sb(34h + 5as)). 1, the default, frees everything at W, as the reference's
  // runtime plans its first schedule.
  double w_memory = 1;
};

struct Schedule {
  ScheduleParams params;
  Placement placement;
  std::vector<std::vector<Action>> ranks;  // rank -> actions in execution order

  int stages() const { return placement.stages(); }
  std::size_t action_count() const;
  // Whether backward passes are split into I and W somewhere.
  bool splits_backward() const;
};

// "rank 0: F0.0 F0.1 ..." one line per rank, '\n'-terminated; parse_text_rank_lines
// (schedule_file.h) reads it back.
std::string to_text(const Schedule& s);

}  // namespace ppbench
