// Squeeze and reorder of the controllable-memory V schedules; see v_memory.h.
// Follows zbv_greedy.py (sail-sg/zero-bubble-pipeline-parallelism at
// 39f2c186a27580b7051eb51e0f651e1efd0a8170): put_w, mem_of_stage, reorder,
// eager_execution_time and schedule_from_pattern, with the same tie-breaks, so
// that the per-rank orders are the reference's. Two things are computed another
// way with the same results, for large D and N: the slot-order walks use a heap
// (SlotWalk) instead of a scan over all lists, and a slot try reads the rank's
// peak from a tree over its slots (RankMemory) instead of rescanning the rank.
// scripts/v_memory_reference_orders.py --compare checks the orders against the
// reference file.
#include "schedules/generators/v_memory.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "schedules/registry.h"

namespace ppbench {

namespace {

// Pass kinds in the reference's order ("FfBbWw"): the index is also the
// tie-break between passes in the same slot of different kinds.
enum Kind : int { kF0 = 0, kF1 = 1, kI1 = 2, kI0 = 3, kW1 = 4, kW0 = 5 };

using Lists = std::vector<std::vector<int>>;  // kind -> slot of micro-batch 0, 1, ...
using Plan = std::vector<Lists>;              // rank -> its lists
using Order = std::vector<std::vector<std::pair<int, int>>>;  // rank -> (kind, mb) in order

// A broken invariant of the construction (the reference's failing assert or
// missing key): a bug, never bad input.
[[noreturn]] void broken(const std::string& what) {
  throw std::logic_error("v-shape squeeze: " + what);
}

int last_slot(const Lists& s) {
  int bound = 0;
  for (const auto& l : s) bound = std::max(bound, l.back());
  return bound;
}

// The earliest pending pass among kinds [0, kinds): (slot, kind); the slot is
// `inf` when none is left.
std::pair<int, int> next_pass(const Lists& s, const std::vector<std::size_t>& at, int kinds,
                              int inf) {
  std::pair<int, int> best{inf + 1, 0};
  for (int k = 0; k < kinds; ++k) {
    const int slot = at[k] < s[k].size() ? s[k][at[k]] : inf;
    if (std::pair{slot, k} < best) best = {slot, k};
  }
  return best;
}

// Every pass of every rank, earliest slot first; ties go to the lower rank,
// then the lower kind (the reference's min over (slot, rank, kind)). Only the
// pass just taken may change its slot before the next call: the heap holds the
// slot of each list's next pass, read when that pass becomes the next.
class SlotWalk {
 public:
  SlotWalk(const Plan& plan, int kinds) : plan_(plan), at_(plan.size()) {
    for (std::size_t r = 0; r < plan.size(); ++r) {
      at_[r].assign(static_cast<std::size_t>(kinds), 0);
      for (int k = 0; k < kinds; ++k) push(static_cast<int>(r), k);
    }
  }
  bool done() const { return heap_.empty(); }
  // (rank, kind, micro-batch) of the next pass.
  std::array<int, 3> next() {
    const auto [slot, rank, kind] = heap_.top();
    heap_.pop();
    const int mb = static_cast<int>(at_[rank][kind]++);
    push(rank, kind);
    return {rank, kind, mb};
  }

