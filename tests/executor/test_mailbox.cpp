// The in-process mailbox's semantics, which the validator's deadlock proof assumes (match by
// name, a bounded channel, a deadline on every wait, abort releasing every waiter), in both of
// its ways of waiting: sleeping on the condition variable (ranks sharing cores, spin 0) and
// spinning then napping (ranks with a core each), where no sender wakes the waiter.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "harness/executor/mailbox.h"

namespace ppbench {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// Long enough that a correct wait never reaches it; a wait that misses its wake-up does.
Clock::time_point far() { return Clock::now() + std::chrono::seconds(10); }

class MailboxWaits : public ::testing::TestWithParam<int> {
 protected:
  microseconds spin() const { return microseconds(GetParam()); }
};

TEST_P(MailboxWaits, ReceivesMatchByNameNotByOrder) {
  Mailbox<int> box(4, spin());
  ASSERT_EQ(box.send(1, 10, far()), WaitResult::kDone);
  ASSERT_EQ(box.send(2, 20, far()), WaitResult::kDone);
  int got = 0;
  ASSERT_EQ(box.receive(2, got, far()), WaitResult::kDone);
  EXPECT_EQ(got, 20);
  ASSERT_EQ(box.receive(1, got, far()), WaitResult::kDone);
  EXPECT_EQ(got, 10);
}

TEST_P(MailboxWaits, AReceiverWaitsPastOtherMessagesForItsOwn) {
  Mailbox<int> box(4, spin());
  int got = 0;
  std::thread receiver([&] { EXPECT_EQ(box.receive(7, got, far()), WaitResult::kDone); });
  // Another message first: the waiter must look again and keep waiting, also once it naps.
  ASSERT_EQ(box.send(3, 30, far()), WaitResult::kDone);
  std::this_thread::sleep_for(milliseconds(5));
  ASSERT_EQ(box.send(7, 70, far()), WaitResult::kDone);
  receiver.join();
  EXPECT_EQ(got, 70);
  int other = 0;
  ASSERT_EQ(box.receive(3, other, Clock::now()), WaitResult::kDone);
  EXPECT_EQ(other, 30);
}

TEST_P(MailboxWaits, AFullMailboxHoldsItsSenderUntilAMessageIsTaken) {
  Mailbox<int> box(1, spin());
  ASSERT_EQ(box.send(1, 10, far()), WaitResult::kDone);
  std::atomic<bool> sent{false};
  std::thread sender([&] {
    EXPECT_EQ(box.send(2, 20, far()), WaitResult::kDone);
    sent = true;
  });
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(sent) << "a send into a full mailbox went through";
  int got = 0;
  ASSERT_EQ(box.receive(1, got, far()), WaitResult::kDone);
  sender.join();
  EXPECT_TRUE(sent);
  ASSERT_EQ(box.receive(2, got, far()), WaitResult::kDone);
  EXPECT_EQ(got, 20);
}

// What the executor asks before it times a send: a send to a full mailbox would wait for its
// receiver, which is not the sender's own work.
TEST_P(MailboxWaits, HasRoomUntilCapacityMessagesAreUntaken) {
  Mailbox<int> box(2, spin());
  EXPECT_TRUE(box.has_room());
  ASSERT_EQ(box.send(1, 10, far()), WaitResult::kDone);
  EXPECT_TRUE(box.has_room());
  ASSERT_EQ(box.send(2, 20, far()), WaitResult::kDone);
  EXPECT_FALSE(box.has_room());
  int got = 0;
  ASSERT_EQ(box.receive(1, got, far()), WaitResult::kDone);
  EXPECT_TRUE(box.has_room());
  Mailbox<int> unbounded(0, spin());
  for (int k = 0; k < 8; ++k) ASSERT_EQ(unbounded.send(k, k, far()), WaitResult::kDone);
  EXPECT_TRUE(unbounded.has_room());
}

TEST_P(MailboxWaits, EveryWaitEndsAtItsDeadline) {
  Mailbox<int> box(1, spin());
  int got = 0;
  EXPECT_EQ(box.receive(5, got, Clock::now() + milliseconds(20)), WaitResult::kTimedOut);
  ASSERT_EQ(box.send(1, 10, far()), WaitResult::kDone);
  EXPECT_EQ(box.send(2, 20, Clock::now() + milliseconds(20)), WaitResult::kTimedOut);
  // The timed-out send left nothing behind.
  EXPECT_EQ(box.receive(2, got, Clock::now()), WaitResult::kTimedOut);
}

TEST_P(MailboxWaits, AbortReleasesEveryWaiter) {
  Mailbox<int> box(1, spin());
  ASSERT_EQ(box.send(1, 10, far()), WaitResult::kDone);
  WaitResult received = WaitResult::kDone, sent = WaitResult::kDone;
  std::thread receiver([&] {
    int got = 0;
    received = box.receive(9, got, far());
  });
  std::thread sender([&] { sent = box.send(2, 20, far()); });
  std::this_thread::sleep_for(milliseconds(5));
  box.abort();
  receiver.join();
  sender.join();
  EXPECT_EQ(received, WaitResult::kAborted);
  EXPECT_EQ(sent, WaitResult::kAborted);
}

INSTANTIATE_TEST_SUITE_P(SleepOrSpinThenNap, MailboxWaits, ::testing::Values(0, 50),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return p.param == 0 ? std::string("SleepsUntilWoken")
                                               : std::string("SpinsThenNaps");
                         });

}  // namespace
}  // namespace ppbench
