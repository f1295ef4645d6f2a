// The emulated link's delay as a one-thread kernel on the receiver's communication stream:
// a host sleep would stall the rank's thread and a host callback would serialise all ranks on
// CUDA's callback thread; a spin on %globaltimer costs one warp slot of the partition and keeps
// the delay ordered with the copy it precedes.
#include "harness/cuda/link_delay.h"
#include "workloads/cuda/check.h"

namespace ppbench::cuda {

namespace {

__global__ void spin_for(unsigned long long nanoseconds) {
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= nanoseconds) break;
    __nanosleep(256);
  }
}

}  // namespace

void enqueue_delay(cudaStream_t stream, double seconds) {
  if (!(seconds > 0)) return;
  spin_for<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(seconds * 1e9));
  CUDA_CHECK_LAUNCH();
}

}  // namespace ppbench::cuda
