#include "harness/cuda/p2p_deadlock_check.h"

#include "core/error.h"

namespace ppbench {

namespace {

using OpRef = P2POpRef;

std::string where(const NcclPlan& plan, const OpRef& at) {
  return "rank " + std::to_string(at.rank) + " step " + std::to_string(at.step) + " " +
         to_string(plan.ranks[at.rank][at.step].ops[at.op]);
}

bool agree(const P2POp& a, const P2POp& b) {
  return a.tag == b.tag && a.bytes == b.bytes && a.count == b.count && a.dtype == b.dtype;
}

}  // namespace

bool P2PRun::finished(const NcclPlan& plan) const {
  for (std::size_t r = 0; r < at.size(); ++r)
    if (at[r] < plan.ranks[r].size()) return false;
  return true;
}

P2PRun run_p2p_plan(const NcclPlan& plan) {
  const int ranks = static_cast<int>(plan.ranks.size());
  // Matching, per ordered pair (a -> b): the k-th send with the k-th receive.
  std::vector<std::vector<OpRef>> sends(static_cast<std::size_t>(ranks) * ranks);
  std::vector<std::vector<OpRef>> recvs(sends.size());
  for (int r = 0; r < ranks; ++r)
    for (std::size_t s = 0; s < plan.ranks[r].size(); ++s) {
      const auto& ops = plan.ranks[r][s].ops;
      for (std::size_t k = 0; k < ops.size(); ++k) {
        const int peer = ops[k].peer;
        if (peer < 0 || peer >= ranks || peer == r)
          throw InvalidSchedule("NCCL plan: " + where(plan, {r, s, k}) + " has no valid peer");
        const bool send = ops[k].dir == P2POp::Dir::Send;
        const std::size_t ch = send ? static_cast<std::size_t>(r) * ranks + peer
                                    : static_cast<std::size_t>(peer) * ranks + r;
        (send ? sends : recvs)[ch].push_back({r, s, k});
      }
    }
  P2PRun run;
  auto& counterpart = run.counterpart;
  counterpart.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    counterpart[r].resize(plan.ranks[r].size());
    for (std::size_t s = 0; s < plan.ranks[r].size(); ++s)
      counterpart[r][s].resize(plan.ranks[r][s].ops.size());
  }
  for (int a = 0; a < ranks; ++a)
    for (int b = 0; b < ranks; ++b) {
      const std::size_t ch = static_cast<std::size_t>(a) * ranks + b;
      if (sends[ch].size() != recvs[ch].size())
        throw InvalidSchedule("NCCL plan: rank " + std::to_string(a) + " posts " +
                              std::to_string(sends[ch].size()) + " sends to rank " +
                              std::to_string(b) + ", which posts " +
                              std::to_string(recvs[ch].size()) + " receives from it");
      for (std::size_t k = 0; k < sends[ch].size(); ++k) {
        const OpRef& s = sends[ch][k];
        const OpRef& q = recvs[ch][k];
        if (!agree(plan.ranks[s.rank][s.step].ops[s.op], plan.ranks[q.rank][q.step].ops[q.op]))
          throw InvalidSchedule("NCCL plan: send #" + std::to_string(k) + " " + where(plan, s) +
                                " is matched with " + where(plan, q) +
                                ", which expects a different tensor");
        counterpart[s.rank][s.step][s.op] = q;
        counterpart[q.rank][q.step][q.op] = s;
      }
    }

  // Simulation: every rank stands at its first unfinished group; transfers whose both ends are
  // posted complete; repeat until nothing moves.
  auto& pc = run.at;
  pc.assign(ranks, 0);
  auto& done = run.done;
  done.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    done[r].resize(plan.ranks[r].size());
    for (std::size_t s = 0; s < plan.ranks[r].size(); ++s)
      done[r][s].assign(plan.ranks[r][s].ops.size(), 0);
  }
  auto skip_computes = [&](int r) {
    while (pc[r] < plan.ranks[r].size() && !plan.ranks[r][pc[r]].is_group) ++pc[r];
  };
  for (int r = 0; r < ranks; ++r) skip_computes(r);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < ranks; ++r) {
      if (pc[r] >= plan.ranks[r].size()) continue;
      const std::size_t s = pc[r];
      bool all = true;
      for (std::size_t k = 0; k < plan.ranks[r][s].ops.size(); ++k) {
        if (done[r][s][k]) continue;
        const OpRef& c = counterpart[r][s][k];
        if (pc[c.rank] == c.step) {
          done[r][s][k] = 1;
          done[c.rank][c.step][c.op] = 1;
        } else {
          all = false;
        }
      }
      if (all) {
        ++pc[r];
        skip_computes(r);
        moved = true;
      }
    }
  }
  return run;
}

void check_p2p_deadlock_free(const NcclPlan& plan) {
  const P2PRun run = run_p2p_plan(plan);
  const auto& pc = run.at;
  const auto& done = run.done;
  // The first op the rank still waits for, for the message.
  auto pending = [&](int r) -> std::string {
    const std::size_t s = pc[r];
    if (s >= plan.ranks[r].size()) return "finished";
    for (std::size_t k = 0; k < plan.ranks[r][s].ops.size(); ++k)
      if (!done[r][s][k]) return to_string(plan.ranks[r][s].ops[k]);
    return "nothing";
  };
  for (int r = 0; r < static_cast<int>(plan.ranks.size()); ++r) {
    const std::size_t s = pc[r];
    if (s >= plan.ranks[r].size()) continue;
    for (std::size_t k = 0; k < plan.ranks[r][s].ops.size(); ++k) {
      if (done[r][s][k]) continue;
      const OpRef& c = run.counterpart[r][s][k];
      throw InvalidSchedule(
          "deadlock in the NCCL plan: " + where(plan, {r, s, k}) + " never completes: rank " +
          std::to_string(c.rank) + " posts the matching op at step " + std::to_string(c.step) +
          " but waits at step " + std::to_string(pc[c.rank]) + " (" + pending(c.rank) + ")");
    }
  }
}

}  // namespace ppbench