 private:
  void push(int rank, int kind) {
    const auto& list = plan_[rank][kind];
    if (at_[rank][kind] < list.size()) heap_.push({list[at_[rank][kind]], rank, kind});
  }
  const Plan& plan_;
  std::vector<std::vector<std::size_t>> at_;
  std::priority_queue<std::array<int, 3>, std::vector<std::array<int, 3>>,
                      std::greater<std::array<int, 3>>>
      heap_;
};

// The k-th smallest (from 0) of the union of two ascending lists.
int kth_of_two(const std::vector<int>& a, const std::vector<int>& b, std::size_t k) {
  if (k >= a.size() + b.size()) broken("a W without its I");
  // The least value with more than k entries at or below it.
  int lo = std::min(a.empty() ? b.front() : a.front(), b.empty() ? a.front() : b.front());
  int hi = std::max(a.empty() ? b.back() : a.back(), b.empty() ? a.back() : b.back());
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    const auto at_or_below =
        static_cast<std::size_t>((std::upper_bound(a.begin(), a.end(), mid) - a.begin()) +
                                 (std::upper_bound(b.begin(), b.end(), mid) - b.begin()));
    if (at_or_below > k)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// Appends W lists to F0 F1 I1 I0 lists: every slot without a pass runs the W
// of the oldest I that has none yet; split, W1 and W0 get a list each and W1
// goes first. W left over at the end run one per slot after the last pass.
Lists put_w(Lists s, bool split) {
  if (s.size() != 4) broken("put_w needs the four F/I lists");
  const int bound = last_slot(s), inf = bound + 1;
  s.resize(split ? 6 : 5);
  int pending[2] = {0, 0};
  std::vector<std::size_t> at(4, 0);
  for (int i = 0; i <= bound; ++i) {
    const auto [slot, kind] = next_pass(s, at, 4, inf);
    if (slot == inf) broken("put_w ran out of passes");
    if (slot == i) {
      ++at[kind];
      if (kind == kI1 || kind == kI0) ++pending[split ? kind - kI1 : 0];
      continue;
    }
    for (int w = 0; w < 2; ++w) {
      if (pending[w] == 0) continue;
      s[kW1 + w].push_back(i);
      --pending[w];
      break;
    }
  }
  int i = bound;
  for (int w = 0; w < 2; ++w)
    for (; pending[w] > 0; --pending[w]) s[kW1 + w].push_back(++i);
  return s;
}

// Peak activations of one rank's lists, in chunk activations: F adds one, W
// frees one. Without W lists, a W runs in every empty slot while an I waits.
int peak_memory(const Lists& s) {
  static constexpr int kDelta[5] = {1, 1, 0, 0, -1};
  if (s.size() > 5) broken("peak_memory takes at most one W list");
  const bool has_w = s.size() > 4;
  const int bound = last_slot(s), inf = bound + 1, kinds = static_cast<int>(s.size());
  int waiting_w = 0, cur = 0, peak = 0;
  std::vector<std::size_t> at(s.size(), 0);
  for (int i = 0; i <= bound; ++i) {
    const auto [slot, kind] = next_pass(s, at, kinds, inf);
    if (slot == inf) broken("peak_memory ran out of passes");
    if (slot == i) {
      ++at[kind];
      cur += kDelta[kind];
      if (kind == kI1 || kind == kI0) ++waiting_w;
    } else if (!has_w && waiting_w > 0) {
      --cur;
      --waiting_w;
    }
    peak = std::max(peak, cur);
  }
  return peak;
}

// peak_memory of one rank while the squeeze tries slots for its passes, in
// O(log S) per try and per move instead of a rescan. Every rank has at most
// one pass per slot (the block's four offsets differ modulo 6, W and moves only
// take empty slots, and re-timing runs one pass at a time), so the rank is a
// row of slots, and each slot maps the running state (memory c, I without W w)
// to the next one. A stretch of slots maps it the same way in closed form,
// w' = max(w + a, b), c' = c + h + (w' - w), and reaches at most
// c + max(x, y - w) inside; these compose (Piece::then), so a tree over the
// row gives the peak of any row that differs in a few slots. The tree's leaves
// are blocks of kBlock slots, read from the slots' kinds when needed.
class RankMemory {
 public:
  explicit RankMemory(const Lists& s) : has_w_(s.size() > 4) {
    for (const auto& l : s) size_ = std::max(size_, l.back() + 1);
    kind_at_.assign(static_cast<std::size_t>(size_), kEmpty);
    for (std::size_t k = 0; k < s.size(); ++k)
      for (int t : s[k]) kind_at_[static_cast<std::size_t>(t)] = static_cast<signed char>(k);
    blocks_ = (size_ + kBlock - 1) / kBlock;
    tree_.assign(2 * static_cast<std::size_t>(blocks_), Piece{});
    for (int j = 0; j < blocks_; ++j) tree_[static_cast<std::size_t>(blocks_ + j)] = block(j);
    for (int j = blocks_ - 1; j > 0; --j) pull(j);
  }
  // The rank's peak with the pass of `kind` at slot `from` moved to `to` < from.
  int peak_if_moved(int kind, int from, int to) const {
    const Piece row = range(0, to)
                          .then(slot(kind))
                          .then(range(to + 1, from))
                          .then(slot(kEmpty))
                          .then(range(from + 1, size_));
    return std::max({0, row.x, row.y});  // from c = 0, w = 0
  }
  // The least t in [lo, from] where the running memory over slots [t, from)
  // stays at or below `limit`. Moving an F from `from` to an empty slot before
  // that raises the memory there by at least one (in empty slots left the W
  // run no sooner), so it would exceed limit + 1.
  int first_fit(int lo, int from, int limit) const {
    const auto fits = [&](int t) {
      const Piece before = range(0, t), inside = range(t, from);
      const int w = std::max(before.a, before.b), c = before.h + w;  // from c = 0, w = 0
      return c + std::max(inside.x, inside.y - w) <= limit;
    };
    if (lo >= from || fits(lo)) return std::min(lo, from);
    int bad = lo, good = from;  // fits(good), !fits(bad)
    while (good - bad > 1) {
      const int mid = bad + (good - bad) / 2;
      (fits(mid) ? good : bad) = mid;
    }
    return good;
  }
  void move(int kind, int from, int to) {
    kind_at_[static_cast<std::size_t>(from)] = kEmpty;
    kind_at_[static_cast<std::size_t>(to)] = static_cast<signed char>(kind);
    update(from / kBlock);
    if (to / kBlock != from / kBlock) update(to / kBlock);
  }

 private:
  static constexpr int kBlock = 8;
  static constexpr signed char kEmpty = -1;
  static constexpr int kNone = -(1 << 28);  // below any reachable value, and twice it fits

  struct Piece {
    int a = 0, b = kNone, h = 0, x = kNone, y = kNone;  // default: no slots
    // This stretch, then `next`.
    Piece then(const Piece& n) const {
      return {a + n.a, std::max(b + n.a, n.b), h + n.h, std::max(x, h + a + n.x),
              std::max(y, h + std::max(b + n.x, n.y))};
    }
  };

  // One slot: F adds one activation, an I one waiting W; W frees one; an empty
  // slot runs a waiting W unless the rank has W lists.
  Piece slot(int kind) const {
    static constexpr Piece kPiece[5] = {{0, 0, 1, 1, 1},      // F0
                                        {0, 0, 1, 1, 1},      // F1
                                        {1, 1, -1, 0, 0},     // I1
                                        {1, 1, -1, 0, 0},     // I0
                                        {0, 0, -1, -1, -1}};  // W
    if (kind >= 0) return kPiece[kind];
    return has_w_ ? Piece{0, 0, 0, 0, 0} : Piece{-1, 0, 0, -1, 0};
  }
  Piece slots(int lo, int hi) const {
    Piece p;
    for (int i = lo; i < hi; ++i) p = p.then(slot(kind_at_[static_cast<std::size_t>(i)]));
    return p;
  }
  Piece block(int j) const { return slots(j * kBlock, std::min(size_, (j + 1) * kBlock)); }
  void pull(int j) {
    const auto u = static_cast<std::size_t>(j);
    tree_[u] = tree_[2 * u].then(tree_[2 * u + 1]);
  }
  void update(int j) {
    tree_[static_cast<std::size_t>(blocks_ + j)] = block(j);
    for (int u = (blocks_ + j) / 2; u > 0; u /= 2) pull(u);
  }
  // The stored row over slots [lo, hi).
  Piece range(int lo, int hi) const {
    if (lo >= hi) return {};
    const int bl = (lo + kBlock - 1) / kBlock, bh = hi / kBlock;  // whole blocks [bl, bh)
    if (bl >= bh) return slots(lo, hi);
    Piece left = slots(lo, bl * kBlock), right;
    for (int l = bl + blocks_, h = bh + blocks_; l < h; l /= 2, h /= 2) {
      if (l & 1) left = left.then(tree_[static_cast<std::size_t>(l++)]);
      if (h & 1) right = tree_[static_cast<std::size_t>(--h)].then(right);
    }
    return left.then(right).then(slots(bh * kBlock, hi));
  }

  bool has_w_;
  int size_ = 0, blocks_ = 0;
  std::vector<signed char> kind_at_;
  std::vector<Piece> tree_;
};

// Walks every pass of every rank in slot order (ties: lower rank, then lower
// kind) and starts it, with unit lengths, once its predecessors ended: the
// same pass of the previous micro-batch, the previous pass of the rank, the
// pass before it in the chain (F0 and I1 come from rank r-1, F1 and I0 from
// rank r+1, F1 I1 I0 follow F0 F1 I1 of the same micro-batch on the rank).
// W passes wait only for the rank and their previous micro-batch.
struct Timed {
  Plan start;   // same shape as the input
  Order order;  // each rank's passes in the walk's order
};

Timed run_eagerly(const Plan& plan) {
  const int ranks = static_cast<int>(plan.size());
  const int kinds = static_cast<int>(plan[0].size());

  Plan end(plan.size());
  for (std::size_t r = 0; r < plan.size(); ++r) {
    end[r].resize(plan[r].size());
    for (std::size_t k = 0; k < plan[r].size(); ++k) end[r][k].assign(plan[r][k].size(), -1);
  }
  auto ended = [&end](int r, int k, int mb) {
    const int t = end.at(static_cast<std::size_t>(r))
                      .at(static_cast<std::size_t>(k))
                      .at(static_cast<std::size_t>(mb));
    if (t < 0) broken("a pass runs before its dependency");
    return t;
  };

  Order order(plan.size());
  for (SlotWalk walk(plan, kinds); !walk.done();) {
    const auto [rank, kind, mb] = walk.next();
    int ready = 0;
    if ((kind == kF0 || kind == kI1) && rank > 0)
      ready = std::max(ready, ended(rank - 1, kind, mb));
    if ((kind == kF1 || kind == kI0) && rank + 1 < ranks)
      ready = std::max(ready, ended(rank + 1, kind, mb));
    if (kind > kF0 && kind < kW1) ready = std::max(ready, ended(rank, kind - 1, mb));
    if (mb > 0) ready = std::max(ready, ended(rank, kind, mb - 1));
    if (!order[rank].empty()) {
      const auto [k, m] = order[rank].back();
      ready = std::max(ready, ended(rank, k, m));
    }
    end[rank][kind][mb] = ready + 1;
    order[rank].push_back({kind, mb});
  }

  Timed out{std::move(end), std::move(order)};
  for (auto& s : out.start)
    for (auto& l : s)
      for (int& t : l) --t;
  return out;
}

// One squeeze pass over the plan (reference: reorder). With `with_w`, W lists
// are added first and squeezed too, and everything outside the steady phase
// moves; without, W run in empty slots and only passes after the steady phase
// move. Returns the re-timed start slots, with one W list.
Plan squeeze(Plan plan, bool with_w) {
  int kinds = 4;
  if (with_w) {
    for (auto& s : plan) s = put_w(std::move(s), false);
    kinds = 5;
  }
  int budget = 0;
  for (const auto& s : plan) budget = std::max(budget, peak_memory(s));
  std::vector<RankMemory> memory(plan.begin(), plan.end());

  const int ranks = static_cast<int>(plan.size());
  const int last_mb = static_cast<int>(plan[0][kF0].size()) - 1;
  // Sized like the reference: up to the last slot of the rank's last list.
  std::vector<std::vector<char>> taken;
  for (const auto& s : plan)
    taken.emplace_back(static_cast<std::size_t>(s.back().back() + 1), char{0});

  int phase = 0;  // 0: before the steady phase, 1: in it, 2: after it
  for (SlotWalk walk(plan, kinds); !walk.done();) {
    const auto [rank, kind, mb] = walk.next();
    int& mine = plan[rank][kind][static_cast<std::size_t>(mb)];
    const int slot = mine;

    if (kind == kI0 && rank == 0 && phase == 0) phase = 1;
    if (phase == 1) {
      if (kind == kF0 && mb == last_mb) phase = 2;
      taken[rank].at(static_cast<std::size_t>(mine)) = 1;
      continue;
    }
    if (phase == 0 && !with_w) {
      taken[rank].at(static_cast<std::size_t>(mine)) = 1;
      continue;
    }

    // The latest slot of a predecessor, from the slots chosen so far.
    int after = -1;
    if ((kind == kF0 || kind == kI1) && rank > 0) after = std::max(after, plan[rank - 1][kind][mb]);
    if ((kind == kF1 || kind == kI0) && rank + 1 < ranks)
      after = std::max(after, plan[rank + 1][kind][mb]);
    if (kind > kF0 && kind < kW1) after = std::max(after, plan[rank][kind - 1][mb]);
    if (kind == kW1) {
      // One W list serves both chunks: its mb-th W follows the mb-th I of
      // either chunk (each list ascends: a pass never precedes its previous
      // micro-batch's).
      after = std::max(after,
                       kth_of_two(plan[rank][kI1], plan[rank][kI0], static_cast<std::size_t>(mb)));
    }
    if (mb > 0) after = std::max(after, plan[rank][kind][mb - 1]);
    if (after + 1 > slot) broken("a pass precedes its dependency");

    bool moved = false;
    int first = after + 1;  // earlier slots would take the rank over the budget
    if (kind == kF0 || kind == kF1) first = memory[rank].first_fit(first, slot, budget - 1);
    for (int t = first; t < slot && !moved; ++t) {
      if (taken[rank].at(static_cast<std::size_t>(t))) continue;
      mine = t;
      moved = memory[rank].peak_if_moved(kind, slot, t) <= budget;
    }
    if (!moved) mine = slot;
    if (mine != slot) memory[rank].move(kind, slot, mine);
    taken[rank].at(static_cast<std::size_t>(mine)) = 1;
  }
  if (!with_w)
    for (auto& s : plan) s = put_w(std::move(s), false);
  return run_eagerly(plan).start;
}

void drop_w(Plan& plan) {
  for (auto& s : plan) s.resize(4);
}

}  // namespace

Schedule v_memory_schedule(const ScheduleParams& p, std::string_view family,
                           const std::function<VBlock(int rank)>& slots) {
  const int d = p.devices, n = p.microbatches;
  require(d >= 1, std::string(family) + " needs --devices >= 1, got " + std::to_string(d));
  require(n >= 1, std::string(family) + " needs --microbatches >= 1, got " + std::to_string(n));
  std::vector<VBlock> block;
  for (int r = 0; r < d; ++r) block.push_back(slots(r));
  Plan plan(block.size());
  for (std::size_t r = 0; r < block.size(); ++r) {
    plan[r].resize(4);
    for (int k = 0; k < 4; ++k)
      for (int m = 0; m < n; ++m) plan[r][k].push_back(block[r][k] + 6 * m);
  }
  plan = squeeze(std::move(plan), true);
  drop_w(plan);
  plan = squeeze(std::move(plan), false);
  drop_w(plan);
  for (auto& s : plan) s = put_w(std::move(s), true);
  Order order = run_eagerly(plan).order;
  Plan().swap(plan);  // the slots are no longer needed; large N keeps the peak down

  Schedule s{p, Placement::v_shape(d, n), {}};
  s.ranks.resize(static_cast<std::size_t>(d));
  for (int r = 0; r < d; ++r) {
    const int down = r, up = 2 * d - 1 - r;  // chunk 0 and chunk 1
    s.ranks[r].reserve(order[r].size());
    for (const auto& [kind, mb] : order[r]) {
      static constexpr Op kOp[6] = {Op::F, Op::F, Op::I, Op::I, Op::W, Op::W};
      const bool on_up = kind == kF1 || kind == kI1 || kind == kW1;
      s.ranks[r].push_back(Action::single(kOp[kind], on_up ? up : down, mb));
    }
    std::vector<std::pair<int, int>>().swap(order[r]);
  }
  return s;
}

ClosedForm v_memory_closed_form(const ScheduleParams& p, std::string_view bubble,
                                std::string_view held_formula, int held) {
  const std::string h(held_formula);
  ClosedForm out;
  out.bubble_formula = "about " + std::string(bubble) + " when F = I = W (paper, approximate)";
  out.note = "the bubble is the paper's approximation; simulate for the exact figure";
  out.activations_formula = "2 " + h + " chunk activations (" + h + " M_B), 2N if less";
  out.peak_activations = std::min(2 * p.microbatches, 2 * held);
  return out;
}

}  // namespace ppbench
