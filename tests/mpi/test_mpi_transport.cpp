// The MPI transport between two processes (run by ctest under mpirun -np 2): the bounded-channel
// semantics the validator proves deadlock-free (a send waits while `capacity` of its messages
// are unreceived), receives matched by name in any order, waits that give up at their deadline
// or at abort(), the CPU tensors' wire form, and what a record says of the MPI library.
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <mpi.h>

#include "core/error.h"
#include "harness/executor/rank_passes.h"
#include "harness/mpi/cpu_codec.h"
#include "harness/mpi/job_report.h"
#include "harness/mpi/launch_check.h"
#include "harness/mpi/mpi_session.h"
#include "harness/mpi/mpi_transport.h"
#include "harness/mpi/nccl_bootstrap.h"
#include "schedules/lower.h"
#include "schedules/registry.h"

namespace ppbench::mpi {
namespace {

using Clock = std::chrono::steady_clock;
using Message = Envelope<std::vector<double>>;

struct VectorCodec {
  static void encode(const Message& m, std::vector<char>& out) {
    WireWriter w;
    w.put(m.sent_at);
    w.put_array(m.payload.data(), m.payload.size());
    out = std::move(w.bytes());
  }
  static void decode(const char* data, std::size_t size, Message& m) {
    WireReader r(data, size);
    m.sent_at = r.get<double>();
    m.payload.resize(r.count<double>());
    r.read(m.payload.data(), m.payload.size());
  }
};

// GPipe on two ranks: rank 0 sends F0.0 .. F0.3 to rank 1, rank 1 sends B1.3 .. B1.0 back.
const Program& program() {
  static const Program p = lower(generate({.name = "gpipe", .devices = 2, .microbatches = 4}));
  return p;
}

std::uint64_t forward(int mb) { return message_name({Op::F, 0, mb}); }

Clock::time_point in(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

class MpiTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(World::get().size(), 2) << "run under mpirun -np 2";
    me = World::get().rank();
  }
  void barrier() { MPI_Barrier(MPI_COMM_WORLD); }
  MpiTransport<Message, VectorCodec> make(int capacity) {
    return {MPI_COMM_WORLD, me, program(), capacity, std::chrono::microseconds(0), &message_name};
  }
  int me = 0;
};

TEST_F(MpiTransportTest, ASendWaitsWhileCapacityMessagesAreUnreceived) {
  auto t = make(2);
  if (me == 0) {
    EXPECT_TRUE(t.has_room(0, 1));
    EXPECT_EQ(t.send(0, 1, forward(0), {{0.5}, 1}, in(5000)), WaitResult::kDone);
    EXPECT_TRUE(t.has_room(0, 1));
    EXPECT_EQ(t.send(0, 1, forward(1), {{1.5}, 2}, in(5000)), WaitResult::kDone);
    // Rank 1 takes nothing until the barrier: the third send finds the channel full.
    EXPECT_FALSE(t.has_room(0, 1));
    EXPECT_EQ(t.send(0, 1, forward(2), {{2.5}, 3}, in(200)), WaitResult::kTimedOut);
  }
  barrier();
  if (me == 1) {
    // In the other order than sent: receives match by name.
    Message a, b;
    EXPECT_EQ(t.receive(0, 1, forward(1), a, in(5000)), WaitResult::kDone);
    EXPECT_EQ(t.receive(0, 1, forward(0), b, in(5000)), WaitResult::kDone);
    EXPECT_EQ(a.payload, std::vector<double>{1.5});
    EXPECT_EQ(a.sent_at, 2);
    EXPECT_EQ(b.payload, std::vector<double>{0.5});
  }
  barrier();
  if (me == 0) {
    // Both taken (a synchronous send completes once matched): room again.
    const auto until = in(5000);
    while (!t.has_room(0, 1) && std::chrono::steady_clock::now() < until) {
    }
    EXPECT_TRUE(t.has_room(0, 1));
    EXPECT_EQ(t.send(0, 1, forward(2), {{2.5, 3.5}, 4}, in(5000)), WaitResult::kDone);
    EXPECT_EQ(t.drain(0, in(5000)), WaitResult::kDone);  // once rank 1 has taken it
  } else {
    Message c;
    EXPECT_EQ(t.receive(0, 1, forward(2), c, in(5000)), WaitResult::kDone);
    EXPECT_EQ(c.payload, (std::vector<double>{2.5, 3.5}));
  }
  barrier();
}

TEST_F(MpiTransportTest, AMessageTakenLastHoldsOneSlotNotTheChannel) {
  // An edited order can send a micro-batch early that its receiver takes last (F0.3 first
  // here). Only that message stays unreceived: with room for two, the others still pass one
  // by one, as through the in-process mailbox and as the validator's model has it.
  auto t = make(2);
  if (me == 0) {
    for (int mb : {3, 0, 1, 2})
      EXPECT_EQ(t.send(0, 1, forward(mb), {{double(mb)}, 0}, in(5000)), WaitResult::kDone)
          << "F0." << mb;
    EXPECT_EQ(t.drain(0, in(5000)), WaitResult::kDone);
  } else {
    for (int mb : {0, 1, 2, 3}) {
      Message m;
      EXPECT_EQ(t.receive(0, 1, forward(mb), m, in(5000)), WaitResult::kDone) << "F0." << mb;
      EXPECT_EQ(m.payload, std::vector<double>{double(mb)});
    }
  }
  barrier();
}

TEST_F(MpiTransportTest, DrainWaitsUntilTheReceiverTakesTheMessage) {
  auto t = make(4);
  if (me == 0) {
    EXPECT_EQ(t.send(0, 1, forward(3), {{7}, 0}, in(5000)), WaitResult::kDone);
    EXPECT_EQ(t.drain(0, in(200)), WaitResult::kTimedOut);  // synchronous mode: not yet taken
  }
  barrier();
  if (me == 1) {
    Message m;
    EXPECT_EQ(t.receive(0, 1, forward(3), m, in(5000)), WaitResult::kDone);
  }
  barrier();
  if (me == 0) {
    EXPECT_EQ(t.drain(0, in(5000)), WaitResult::kDone);
  }
  barrier();
}

TEST_F(MpiTransportTest, AReceiveGivesUpAtItsDeadlineAndAtAbort) {
  auto t = make(4);
  if (me == 1) {
    Message m;
    const auto before = Clock::now();
    EXPECT_EQ(t.receive(0, 1, forward(0), m, in(150)), WaitResult::kTimedOut);
    EXPECT_GE(Clock::now() - before, std::chrono::milliseconds(150));
    t.abort();
    EXPECT_EQ(t.receive(0, 1, forward(0), m, in(60000)), WaitResult::kAborted);
  }
  barrier();
}

TEST_F(MpiTransportTest, AMessageOutsideThePlanIsAnError) {
  auto t = make(4);
  Message m;
  // Rank 1 never sends activations to rank 0.
  EXPECT_THROW(t.receive(me == 0 ? 1 : 0, me, forward(0) + 1000, m, in(10)), std::logic_error);
}

TEST(CpuTensorCodec, TensorsTravelWithTheirShapesAndReleasedBuffers) {
  using Codec = CpuTensorCodec<float>;
  Codec::Message m;
  m.sent_at = 0.25;
  m.payload.emplace_back(std::vector<std::int64_t>{2, 3}, 1.5f);
  m.payload.emplace_back(std::vector<std::int64_t>{4});
  m.payload.back().release();  // shape only
  std::vector<char> bytes;
  Codec::encode(m, bytes);
  Codec::Message back;
  Codec::decode(bytes.data(), bytes.size(), back);
  EXPECT_EQ(back.sent_at, 0.25);
  ASSERT_EQ(back.payload.size(), 2u);
  EXPECT_EQ(back.payload[0].shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(std::vector<float>(back.payload[0].data.begin(), back.payload[0].data.end()),
            std::vector<float>(6, 1.5f));
  EXPECT_EQ(back.payload[1].shape, (std::vector<std::int64_t>{4}));
  EXPECT_TRUE(back.payload[1].data.empty());
  // A message cut short, or with bytes to spare, is refused rather than read past its end.
  EXPECT_THROW(Codec::decode(bytes.data(), bytes.size() - 1, back), std::runtime_error);
  bytes.push_back(0);
  EXPECT_THROW(Codec::decode(bytes.data(), bytes.size(), back), std::runtime_error);
}

// NCCL's bootstrap (nccl_bootstrap.h): process 0's id, and only process 0's, reaches everyone,
// on the world and on each communicator of a split (as the pipeline and data communicators are).
TEST(NcclBootstrap, EveryProcessGetsTheRootsIdAndOnlyTheRootMakesOne) {
  const World& world = World::get();
  for (MPI_Comm comm : {world.comm(), MPI_COMM_SELF}) {
    int rank = 0, made = 0;
    MPI_Comm_rank(comm, &rank);
    const auto id = broadcast_from_root<128>(comm, [&](std::array<char, 128>& bytes) {
      ++made;
      for (std::size_t i = 0; i < bytes.size(); ++i)
        bytes[i] = static_cast<char>(i * 7 + static_cast<std::size_t>(world.rank()) * 31 + 1);
    });
    EXPECT_EQ(made, rank == 0 ? 1 : 0);
    // On the world the root is process 0; on MPI_COMM_SELF each process is its own root.
    const std::size_t root = comm == MPI_COMM_SELF ? static_cast<std::size_t>(world.rank()) : 0;
    for (std::size_t i = 0; i < id.size(); ++i)
      ASSERT_EQ(id[i], static_cast<char>(i * 7 + root * 31 + 1)) << i;
  }
}

// Process 0 failing to make the id (no NCCL there, say) fails every process, none left waiting
// in the broadcast: process 0 with its own error, the others naming process 0.
TEST(NcclBootstrap, AFailureOnTheRootFailsEveryProcess) {
  const World& world = World::get();
  try {
    (void)broadcast_from_root<16>(world.comm(), [](std::array<char, 16>&) {
      throw EnvironmentError("NCCL: ncclGetUniqueId: unhandled system error");
    });
    FAIL() << "no process may go on without the id";
  } catch (const EnvironmentError& e) {
    EXPECT_NE(std::string(e.what()).find(world.rank() == 0 ? "ncclGetUniqueId"
                                                           : "process 0 could not make"),
              std::string::npos)
        << e.what();
  }
}

// Two processes of one machine read one steady clock, so the true offset is 0: the estimate must
// lie within the uncertainty it reports (half its shortest round trip); process 0 is its own
// reference.
TEST(ClockOffset, TheTrueOffsetLiesWithinTheReportedUncertainty) {
  const World& world = World::get();
  for (int trial = 0; trial < 3; ++trial) {
    const ClockOffset c = clock_offset_to_root(world);
    if (world.rank() == 0) {
      EXPECT_EQ(c.seconds, 0.0);
      EXPECT_EQ(c.uncertainty, 0.0);
      EXPECT_EQ(c.rounds, 0);
      continue;
    }
    EXPECT_GE(c.rounds, 1);
    EXPECT_LE(c.rounds, 1000);
    EXPECT_GT(c.uncertainty, 0.0);
    EXPECT_LT(c.uncertainty, 1.0);
    EXPECT_LE(std::abs(c.seconds), c.uncertainty + 1e-9) << "rounds " << c.rounds;
  }
}

// A stage output past one MPI message's int count is refused before any work, naming the stage;
// one just inside it is not.
TEST(LaunchCheck, AHandOverLargerThanOneMpiMessageIsRefusedNamingItsStage) {
  PartitionPlan plan;
  plan.stages.resize(3);
  plan.stages[0].boundary_bytes_out = std::int64_t{1} << 30;
  plan.stages[1].boundary_bytes_out = std::numeric_limits<int>::max() - 4096;
  EXPECT_NO_THROW(require_messages_fit(plan));
  plan.stages[1].boundary_bytes_out = std::int64_t{3} << 30;
  try {
    require_messages_fit(plan);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("stage 1 hands 3221225472 bytes per micro-batch", 0), 0u)
        << e.what();
  }
}

}  // namespace
}  // namespace ppbench::mpi

