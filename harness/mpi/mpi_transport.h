// The pipeline's point-to-point transport between processes: MPI messages on the replica's
// pipeline communicator, with the semantics of the in-process mailboxes (transport.h).
//
//   - A message's tag is its index among the messages its sender sends to that destination in
//     one step (both sides lower the same schedule, so both know it), which keeps tags far below
//     MPI_TAG_UB whatever the stage and micro-batch numbers.
//   - Sends are synchronous-mode and non-blocking (MPI_Issend): one completes only when the
//     receiver has matched it, so "at most `capacity` unreceived messages per destination" is
//     exactly the bounded channel the validator proves deadlock-free.
//   - Receives probe for their tag (MPI_Improbe, then MPI_Imrecv), so the receiver learns the
//     size from the message and allocates nothing before it arrives.
//   - Every wait polls until its deadline, so a peer that never sends (or died) becomes the
//     watchdog's error; polling spins briefly, then sleeps, so that ranks oversubscribing the
//     cores do not take them from the rank they wait for.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <list>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <mpi.h>

#include "core/error.h"
#include "harness/executor/naps.h"
#include "harness/executor/transport.h"
#include "harness/mpi/mpi_session.h"
#include "schedules/lower.h"

namespace ppbench::mpi {

// Codec: static void encode(const Message&, std::vector<char>&), static void decode(const char*,
// std::size_t, Message&).
template <class Message, class Codec>
class MpiTransport final : public Transport<Message> {
 public:
  using Clock = std::chrono::steady_clock;

  // `comm`: the replica's pipeline communicator (its rank = pipeline rank); `self`: this
  // process's pipeline rank; `program`: the step's lowered programs (every rank's).
  MpiTransport(MPI_Comm comm, int self, const Program& program, int capacity,
               std::chrono::microseconds spin, std::uint64_t (*name_of)(const Task&))
      : comm_(comm), self_(self), capacity_(capacity), spin_(spin) {
    int* ub = nullptr;
    int found = 0;
    check(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found), "MPI_Comm_get_attr");
    const long tag_ub = found != 0 && ub != nullptr ? *ub : 32767;  // the least MPI allows
    // Tags of this rank's sends (by destination) and of the messages it receives (by source).
    const int ranks = static_cast<int>(program.ranks.size());
    out_.resize(static_cast<std::size_t>(ranks));
    in_.resize(static_cast<std::size_t>(ranks));
    for (int src = 0; src < ranks; ++src) {
      std::vector<int> next(static_cast<std::size_t>(ranks), 0);
      for (const Instr& in : program.ranks[static_cast<std::size_t>(src)]) {
        if (in.kind != Instr::Kind::Send) continue;
        const int tag = next[static_cast<std::size_t>(in.peer)]++;
        // The same on every process (the same schedule, the same library): a request this MPI
        // cannot carry, refused by all alike (exit 2).
        if (tag > tag_ub)
          throw UsageError("a step of this schedule sends more messages between two ranks (" +
                           std::to_string(tag) + ") than this MPI library's tags allow (" +
                           std::to_string(tag_ub) + "): fewer micro-batches or chunks");
        if (src == self_) out_[static_cast<std::size_t>(in.peer)].tags[name_of(in.payload)] = tag;
        if (in.peer == self_) in_[static_cast<std::size_t>(src)][name_of(in.payload)] = tag;
      }
    }
  }

  WaitResult send(int /*src*/, int dst, std::uint64_t name, Message message,
                  Clock::time_point deadline) override {
    Channel& ch = out_.at(static_cast<std::size_t>(dst));
    // Full: wait for one of its unreceived messages to be taken.
    if (static_cast<int>(ch.pending.size()) >= capacity_) {
      const WaitResult r = wait_until(deadline, [&] { return reap(ch) < capacity_; });
      if (r != WaitResult::kDone) return r;
    }
    Pending p;
    Codec::encode(message, p.bytes);
    p.payload_bytes = message_bytes(message.payload);
    if (p.bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::runtime_error("a message of " + std::to_string(p.bytes.size()) +
                               " bytes is larger than one MPI message may be (2^31 - 1)");
    check(MPI_Issend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, dst,
                     tag(ch.tags, name, dst), comm_, &p.request),
          "MPI_Issend");
    in_flight_ += p.payload_bytes;
    peak_ = std::max(peak_, in_flight_);
    ch.pending.push_back(std::move(p));
    return WaitResult::kDone;
  }

  bool has_room(int /*src*/, int dst) override {
    return reap(out_.at(static_cast<std::size_t>(dst))) < capacity_;
  }

