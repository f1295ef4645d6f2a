#include "harness/cuda/nccl_plan.h"

#include <algorithm>

#include "core/error.h"
#include "harness/cuda/p2p_deadlock_check.h"

namespace ppbench {

std::size_t wire_dtype_bytes(WireDType t) {
  switch (t) {
    case WireDType::F32:
      return 4;
    case WireDType::BF16:
      return 2;
    case WireDType::F16:
      return 2;
    case WireDType::F64:
      return 8;
  }
  return 0;
}

std::string_view nccl_dtype_name(WireDType t) {
  switch (t) {
    case WireDType::F32:
      return "ncclFloat32";
    case WireDType::BF16:
      return "ncclBfloat16";
    case WireDType::F16:
      return "ncclFloat16";
    case WireDType::F64:
      return "ncclFloat64";
  }
  return "?";
}

std::uint64_t p2p_tag(const Task& payload) {
  const std::uint64_t gradient = payload.op == Op::F ? 0 : 1;
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(payload.stage)) << 33) |
         (static_cast<std::uint64_t>(static_cast<std::uint32_t>(payload.mb)) << 1) | gradient;
}

NcclPlan build_nccl_plan(const Schedule& s, const Program& program, const NcclPlanOptions& o) {
  const auto& bytes = o.activation_bytes;
  if (static_cast<int>(bytes.size()) != s.stages())
    throw UsageError("activation bytes: expected one entry per stage (" +
                     std::to_string(s.stages()) + "), got " + std::to_string(bytes.size()));
  const std::size_t elem = wire_dtype_bytes(o.dtype);
  for (std::size_t st = 0; st < bytes.size(); ++st)
    if (bytes[st] == 0 || bytes[st] % elem != 0)
      throw UsageError("activation bytes of stage " + std::to_string(st) + " (" +
                       std::to_string(bytes[st]) + ") is not a positive multiple of " +
                       std::to_string(elem) + " (" + std::string(nccl_dtype_name(o.dtype)) + ")");

  NcclPlan plan;
  plan.ranks.resize(program.ranks.size());
  for (std::size_t r = 0; r < program.ranks.size(); ++r) {
    auto& steps = plan.ranks[r];
    const auto& prog = program.ranks[r];
    bool open = false;  // the last step is a group that the next op may join
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const Instr& in = prog[i];
      if (in.kind == Instr::Kind::Compute) {
        steps.push_back({false, in.action, {}});
        open = false;
        continue;
      }
      const Task& t = in.payload;
      const std::size_t n = t.op == Op::F ? bytes[t.stage] : bytes[t.stage - 1];
      const P2POp op{in.kind == Instr::Kind::Send ? P2POp::Dir::Send : P2POp::Dir::Recv,
                     in.peer,
                     n,
                     n / elem,
                     o.dtype,
                     p2p_tag(t),
                     t,
                     i};
      if (!open || !o.group_consecutive) steps.push_back({true, {}, {}});
      steps.back().ops.push_back(op);
      open = true;
    }
  }
  plan.hoisted_receives = match_receive_order(plan);
  if (o.defer_blocked_sends) plan.deferred_sends = defer_blocked_sends(plan);
  return plan;
}

std::vector<std::pair<int, int>> send_links(const NcclPlan& plan) {
  std::vector<std::pair<int, int>> links;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    for (const P2PStep& step : plan.ranks[r])
      for (const P2POp& op : step.ops)
        if (op.dir == P2POp::Dir::Send) links.emplace_back(static_cast<int>(r), op.peer);
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
  return links;
}