TEST(MpiLibrary, TheRecordNamesTheLibraryAndOnlyTheTransportSettings) {
  const nlohmann::json j = ppbench::mpi::mpi_library_json(
      {"OMPI_MCA_btl=tcp,self", "OMPI_MCA_btl_tcp_flags=send,inplace",
       "OMPI_MCA_btl_tcp_eager_limit=524288", "OMPI_MCA_pml=ob1", "OMPI_MCA_coll_tuned_x=4",
       "OMPI_MCA_orte_hnp_uri=1.0;tcp://10.0.0.1:5", "OMPI_MCA_btlish=1", "OMPI_MCA_mtl",
       "PATH=/usr/bin", "OMPI_MCA_=x"});
  EXPECT_EQ(j["settings"], (nlohmann::json{{"btl", "tcp,self"},
                                           {"btl_tcp_flags", "send,inplace"},
                                           {"btl_tcp_eager_limit", "524288"},
                                           {"pml", "ob1"},
                                           {"coll_tuned_x", "4"}}));
  // The library's own words, one line; the standard as MAJOR.MINOR.
  const std::string library = j["library"];
  EXPECT_FALSE(library.empty());
  EXPECT_EQ(library.find('\n'), std::string::npos);
  // Text only: no terminator carried over from the C string, no control character, no trailing
  // blank.
  for (const char c : library) EXPECT_FALSE(std::iscntrl(static_cast<unsigned char>(c))) << library;
  EXPECT_FALSE(std::isspace(static_cast<unsigned char>(library.back()))) << library;
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(j["standard"].get<std::string>()[0])));
  EXPECT_EQ(j["standard"].get<std::string>()[1], '.');
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ppbench::mpi::World::get();  // MPI_Init_thread
  // Only process 0 prints; every process's failures still set the exit code.
  if (ppbench::mpi::World::get().rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  ppbench::mpi::World::finalize();
  return failed;
}
