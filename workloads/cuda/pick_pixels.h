// The two half-resolution subsamples of AmoebaNet's factorized reduce (amoebanet_ops.h) and
// their backward, on NHWC tensors, as pick_pixels / scatter_pixels in
// workloads/cpu/amoebanet_ops.cpp. Raw element copies in the tensor's dtype (bf16 stays
// bit-exact); no parameters, nothing saved.
#pragma once

#include "workloads/cuda/context.h"
#include "workloads/cuda/tensor.h"

namespace ppbench::cuda {

// y[b, i, j, :] = x[b, 2i + offset, 2j + offset, :] for offset 0 or 1, y of size ceil(H/2) x
// ceil(W/2); zero where the pixel lies past the border (offset 1 on an odd size), as the
// reference pads the shifted input.
DTensor pick_pixels(Context& ctx, const DTensor& x, std::int64_t offset);

// The backward of picking offsets 0 and 1 from one tensor of `shape`: dx at (2i, 2j) from
// `d_even`, at (2i + 1, 2j + 1) from `d_odd`, zero elsewhere. The two picks never share a pixel,
// so this is the sum of the CPU's two scatters, written as one gather (each dx element written
// once, no atomics, no memset).
DTensor unpick_pixels(Context& ctx, const DTensor& d_even, const DTensor& d_odd,
                      const Shape& shape);

}  // namespace ppbench::cuda
