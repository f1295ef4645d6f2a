#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/cuda/nccl_plan.h"
#include "harness/cuda/p2p_deadlock_check.h"
#include "schedules/lower.h"
#include "schedules/registry.h"

namespace ppbench {
namespace {

// Unequal boundaries, so a gradient sized by the wrong stage shows.
NcclPlanOptions options_for(const Schedule& s, WireDType dtype = WireDType::BF16) {
  NcclPlanOptions o;
  for (int st = 0; st < s.stages(); ++st)
    o.activation_bytes.push_back(static_cast<std::size_t>(st + 1) * 4096);
  o.dtype = dtype;
  return o;
}

std::string deadlock_of(const NcclPlan& plan) {
  try {
    check_p2p_deadlock_free(plan);
  } catch (const InvalidSchedule& e) {
    return e.what();
  }
  return "";
}

TEST(NcclPlan, GroupsTheOpsBetweenTwoComputes) {
  const Schedule s = generate({"1f1b", 4, 8});
  const Program prog = lower(s);
  const NcclPlan plan = build_nccl_plan(s, prog, options_for(s));
  ASSERT_EQ(plan.ranks.size(), 4u);
  for (std::size_t r = 0; r < 4; ++r) {
    std::size_t ops = 0, computes = 0;
    const auto& steps = plan.ranks[r];
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (steps[i].is_group) {
        EXPECT_FALSE(steps[i].ops.empty());
        if (i > 0) {
          EXPECT_FALSE(steps[i - 1].is_group) << "two groups in a row on rank " << r;
        }
        for (const P2POp& op : steps[i].ops) {
          const Instr& in = prog.ranks[r][op.instr];
          EXPECT_EQ(op.payload, in.payload);
          EXPECT_EQ(op.peer, in.peer);
          EXPECT_EQ(op.dir == P2POp::Dir::Send, in.kind == Instr::Kind::Send);
          // Ops keep the lowered order, so the k-th send of a pair stays the k-th.
          EXPECT_EQ(op.instr, ops + computes);
          ++ops;
        }
      } else {
        EXPECT_EQ(steps[i].action, prog.ranks[r][ops + computes].action);
        ++computes;
      }
    }
    EXPECT_EQ(ops + computes, prog.ranks[r].size());
  }
  // Steady state of 1F1B on a middle rank: after an F, its activation goes down and the next
  // B's gradient comes up, in one group.
  EXPECT_EQ(plan.deferred_sends, 0);  // 1F1B needs grouping only
  const std::string text = to_text(plan);
  EXPECT_NE(text.find("[send(F1.3->2, 8192 B) recv(B2.1<-2, 8192 B)]"), std::string::npos) << text;
}

TEST(NcclPlan, BytesCountDtypeAndTagFollowThePayload) {
  const Schedule s = generate({"1f1b", 4, 8});
  const NcclPlan plan = build_nccl_plan(s, lower(s), options_for(s, WireDType::F32));
  for (const auto& rank : plan.ranks)
    for (const auto& step : rank)
      for (const P2POp& op : step.ops) {
        const int boundary = op.payload.op == Op::F ? op.payload.stage : op.payload.stage - 1;
        EXPECT_EQ(op.bytes, static_cast<std::size_t>(boundary + 1) * 4096) << to_string(op);
        EXPECT_EQ(op.count, op.bytes / 4);
        EXPECT_EQ(op.dtype, WireDType::F32);
        EXPECT_EQ(op.tag, p2p_tag(op.payload));
      }
  EXPECT_EQ(nccl_dtype_name(WireDType::BF16), "ncclBfloat16");
  EXPECT_EQ(wire_dtype_bytes(WireDType::BF16), 2u);
}

TEST(NcclPlan, GradientTagIgnoresBOrI) {
  EXPECT_EQ(p2p_tag({Op::B, 3, 5}), p2p_tag({Op::I, 3, 5}));
  EXPECT_NE(p2p_tag({Op::F, 3, 5}), p2p_tag({Op::B, 3, 5}));
  EXPECT_NE(p2p_tag({Op::F, 3, 5}), p2p_tag({Op::F, 5, 3}));
}

TEST(NcclPlan, RejectsBadBoundaryBytes) {
  const Schedule s = generate({"gpipe", 2, 2});
  NcclPlanOptions o = options_for(s);
  o.activation_bytes.pop_back();
  EXPECT_THROW(build_nccl_plan(s, lower(s), o), UsageError);
  o = options_for(s, WireDType::F32);
  o.activation_bytes[1] = 6;  // not a whole number of floats
  try {
    build_nccl_plan(s, lower(s), o);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("stage 1 (6)"), std::string::npos) << e.what();
  }
}

