// What a rank's walk asks of a transport, whatever carries the tensors: the in-process mailboxes
// (harness/executor/mailbox.h) between the threads of one process, or MPI point-to-point
// messages between processes (harness/mpi/mpi_transport.h). Both keep the semantics the
// validator proves deadlock-free (schedules/lower.h, check_deadlock_free): receives match by
// name, and a send waits while `capacity` of its messages to that destination are unreceived.
#pragma once

#include <chrono>
#include <cstdint>

namespace ppbench {

enum class WaitResult { kDone, kTimedOut, kAborted };

// A tensor in flight, and when its sender let it go (seconds on the step's clock), so that the
// receiver can time the hand-over rather than its own lateness.
template <class Payload>
struct Envelope {
  Payload payload{};
  double sent_at = 0;
  std::int64_t bytes = 0;  // what the payload holds, when the executor can tell (message_bytes)
};

// The bytes of a payload: payload_bytes(p) where the payload's namespace defines it (the CPU
// backend's tensors do), else 0.
template <class Payload>
std::int64_t message_bytes(const Payload& p) {
  if constexpr (requires { payload_bytes(p); })
    return static_cast<std::int64_t>(payload_bytes(p));
  else
    return 0;
}

template <class Message>
class Transport {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~Transport() = default;

  // src's message `name` to dst; waits (until `deadline`) while the channel is full.
  virtual WaitResult send(int src, int dst, std::uint64_t name, Message message,
                          Clock::time_point deadline) = 0;
  // Whether a send from src to dst would find room in its channel now (so that the send's span
  // is the sender's own work, not a wait for the receiver).
  virtual bool has_room(int /*src*/, int /*dst*/) { return true; }
  // dst takes message `name` from src, waiting until it arrives or `deadline`.
  virtual WaitResult receive(int src, int dst, std::uint64_t name, Message& out,
                             Clock::time_point deadline) = 0;
  // Lets transfers in flight advance while the rank computes (MPI progresses only inside calls).
  virtual void progress() {}
  // Waits until every message this rank sent has been taken (the end of its step).
  virtual WaitResult drain(int /*src*/, Clock::time_point /*deadline*/) {
    return WaitResult::kDone;
  }
  // Makes every wait return kAborted at once (the step failed elsewhere).
  virtual void abort() = 0;
};

}  // namespace ppbench
