// What both executors (CPU threads, GPU ranks) do between a rank's receives and sends: keep the
// tensors in flight by the name of the message that carries them, and run a task's pass against
// them (F takes the previous stage's output, B or I the next stage's input gradient; a chain's
// first stage reads its own data and its last seeds the gradient from the loss).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "harness/executor/stage_work.h"
#include "schedules/action.h"
#include "schedules/placement.h"

namespace ppbench {

// The name of the message a task's output travels in. F carries an activation, B or I a
// gradient; the receiver names both backward ops "B" (it cannot know which the sender ran).
inline std::uint64_t message_name(const Task& t) {
  const std::uint64_t grad = t.op == Op::F ? 0 : 1;
  return (static_cast<std::uint64_t>(t.stage) << 33) | (static_cast<std::uint64_t>(t.mb) << 1) |
         grad;
}

// The task a message name stands for, as the receiver knows it (a backward is "B").
inline Task message_task(std::uint64_t name) {
  return {name & 1 ? Op::B : Op::F, static_cast<int>(name >> 33),
          static_cast<int>((name >> 1) & 0xffffffffu)};
}

template <class Payload>
class RankPasses {
 public:
  RankPasses(StageWork<Payload>& work, const Placement& placement) : work_(work), p_(placement) {}

  // The tensor of message `name`, handed over. Throws std::logic_error where none is held: the
  // lowered program sends or consumes what nothing produced or received (a lowering bug; the
  // executors prefix the rank).
  Payload take(std::uint64_t name) {
    auto it = ready_.find(name);
    if (it == ready_.end())
      throw std::logic_error("no tensor of " + to_string(message_task(name)) +
                             " is held here to send or use (a lowering bug)");
    Payload out = std::move(it->second);
    ready_.erase(it);
    return out;
  }
  // A received tensor, or one produced here for a stage on this rank. Throws std::logic_error
  // where one of that name is held already (a lowering bug: it arrived or was produced twice).
  void put(std::uint64_t name, Payload x) {
    if (!ready_.emplace(name, std::move(x)).second)
      throw std::logic_error("a second tensor of " + to_string(message_task(name)) +
                             " arrived while the first is held (a lowering bug)");
  }

  void run(const Task& t) {
    switch (t.op) {
      case Op::F: {
        Payload in =
            p_.is_first(t.stage) ? Payload{} : take(message_name({Op::F, t.stage - 1, t.mb}));
        Payload out = work_.forward(t.stage, t.mb, std::move(in));
        if (!p_.is_last(t.stage)) put(message_name(t), std::move(out));
        break;
      }
      case Op::B:
      case Op::I: {
        Payload grad =
            p_.is_last(t.stage) ? Payload{} : take(message_name({Op::B, t.stage + 1, t.mb}));
        Payload out = work_.backward(t.stage, t.mb, std::move(grad), t.op == Op::I);
        if (!p_.is_first(t.stage)) put(message_name(t), std::move(out));
        break;
      }
      case Op::W:
        work_.backward_weight(t.stage, t.mb);
        break;
    }
  }

 private:
  StageWork<Payload>& work_;
  const Placement& p_;
  // Tensors ready for their consumer: received from another rank, produced here for a stage on
  // this rank (V shapes, interleaving with D = 1), or produced here and waiting for their send.
  std::unordered_map<std::uint64_t, Payload> ready_;
};

}  // namespace ppbench
