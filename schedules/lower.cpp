#include "schedules/lower.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "schedules/deps.h"

namespace ppbench {

Program lower(const Schedule& s) {
  const Placement& p = s.placement;
  const TaskIndex index(p);
  // Sends are attached to the producing action, so first find, for every
  // task, which cross-rank consumer needs it.
  std::vector<std::int32_t> consumer_rank(index.size(), -1);
  std::array<TaskIndex::Dep, 2> deps;
  for (int r = 0; r < p.ranks; ++r)
    for (const Action& a : s.ranks[r])
      for (const Task& t : a.tasks()) {
        const int n = index.dependencies(t, deps);
        for (int k = 0; k < n; ++k)
          if (p.stage_rank[deps[k].stage] != r) consumer_rank[deps[k].id()] = r;
      }

  Program out;
  out.ranks.resize(p.ranks);
  for (int r = 0; r < p.ranks; ++r) {
    auto& prog = out.ranks[r];
    prog.reserve(3 * s.ranks[r].size());
    for (const Action& a : s.ranks[r]) {
      for (const Task& t : a.tasks()) {
        const int n = index.dependencies(t, deps);
        for (int k = 0; k < n; ++k) {
          const int producer = p.stage_rank[deps[k].stage];
          if (producer != r) prog.push_back({Instr::Kind::Recv, {}, deps[k].task(), producer});
        }
      }
      prog.push_back({Instr::Kind::Compute, a, {}, -1});
      for (const Task& t : a.tasks()) {
        const int to = consumer_rank[index.id(t)];
        if (to >= 0) prog.push_back({Instr::Kind::Send, {}, t, to});
      }
    }
  }
  return out;
}

namespace {

// Where a run of the programs stopped short: the first rank not at its end.
struct Stuck {
  int rank = 0;
  std::size_t pc = 0;
};

// Runs the programs (see check_deadlock_free). `deepest`, if given, gets the most messages any
// one channel held at once.
std::optional<Stuck> run_programs(const Schedule& s, const Program& program, int capacity,
                                  int* deepest = nullptr) {
  const int ranks = static_cast<int>(program.ranks.size());
  const TaskIndex index(s.placement);
  // Every task crosses ranks at most once, so a message is named by its task
  // id; B and I of a (stage, mb) share an id, as the receiver cannot tell.
  std::vector<std::uint8_t> arrived(index.size(), 0);
  std::vector<int> depth(static_cast<std::size_t>(ranks) * ranks, 0);
  // Who is blocked on what: a receiver on a message id, a sender on a full
  // mailbox. Each is woken by the one event that can unblock it, so the run
  // is linear in the program's length.
  std::vector<std::int32_t> waiting_receiver(index.size(), -1);
  std::vector<std::int32_t> waiting_sender(depth.size(), -1);
  std::vector<std::size_t> pc(ranks, 0);
  std::vector<std::int32_t> ready;
  for (int r = ranks - 1; r >= 0; --r) ready.push_back(r);
  auto wake = [&](std::int32_t& who) {
    if (who >= 0) ready.push_back(who), who = -1;
  };
  while (!ready.empty()) {
    const int r = ready.back();
    ready.pop_back();
    const auto& prog = program.ranks[r];
    while (pc[r] < prog.size()) {
      const Instr& in = prog[pc[r]];
      if (in.kind == Instr::Kind::Send) {
        const std::size_t ch = static_cast<std::size_t>(r) * ranks + in.peer;
        if (capacity > 0 && depth[ch] >= capacity) {
          waiting_sender[ch] = r;
          break;
        }
        ++depth[ch];
        if (deepest) *deepest = std::max(*deepest, depth[ch]);
        const std::size_t id = index.id(in.payload);
        arrived[id] = 1;
        wake(waiting_receiver[id]);
      } else if (in.kind == Instr::Kind::Recv) {
        const std::size_t id = index.id(in.payload);
        if (!arrived[id]) {
          waiting_receiver[id] = r;
          break;
        }
        arrived[id] = 0;
        const std::size_t ch = static_cast<std::size_t>(in.peer) * ranks + r;
        --depth[ch];
        wake(waiting_sender[ch]);
      }
      ++pc[r];
    }
  }
  for (int r = 0; r < ranks; ++r)
    if (pc[r] < program.ranks[r].size()) return Stuck{r, pc[r]};
  return std::nullopt;
}

}  // namespace

int least_channel_capacity(const Schedule& s, const Program& program) {
  // Where unbounded channels run it, a capacity of the deepest channel in that run replays the
  // very same run (the order of execution is deterministic and no send ever finds its channel
  // full), so a capacity that works lies in [1, deepest]. Bisection finds one next to a
  // capacity that fails: the least, wherever more capacity never hurts.
  int deepest = 0;
  if (run_programs(s, program, 0, &deepest)) return 0;
  int fails = 0, runs = std::max(deepest, 1);
  while (runs - fails > 1) {
    const int mid = fails + (runs - fails) / 2;
    (run_programs(s, program, mid) ? fails : runs) = mid;
  }
  return runs;
}

int default_channel_capacity(const Schedule& s) {
  return std::max(kDefaultChannelCapacity, least_channel_capacity(s, lower(s)));
}

int resolve_channel_capacity(int requested, const Schedule& s) {
  return requested > 0 ? requested : default_channel_capacity(s);
}

void check_deadlock_free(const Schedule& s, const Program& program, int capacity) {
  const std::optional<Stuck> stuck = run_programs(s, program, capacity);
  if (!stuck) return;
  std::string what = "deadlock in the lowered program: rank " + std::to_string(stuck->rank) +
                     " is stuck at instruction " + std::to_string(stuck->pc) + " (" +
                     to_string(program.ranks[stuck->rank][stuck->pc]) + ")";
  if (capacity > 0) {
    what += " with channel capacity " + std::to_string(capacity);
    if (const int least = least_channel_capacity(s, program); least > 0)
      what += "; it runs with a channel capacity of " + std::to_string(least);
  }
  throw InvalidSchedule(what, stuck->rank);
}

std::string to_string(const Instr& i) {
  switch (i.kind) {
    case Instr::Kind::Compute:
      return to_string(i.action);
    case Instr::Kind::Send:
      return "send(" + to_string(i.payload) + "->" + std::to_string(i.peer) + ")";
    case Instr::Kind::Recv:
      return "recv(" + to_string(i.payload) + "<-" + std::to_string(i.peer) + ")";
  }
  return "?";
}

std::string to_text(const Program& p) {
  std::string out;
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    out += "rank " + std::to_string(r) + ":";
    for (const auto& i : p.ranks[r]) out += ' ' + to_string(i);
    out += '\n';
  }
  return out;
}

}  // namespace ppbench
