// The Zero Bubble paper's automatic schedules ZB-1p and ZB-2p (Qi, Wan, Huang & Lin, "Zero
// Bubble Pipeline Parallelism", ICLR 2024, arXiv 2401.10241, section 3 "Automatic pipeline
// scheduling", its heuristic algorithm). The order is the one the authors' heuristic search
// finds: sail-sg/zero-bubble-pipeline-parallelism,
// megatron/core/pipeline_parallel/zerobubble/scheduler/zb.py (Graph.manual_order,
// initial_solution, create_scheduled_nodes; commit 39f2c186), whose heuristic is the same as
// the older megatron/core/pipeline_parallel/auto_schedule.py. That older file also builds the
// paper's ILP to refine the heuristic's order, but guards it with `nnodes < 0`, which never holds
// ("Disabling ILP for now"); the newer file has no ILP. So the reference's schedules are the
// heuristic's, and so are ours: the ILP is not implemented. The heuristic alone reproduces the
// paper's Table 5 figures for ZB-1p and ZB-2p (scripts/zb_table5.py).
//
// The search greedily places F, I (the paper's B) and W on every stage, micro-batch by
// micro-batch, simulating their end times under the planning costs (F, I, W and the transfer
// delay comm): stage r warms up with as many forwards as fit before the first I reaches it (and
// fit the memory limit), then each iteration places one F per stage (unless it would only make
// a bubble) and one I per stage, filling with pending W whenever a stage would otherwise wait or
// run out of memory. It tries the 2 x 2 x 2 settings of its three switches and keeps the first
// with the shortest longest-stage time.
//
// Memory as the reference counts it (its mem_f, mem_b, mem_w, in units of M_B): F holds one
// micro-batch's activations M_B, I frees all but M_W, W frees M_W (the paper's Table 1), with
// M_W / M_B = ScheduleParams::w_memory; the default 1 (I frees nothing) is how the reference's
// runtime plans its first schedule. The limit per rank is D M_B for ZB-1p (1F1B's peak) and
// 2D M_B for ZB-2p unless ScheduleParams::memory_limit gives another.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "schedules/registry.h"

namespace ppbench {

namespace {

enum Kind { kF = 0, kI = 1, kW = 2 };

struct Switches {
  bool allow_bubble_before_first_b;
  bool prioritize_b;
  bool no_bubble_greedy;
};

struct Plan {
  std::vector<std::array<std::vector<double>, 3>> end;  // [stage][kind][mb]: completion time
  double longest_stage = 0;
};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// One run of the reference's manual_order under one setting of its switches.
class Search {
 public:
  Search(int stages, int mbs, const PlanningCosts& c, double limit, double w_memory,
         const std::string& family)
      : s_(stages), n_(mbs), c_(c), limit_(limit), w_memory_(w_memory), family_(family) {
    plan_.end.resize(static_cast<std::size_t>(s_));
    for (auto& kinds : plan_.end)
      for (auto& v : kinds) v.assign(static_cast<std::size_t>(n_), 0.0);
    count_.assign(static_cast<std::size_t>(s_), {0, 0, 0});
    mem_.assign(static_cast<std::size_t>(s_), 0.0);
    free_at_.assign(static_cast<std::size_t>(s_), 0.0);
    bubble_.assign(static_cast<std::size_t>(s_), 0.0);
  }

  Plan run(const Switches& sw);

 private:
  double cost(int k) const { return k == kF ? c_.f : k == kI ? c_.i : c_.w; }
  // F holds M_B, I frees M_B - M_W, W frees M_W (the reference's mem_f, mem_b, mem_w).
  double mem(int k) const { return k == kF ? 1.0 : k == kI ? w_memory_ - 1.0 : -w_memory_; }
  double t(int stage, int k, int mb) const {
    return plan_.end[static_cast<std::size_t>(stage)][k][static_cast<std::size_t>(mb)];
  }
  int& f(int j) { return count_[static_cast<std::size_t>(j)][kF]; }
  int& b(int j) { return count_[static_cast<std::size_t>(j)][kI]; }
  int& w(int j) { return count_[static_cast<std::size_t>(j)][kW]; }
  double& m(int j) { return mem_[static_cast<std::size_t>(j)]; }
  double& e(int j) { return free_at_[static_cast<std::size_t>(j)]; }
  double max_bubble() const { return *std::max_element(bubble_.begin(), bubble_.end()); }
  double& bubble(int j) { return bubble_[static_cast<std::size_t>(j)]; }

