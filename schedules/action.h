// The unit of a pipeline schedule: one pass of one stage over one micro-batch.
//
// Text form (docs/schedules.md): `F3.1` is the forward of stage 3 for micro-batch 1;
// likewise B (full backward), I (input gradient) and W (weight gradient).
// An overlapped pair of two different (stage, micro-batch), DualPipe's F&B, is
// written `(F0.7+B15.3)`: the forward half first, then the backward half.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ppbench {

enum class Op : std::uint8_t { F, B, I, W };

char op_letter(Op op);

// One (op, stage, micro-batch). Micro-batches are numbered within the chain
// that carries them (docs/schedules.md: two-direction schedules number each chain
// from 0).
//
// Packed into 8 bytes (an op of 8 bits and a stage id of 24), since a large schedule is mostly
// its actions and the simulator walks them all: stage ids go up to kMaxStageId, above any
// pipeline the CLI accepts (4096 ranks x 1024 chunks).
inline constexpr std::int32_t kMaxStageId = (1 << 23) - 1;

struct Task {
  Op op : 8 = Op::F;
  std::int32_t stage : 24 = 0;
  std::int32_t mb = 0;

  Task() = default;
  // The caller keeps 0 <= stage <= kMaxStageId (generators by construction, parsers by a check).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wconversion"
  constexpr Task(Op o, int s, int m) : op(o), stage(s), mb(m) {}
#pragma GCC diagnostic pop

  friend bool operator==(const Task&, const Task&) = default;
};
static_assert(sizeof(Task) == 8);

// What a rank executes next: a single task, or an overlapped forward/backward
// pair that runs as one unit of time.
//
// 16 bytes: whether it is a pair is kept in the partner's micro-batch (never negative in a real
// task) rather than in a flag, which would pad the action to 20 bytes; the walks read every action.
struct Action {
  static constexpr std::int32_t kNoPartner = -1;

  Task task;                           // the action, or the forward half of a pair
  Task partner{Op::F, 0, kNoPartner};  // the backward half (B or I), only when paired()

  static Action single(Op op, int stage, int mb) { return {{op, stage, mb}}; }
  static Action single(Task t) { return {t}; }
  static Action pair(Task forward, Task backward) { return {forward, backward}; }

  bool paired() const { return partner.mb != kNoPartner; }

  // Its tasks in order, for `for (const Task& t : a.tasks())`: the one task, or the pair's
  // forward half, then its backward half. Not of a temporary, which a loop would outlive.
  class Tasks;
  Tasks tasks() const&;
  Tasks tasks() && = delete;

  friend bool operator==(const Action& a, const Action& b) {
    return a.paired() == b.paired() && a.task == b.task && (!a.paired() || a.partner == b.partner);
  }
};
static_assert(sizeof(Action) == 16);

class Action::Tasks {
 public:
  class Iterator {
   public:
    Iterator(const Action& a, int at) : a_(&a), at_(at) {}
    const Task& operator*() const { return at_ == 0 ? a_->task : a_->partner; }
    Iterator& operator++() {
      ++at_;
      return *this;
    }
    bool operator==(const Iterator& o) const { return at_ == o.at_; }

   private:
    const Action* a_;
    int at_;  // 0: the task, 1: the partner
  };

  explicit Tasks(const Action& a) : a_(a) {}
  Iterator begin() const { return {a_, 0}; }
  Iterator end() const { return {a_, a_.paired() ? 2 : 1}; }

 private:
  const Action& a_;
};

inline Action::Tasks Action::tasks() const& { return Tasks(*this); }

std::string to_string(const Task& t);
std::string to_string(const Action& a);

// Parses the text form; throws UsageError naming the bad token, or a stage above `max_stage`
// (at most kMaxStageId; a schedule file allows fewer) with the range allowed.
Action parse_action(std::string_view text, int max_stage = kMaxStageId);

}  // namespace ppbench