int match_receive_order(NcclPlan& plan) {
  const std::size_t ranks = plan.ranks.size();
  int hoisted = 0;
  for (std::size_t b = 0; b < ranks; ++b) {
    // Per sender: the tags in send order, and this rank's receive op for each tag.
    std::vector<std::vector<std::uint64_t>> sent(ranks);
    for (std::size_t a = 0; a < ranks; ++a)
      for (const auto& step : plan.ranks[a])
        for (const P2POp& op : step.ops)
          if (op.dir == P2POp::Dir::Send && op.peer == static_cast<int>(b))
            sent[a].push_back(op.tag);
    std::vector<std::vector<P2POp>> recv_of(ranks);  // [sender] -> ops, looked up by tag
    for (const auto& step : plan.ranks[b])
      for (const P2POp& op : step.ops)
        if (op.dir == P2POp::Dir::Recv && op.peer >= 0 && op.peer < static_cast<int>(ranks))
          recv_of[op.peer].push_back(op);
    auto find = [](const std::vector<P2POp>& ops, std::uint64_t tag) -> const P2POp* {
      for (const P2POp& op : ops)
        if (op.tag == tag) return &op;
      return nullptr;
    };
    std::vector<std::size_t> next(ranks, 0);               // [sender] -> next tag in send order
    std::vector<std::vector<std::uint64_t>> early(ranks);  // tags already received by hoisting
    for (auto& step : plan.ranks[b]) {
      if (!step.is_group) continue;
      std::vector<P2POp> ops;
      for (const P2POp& op : step.ops) {
        if (op.dir != P2POp::Dir::Recv || op.peer < 0 || op.peer >= static_cast<int>(ranks)) {
          ops.push_back(op);
          continue;
        }
        const auto a = static_cast<std::size_t>(op.peer);
        auto& got = early[a];
        if (std::find(got.begin(), got.end(), op.tag) != got.end()) continue;  // hoisted before
        const auto& order = sent[a];
        if (std::find(order.begin() + static_cast<std::ptrdiff_t>(next[a]), order.end(), op.tag) ==
            order.end()) {
          ops.push_back(op);  // never sent: left for the checker to report
          continue;
        }
        for (; order[next[a]] != op.tag; ++next[a]) {
          const P2POp* ahead = find(recv_of[a], order[next[a]]);
          if (!ahead) break;  // sent but never received: the checker reports it
          ops.push_back(*ahead);
          got.push_back(ahead->tag);
          ++hoisted;
        }
        if (order[next[a]] == op.tag) ++next[a];
        ops.push_back(op);
      }
      step.ops = std::move(ops);
    }
  }
  return hoisted;
}

int defer_blocked_sends(NcclPlan& plan) {
  int moved_total = 0;
  for (;;) {
    const P2PRun run = run_p2p_plan(plan);
    if (run.finished(plan)) return moved_total;
    int moved = 0;
    for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
      auto& steps = plan.ranks[r];
      const std::size_t s = run.at[r];
      // Only a rank that waits on sends alone: its receives are in, so it would move on were
      // its sends buffered. A rank still waiting to receive is unblocked by another's deferral.
      if (s >= steps.size()) continue;
      const auto& done = run.done[r][s];
      bool sends_only = true;
      for (std::size_t k = 0; k < done.size(); ++k)
        if (!done[k] && steps[s].ops[k].dir == P2POp::Dir::Recv) sends_only = false;
      // A group is always followed by a compute; the last group has nowhere to defer to.
      if (!sends_only || s + 1 >= steps.size()) continue;
      std::vector<P2POp> keep, later;
      for (std::size_t k = 0; k < done.size(); ++k)
        (done[k] ? keep : later).push_back(steps[s].ops[k]);
      const std::size_t after = s + 2;
      if (after >= steps.size() || !steps[after].is_group)
        steps.insert(steps.begin() + static_cast<std::ptrdiff_t>(after), {true, {}, {}});
      // In front: sends to the same peer already there come later in that channel's order.
      auto& target = steps[after].ops;
      target.insert(target.begin(), later.begin(), later.end());
      moved += static_cast<int>(later.size());
      if (keep.empty())
        steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(s));
      else
        steps[s].ops = std::move(keep);
    }
    if (moved == 0) return moved_total;
    moved_total += moved;
  }
}

std::string to_string(const P2POp& op) {
  const bool send = op.dir == P2POp::Dir::Send;
  return std::string(send ? "send(" : "recv(") + to_string(op.payload) + (send ? "->" : "<-") +
         std::to_string(op.peer) + ", " + std::to_string(op.bytes) + " B)";
}

std::string to_text(const NcclPlan& plan) {
  std::string out;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    out += "rank " + std::to_string(r) + ":";
    for (const auto& step : plan.ranks[r]) {
      if (!step.is_group) {
        out += ' ' + to_string(step.action);
        continue;
      }
      out += " [";
      for (std::size_t k = 0; k < step.ops.size(); ++k)
        out += (k ? " " : "") + to_string(step.ops[k]);
      out += ']';
    }
    out += '\n';
  }
  return out;
}

}  // namespace ppbench
