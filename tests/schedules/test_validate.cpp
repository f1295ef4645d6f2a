// The validator rejects every kind of broken schedule with the rank and
// action that break it; the lowering derives the right sends and receives.
#include <algorithm>

#include <gtest/gtest.h>

#include "schedules/lower.h"
#include "sim_helpers.h"

namespace ppbench {
namespace {

std::string rejection(const Schedule& s) {
  try {
    validate(s);
  } catch (const InvalidSchedule& e) {
    return e.what();
  }
  return "";
}

Schedule one_f_one_b() { return generate({"1f1b", 4, 8}); }

TEST(Validate, AcceptsEveryGeneratedSchedule) {
  for (const auto& info : all_schedules())
    for (int d : {2, 4, 8})
      for (int n : {2 * d, 4 * d}) {
        ScheduleParams p{std::string(info.name), d, n, info.uses_chunks ? 2 : 0, 0};
        EXPECT_NO_THROW(validate(generate(p))) << info.name << " D=" << d << " N=" << n;
      }
}

TEST(Validate, RejectsSwappedDependency) {
  Schedule s = one_f_one_b();
  // Rank 3 runs B3.0 before F3.0.
  std::swap(s.ranks[3][0], s.ranks[3][1]);
  const std::string why = rejection(s);
  EXPECT_NE(why.find("rank 3"), std::string::npos) << why;
  EXPECT_NE(why.find("B3.0"), std::string::npos) << why;
}

TEST(Validate, RejectsCrossRankDeadlock) {
  Schedule s = one_f_one_b();
  // Rank 0 waits for B0.0 before sending F0.0's activation: both ranks stall.
  auto& r0 = s.ranks[0];
  auto b = std::find(r0.begin(), r0.end(), Action::single(Op::B, 0, 0));
  std::rotate(r0.begin(), b, b + 1);
  const std::string why = rejection(s);
  EXPECT_NE(why.find("rank 0"), std::string::npos) << why;
  EXPECT_NE(why.find("B0.0"), std::string::npos) << why;
}

TEST(Validate, RejectsMissingDuplicateAndMisplacedActions) {
  Schedule missing = one_f_one_b();
  missing.ranks[2].pop_back();
  EXPECT_NE(rejection(missing).find("B2.7"), std::string::npos) << rejection(missing);

  Schedule duplicate = one_f_one_b();
  duplicate.ranks[1].push_back(Action::single(Op::F, 1, 0));
  EXPECT_NE(rejection(duplicate).find("more than once"), std::string::npos);

  Schedule misplaced = one_f_one_b();
  misplaced.ranks[1][0] = Action::single(Op::F, 2, 0);
  EXPECT_NE(rejection(misplaced).find("lives on rank 2"), std::string::npos)
      << rejection(misplaced);

  Schedule out_of_range = one_f_one_b();
  out_of_range.ranks[0][0] = Action::single(Op::F, 0, 99);
  EXPECT_NE(rejection(out_of_range).find("micro-batch 99"), std::string::npos);

  Schedule no_stage = one_f_one_b();
  no_stage.ranks[0][0] = Action::single(Op::F, 7, 0);
  EXPECT_NE(rejection(no_stage).find("does not exist"), std::string::npos);
}

TEST(Validate, RejectsBrokenSplitBackward) {
  Schedule s = one_f_one_b();
  // Replace B3.0 by I3.0 without its W.
  std::vector<Action>& r3 = s.ranks[3];
  const auto b30 = std::find(r3.begin(), r3.end(), Action::single(Op::B, 3, 0));
  ASSERT_NE(b30, r3.end());
  *b30 = Action::single(Op::I, 3, 0);
  EXPECT_NE(rejection(s).find("without its W"), std::string::npos) << rejection(s);
  // W before its I.
  std::vector<Action> w_first{Action::single(Op::W, 3, 0)};
  w_first.insert(w_first.end(), r3.begin(), r3.end());
  r3 = std::move(w_first);
  EXPECT_NE(rejection(s).find("W3.0"), std::string::npos) << rejection(s);
  // W after a full B.
  Schedule t = one_f_one_b();
  t.ranks[3].push_back(Action::single(Op::W, 3, 1));
  EXPECT_NE(rejection(t).find("full B"), std::string::npos) << rejection(t);
}

TEST(Validate, RejectsBadOverlappedPairs) {
  Schedule s = one_f_one_b();
  s.ranks[3][0] = Action::pair({Op::F, 3, 0}, {Op::B, 3, 0});
  s.ranks[3].erase(s.ranks[3].begin() + 1);
  EXPECT_NE(rejection(s).find("two different"), std::string::npos) << rejection(s);
}

TEST(Lowering, SendsFollowProducersAndReceivesPrecedeConsumers) {
  Schedule s = generate({"1f1b", 2, 2});
  EXPECT_EQ(
      to_text(lower(s)),
      "rank 0: F0.0 send(F0.0->1) F0.1 send(F0.1->1) recv(B1.0<-1) B0.0 recv(B1.1<-1) B0.1\n"
      "rank 1: recv(F0.0<-0) F1.0 B1.0 send(B1.0->0) recv(F0.1<-0) F1.1 B1.1 send(B1.1->0)\n");
}

TEST(Lowering, EveryCrossRankDependencyIsOneSendAndOneReceive) {
  for (const auto& info : all_schedules()) {
    ScheduleParams p{std::string(info.name), 4, 16, info.uses_chunks ? 2 : 0, 0};
    const Schedule s = generate(p);
    const Program prog = lower(s);
    std::size_t sends = 0, recvs = 0, computes = 0;
    for (const auto& r : prog.ranks)
      for (const auto& i : r) {
        sends += i.kind == Instr::Kind::Send;
        recvs += i.kind == Instr::Kind::Recv;
        computes += i.kind == Instr::Kind::Compute;
      }
    EXPECT_EQ(sends, recvs) << info.name;
    EXPECT_EQ(computes, s.action_count()) << info.name;
    // Each (stage, mb) crossing: forward activations and backward gradients
    // at every boundary between stages on different ranks.
    std::size_t crossings = 0;
    for (int st = 0; st < s.stages(); ++st)
      if (!s.placement.is_last(st) && s.placement.stage_rank[st] != s.placement.stage_rank[st + 1])
        crossings += 2 * static_cast<std::size_t>(s.placement.microbatches_of(st));
    EXPECT_EQ(sends, crossings) << info.name;
    EXPECT_NO_THROW(check_deadlock_free(s, prog, 0)) << info.name;
  }
}

TEST(Lowering, BoundedChannelsCanDeadlockWhereUnboundedDoNot) {
  // GPipe's rank 0 sends all N activations before it receives anything; with
  // capacity 1 and the consumer's own order it still drains, but a consumer
  // that receives in reverse order needs the whole queue buffered.
  Schedule s = generate({"gpipe", 2, 4});
  Program prog = lower(s);
  EXPECT_NO_THROW(check_deadlock_free(s, prog, 1));
  auto& r1 = prog.ranks[1];
  // Make rank 1 receive F0.3 first: it must wait behind three unreceived sends.
  std::vector<Instr> reordered;
  for (int m = 3; m >= 0; --m) reordered.push_back({Instr::Kind::Recv, {}, {Op::F, 0, m}, 0});
  r1.erase(std::remove_if(
               r1.begin(), r1.end(),
               [](const Instr& i) { return i.kind == Instr::Kind::Recv && i.payload.op == Op::F; }),
           r1.end());
  r1.insert(r1.begin(), reordered.begin(), reordered.end());
  EXPECT_NO_THROW(check_deadlock_free(s, prog, 0));
  EXPECT_THROW(check_deadlock_free(s, prog, 2), InvalidSchedule);
}

TEST(Validate, BoundedChannelsAreCheckedOnTheLoweredProgram) {
  // Rank 1 takes GPipe's forwards in reverse: fine when sends never block,
  // a deadlock when each mailbox holds one message (rank 0 blocks on its
  // second send while rank 1 waits for the fourth).
  Schedule s = generate({"gpipe", 2, 4});
  std::reverse(s.ranks[1].begin(), s.ranks[1].begin() + 4);
  std::reverse(s.ranks[1].begin() + 4, s.ranks[1].end());
  EXPECT_NO_THROW(validate(s));
  EXPECT_NO_THROW(validate(s, {.channel_capacity = 4}));
  try {
    validate(s, {.channel_capacity = 1});
    ADD_FAILURE() << "expected a deadlock with capacity 1";
  } catch (const InvalidSchedule& e) {
    EXPECT_NE(std::string(e.what()).find("capacity 1"), std::string::npos) << e.what();
  }
}

TEST(Validate, ADeadlockOfBoundedChannelsNamesTheCapacityThatRunsIt) {
  // Rank 1 takes GPipe's forwards in reverse, so rank 0's four sends must all be buffered: the
  // least capacity that runs it is 4, and each smaller one says so.
  Schedule s = generate({"gpipe", 2, 4});
  std::reverse(s.ranks[1].begin(), s.ranks[1].begin() + 4);
  std::reverse(s.ranks[1].begin() + 4, s.ranks[1].end());
  for (int capacity = 1; capacity < 4; ++capacity) {
    try {
      validate(s, {.channel_capacity = capacity});
      ADD_FAILURE() << "expected a deadlock with capacity " << capacity;
    } catch (const InvalidSchedule& e) {
      EXPECT_NE(std::string(e.what()).find("; it runs with a channel capacity of 4"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(validate(s, {.channel_capacity = 4}));
}

// On every family's own orders the least capacity is least: one message less deadlocks. Run on
// generated orders, this also checks the bisection's premise that more capacity never hurts.
TEST(Lowering, TheLeastChannelCapacityOfEveryFamilyIsLeast) {
  int above_default = 0;
  for (const auto& info : all_schedules())
    for (int d : {2, 3, 4})
      for (int n : {4, 8, 12}) {
        ScheduleParams p{std::string(info.name), d, n, info.uses_chunks ? 2 : 0, 0};
        Schedule s;
        try {
          s = generate(p);
        } catch (const std::exception&) {
          continue;  // a size the family does not take
        }
        const Program prog = lower(s);
        const int least = least_channel_capacity(s, prog);
        ASSERT_GE(least, 1) << info.name << " D=" << d << " N=" << n;
        EXPECT_NO_THROW(check_deadlock_free(s, prog, least)) << info.name << " D=" << d;
        if (least > 1) {
          EXPECT_THROW(check_deadlock_free(s, prog, least - 1), InvalidSchedule)
              << info.name << " D=" << d << " N=" << n;
        }
        above_default += least > 4;
      }
  EXPECT_GT(above_default, 0);  // looped-bfs at D = 2, N = 12 needs more than 4
}

TEST(Lowering, ADeadlockNoCapacityCuresNamesNoCapacity) {
  // Rank 0 first waits for a gradient that needs its own first forward: stuck with any capacity.
  Schedule s = generate({"gpipe", 2, 4});
  Program prog = lower(s);
  std::vector<Instr> waits_first{{Instr::Kind::Recv, {}, {Op::B, 1, 0}, 1}};
  waits_first.insert(waits_first.end(), prog.ranks[0].begin(), prog.ranks[0].end());
  prog.ranks[0] = std::move(waits_first);
  try {
    check_deadlock_free(s, prog, 2);
    ADD_FAILURE() << "expected a deadlock";
  } catch (const InvalidSchedule& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0 is stuck at instruction 0"), std::string::npos) << what;
    EXPECT_EQ(what.find("it runs with"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace ppbench
