// The emulated link's time on a stream (see link_delay.cu); kept apart from the transport so
// that nvcc compiles only this and the CUDA runtime header.
#pragma once

#include <cuda_runtime_api.h>

namespace ppbench::cuda {

// Enqueues a wait of `seconds` on `stream`; nothing for seconds <= 0.
void enqueue_delay(cudaStream_t stream, double seconds);

}  // namespace ppbench::cuda
