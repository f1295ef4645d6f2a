// Edits of a schedule, the way a researcher edits a generated one by hand: swapping, moving,
// dropping, duplicating, splitting, pairing actions. Shared by the fuzzer, which applies any of
// them and holds the validator to its verdict (tests/fuzz/fuzz_schedule_edits.cpp), and by the
// backends' tests that run the edited orders the validator accepts (test_edited_orders.cpp in
// tests/backends, CPU threads, and tests/cuda_exec, virtual devices; tests/mpi/
// test_mpi_edited_orders.cpp, processes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>

#include "core/error.h"
#include "schedules/schedule.h"
#include "schedules/validate.h"

namespace ppbench::edits {

enum class Edit : std::uint8_t {
  kSwapNext,      // the action and the one after it trade places
  kMoveToRank,    // the action goes to the end of another rank's order
  kDrop,          // the action is removed
  kDuplicate,     // the action runs twice
  kSplitB,        // a B becomes I in place and W at the end of the rank
  kPairWithNext,  // an F and a later B or I of the same rank become one overlapped pair
  kUnpair,        // a pair becomes its two halves
  kShiftMb,       // the micro-batch goes one up
  kFlipOp,        // F <-> B, I <-> W
  kMoveWithin,    // the action moves to another place in its rank
  kCount
};

inline void apply(Schedule& s, Edit edit, int rank_byte, int pos_byte) {
  const int ranks = static_cast<int>(s.ranks.size());
  if (ranks == 0) return;
  auto& order = s.ranks[static_cast<std::size_t>(rank_byte % ranks)];
  if (order.empty()) return;
  const std::size_t at = static_cast<std::size_t>(pos_byte) % order.size();
  Action& a = order[at];
  switch (edit) {
    case Edit::kSwapNext:
      if (at + 1 < order.size()) std::swap(order[at], order[at + 1]);
      break;
    case Edit::kMoveToRank: {
      const Action moved = a;
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(at));
      s.ranks[static_cast<std::size_t>((rank_byte + 1) % ranks)].push_back(moved);
      break;
    }
    case Edit::kDrop:
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(at));
      break;
    case Edit::kDuplicate:
      order.insert(order.begin() + static_cast<std::ptrdiff_t>(at), a);
      break;
    case Edit::kSplitB:
      if (!a.paired() && a.task.op == Op::B) {
        const Task w{Op::W, a.task.stage, a.task.mb};
        a.task.op = Op::I;
        order.push_back(Action::single(w));
      }
      break;
    case Edit::kPairWithNext:
      if (!a.paired() && a.task.op == Op::F) {
        for (std::size_t k = at + 1; k < order.size(); ++k) {
          const Action b = order[k];
          if (b.paired() || (b.task.op != Op::B && b.task.op != Op::I)) continue;
          order[at] = Action::pair(a.task, b.task);
          order.erase(order.begin() + static_cast<std::ptrdiff_t>(k));
          break;
        }
      }
      break;
    case Edit::kUnpair:
      if (a.paired()) {
        const Task backward = a.partner;
        a = Action::single(a.task);
        order.insert(order.begin() + static_cast<std::ptrdiff_t>(at) + 1, Action::single(backward));
      }
      break;
    case Edit::kShiftMb:
      a.task.mb += 1;
      break;
    case Edit::kFlipOp: {
      static constexpr Op kFlipped[] = {Op::B, Op::F, Op::W, Op::I};  // indexed by F, B, I, W
      a.task.op = kFlipped[static_cast<int>(a.task.op)];
      break;
    }
    case Edit::kMoveWithin: {
      const Action moved = a;
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(at));
      const std::size_t to = static_cast<std::size_t>(pos_byte / 3) % (order.size() + 1);
      order.insert(order.begin() + static_cast<std::ptrdiff_t>(to), moved);
      break;
    }
    case Edit::kCount:
      break;
  }
}

// The edits that change only the order of a rank's work or how it is split and paired: each can
// leave a sound schedule sound. The others (kMoveToRank, kDrop, kDuplicate, kShiftMb, kFlipOp)
// always break its structure.
inline constexpr std::array<Edit, 5> kOrderEdits = {
    Edit::kSwapNext, Edit::kSplitB, Edit::kPairWithNext, Edit::kUnpair, Edit::kMoveWithin};

// Up to `wanted` random order edits of `s`, each kept only where the schedule stays sound for a
// run (validate_for_run at the default channel capacity); returns how many it kept.
inline int random_sound_edits(Schedule& s, std::mt19937& rng, int wanted) {
  int made = 0;
  for (int attempt = 0; attempt < 100 * wanted && made < wanted; ++attempt) {
    Schedule next = s;
    const Edit edit = kOrderEdits[rng() % kOrderEdits.size()];
    apply(next, edit, static_cast<int>(rng() % 4096), static_cast<int>(rng() % 4096));
    if (next.ranks == s.ranks) continue;
    try {
      validate_for_run(next, 0);
    } catch (const InvalidSchedule&) {
      continue;
    }
    s = std::move(next);
    ++made;
  }
  return made;
}

}  // namespace ppbench::edits
