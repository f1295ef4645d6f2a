// AmoebaNet-D's op library and genotype, as GPipe's (TensorFlow) reference builds it
// (docs/papers.md), shared by the workload spec, the CPU cells and the CUDA cells so that all
// build the same graph: (input state, op) pairs where ops 2k and 2k+1 are summed into state 2 + k;
// states 0 and 1 are the preprocessed s1 and s2; a cell's output concatenates the listed states.
#pragma once

#include <span>
#include <string_view>
#include <utility>

namespace ppbench {

enum class AmoebaOp {
  kConv1x1,
  kConv3x3,
  kConv1x7_7x1,
  kMaxPool3x3,
  kMaxPool2x2,
  kAvgPool3x3,
  kNone
};

inline std::string_view amoeba_op_name(AmoebaOp op) {
  switch (op) {
    case AmoebaOp::kConv1x1:
      return "conv1x1";
    case AmoebaOp::kConv3x3:
      return "conv3x3";
    case AmoebaOp::kConv1x7_7x1:
      return "conv1x7_7x1";
    case AmoebaOp::kMaxPool3x3:
      return "maxpool3x3";
    case AmoebaOp::kMaxPool2x2:
      return "maxpool2x2";
    case AmoebaOp::kAvgPool3x3:
      return "avgpool3x3";
    case AmoebaOp::kNone:
      return "none";
  }
  return "?";
}

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

// A normal or a reduction cell's ops, and the states its output concatenates.
inline std::span<const std::pair<int, AmoebaOp>> amoeba_cell_ops(bool reduction) {
  if (reduction) return kReductionOps;
  return kNormalOps;
}
inline std::span<const int> amoeba_cell_concat(bool reduction) {
  if (reduction) return kReductionConcat;
  return kNormalConcat;
}

}  // namespace ppbench
