// AmoebaNet-D's genotype, shared by the CPU and the CUDA cells so that both build the same
// graph: (input state, op) pairs where ops 2k and 2k+1 are summed into state 2 + k; states 0 and
// 1 are the preprocessed s1 and s2; a cell's output concatenates the listed states.
#pragma once

#include <utility>

#include "workloads/cpu/amoebanet_ops.h"

namespace ppbench::cpu {

inline constexpr std::pair<int, AmoebaOp> kNormalOps[] = {
    {1, AmoebaOp::kConv1x1},     {1, AmoebaOp::kMaxPool3x3}, {1, AmoebaOp::kNone},
    {0, AmoebaOp::kConv1x7_7x1}, {0, AmoebaOp::kConv1x1},    {0, AmoebaOp::kConv1x7_7x1},
    {2, AmoebaOp::kMaxPool3x3},  {2, AmoebaOp::kNone},       {1, AmoebaOp::kAvgPool3x3},
    {5, AmoebaOp::kConv1x1}};
inline constexpr int kNormalConcat[] = {0, 3, 4, 6};
inline constexpr std::pair<int, AmoebaOp> kReductionOps[] = {
    {0, AmoebaOp::kMaxPool2x2}, {0, AmoebaOp::kMaxPool3x3},  {2, AmoebaOp::kNone},
    {1, AmoebaOp::kConv3x3},    {2, AmoebaOp::kConv1x7_7x1}, {2, AmoebaOp::kMaxPool3x3},
    {3, AmoebaOp::kNone},       {1, AmoebaOp::kMaxPool2x2},  {2, AmoebaOp::kAvgPool3x3},
    {3, AmoebaOp::kConv1x1}};
inline constexpr int kReductionConcat[] = {4, 5, 6};

}  // namespace ppbench::cpu
