#include "schedules/validate.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "core/large_buffer.h"
#include "schedules/deps.h"
#include "schedules/lower.h"

namespace ppbench {

namespace {

[[noreturn]] void reject(int rank, const Action& a, const std::string& why) {
  throw InvalidSchedule(
      "invalid schedule: rank " + std::to_string(rank) + ", action " + to_string(a) + ": " + why,
      rank);
}

void check_task(const TaskIndex& index, int rank, const Action& a, const Task& t) {
  if (t.stage < 0 || t.stage >= index.stages())
    reject(rank, a,
           "stage " + std::to_string(t.stage) + " does not exist (stages 0.." +
               std::to_string(index.stages() - 1) + ")");
  if (index.rank_of(t.stage) != rank)
    reject(rank, a,
           "stage " + std::to_string(t.stage) + " lives on rank " +
               std::to_string(index.rank_of(t.stage)));
  if (t.mb < 0 || t.mb >= index.microbatches_of(t.stage))
    reject(rank, a,
           "micro-batch " + std::to_string(t.mb) + " is not carried by stage " +
               std::to_string(t.stage) + " (0.." +
               std::to_string(index.microbatches_of(t.stage) - 1) + ")");
}

// Names the cause of a stall: an action ordered before a same-rank action it
// depends on, or else the cycle of ranks waiting on each other.
}  // namespace

void explain_stall(const Schedule& s, const std::vector<Stall>& stalls) {
  const Placement& p = s.placement;
  for (const Stall& st : stalls)
    if (p.stage_rank[st.waiting_for.stage] == st.rank) {
      const std::vector<Action>& order = s.ranks[static_cast<std::size_t>(st.rank)];
      std::string where;
      for (std::size_t i = 0; i < order.size(); ++i)
        if (order[i].task == st.waiting_for ||
            (order[i].paired() && order[i].partner == st.waiting_for))
          where = " at position " + std::to_string(i);
      reject(st.rank, st.action,
             "depends on " + to_string(st.waiting_for) + ", which this rank runs later" + where +
                 " (this action is at position " + std::to_string(st.position) + ")");
    }
  std::vector<const Stall*> by_rank(p.ranks, nullptr);
  for (const Stall& st : stalls) by_rank[st.rank] = &st;
  std::vector<int> seen(p.ranks, -1);
  std::vector<const Stall*> chain;
  for (const Stall* st = &stalls.front(); st && seen[st->rank] < 0;
       st = by_rank[p.stage_rank[st->waiting_for.stage]]) {
    seen[st->rank] = static_cast<int>(chain.size());
    chain.push_back(st);
  }
  // The walk starts at a stall, so the chain holds at least that one.
  const Stall& last = chain.empty() ? stalls.front() : *chain.back();
  std::string cycle;
  const int owner = p.stage_rank[last.waiting_for.stage];
  for (std::size_t k = seen[owner] < 0 ? 0 : seen[owner]; k < chain.size(); ++k) {
    const Stall& st = *chain[k];
    if (!cycle.empty()) cycle += "; ";
    cycle += "rank " + std::to_string(st.rank) + " at " + to_string(st.action) + " waits for " +
             to_string(st.waiting_for) + " on rank " +
             std::to_string(p.stage_rank[st.waiting_for.stage]);
  }
  const Stall& first = chain.empty() ? stalls.front() : *chain[seen[owner] < 0 ? 0 : seen[owner]];
  reject(first.rank, first.action, "deadlock: " + cycle);
}

void validate_structure(const Schedule& s) {
  const Placement& p = s.placement;
  if (static_cast<int>(s.ranks.size()) != p.ranks)
    throw InvalidSchedule("invalid schedule: " + std::to_string(s.ranks.size()) +
                          " rank lists for " + std::to_string(p.ranks) + " ranks");
  const TaskIndex index(p);
  // Which (op slot, stage, mb) have appeared: 1, or 2 for a full B in the input-gradient slot
  // (it has no W; an I has one).
  constexpr std::uint8_t kSeen = 1, kFullBackward = 2;
  const LargeBuffer<std::uint8_t> seen(index.size(), 0);
  for (int r = 0; r < p.ranks; ++r) {
    for (const Action& a : s.ranks[r]) {
      for (const Task& t : a.tasks()) {
        check_task(index, r, a, t);
        const std::size_t id = index.id(t);
        if (seen[id])
          reject(r, a,
                 to_string(t) + " appears more than once" +
                     (t.op == Op::B || t.op == Op::I ? " (a B or I already ran)" : ""));
        seen[id] = t.op == Op::B ? kFullBackward : kSeen;
      }
      if (a.paired()) {
        if (a.task.op != Op::F || (a.partner.op != Op::B && a.partner.op != Op::I))
          reject(r, a, "an overlapped pair is a forward and a B or I");
        if (a.task.stage == a.partner.stage && a.task.mb == a.partner.mb)
          reject(r, a, "an overlapped pair joins two different (stage, micro-batch)");
      }
    }
  }
  for (int st = 0; st < p.stages(); ++st)
    for (int m = 0; m < p.microbatches_of(st); ++m) {
      const int rank = p.stage_rank[st];
      const std::size_t f = index.id(Op::F, st, m);
      const Action fa = Action::single(Op::F, st, m);
      if (!seen[f]) reject(rank, fa, "missing: never scheduled");
      if (!seen[f + 1])
        reject(rank, Action::single(Op::B, st, m), "missing: neither B nor I is scheduled");
      const bool full = seen[f + 1] == kFullBackward;
      if (full && seen[f + 2])
        reject(rank, Action::single(Op::W, st, m), "W after a full B (B already includes W)");
      if (!full && !seen[f + 2])
        reject(rank, Action::single(Op::W, st, m), "missing: I is scheduled without its W");
    }
}

void validate(const Schedule& s, const ValidateOptions& options) {
  validate_structure(s);
  // The order alone: one flag per task slot, set when the task has run.
  const TaskIndex index(s.placement);
  const LargeBuffer<std::uint8_t> ran(index.size(), 0);
  auto has_run = [&](const TaskIndex::Dep& d) { return ran[d.id()] != 0; };
  const auto stalls = walk_in_dependency_order(
      s, index,
      [&](int, std::size_t, const Action& a) {
        if (!index.for_each_dependency(a.task, has_run) ||
            (a.paired() && !index.for_each_dependency(a.partner, has_run)))
          return false;
        ran[index.id(a.task)] = 1;
        if (a.paired()) ran[index.id(a.partner)] = 1;
        return true;
      },
      has_run);
  if (!stalls.empty()) explain_stall(s, stalls);
  if (options.channel_capacity > 0) check_deadlock_free(s, lower(s), options.channel_capacity);
}

int validate_for_run(const Schedule& s, int channel_capacity) {
  if (channel_capacity > 0) {
    validate(s, {.channel_capacity = channel_capacity});
    return channel_capacity;
  }
  // Sound with unbounded channels first: the default is the least capacity of that run, or more.
  validate(s);
  return default_channel_capacity(s);
}

}  // namespace ppbench
