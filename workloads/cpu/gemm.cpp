#include "workloads/cpu/gemm.h"

#include <climits>
#include <cstdlib>
#include <vector>

#ifdef PPBENCH_HAVE_BLAS
#include <cblas.h>
#endif

namespace ppbench::cpu {

namespace {

struct Shape {
  std::int64_t m, n, k;  // C is m x n; the products run over k
};

template <typename T>
Shape shape_of(const GemmOperand<T>& a, const GemmOperand<T>& b, const MatrixRef<T>& c) {
  const std::int64_t m = a.transposed ? a.m.cols : a.m.rows;
  const std::int64_t k = a.transposed ? a.m.rows : a.m.cols;
  const std::int64_t kb = b.transposed ? b.m.cols : b.m.rows;
  const std::int64_t n = b.transposed ? b.m.rows : b.m.cols;
  check(k == kb && c.rows == m && c.cols == n,
        "gemm: [" + std::to_string(m) + " x " + std::to_string(k) + "] by [" + std::to_string(kb) +
            " x " + std::to_string(n) + "] into [" + std::to_string(c.rows) + " x " +
            std::to_string(c.cols) + "]");
  return {m, n, k};
}

template <typename T>
using StridedMap = Eigen::Map<RowMat<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using ConstStridedMap = Eigen::Map<const RowMat<T>, 0, Eigen::OuterStride<>>;

template <typename T>
ConstStridedMap<T> eigen_map(const MatrixRef<const T>& r) {
  return {r.data, r.rows, r.cols, Eigen::OuterStride<>(r.stride)};
}
template <typename T>
StridedMap<T> eigen_map(const MatrixRef<T>& r) {
  return {r.data, r.rows, r.cols, Eigen::OuterStride<>(r.stride)};
}

std::string eigen_version() {
  return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
         std::to_string(EIGEN_MAJOR_VERSION) + "." + std::to_string(EIGEN_MINOR_VERSION);
}

}  // namespace

template <typename T>
void gemm_eigen(GemmOperand<T> a, GemmOperand<T> b, MatrixRef<T> c, Gemm mode) {
  shape_of(a, b, c);
  auto C = eigen_map(c);
  const auto A = eigen_map(a.m);
  const auto B = eigen_map(b.m);
  const auto product = [&](const auto& x, const auto& y) {
    if (mode == Gemm::kAccumulate)
      C.noalias() += x * y;
    else
      C.noalias() = x * y;
  };
  if (a.transposed && b.transposed)
    product(A.transpose(), B.transpose());
  else if (a.transposed)
    product(A.transpose(), B);
  else if (b.transposed)
    product(A, B.transpose());
  else
    product(A, B);
}

#ifdef PPBENCH_HAVE_BLAS

namespace {

void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float* a,
                int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}
void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const double* a,
                int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// OpenBLAS starts a pool of (cores - 1) threads when it is initialised, which the kernels never
// use: each rank thread runs its own products on one thread (openblas_set_num_threads(1) below).
// Where OpenBLAS is linked into the program itself (the static ppbench) this constructor runs
// before OpenBLAS's, so it starts none; where it is a shared library it has started them already,
// and they sleep.
__attribute__((constructor(101))) void no_openblas_thread_pool() {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
}

// Whether OpenBLAS may be called from several rank threads at once. Its pthreads build may (each
// call takes its buffers under a lock); Debian's serial build may not: built without USE_LOCKING,
// concurrent calls share its buffers, which showed as wrong gradients in the pipeline tests. With
// any other build the products stay on Eigen.
bool blas_usable() {
  static const bool usable = [] {
    openblas_set_num_threads(1);
    return openblas_get_parallel() == 1;
  }();
  return usable;
}

CBLAS_TRANSPOSE op(bool transposed) { return transposed ? CblasTrans : CblasNoTrans; }

bool fits_int(std::int64_t v) { return v <= INT_MAX; }

}  // namespace

template <typename T>
void gemm_blas(GemmOperand<T> a, GemmOperand<T> b, MatrixRef<T> c, Gemm mode) {
  if (!blas_usable()) {
    gemm_eigen(a, b, c, mode);
    return;
  }
  const Shape s = shape_of(a, b, c);
  if (s.m == 0 || s.n == 0) return;
  const bool accumulate = mode == Gemm::kAccumulate;
  if (s.k == 0) {
    if (!accumulate) eigen_map(c).setZero();
    return;
  }
  // BLAS takes 32-bit sizes (Debian's OpenBLAS is not ILP64): larger products go to Eigen.
  if (!fits_int(s.m) || !fits_int(s.n) || !fits_int(s.k) || !fits_int(a.m.stride) ||
      !fits_int(b.m.stride) || !fits_int(c.stride) || !fits_int(s.m * s.n)) {
    gemm_eigen(a, b, c, mode);
    return;
  }
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  const int lda = static_cast<int>(a.m.stride), ldb = static_cast<int>(b.m.stride);
  // A · B^T with few rows in A (dX = dY W^T of a micro-batch) runs 25-40 % slower in OpenBLAS
  // 0.3.21 than the same product transposed, C^T = B A^T, whose transpose costs m·n copies
  // against m·n·k multiply-adds (64 x 1024 by 1024 x 1024: 1.86 ms direct, 1.40 ms so). At
  // 128 rows and more both ways take the same time.
  if (!a.transposed && b.transposed && s.m < 128) {
    thread_local std::vector<T> scratch;
    scratch.resize(static_cast<std::size_t>(s.m * s.n));
    cblas_gemm(CblasNoTrans, CblasTrans, n, m, k, b.m.data, ldb, a.m.data, lda, T(0),
               scratch.data(), m);
    const Eigen::Map<const RowMat<T>> ct(scratch.data(), s.n, s.m);
    auto C = eigen_map(c);
    if (accumulate)
      C += ct.transpose();
    else
      C = ct.transpose();
    return;
  }
  cblas_gemm(op(a.transposed), op(b.transposed), m, n, k, a.m.data, lda, b.m.data, ldb,
             accumulate ? T(1) : T(0), c.data, static_cast<int>(c.stride));
}

bool have_blas() { return blas_usable(); }

std::string gemm_library() {
  const std::string openblas =
      std::string(openblas_get_config()) + " (core " + openblas_get_corename() + ")";
  if (blas_usable()) return openblas;
  return eigen_version() + " (" + openblas + " is not safe to call from several threads)";
}

#else

template <typename T>
void gemm_blas(GemmOperand<T> a, GemmOperand<T> b, MatrixRef<T> c, Gemm mode) {
  gemm_eigen(a, b, c, mode);
}

bool have_blas() { return false; }

std::string gemm_library() { return eigen_version(); }

#endif

// gemm_blas already hands a product to Eigen where OpenBLAS is missing, is not safe from several
// threads, or the sizes do not fit its 32-bit arguments.
template <typename T>
void gemm_impl(GemmOperand<T> a, GemmOperand<T> b, MatrixRef<T> c, Gemm mode) {
  gemm_blas(a, b, c, mode);
}

#define PPBENCH_GEMM(T)                                                            \
  template void gemm_eigen<T>(GemmOperand<T>, GemmOperand<T>, MatrixRef<T>, Gemm); \
  template void gemm_blas<T>(GemmOperand<T>, GemmOperand<T>, MatrixRef<T>, Gemm);  \
  template void gemm_impl<T>(GemmOperand<T>, GemmOperand<T>, MatrixRef<T>, Gemm);
PPBENCH_GEMM(float)
PPBENCH_GEMM(double)
#undef PPBENCH_GEMM

}  // namespace ppbench::cpu