  void put(int j, int k);
  [[noreturn]] void cannot_fit() const {
    throw UsageError(family_ + " cannot plan within --memory-limit " + number(limit_) +
                     " (M_B per rank): the search ran out of weight-gradient passes to free "
                     "memory; allowed: a larger limit");
  }
  // Before an F or I on stage j that waits for `ready` (its input's arrival): W passes that end
  // by then, then maybe one more W that overruns it (always when the wait is longer than what
  // the most idle stage has lost, else when no_bubble_greedy).
  void fill_wait(int j, double ready, bool no_bubble_greedy);
  void first_iteration(bool allow_bubble_before_first_b);

  int s_, n_;
  PlanningCosts c_;
  double limit_;
  double w_memory_;
  std::string family_;
  Plan plan_;
  std::vector<std::array<int, 3>> count_;  // placed F, I, W per stage
  std::vector<double> mem_, free_at_, bubble_;
};

void Search::put(int j, int k) {
  const int mb = count_[static_cast<std::size_t>(j)][k];
  const double own = e(j) + cost(k);
  double end = own;
  if (j > 0 && k == kF) end = std::max(end, t(j - 1, kF, mb) + c_.comm + cost(k));
  if (j < s_ - 1 && k == kI) end = std::max(end, t(j + 1, kI, mb) + c_.comm + cost(k));
  // The wait before a stage's first forward is not counted as its bubble.
  if (f(j) > 0) bubble(j) += end - own;
  e(j) = end;
  plan_.end[static_cast<std::size_t>(j)][k][static_cast<std::size_t>(mb)] = end;
  m(j) += mem(k);
  ++count_[static_cast<std::size_t>(j)][k];
}

void Search::fill_wait(int j, double ready, bool no_bubble_greedy) {
  while (w(j) < b(j) && e(j) + cost(kW) <= ready) put(j, kW);
  if (w(j) < b(j) && e(j) < ready) {
    if (ready - e(j) <= max_bubble() - bubble(j)) {
      if (no_bubble_greedy) put(j, kW);
    } else {
      put(j, kW);
    }
  }
}

void Search::first_iteration(bool allow_bubble_before_first_b) {
  for (int j = 0; j < s_; ++j) put(j, kF);
  // Walk the first I back from the last stage; each stage takes the extra forwards that fit (in
  // memory and in time) before that I can start on it.
  std::vector<int> extra(static_cast<std::size_t>(s_), 0);
  double last_t = 0;
  for (int j = s_ - 1; j >= 0; --j) {
    if (j == s_ - 1) {
      last_t = t(j, kF, 0) + cost(kI);
      continue;
    }
    int& x = extra[static_cast<std::size_t>(j)];
    double mem_j = m(j), busy_until = e(j);
    while (f(j) + x < n_ && mem_j + mem(kF) <= limit_) {
      if (allow_bubble_before_first_b ? busy_until + cost(kF) > last_t + c_.comm
                                      : busy_until >= last_t + c_.comm)
        break;
      mem_j += mem(kF);
      busy_until += cost(kF);
      ++x;
    }
    last_t = std::max(busy_until, last_t + c_.comm) + cost(kI);
  }
  // Each stage gets strictly fewer extra forwards than the one before it.
  for (int j = 1; j < s_; ++j) {
    int& x = extra[static_cast<std::size_t>(j)];
    while (x > 0 && x >= extra[static_cast<std::size_t>(j - 1)] && f(j) + x < n_) --x;
  }
  for (int j = 0; j < s_; ++j)
    for (int k = 0; k < extra[static_cast<std::size_t>(j)]; ++k) put(j, kF);
  for (int j = s_ - 1; j >= 0; --j) put(j, kI);
}

Plan Search::run(const Switches& sw) {
  for (int i = 0; i < n_; ++i) {
    if (i == 0) {
      first_iteration(sw.allow_bubble_before_first_b);
      continue;
    }
    std::vector<int> want_f(static_cast<std::size_t>(s_), 0);
    for (int j = 0; j < s_; ++j) {
      if (f(j) >= n_) continue;
      if (j + 1 < s_ && f(j) >= f(j + 1) + 2 && sw.prioritize_b) {
        // Stage j is two or more forwards ahead of the next: skip its F when the next stage's
        // F and I would come back too late to use it, or when it would cost a bubble larger
        // than stage j can afford against the most idle stage.
        const double next_plus_fw = e(j + 1) + cost(kF) + cost(kI) + c_.comm;
        if (e(j) >= next_plus_fw) continue;
        double w_cost = 0, mem_with_w = m(j) + mem(kF);
        for (int wc = 0; mem_with_w > limit_ && w(j) + wc < b(j); ++wc) {
          w_cost += cost(kW);
          mem_with_w += mem(kW);
        }
        if (e(j) + cost(kF) + w_cost <= next_plus_fw) {
          want_f[static_cast<std::size_t>(j)] = 1;
          continue;
        }
        // The reference resets the W time here (its W-draining variant is commented out).
        if (next_plus_fw - e(j) <= max_bubble() - bubble(j)) continue;
      }
      want_f[static_cast<std::size_t>(j)] = 1;
    }
    // A stage forwards only when the next one does too.
    for (int j = s_ - 2; j >= 0; --j)
      want_f[static_cast<std::size_t>(j)] =
          std::min(want_f[static_cast<std::size_t>(j)], want_f[static_cast<std::size_t>(j + 1)]);
    for (int j = 0; j < s_; ++j) {
      if (want_f[static_cast<std::size_t>(j)] == 0) continue;
      while (m(j) + mem(kF) > limit_) {
        if (w(j) >= b(j)) cannot_fit();
        put(j, kW);
      }
      if (j > 0) fill_wait(j, t(j - 1, kF, f(j)) + c_.comm, sw.no_bubble_greedy);
      put(j, kF);
    }
    for (int j = s_ - 1; j >= 0; --j) {
      if (b(j) != i)
        throw std::logic_error("zb auto search: I out of step on stage " + std::to_string(j));
      while (m(j) + mem(kI) > limit_) {
        if (w(j) >= b(j)) cannot_fit();
        put(j, kW);
      }
      if (j + 1 < s_) fill_wait(j, t(j + 1, kI, i) + c_.comm, sw.no_bubble_greedy);
      if (j == 0 && f(j) == n_)
        while (w(j) < b(j)) put(j, kW);
      put(j, kI);
    }
  }
  for (int j = 0; j < s_; ++j)
    while (w(j) < n_) put(j, kW);

  // The reference's own checks: every pass ends at least its cost after what it depends on.
  for (int j = 0; j < s_; ++j)
    for (int mb = 0; mb < n_; ++mb) {
      bool ok = t(j, kI, mb) >= t(j, kF, mb) + cost(kI) && t(j, kW, mb) >= t(j, kI, mb) + cost(kW);
      if (j > 0) ok = ok && t(j, kF, mb) >= t(j - 1, kF, mb) + c_.comm + cost(kF);
      if (j < s_ - 1) ok = ok && t(j, kI, mb) >= t(j + 1, kI, mb) + c_.comm + cost(kI);
      if (!ok)
        throw std::logic_error("zb auto search: stage " + std::to_string(j) + " micro-batch " +
                               std::to_string(mb) + " ends before its inputs");
    }
  for (int j = 0; j < s_; ++j)
    plan_.longest_stage = std::max(plan_.longest_stage, t(j, kW, n_ - 1) - t(j, kF, 0) + cost(kF));
  return plan_;
}

Schedule generate_zb_auto(const ScheduleParams& p, int default_limit_per_rank) {
  const std::string family = p.name;
  const int d = p.devices, n = p.microbatches;
  require(d >= 1, family + " needs --devices >= 1, got " + std::to_string(d));
  require(n >= 1, family + " needs --microbatches >= 1, got " + std::to_string(n));
  const PlanningCosts& c = p.costs;
  for (const auto& [name, v] : {std::pair{"F", c.f}, std::pair{"I", c.i}, std::pair{"W", c.w}})
    require(std::isfinite(v) && v > 0,
            family + " needs planning cost " + name + " finite and > 0, got " + number(v));
  require(std::isfinite(c.comm) && c.comm >= 0,
          family + " needs planning comm finite and >= 0, got " + number(c.comm));
  const double limit =
      p.memory_limit == 0 ? static_cast<double>(default_limit_per_rank) * d : p.memory_limit;
  // Every forward needs room for one micro-batch's activations.
  require(std::isfinite(limit) && limit >= 1,
          "--memory-limit " + number(limit) + " is too small for " + family +
              " (allowed: a finite number >= 1, in units of M_B)");
  require(std::isfinite(p.w_memory) && p.w_memory >= 0 && p.w_memory <= 1,
          "--w-memory " + number(p.w_memory) + " is out of range for " + family +
              " (allowed: 0 to 1, the share of M_B that W still needs)");

  // The reference tries every setting and keeps the first with the least longest-stage time.
  Plan best;
  bool have = false;
  for (bool allow : {true, false})
    for (bool prioritize : {true, false})
      for (bool greedy : {true, false}) {
        Plan plan = Search(d, n, c, limit, p.w_memory, family).run({allow, prioritize, greedy});
        if (!have || plan.longest_stage < best.longest_stage) {
          best = std::move(plan);
          have = true;
        }
      }

  Schedule s{p, Placement::linear(d, n), {}};
  s.params.memory_limit = limit;  // records say which limit was planned for
  s.ranks.resize(static_cast<std::size_t>(d));
  for (int r = 0; r < d; ++r) {
    // Each stage's passes by completion time; the reference sorts F, then I, then W, each by
    // micro-batch, with a stable sort, so ties keep that order.
    struct Item {
      double end;
      Op op;
      int mb;
    };
    std::vector<Item> items;
    items.reserve(static_cast<std::size_t>(3 * n));
    const std::array<Op, 3> ops{Op::F, Op::I, Op::W};
    for (int k = 0; k < 3; ++k)
      for (int mb = 0; mb < n; ++mb)
        items.push_back({best.end[static_cast<std::size_t>(r)][k][static_cast<std::size_t>(mb)],
                         ops[static_cast<std::size_t>(k)], mb});
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& a, const Item& b) { return a.end < b.end; });
    for (const Item& it : items)
      s.ranks[static_cast<std::size_t>(r)].push_back(Action::single(it.op, r, it.mb));
  }
  return s;
}

}  // namespace