  WaitResult receive(int src, int /*dst*/, std::uint64_t name, Message& out,
                     Clock::time_point deadline) override {
    const int t = tag(in_.at(static_cast<std::size_t>(src)), name, src);
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status status;
    const WaitResult r = wait_until(deadline, [&] {
      int flag = 0;
      check(MPI_Improbe(src, t, comm_, &flag, &msg, &status), "MPI_Improbe");
      return flag != 0;
    });
    if (r != WaitResult::kDone) return r;
    int count = 0;
    check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
    buffer_.resize(static_cast<std::size_t>(count));
    // Not a blocking MPI_Mrecv: past the eager limit the rest of the message follows only now,
    // and Open MPI's blocking receive polls without a pause for as long as it takes. Across TCP
    // on a machine with few cores, two processes polling so kept the kernel from moving their
    // bytes: 256 KiB hand-overs took 8 ms where the same bytes alone crossed the link in 0.3
    // (docs/multi-process.md). This wait spins briefly, then naps, as every other wait here.
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Imrecv(buffer_.data(), count, MPI_BYTE, &msg, &request), "MPI_Imrecv");
    receiving_ = true;
    const WaitResult got = wait_until(deadline, [&] {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      return done != 0;
    });
    if (got != WaitResult::kDone) return got;  // still posted: see the destructor
    receiving_ = false;
    Codec::decode(buffer_.data(), buffer_.size(), out);
    return WaitResult::kDone;
  }

  void progress() override {
    for (Channel& ch : out_) reap(ch);
  }

  WaitResult drain(int /*src*/, Clock::time_point deadline) override {
    return wait_until(deadline, [&] {
      bool empty = true;
      for (Channel& ch : out_) empty = reap(ch) == 0 && empty;
      return empty;
    });
  }

  // The most payload bytes this rank had sent and not yet seen taken, since reset_peak().
  double peak_bytes() const { return static_cast<double>(peak_); }
  void reset_peak() { peak_ = in_flight_; }

  // Cancels nothing in flight (MPI cannot take back a matched send); the job ends after a
  // failure, and until then every wait returns at once.
  void abort() override { aborted_ = true; }

  // After a failure (a watchdog, an abort) sends may be pending and a receive still posted into
  // buffer_; MPI may touch their bytes until MPI_Abort ends the job, which comes after this
  // object is gone. Their memory is then left to the process's end rather than freed under MPI.
  ~MpiTransport() override {
    bool busy = receiving_;
    for (const Channel& ch : out_) busy = busy || !ch.pending.empty();
    if (!busy) return;
    new std::vector<Channel>(std::move(out_));  // leaked on purpose: the list nodes stay put
    new std::vector<char>(std::move(buffer_));  // leaked on purpose
  }
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

 private:
  struct Pending {
    std::vector<char> bytes;
    std::int64_t payload_bytes = 0;  // the tensors' own bytes (without the wire's counts)
    MPI_Request request = MPI_REQUEST_NULL;
  };
  struct Channel {
    std::unordered_map<std::uint64_t, int> tags;
    // Unreceived sends. A list: one taken from the middle leaves the others' buffers where
    // MPI_Issend was given them.
    std::list<Pending> pending;
  };

  // Frees every completed send; returns how many are left. Any of them, not only the oldest:
  // receives match by name, so an order that sends a message early and has it taken last (an
  // edited schedule) holds one slot with it, not the whole channel behind it.
  int reap(Channel& ch) {
    for (auto it = ch.pending.begin(); it != ch.pending.end();) {
      int done = 0;
      check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done == 0) {
        ++it;
        continue;
      }
      in_flight_ -= it->payload_bytes;
      it = ch.pending.erase(it);
    }
    return static_cast<int>(ch.pending.size());
  }

  static int tag(const std::unordered_map<std::uint64_t, int>& tags, std::uint64_t name, int peer) {
    const auto it = tags.find(name);
    if (it == tags.end())
      throw std::logic_error("no message of this name is planned with rank " +
                             std::to_string(peer));
    return it->second;
  }

  template <class Ready>
  WaitResult wait_until(Clock::time_point deadline, Ready ready) {
    SpinThenNap pause(spin_);
    for (;;) {
      if (aborted_) return WaitResult::kAborted;
      if (ready()) return WaitResult::kDone;
      const auto now = Clock::now();
      if (now >= deadline) return WaitResult::kTimedOut;
      pause.pause(now);
    }
  }

  MPI_Comm comm_;
  int self_;
  int capacity_;
  std::chrono::microseconds spin_;
  std::vector<Channel> out_;                                // by destination
  std::vector<std::unordered_map<std::uint64_t, int>> in_;  // by source
  std::vector<char> buffer_;
  bool receiving_ = false;  // an MPI_Imrecv into buffer_ not yet seen complete
  std::atomic<bool> aborted_{false};
  std::int64_t in_flight_ = 0, peak_ = 0;
};

}  // namespace ppbench::mpi