// The links a transport connects before the first step: every pair a step sends over, from the
// lowered program itself (not the plan's groups), and nothing else; every receive comes over one.
TEST(NcclPlan, SendLinksAreThePairsTheProgramSendsOver) {
  const Schedule one_f_one_b = generate({"1f1b", 4, 8});
  const std::vector<std::pair<int, int>> neighbours = {{0, 1}, {1, 0}, {1, 2},
                                                       {2, 1}, {2, 3}, {3, 2}};
  EXPECT_EQ(send_links(build_nccl_plan(one_f_one_b, lower(one_f_one_b), options_for(one_f_one_b))),
            neighbours);
  for (const auto& info : all_schedules())
    for (int d : {2, 4}) {
      const Schedule s = generate({std::string(info.name), d, 4 * d, info.uses_chunks ? 2 : 0, 0});
      const Program prog = lower(s);
      std::vector<std::pair<int, int>> sent, received;
      for (std::size_t r = 0; r < prog.ranks.size(); ++r)
        for (const Instr& in : prog.ranks[r]) {
          if (in.kind == Instr::Kind::Send) sent.emplace_back(static_cast<int>(r), in.peer);
          if (in.kind == Instr::Kind::Recv) received.emplace_back(in.peer, static_cast<int>(r));
        }
      for (auto* v : {&sent, &received}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
      }
      const auto links = send_links(build_nccl_plan(s, prog, options_for(s)));
      EXPECT_EQ(links, sent) << info.name << " D=" << d;
      EXPECT_EQ(links, received) << info.name << " D=" << d;
      EXPECT_FALSE(links.empty()) << info.name << " D=" << d;
    }
}

TEST(P2PDeadlock, EveryGeneratedScheduleIsDeadlockFreeWhenGrouped) {
  for (const auto& info : all_schedules())
    for (int d : {2, 4, 8})
      for (int n : {2 * d, 4 * d}) {
        const ScheduleParams p{std::string(info.name), d, n, info.uses_chunks ? 2 : 0, 0};
        const Schedule s = generate(p);
        const NcclPlan plan = build_nccl_plan(s, lower(s), options_for(s));
        EXPECT_EQ(deadlock_of(plan), "") << info.name << " D=" << d << " N=" << n;
      }
}

// How many computes a rank has run before each lowered instruction, and before each plan step.
std::vector<std::size_t> computes_before(const std::vector<Instr>& prog) {
  std::vector<std::size_t> out;
  std::size_t n = 0;
  for (const Instr& in : prog) {
    out.push_back(n);
    if (in.kind == Instr::Kind::Compute) ++n;
  }
  return out;
}

TEST(P2PDeadlock, ReceivesOnlyMoveEarlierAndSendsOnlyLaterInSendersOrder) {
  int hoisted = 0, deferred = 0;
  for (const auto& info : all_schedules())
    for (int d : {2, 4, 8}) {
      const ScheduleParams p{std::string(info.name), d, 4 * d, info.uses_chunks ? 2 : 0, 0};
      const Schedule s = generate(p);
      const Program prog = lower(s);
      const NcclPlan plan = build_nccl_plan(s, prog, options_for(s));
      const std::string what = std::string(info.name) + " D=" + std::to_string(d);
      hoisted += plan.hoisted_receives;
      deferred += plan.deferred_sends;
      const auto ranks = plan.ranks.size();
      std::vector<std::vector<std::uint64_t>> sent(ranks * ranks), received(ranks * ranks);
      std::size_t ops = 0, instrs = 0;
      for (std::size_t r = 0; r < ranks; ++r) {
        const auto before = computes_before(prog.ranks[r]);
        std::size_t computes = 0;
        for (const auto& step : plan.ranks[r]) {
          if (!step.is_group) {
            ++computes;
            continue;
          }
          for (const P2POp& op : step.ops) {
            ++ops;
            const auto peer = static_cast<std::size_t>(op.peer);
            if (op.dir == P2POp::Dir::Recv) {
              EXPECT_LE(computes, before[op.instr]) << what << " " << to_string(op);
              received[peer * ranks + r].push_back(op.tag);
            } else {
              EXPECT_GE(computes, before[op.instr]) << what << " " << to_string(op);
              sent[r * ranks + peer].push_back(op.tag);
            }
          }
        }
        for (const Instr& in : prog.ranks[r]) instrs += in.kind != Instr::Kind::Compute;
      }
      EXPECT_EQ(ops, instrs) << info.name << " D=" << d;  // nothing lost or duplicated
      EXPECT_EQ(sent, received) << info.name << " D=" << d;
    }
  // Two-chain and V placements need hoisting, interleaving and ZB-H2 need deferral: keep the
  // test honest that both paths run.
  EXPECT_GT(hoisted, 0);
  EXPECT_GT(deferred, 0);
}