Schedule generate_zb_1p(const ScheduleParams& p) { return generate_zb_auto(p, 1); }
Schedule generate_zb_2p(const ScheduleParams& p) { return generate_zb_auto(p, 2); }

ClosedForm closed_form_zb_auto(const ScheduleParams& p, const UniformCost& c) {
  const bool two_p = p.name == "zb-2p";
  const double d = p.devices, n = p.microbatches;
  const double default_limit = (two_p ? 2 : 1) * d;
  ClosedForm out;
  // A search has no formula of its own. At F = I = W with the default limit, both searches lose
  // (D-1)F of the makespan on every rank once N >= D (found by sweeping D and N in the
  // simulator; zb-1p is then ZB-H1's order for N > D), and zb-2p has no idle within each rank's
  // span once N >= 2D-1, the paper's zero bubble.
  out.bubble_formula = "a heuristic search; idle/(idle+N(F+I+W)), idle = (D-1)F when F = I = W";
  out.idle_formula = two_p ? "(D-1)F of the makespan, 0 within each rank's span for N >= 2D-1, "
                             "when F = I = W and N >= D"
                           : "(D-1)F when F = I = W and N >= D";
  out.activations_formula =
      two_p ? "at most 2D (or --memory-limit)" : "at most D (or --memory-limit)";
  const bool default_memory =
      (p.memory_limit == 0 || p.memory_limit == default_limit) && p.w_memory == 1;
  if (default_memory && c.f == c.i && c.i == c.w && n >= d) {
    out.idle_per_rank = (d - 1) * c.f;
    out.bubble_fraction = idle_fraction(*out.idle_per_rank, n * (c.f + c.i + c.w));
  } else {
    out.note = "a heuristic search: figures only for F = I = W, N >= D and the default memory";
  }
  return out;
}

}  // namespace ppbench
