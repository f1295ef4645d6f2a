// The matrix products of the CPU kernels, in one place: C = op(A) op(B) or C += op(A) op(B), on
// row-major matrices (Tensor views, or blocks of them with a row stride).
//
// Built with OpenBLAS (CMake's PPBENCH_BLAS, the default where it is installed) the products run
// on its kernels, otherwise on Eigen's. On the AVX-512 development VM OpenBLAS 0.3.21 is 10-25 %
// faster than Eigen 3.4 at the shapes a pipeline stage multiplies (64 x 1024 by 1024 x 1024:
// 1.40 ms against 1.58-1.80 ms), which is what PyTorch's MKL reaches; results/perf/README.md.
//
//   gemm(mat(x), mat(w), mat(y));                                // y = x w
//   gemm(mat(dy), transposed(mat(w)), mat(dx));                  // dx = dy w^T
//   gemm(transposed(mat(x)), mat(dy), mat(dw), Gemm::kAccumulate);  // dw += x^T dy
#pragma once

#include <cstdint>
#include <type_traits>

#include "workloads/cpu/eigen_util.h"
#include "workloads/cpu/gemm_library.h"

namespace ppbench::cpu {

// rows x cols elements; row i starts at data + i * stride (stride >= cols).
template <typename T>
struct MatrixRef {
  T* data;
  std::int64_t rows, cols, stride;
};

// A factor of a product: a matrix as stored, or its transpose.
template <typename T>
struct GemmOperand {
  MatrixRef<const T> m;
  bool transposed = false;
};

enum class Gemm { kAssign, kAccumulate };

// The row-major matrix behind an Eigen map, block or matrix (unit inner stride); const data for a
// const one.
template <typename E>
auto matrix_ref(E&& e) {
  using Plain = std::remove_cvref_t<E>;
  static_assert(Plain::IsRowMajor, "gemm takes row-major matrices");
  check(e.innerStride() == 1, "gemm: a matrix with a column stride");
  using Pointer = decltype(e.data());
  return MatrixRef<std::remove_pointer_t<Pointer>>{e.data(), e.rows(), e.cols(), e.outerStride()};
}

// A function deduces the element type: deducing it from braces (C++20's aggregate deduction,
// GemmOperand{m, t}) is missing from some compilers ppbench builds with (clang before 17).
template <typename T>
GemmOperand<T> operand_of(MatrixRef<const T> m, bool transposed) {
  return {m, transposed};
}

template <typename E>
auto transposed(const E& e) {
  return operand_of(matrix_ref(e), true);
}

template <typename T>
GemmOperand<T> gemm_operand(const GemmOperand<T>& op) {
  return op;
}
template <typename E>
auto gemm_operand(const E& e) {
  return operand_of(matrix_ref(e), false);
}

// C = op(A) op(B) (kAssign) or C += op(A) op(B) (kAccumulate); OpenBLAS's where the build has it.
template <typename T>
void gemm_impl(GemmOperand<T> a, GemmOperand<T> b, MatrixRef<T> c, Gemm mode);

template <typename A, typename B, typename C>
void gemm(const A& a, const B& b, C&& c, Gemm mode = Gemm::kAssign) {
  const auto out = matrix_ref(c);
  using T = std::remove_pointer_t<decltype(out.data)>;
  static_assert(!std::is_const_v<T>, "gemm writes its result into a read-only matrix");
  gemm_impl<T>(gemm_operand(a), gemm_operand(b), out, mode);
}

// The two implementations gemm() chooses between; where OpenBLAS is built in both are, and the
// tests check each against a plain triple loop.
template <typename T>
void gemm_eigen(GemmOperand<T> a, GemmOperand<T> b, MatrixRef<T> c, Gemm mode);
template <typename T>
void gemm_blas(GemmOperand<T> a, GemmOperand<T> b, MatrixRef<T> c, Gemm mode);
bool have_blas();

}  // namespace ppbench::cpu
