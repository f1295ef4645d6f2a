// A CUDA thread block emulated on the host, so that a kernel's own source runs without a GPU and
// its result can be held to a CPU reference (tests/simt/test_fa2_emulated.cpp).
//
// Every thread of a block is a fiber (ucontext) on the calling OS thread; blocks run one after
// another. A fiber runs until it reaches __syncthreads or a warp-wide instruction, then yields;
// the barrier (or the instruction) completes once every thread of the block (or lane of the warp)
// has reached it. So the emulation is deterministic, and a kernel that reaches a barrier or a
// warp-wide instruction from divergent code (some lanes elsewhere, or already returned), which is
// undefined on a GPU, stops with a SimtError naming the warp instead of hanging.
//
// What it does not model: timing, memory ordering between threads other than at barriers, and
// bank conflicts. A GPU run (and compute-sanitizer) remains the judge of those.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>

namespace ppbench::simt {

struct Index {
  unsigned x = 0, y = 0, z = 0;
};

class SimtError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int kWarpSize = 32;

// The order in which a pass of the emulation runs a block's threads, each until its next barrier
// or warp-wide instruction. On a GPU the warps run at once, in no order a kernel may rely on;
// here one order is chosen, so a race (a thread reading shared memory that another writes with
// no barrier between) gives the answer of that order and may pass unseen. Run under several
// orders, a race-free kernel gives the same bits each time (where it sums nothing with atomics)
// and a racy one, in general, does not: racecheck's question, asked on the host.
enum class Order {
  kInOrder,   // thread 0, 1, 2, ... every pass
  kReversed,  // the last thread first, every pass
  kShuffled,  // a new random order every pass, from `seed`, and between barriers a random set
              // of warps held back until the others can go no further
};
struct Interleaving {
  Order order = Order::kInOrder;
  unsigned seed = 0;
};
std::string to_string(const Interleaving& i);

// Runs `kernel` for every thread of `blocks` one-dimensional blocks of `threads` threads (a
// multiple of 32), calling `before_block(b)` before block b's threads start (where the caller
// resets the shared memory its kernel declares), its threads interleaved as `interleaving` says.
// Rethrows the first exception a thread raised, as SimtError.
void launch(unsigned blocks, unsigned threads, const std::function<void()>& kernel,
            const std::function<void(unsigned)>& before_block = {}, Interleaving interleaving = {});

// Inside a kernel: the calling thread's indices and the block's shape.
const Index& thread_idx();
const Index& block_idx();
const Index& block_dim();

// __syncthreads().
void sync_threads();

// Type-erased half of warp_collective: records the lane's operands, and once every lane of its
// warp has arrived with the same `instruction`, runs `compute` (as given by the last lane to
// arrive) over all 32 lanes' operands.
using WarpCompute = std::function<void(const std::array<const void*, kWarpSize>& in,
                                       const std::array<void*, kWarpSize>& out)>;
void arrive_at_warp_instruction(const char* instruction, const void* in, void* out,
                                const WarpCompute& compute);

// A warp-wide instruction: each lane passes `in` and receives its `Out`; `op(in, out)` sees the
// operands of lanes 0..31 and fills each lane's result.
template <class Out, class In, class Op>
Out warp_collective(const char* instruction, const In& in, Op op) {
  Out out{};
  arrive_at_warp_instruction(instruction, &in, &out,
                             [&op](const std::array<const void*, kWarpSize>& ins,
                                   const std::array<void*, kWarpSize>& outs) {
                               std::array<const In*, kWarpSize> typed_in{};
                               std::array<Out*, kWarpSize> typed_out{};
                               for (int l = 0; l < kWarpSize; ++l) {
                                 typed_in[l] = static_cast<const In*>(ins[l]);
                                 typed_out[l] = static_cast<Out*>(outs[l]);
                               }
                               op(typed_in, typed_out);
                             });
  return out;
}

// The calling thread's lane (thread_idx().x % 32).
int lane_id();

}  // namespace ppbench::simt