TEST(P2PDeadlock, InterleavedDeadlocksWithoutDeferral) {
  const Schedule s = generate({"interleaved-1f1b", 4, 8, 2, 0});
  NcclPlanOptions o = options_for(s);
  o.defer_blocked_sends = false;
  const std::string why = deadlock_of(build_nccl_plan(s, lower(s), o));
  EXPECT_NE(why.find("deadlock in the NCCL plan"), std::string::npos) << why;
  o.defer_blocked_sends = true;
  const NcclPlan fixed = build_nccl_plan(s, lower(s), o);
  EXPECT_GT(fixed.deferred_sends, 0);
  EXPECT_EQ(deadlock_of(fixed), "");
}

TEST(P2PDeadlock, OneOpPerGroupDeadlocksIn1F1B) {
  // Why grouping is needed: rank r sends F down while r+1 sends B up, neither posted a receive.
  const Schedule s = generate({"1f1b", 4, 8});
  NcclPlanOptions o = options_for(s);
  o.group_consecutive = false;
  o.defer_blocked_sends = false;
  const std::string why = deadlock_of(build_nccl_plan(s, lower(s), o));
  EXPECT_NE(why.find("deadlock in the NCCL plan"), std::string::npos) << why;
}

TEST(P2PDeadlock, CatchesADeadlockingOrder) {
  Schedule s = generate({"1f1b", 4, 8});
  // Rank 0 waits for B0.0's gradient before sending F0.0's activation.
  auto& r0 = s.ranks[0];
  auto b = std::find(r0.begin(), r0.end(), Action::single(Op::B, 0, 0));
  std::rotate(r0.begin(), b, b + 1);
  const std::string why = deadlock_of(build_nccl_plan(s, lower(s), options_for(s)));
  EXPECT_NE(why.find("deadlock"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 0"), std::string::npos) << why;
  EXPECT_NE(why.find("recv(B1.0<-1"), std::string::npos) << why;
}

TEST(P2PDeadlock, CatchesHandWrittenCycle) {
  // Each rank receives before it sends, with a compute in between: a cycle NCCL cannot break.
  auto op = [](P2POp::Dir dir, int peer, Task t) {
    return P2POp{dir, peer, 64, 32, WireDType::BF16, p2p_tag(t), t, 0};
  };
  const Task a{Op::F, 0, 0}, b{Op::F, 1, 0};
  NcclPlan plan;
  plan.ranks.resize(2);
  plan.ranks[0] = {{true, {}, {op(P2POp::Dir::Recv, 1, b)}},
                   {false, Action::single(Op::F, 0, 0), {}},
                   {true, {}, {op(P2POp::Dir::Send, 1, a)}}};
  plan.ranks[1] = {{true, {}, {op(P2POp::Dir::Recv, 0, a)}},
                   {false, Action::single(Op::F, 1, 0), {}},
                   {true, {}, {op(P2POp::Dir::Send, 0, b)}}};
  EXPECT_NE(deadlock_of(plan).find("deadlock"), std::string::npos);
  // The same ops, each rank's two in one group, complete.
  NcclPlan grouped;
  grouped.ranks = {{{true, {}, {op(P2POp::Dir::Recv, 1, b), op(P2POp::Dir::Send, 1, a)}}},
                   {{true, {}, {op(P2POp::Dir::Recv, 0, a), op(P2POp::Dir::Send, 0, b)}}}};
  EXPECT_EQ(deadlock_of(grouped), "");
}

TEST(P2PDeadlock, CatchesMismatchedAndUnmatchedOps) {
  const Schedule s = generate({"gpipe", 2, 2});
  NcclPlan plan = build_nccl_plan(s, lower(s), options_for(s));
  // Rank 0's two activation sends swapped: NCCL would deliver F0.1 where F0.0 is expected.
  std::vector<P2POp*> sends;
  for (auto& step : plan.ranks[0])
    for (auto& op : step.ops)
      if (op.dir == P2POp::Dir::Send) sends.push_back(&op);
  ASSERT_EQ(sends.size(), 2u);
  std::swap(sends[0]->payload, sends[1]->payload);
  std::swap(sends[0]->tag, sends[1]->tag);
  const std::string why = deadlock_of(plan);
  EXPECT_NE(why.find("expects a different tensor"), std::string::npos) << why;

  NcclPlan unmatched = build_nccl_plan(s, lower(s), options_for(s));
  unmatched.ranks[1].pop_back();  // rank 1's last gradient send is gone
  const std::string why2 = deadlock_of(unmatched);
  EXPECT_NE(why2.find("rank 1 posts 1 sends to rank 0, which posts 2 receives"), std::string::npos)
      << why2;
}

}  // namespace
}  // namespace ppbench
