// Closed-form bubble and memory figures of the papers, for uniform per-stage
// costs and no communication time. Each schedule's function lives beside its
// generator (schedules/generators/) and is registered with it
// (schedules/registry.h). The tests check the simulator against every one of
// them; `ppbench simulate` prints them beside the simulated figures.
#pragma once

#include <optional>
#include <string>

#include "schedules/schedule.h"

namespace ppbench {

// Uniform per-stage costs (harness/cost_model.h's StageCost without comm).
struct UniformCost {
  double f = 1, b = 2, i = 1, w = 1, fb = 3;
};

struct ClosedForm {
  std::string bubble_formula;             // as the paper writes it
  std::string idle_formula;               // idle time per rank (of the makespan)
  std::optional<double> bubble_fraction;  // sum idle / (ranks * makespan)
  std::optional<double> idle_per_rank;    // when the paper states the idle time
  std::string activations_formula;        // peak in-flight (stage, mb) activations
  std::optional<int> peak_activations;    // max over ranks, in (stage, mb) activations
  // The papers' parameter column: "1x", or "2x" where a rank holds two stages' parameters
  // (Chimera's and DualPipe's two copies; DualPipeV's two halves, said against 1F1B on 2D ranks).
  std::string params_formula = "1x";
  std::string note;  // why the figures are missing, where a user chooses
};

// The closed form for a schedule's parameters, from its registry entry. Fields
// stay empty where the paper gives none for these parameters.
ClosedForm closed_form(const ScheduleParams& p, const UniformCost& c);

// Bubble fraction of a rank that idles `idle` and works `busy`.
inline double idle_fraction(double idle, double busy) {
  return idle + busy > 0 ? idle / (idle + busy) : 0;
}

// The flush bubble GPipe and 1F1B share: (D-1)(F+B) idle on every rank. The
// caller adds its activation figures.
ClosedForm flush_closed_form(const ScheduleParams& p, const UniformCost& c);

// DualPipe's idle on its most idle rank, (PP/2-1)(F&B+B-3W), which the reference's
// order reaches only when I = F, W <= F and B <= FB <= F + B (found by sweeping
// costs in the simulator); with FB = F + B (no overlap saving) it is every
// rank's, and the bubble fraction follows with `work` per rank. Shared by
// dualpipe (PP = D) and dualpipev (PP = 2D).
void set_dual_idle(ClosedForm& out, double half_pp_minus_one, double work, const UniformCost& c);

// Each family's closed form (schedules/generators/*.cpp).
ClosedForm closed_form_naive(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_gpipe(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_1f1b(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_interleaved_1f1b(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_looped_bfs(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_interleaved_zb(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_chimera(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_chimera_doubling(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_zb_h1(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_zb_h2(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_zb_auto(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_zb_v(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_v_half(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_v_min(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_dualpipe(const ScheduleParams& p, const UniformCost& c);
ClosedForm closed_form_dualpipev(const ScheduleParams& p, const UniformCost& c);

// Peak in-flight (stage, mb) activations on rank r for 1F1B (docs/papers.md:
// D - r) — the per-rank shape of the 1F1B memory claim.
int one_f_one_b_peak(int devices, int rank);

}  // namespace ppbench
