// The CPU kernels' matrix products (workloads/cpu/gemm.h) against a plain triple loop: both
// implementations (Eigen's, and OpenBLAS's where the build has it), every transpose, assign and
// accumulate, strided blocks, the few-rows A B^T path OpenBLAS takes transposed, and empty sizes.
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cpu_kernels/test_util.h"
#include "workloads/cpu/gemm.h"

namespace ppbench::cpu {
namespace {

enum class Impl { kEigen, kBlas, kChosen };

// A row-major matrix with `pad` unused columns after each row, filled with a sentinel there.
template <typename T>
struct Padded {
  std::int64_t rows, cols, pad;
  std::vector<T> data;
  Padded(std::int64_t r, std::int64_t c, std::int64_t p, std::uint64_t seed)
      : rows(r), cols(c), pad(p), data(static_cast<std::size_t>(r * (c + p)), T(-777)) {
    Rng rng(seed);
    for (std::int64_t i = 0; i < r; ++i)
      for (std::int64_t j = 0; j < c; ++j) at(i, j) = static_cast<T>(rng.uniform() * 2.0 - 1.0);
  }
  T& at(std::int64_t i, std::int64_t j) {
    return data[static_cast<std::size_t>(i * (cols + pad) + j)];
  }
  MatrixRef<T> ref() { return {data.data(), rows, cols, cols + pad}; }
  MatrixRef<const T> cref() { return {data.data(), rows, cols, cols + pad}; }
};

template <typename T>
void run(Impl impl, GemmOperand<T> a, GemmOperand<T> b, MatrixRef<T> c, Gemm mode) {
  if (impl == Impl::kEigen) gemm_eigen(a, b, c, mode);
  if (impl == Impl::kBlas) gemm_blas(a, b, c, mode);
  if (impl == Impl::kChosen) gemm_impl(a, b, c, mode);
}

template <typename T>
void check_product(Impl impl, std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb,
                   Gemm mode) {
  SCOPED_TRACE("m " + std::to_string(m) + " n " + std::to_string(n) + " k " + std::to_string(k) +
               (ta ? " A^T" : " A") + (tb ? " B^T" : " B") +
               (mode == Gemm::kAccumulate ? " +=" : " ="));
  Padded<T> a(ta ? k : m, ta ? m : k, 3, 11), b(tb ? n : k, tb ? k : n, 5, 12), c(m, n, 2, 13);
  const Padded<T> before = c;
  run<T>(impl, {a.cref(), ta}, {b.cref(), tb}, c.ref(), mode);
  const double eps = std::numeric_limits<T>::epsilon();
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double want =
          mode == Gemm::kAccumulate
              ? static_cast<double>(before.data[static_cast<std::size_t>(i * (n + 2) + j)])
              : 0.0;
      double scale = std::abs(want);
      for (std::int64_t p = 0; p < k; ++p) {
        const double x = static_cast<double>(ta ? a.at(p, i) : a.at(i, p));
        const double y = static_cast<double>(tb ? b.at(j, p) : b.at(p, j));
        want += x * y;
        scale += std::abs(x * y);
      }
      ASSERT_NEAR(static_cast<double>(c.at(i, j)), want,
                  4.0 * static_cast<double>(k + 1) * eps * scale + 1e-300)
          << "at (" << i << ", " << j << ")";
    }
    for (std::int64_t j = n; j < n + 2; ++j)
      ASSERT_EQ(c.at(i, j), T(-777)) << "the padding after row " << i << " was written";
  }
}

