#include "tests/simt/simt.h"

#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

namespace ppbench::simt {

namespace {

constexpr std::size_t kStackBytes = 256 * 1024;  // a kernel's registers live on its fiber's stack

struct Thread {
  Index idx;
  ucontext_t context{};
  std::unique_ptr<unsigned char[]> stack;
  bool done = false;
};

// Where a warp or the block stands at its current barrier or warp-wide instruction.
struct Rendezvous {
  int arrived = 0;
  std::uint64_t generation = 0;  // completed rendezvous so far
};

struct WarpState {
  Rendezvous meet;
  const char* instruction = nullptr;
  std::array<const void*, kWarpSize> in{};
  std::array<void*, kWarpSize> out{};
};

struct BlockRun {
  const std::function<void()>* kernel = nullptr;
  Index block, dim;
  std::vector<Thread> threads;
  std::vector<WarpState> warps;
  Rendezvous barrier;
  int live = 0;  // threads that have not returned: the count a barrier waits for
  ucontext_t scheduler{};
  Thread* current = nullptr;
  std::uint64_t progress = 0;  // bumped by every arrival, completion and return
  std::exception_ptr failure;
  std::string failure_where;
};

BlockRun* g_block = nullptr;

BlockRun& block() {
  if (g_block == nullptr) throw SimtError("a SIMT intrinsic was called outside simt::launch");
  return *g_block;
}

void yield() { swapcontext(&block().current->context, &block().scheduler); }

void fiber_entry() {
  BlockRun& b = block();
  try {
    (*b.kernel)();
  } catch (...) {
    if (!b.failure) {
      b.failure = std::current_exception();
      b.failure_where =
          "thread " + std::to_string(b.current->idx.x) + " of block " + std::to_string(b.block.x);
    }
  }
  b.current->done = true;
  --b.live;
  ++b.progress;
  // A thread that returns no longer counts at the barrier: release it if it now waits on no one.
  Rendezvous& r = b.barrier;
  if (r.arrived > 0 && r.arrived == b.live) {
    r.arrived = 0;
    ++r.generation;
  }
  // Returning ends the fiber: uc_link resumes the scheduler.
}

void run_block(BlockRun& b, unsigned threads, const Interleaving& interleaving) {
  b.threads.resize(threads);
  b.live = static_cast<int>(threads);
  b.warps.assign(threads / kWarpSize, WarpState{});
  for (unsigned t = 0; t < threads; ++t) {
    Thread& th = b.threads[t];
    th.idx.x = t;
    th.stack = std::make_unique<unsigned char[]>(kStackBytes);
    getcontext(&th.context);
    th.context.uc_stack.ss_sp = th.stack.get();
    th.context.uc_stack.ss_size = kStackBytes;
    th.context.uc_link = &b.scheduler;
    makecontext(&th.context, fiber_entry, 0);
  }
  // Passes over the threads until every thread has returned, in the order `interleaving` gives;
  // a pass over every thread in which nothing moved is a deadlock. Shuffled, each stretch between
  // barriers also holds a random set of warps back until the others can go no further (to the
  // barrier, or to their end): the held warps then run as late as a GPU could run them, and the
  // others as early, which is where a missing barrier shows.
  std::vector<unsigned> order(threads);
  std::iota(order.begin(), order.end(), 0u);
  if (interleaving.order == Order::kReversed) std::reverse(order.begin(), order.end());
  const bool shuffled = interleaving.order == Order::kShuffled;
  std::mt19937 shuffle(interleaving.seed * 7919u + b.block.x);
  std::vector<char> held(threads / kWarpSize, 0);
  std::uint64_t stretch = ~std::uint64_t{0};  // the barrier generation `held` was drawn for
  for (;;) {
    if (b.live == 0) return;
    if (shuffled && b.barrier.generation != stretch) {
      stretch = b.barrier.generation;
      for (char& h : held) h = static_cast<char>(shuffle() % 2);
      std::shuffle(order.begin(), order.end(), shuffle);
    } else if (shuffled) {
      std::shuffle(order.begin(), order.end(), shuffle);
    }
    const std::uint64_t before = b.progress;
    for (unsigned t : order) {
      Thread& th = b.threads[t];
      if (th.done || held[t / kWarpSize]) continue;
      b.current = &th;
      swapcontext(&b.scheduler, &th.context);
      b.current = nullptr;
      if (b.failure) return;
    }
    if (b.progress == before && std::count(held.begin(), held.end(), 1) > 0) {
      std::fill(held.begin(), held.end(), 0);  // the others wait on the held warps: release them
      continue;
    }
    if (b.progress == before) {
      std::string where;
      for (std::size_t w = 0; w < b.warps.size(); ++w)
        if (b.warps[w].meet.arrived > 0)
          where += " warp " + std::to_string(w) + ": " + std::to_string(b.warps[w].meet.arrived) +
                   " of 32 lanes at " + b.warps[w].instruction + ";";
      if (b.barrier.arrived > 0)
        where += " " + std::to_string(b.barrier.arrived) + " of " + std::to_string(b.live) +
                 " threads at __syncthreads;";
      throw SimtError("block " + std::to_string(b.block.x) +
                      " deadlocked (a barrier or warp-wide instruction reached from divergent "
                      "code):" +
                      where);
    }
  }
}

}  // namespace

std::string to_string(const Interleaving& i) {
  switch (i.order) {
    case Order::kInOrder:
      return "in order";
    case Order::kReversed:
      return "reversed";
    case Order::kShuffled:
      return "shuffled (seed " + std::to_string(i.seed) + ")";
  }
  return "?";
}

void launch(unsigned blocks, unsigned threads, const std::function<void()>& kernel,
            const std::function<void(unsigned)>& before_block, Interleaving interleaving) {
  if (threads == 0 || threads % kWarpSize != 0)
    throw SimtError("simt::launch: " + std::to_string(threads) +
                    " threads per block; a multiple of 32 is needed");
  if (g_block != nullptr) throw SimtError("simt::launch: launches do not nest");
  for (unsigned bx = 0; bx < blocks; ++bx) {
    BlockRun b;
    b.kernel = &kernel;
    b.block.x = bx;
    b.dim.x = threads;
    b.dim.y = b.dim.z = 1;
    if (before_block) before_block(bx);
    g_block = &b;
    try {
      run_block(b, threads, interleaving);
    } catch (...) {
      g_block = nullptr;
      throw;
    }
    g_block = nullptr;
    if (b.failure) {
      try {
        std::rethrow_exception(b.failure);
      } catch (const std::exception& e) {
        throw SimtError(b.failure_where + ": " + e.what());
      }
    }
  }
}

const Index& thread_idx() { return block().current->idx; }
const Index& block_idx() { return block().block; }
const Index& block_dim() { return block().dim; }
int lane_id() { return static_cast<int>(thread_idx().x % kWarpSize); }

void sync_threads() {
  BlockRun& b = block();
  Rendezvous& r = b.barrier;
  const std::uint64_t mine = r.generation;
  ++r.arrived;
  ++b.progress;
  if (r.arrived == b.live) {
    r.arrived = 0;
    ++r.generation;
    return;
  }
  while (r.generation == mine) yield();
}

void arrive_at_warp_instruction(const char* instruction, const void* in, void* out,
                                const WarpCompute& compute) {
  BlockRun& b = block();
  const int lane = lane_id();
  WarpState& w = b.warps[thread_idx().x / kWarpSize];
  if (w.meet.arrived == 0) {
    w.instruction = instruction;
  } else if (std::strcmp(w.instruction, instruction) != 0) {
    throw SimtError("warp " + std::to_string(thread_idx().x / kWarpSize) + ": lane " +
                    std::to_string(lane) + " reached " + instruction +
                    " while other lanes wait at " + w.instruction);
  }
  const std::uint64_t mine = w.meet.generation;
  w.in[static_cast<std::size_t>(lane)] = in;
  w.out[static_cast<std::size_t>(lane)] = out;
  ++w.meet.arrived;
  ++b.progress;
  if (w.meet.arrived == kWarpSize) {
    compute(w.in, w.out);
    w.meet.arrived = 0;
    ++w.meet.generation;
    return;
  }
  while (w.meet.generation == mine) yield();
}

}  // namespace ppbench::simt
