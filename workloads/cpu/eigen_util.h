// Eigen views over Tensor buffers. Internal to workloads/cpu/*.cpp: public headers stay Eigen-free.
// Eigen's own threading stays off (no setNbThreads, no -fopenmp): the executor runs one thread
// per rank.
#pragma once

#include <stdexcept>
#include <string>

#include <Eigen/Core>

#include "workloads/cpu/tensor.h"

namespace ppbench::cpu {

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatMap = Eigen::Map<RowMat<T>>;
template <typename T>
using ConstMatMap = Eigen::Map<const RowMat<T>>;
template <typename T>
using RowVec = Eigen::Matrix<T, 1, Eigen::Dynamic>;

// [rows, cols] view, by default [numel / last, last].
template <typename T>
MatMap<T> mat(Tensor<T>& x) {
  return MatMap<T>(x.data.data(), x.rows(), x.cols());
}
template <typename T>
ConstMatMap<T> mat(const Tensor<T>& x) {
  return ConstMatMap<T>(x.data.data(), x.rows(), x.cols());
}
template <typename T>
Eigen::Map<RowVec<T>> vec(Tensor<T>& x) {
  return Eigen::Map<RowVec<T>>(x.data.data(), x.numel());
}
template <typename T>
Eigen::Map<const RowVec<T>> vec(const Tensor<T>& x) {
  return Eigen::Map<const RowVec<T>>(x.data.data(), x.numel());
}

inline void check(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("ppbench cpu kernel: " + what);
}

}  // namespace ppbench::cpu