template <typename T>
void check_all(Impl impl) {
  // Rows below and above 128 (OpenBLAS's A B^T is taken transposed below), odd sizes, a k of 1.
  const std::int64_t shapes[][3] = {
      {64, 96, 80}, {5, 7, 3}, {130, 33, 17}, {1, 200, 1}, {127, 129, 64}};
  for (const auto& s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (Gemm mode : {Gemm::kAssign, Gemm::kAccumulate})
          check_product<T>(impl, s[0], s[1], s[2], ta, tb, mode);
}

TEST(Gemm, EigenMatchesTheLoop) {
  check_all<float>(Impl::kEigen);
  check_all<double>(Impl::kEigen);
}

TEST(Gemm, OpenBlasMatchesTheLoop) {
  if (!have_blas()) GTEST_SKIP() << "built without OpenBLAS (PPBENCH_BLAS)";
  check_all<float>(Impl::kBlas);
  check_all<double>(Impl::kBlas);
}

TEST(Gemm, TheChosenImplementationMatchesTheLoop) { check_all<double>(Impl::kChosen); }

// Every rank thread multiplies at once in a pipeline step. Each thread's products must equal,
// bit for bit, the same products computed alone (one thread per call is deterministic); an
// OpenBLAS that shares its buffers between concurrent calls (Debian's serial build) breaks this.
TEST(Gemm, ConcurrentProductsEqualTheSameProductsAlone) {
  // Small products call the library most often, where buffers shared between calls collide:
  // Debian's serial OpenBLAS got 4 x 16 by 16 x 16 wrong about once in 40 calls this way.
  constexpr int kThreads = 4, kRounds = 2000;
  const std::int64_t shapes[][3] = {{4, 16, 16}, {4, 16, 16}, {64, 128, 128}, {16, 48, 32}};
  struct Work {
    Padded<double> a, b, c;
    std::vector<double> alone;
  };
  std::vector<Work> work;
  for (int t = 0; t < kThreads; ++t) {
    const auto& s = shapes[t];
    Work w{Padded<double>(s[0], s[2], 0, 100u + t),
           Padded<double>(s[1], s[2], 0, 200u + t),
           Padded<double>(s[0], s[1], 0, 300u + t),
           {}};
    gemm_impl<double>({w.a.cref(), false}, {w.b.cref(), true}, w.c.ref(), Gemm::kAssign);
    w.alone = w.c.data;
    work.push_back(std::move(w));
  }
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Work& w = work[static_cast<std::size_t>(t)];
      for (int r = 0; r < kRounds; ++r) {
        gemm_impl<double>({w.a.cref(), false}, {w.b.cref(), true}, w.c.ref(), Gemm::kAssign);
        if (w.c.data != w.alone) ++wrong[static_cast<std::size_t>(t)];
      }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(wrong[static_cast<std::size_t>(t)], 0)
        << "thread " << t << " of " << kThreads << ", " << gemm_library();
}

TEST(Gemm, AnEmptySumAssignsZeroAndAccumulatesNothing) {
  for (Impl impl : {Impl::kEigen, Impl::kBlas}) {
    Padded<double> a(4, 0, 1, 1), b(0, 3, 1, 2), c(4, 3, 0, 3);
    const std::vector<double> before = c.data;
    run<double>(impl, {a.cref(), false}, {b.cref(), false}, c.ref(), Gemm::kAccumulate);
    EXPECT_EQ(c.data, before);
    run<double>(impl, {a.cref(), false}, {b.cref(), false}, c.ref(), Gemm::kAssign);
    for (double v : c.data) EXPECT_EQ(v, 0.0);
  }
}

TEST(Gemm, MismatchedShapesAreRefusedWithTheShapes) {
  Padded<float> a(4, 5, 0, 1), b(6, 3, 0, 2), c(4, 3, 0, 3);
  for (Impl impl : {Impl::kEigen, Impl::kBlas}) {
    try {
      run<float>(impl, {a.cref(), false}, {b.cref(), false}, c.ref(), Gemm::kAssign);
      FAIL() << "a 4 x 5 by 6 x 3 product was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("[4 x 5] by [6 x 3]"), std::string::npos) << e.what();
    }
  }
}

TEST(Gemm, TheEigenFrontEndTakesMapsBlocksAndTransposes) {
  Tensor<double> x = testing::random_tensor<double>({3, 4}, 1);
  Tensor<double> w = testing::random_tensor<double>({4, 5}, 2);
  Tensor<double> y({3, 5}), dx({3, 4});
  gemm(mat(x), mat(w), mat(y));
  const RowMat<double> want = mat(x) * mat(w);
  EXPECT_LT((mat(y) - want).cwiseAbs().maxCoeff(), 1e-14);
  gemm(mat(y), transposed(mat(w)), mat(dx));
  const RowMat<double> want_dx = want * mat(w).transpose();
  EXPECT_LT((mat(dx) - want_dx).cwiseAbs().maxCoeff(), 1e-14);
  // A block: the middle two columns of x times two rows of w.
  RowMat<double> z(3, 5);
  gemm(mat(x).middleCols(1, 2), mat(w).middleRows(1, 2), z);
  const RowMat<double> want_z = mat(x).middleCols(1, 2) * mat(w).middleRows(1, 2);
  EXPECT_LT((z - want_z).cwiseAbs().maxCoeff(), 1e-14);
}

TEST(Gemm, TheLibraryIsNamedForProvenance) {
  const std::string name = gemm_library();
  EXPECT_EQ(name.rfind(have_blas() ? "OpenBLAS" : "Eigen", 0), 0u) << name;
}

}  // namespace
}  // namespace ppbench::cpu
