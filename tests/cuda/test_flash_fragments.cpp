// Host-only checks of the FlashAttention-2 kernels' register and shared-memory arithmetic
// (workloads/cuda/flash_fragments.h, flash_fa2_tiles.h): no GPU and no CUDA runtime needed, built
// by the host compiler into its own binary (flash_fragment_tests).
//
// A warp is simulated on the CPU: fragments are 32 lanes of element values, mma.m16n8k16 and
// ldmatrix .x4 act on them as the PTX ISA defines them (9.7.14.5.8 "Matrix Fragments for
// mma.m16n8k16 with floating point type" and 9.7.14.5.15 "Warp-level matrix load instruction:
// ldmatrix", transcribed here independently of the header's bit arithmetic), and the kernels'
// loops (their address placements, swizzle, accumulator reuse, dS^T stores) are replayed on small
// integer matrices, whose products are exact in bf16 and f32, against plain matrix products.
#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "tests/simt/ptx_tables.h"
#include "workloads/cuda/flash_fa2_tiles.h"
#include "workloads/cuda/flash_fragments.h"

namespace ppbench::cuda::frag {
namespace {

constexpr int kLanes = 32;

// --- A simulated warp -------------------------------------------------------------------------

struct Matrix {
  int rows = 0, cols = 0;
  std::vector<double> v;
  Matrix(int r, int c) : rows(r), cols(c), v(static_cast<std::size_t>(r) * c, 0.0) {}
  double& at(int r, int c) { return v[static_cast<std::size_t>(r) * cols + c]; }
  double at(int r, int c) const { return v[static_cast<std::size_t>(r) * cols + c]; }
};

// Small integers: every product and sum below is exact in bf16 inputs and f32 accumulators.
Matrix random_ints(int rows, int cols, int lo, int hi, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  Matrix m(rows, cols);
  for (double& x : m.v) x = dist(gen);
  return m;
}

Matrix product(const Matrix& a, const Matrix& b) {
  Matrix c(a.rows, b.cols);
  for (int i = 0; i < a.rows; ++i)
    for (int j = 0; j < b.cols; ++j) {
      double s = 0;
      for (int k = 0; k < a.cols; ++k) s += a.at(i, k) * b.at(k, j);
      c.at(i, j) = s;
    }
  return c;
}

Matrix transpose(const Matrix& a) {
  Matrix t(a.cols, a.rows);
  for (int i = 0; i < a.rows; ++i)
    for (int j = 0; j < a.cols; ++j) t.at(j, i) = a.at(i, j);
  return t;
}

// Registers of one warp: A holds 8 elements per lane (4 .b32 of two bf16), B 4, C/D 4 f32.
using FragA = std::array<std::array<double, 8>, kLanes>;
using FragB = std::array<std::array<double, 4>, kLanes>;
using FragC = std::array<std::array<double, 4>, kLanes>;

FragC zero_c() {
  FragC c{};
  return c;
}

// mma.sync.aligned.m16n8k16.row.col: D = A B + C over the matrices the lanes hold, located by
// the ISA's tables (not the header's functions).
FragC mma(const FragA& a, const FragB& b, const FragC& c) {
  Matrix am(16, 16), bm(16, 8), cm(16, 8);
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int i = 0; i < 8; ++i) am.at(ptx_a(lane, i).row, ptx_a(lane, i).col) = a[lane][i];
    for (int i = 0; i < 4; ++i) bm.at(ptx_b(lane, i).row, ptx_b(lane, i).col) = b[lane][i];
    for (int i = 0; i < 4; ++i) cm.at(ptx_c(lane, i).row, ptx_c(lane, i).col) = c[lane][i];
  }
  const Matrix ab = product(am, bm);
  FragC d{};
  for (int lane = 0; lane < kLanes; ++lane)
    for (int i = 0; i < 4; ++i) {
      const Coord x = ptx_c(lane, i);
      d[lane][i] = ab.at(x.row, x.col) + cm.at(x.row, x.col);
    }
  return d;
}

// Shared memory holding bf16 elements (as doubles), indexed by element offset.
using Smem = std::vector<double>;

// ldmatrix .x4 (.trans): lane l gives the element offset of row l & 7 of matrix l >> 3; register
// m of every lane receives its two elements of matrix m.
using LdsmRegs = std::array<std::array<std::array<double, 2>, 4>, kLanes>;
LdsmRegs ldmatrix_x4(const Smem& smem, const std::array<int, kLanes>& row_offset, bool trans) {
  LdsmRegs out{};
  for (int lane = 0; lane < kLanes; ++lane)
    for (int m = 0; m < 4; ++m)
      for (int h = 0; h < 2; ++h) {
        const Coord x = ptx_ldsm(lane, h, trans);  // as stored
        out[lane][m][h] = smem.at(static_cast<std::size_t>(row_offset[8 * m + x.row] + x.col));
      }
  return out;
}

// A [rows x width] matrix laid into shared memory under the kernels' swizzle.
Smem store_swizzled(const Matrix& m) {
  Smem s(m.v.size(), 0.0);
  for (int r = 0; r < m.rows; ++r)
    for (int c = 0; c < m.cols; ++c)
      s[static_cast<std::size_t>(swizzle(r, c, m.cols))] = m.at(r, c);
  return s;
}

enum class Placement { kDownThenRight, kRightThenDown };

// The element offsets a warp gives to ldmatrix for the 16 x 16 block at (row0, col0), computed as
// the kernels do (fa2::ldsm_lane + fa2::ldsm_at, here in elements).
std::array<int, kLanes> ldsm_rows(Placement p, int row0, int col0, int width) {
  std::array<int, kLanes> rows{};
  for (int lane = 0; lane < kLanes; ++lane) {
    const Coord where =
        p == Placement::kDownThenRight ? ldsm_down_then_right(lane) : ldsm_right_then_down(lane);
    rows[lane] = ldsm_offset(swizzle(where.row, where.col, width), row0, col0, width);
  }
  return rows;
}

// The four ways the kernels load operands (see flash_fragments.h):
// A stored [m][k], no .trans (Q in the forward; K, V in the backward).
FragA load_a(const Smem& s, int width, int row0, int col0) {
  const LdsmRegs r = ldmatrix_x4(s, ldsm_rows(Placement::kDownThenRight, row0, col0, width), false);
  FragA a{};
  for (int lane = 0; lane < kLanes; ++lane)
    for (int i = 0; i < 8; ++i) a[lane][i] = r[lane][i / 2][i % 2];
  return a;
}
// A stored [k][m], .trans (dS^T for dQ).
FragA load_a_trans(const Smem& s, int width, int row0, int col0) {
  const LdsmRegs r = ldmatrix_x4(s, ldsm_rows(Placement::kRightThenDown, row0, col0, width), true);
  FragA a{};
  for (int lane = 0; lane < kLanes; ++lane)
    for (int i = 0; i < 8; ++i) a[lane][i] = r[lane][i / 2][i % 2];
  return a;
}
// Two n8 B fragments (registers 0, 1 and 2, 3) from B stored [n][k], no .trans (K in the
// forward; Q, dO in the backward's S^T and dP^T).
std::array<FragB, 2> load_b_nk(const Smem& s, int width, int row0, int col0) {
  const LdsmRegs r = ldmatrix_x4(s, ldsm_rows(Placement::kRightThenDown, row0, col0, width), false);
  std::array<FragB, 2> b{};
  for (int lane = 0; lane < kLanes; ++lane)
    for (int t = 0; t < 2; ++t)
      for (int i = 0; i < 4; ++i) b[t][lane][i] = r[lane][2 * t + i / 2][i % 2];
  return b;
}
// Two n8 B fragments from B stored [k][n], .trans (V in the forward; dO, Q and K in the
// backward's dV, dK and dQ).
std::array<FragB, 2> load_b_kn(const Smem& s, int width, int row0, int col0) {
  const LdsmRegs r = ldmatrix_x4(s, ldsm_rows(Placement::kDownThenRight, row0, col0, width), true);
  std::array<FragB, 2> b{};
  for (int lane = 0; lane < kLanes; ++lane)
    for (int t = 0; t < 2; ++t)
      for (int i = 0; i < 4; ++i) b[t][lane][i] = r[lane][2 * t + i / 2][i % 2];
  return b;
}

// The A fragment of k-chunk kc from the accumulators of n8 tiles 2 kc and 2 kc + 1, as the kernels
// build P (forward) and P^T, dS^T (backward).
FragA a_from_accumulators(const std::vector<FragC>& acc, int kc) {
  FragA a{};
  for (int lane = 0; lane < kLanes; ++lane)
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 2; ++h)
        a[lane][2 * r + h] = acc[2 * kc + acc_tile_of_a(r)][lane][acc_elem_of_a(r) + h];
  return a;
}

// Reads back a row block of n8 accumulator tiles through the header's C map.
void expect_accumulators(const std::vector<FragC>& acc, const Matrix& want, int row0,
                         const char* what) {
  for (std::size_t t = 0; t < acc.size(); ++t)
    for (int lane = 0; lane < kLanes; ++lane)
      for (int i = 0; i < 4; ++i) {
        const Coord c = mma_c(lane, i);
        ASSERT_EQ(acc[t][lane][i], want.at(row0 + c.row, 8 * static_cast<int>(t) + c.col))
            << what << ": tile " << t << " lane " << lane << " element " << i;
      }
}

// --- The maps ---------------------------------------------------------------------------------

TEST(FlashFragments, MmaMapsMatchThePtxTables) {
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int i = 0; i < 8; ++i) EXPECT_EQ(mma_a(lane, i), ptx_a(lane, i)) << lane << " a" << i;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(mma_b(lane, i), ptx_b(lane, i)) << lane << " b" << i;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(mma_c(lane, i), ptx_c(lane, i)) << lane << " c" << i;
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(ldsm_received(lane, h, false), ptx_ldsm(lane, h, false));
      EXPECT_EQ(ldsm_received(lane, h, true), ptx_ldsm(lane, h, true));
    }
  }
}

// Each map hands every element of its matrix to exactly one (lane, element).
TEST(FlashFragments, MmaMapsCoverTheirMatricesOnce) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int i = 0; i < 8; ++i) a.insert({mma_a(lane, i).row, mma_a(lane, i).col});
    for (int i = 0; i < 4; ++i) b.insert({mma_b(lane, i).row, mma_b(lane, i).col});
    for (int i = 0; i < 4; ++i) c.insert({mma_c(lane, i).row, mma_c(lane, i).col});
  }
  EXPECT_EQ(a.size(), 256u);
  EXPECT_EQ(b.size(), 128u);
  EXPECT_EQ(c.size(), 128u);
  for (auto [r, col] : a) EXPECT_TRUE(r >= 0 && r < 16 && col >= 0 && col < 16);
  for (auto [r, col] : b) EXPECT_TRUE(r >= 0 && r < 16 && col >= 0 && col < 8);
  for (auto [r, col] : c) EXPECT_TRUE(r >= 0 && r < 16 && col >= 0 && col < 8);
}

// Fragments built with the header's maps, multiplied as the instruction is defined, read back
// with the header's C map: a plain matrix product.
TEST(FlashFragments, SimulatedMmaIsAMatrixProduct) {
  const Matrix am = random_ints(16, 16, -4, 4, 1), bm = random_ints(16, 8, -4, 4, 2);
  const Matrix cm = random_ints(16, 8, -50, 50, 3);
  FragA a{};
  FragB b{};
  FragC c{};
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int i = 0; i < 8; ++i) a[lane][i] = am.at(mma_a(lane, i).row, mma_a(lane, i).col);
    for (int i = 0; i < 4; ++i) b[lane][i] = bm.at(mma_b(lane, i).row, mma_b(lane, i).col);
    for (int i = 0; i < 4; ++i) c[lane][i] = cm.at(mma_c(lane, i).row, mma_c(lane, i).col);
  }
  const FragC d = mma(a, b, c);
  const Matrix ab = product(am, bm);
  for (int lane = 0; lane < kLanes; ++lane)
    for (int i = 0; i < 4; ++i) {
      const Coord x = mma_c(lane, i);
      EXPECT_EQ(d[lane][i], ab.at(x.row, x.col) + cm.at(x.row, x.col));
    }
}

// The accumulators of n8 tiles 2 kc, 2 kc + 1 sit, lane by lane, where the A fragment of k-chunk
// kc expects them: P (and P^T, dS^T) go from one MMA's output to the next one's input in place.
TEST(FlashFragments, AccumulatorsOfTwoTilesAreAnAFragment) {
  for (int lane = 0; lane < kLanes; ++lane)
    for (int kc = 0; kc < 8; ++kc)
      for (int r = 0; r < 4; ++r)
        for (int h = 0; h < 2; ++h) {
          const Coord from = mma_c(lane, acc_elem_of_a(r) + h);
          const Coord to = mma_a(lane, 2 * r + h);
          EXPECT_EQ(from.row, to.row);
          EXPECT_EQ(8 * (2 * kc + acc_tile_of_a(r)) + from.col, 16 * kc + to.col);
        }
}

// --- Shared memory ----------------------------------------------------------------------------

TEST(FlashFragments, SwizzleIsABijectionWithinEachRow) {
  for (int width : {64, 128}) {
    constexpr int kRows = 128;
    std::vector<int> seen(static_cast<std::size_t>(kRows) * width, 0);
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < width; ++c) {
        const int o = swizzle(r, c, width);
        ASSERT_GE(o, r * width);
        ASSERT_LT(o, (r + 1) * width);
        ASSERT_EQ(o % 8, c % 8) << "a 16-byte chunk stays whole";
        ++seen[static_cast<std::size_t>(o)];
      }
    for (int n : seen) ASSERT_EQ(n, 1) << "width " << width;
  }
}

// The kernels' split of an ldmatrix address into a per-lane part and a per-block XOR and add.
TEST(FlashFragments, LdsmOffsetIsTheSwizzledRowStart) {
  for (int width : {64, 128})
    for (Placement p : {Placement::kDownThenRight, Placement::kRightThenDown})
      for (int row0 = 0; row0 < 128; row0 += 8)
        for (int col0 = 0; col0 < width; col0 += 16) {
          const std::array<int, kLanes> rows = ldsm_rows(p, row0, col0, width);
          for (int lane = 0; lane < kLanes; ++lane) {
            const Coord w = p == Placement::kDownThenRight ? ldsm_down_then_right(lane)
                                                           : ldsm_right_then_down(lane);
            ASSERT_EQ(rows[lane], swizzle(row0 + w.row, col0 + w.col, width))
                << "width " << width << " block " << row0 << "," << col0 << " lane " << lane;
          }
        }
}

// 32 banks of 4 bytes; a 16-byte access covers 4 of them, the 8 lanes of one ldmatrix matrix
// (and 8 consecutive threads of a 16-byte cp.async) are served together and must hit 8 distinct
// groups of 4 banks.
int bank_group(int element_offset) { return element_offset * 2 / 16 % 8; }

TEST(FlashFragments, LdmatrixAndCopiesAreBankConflictFree) {
  for (int width : {64, 128}) {
    for (Placement p : {Placement::kDownThenRight, Placement::kRightThenDown})
      for (int row0 = 0; row0 < 128; row0 += 16)
        for (int col0 = 0; col0 < width; col0 += 16) {
          const std::array<int, kLanes> rows = ldsm_rows(p, row0, col0, width);
          for (int m = 0; m < 4; ++m) {
            std::set<int> groups;
            for (int l = 8 * m; l < 8 * m + 8; ++l) groups.insert(bank_group(rows[l]));
            EXPECT_EQ(groups.size(), 8u) << "width " << width << " matrix " << m;
          }
        }
    for (int first = 0; first < 256; first += 8) {
      std::set<int> groups;
      for (int tid = first; tid < first + 8; ++tid) {
        const Coord c = copy_chunk(tid, width);
        groups.insert(bank_group(swizzle(c.row, c.col, width)));
      }
      EXPECT_EQ(groups.size(), 8u) << "cp.async threads " << first << ".. width " << width;
    }
  }
  // The backward's dS^T stores: 4-byte words from the accumulator layout, 32 lanes at a time.
  constexpr int kBr = fa2::BackwardTiles<128>::kQueryRows;
  for (int warp = 0; warp < fa2::BackwardTiles<128>::kWarps; ++warp)
    for (int tile = 0; tile < kBr / 8; ++tile)
      for (int e : {0, 2}) {
        std::set<int> banks;
        for (int lane = 0; lane < kLanes; ++lane) {
          const Coord c = mma_c(lane, e);
          banks.insert(swizzle(16 * warp + c.row, 8 * tile + c.col, kBr) * 2 / 4 % 32);
        }
        EXPECT_EQ(banks.size(), 32u) << "warp " << warp << " tile " << tile << " e " << e;
      }
}

// Every operand load of the kernels yields exactly the fragment the mma expects.
TEST(FlashFragments, LdmatrixYieldsTheMmaOperands) {
  for (int width : {64, 128}) {
    const Matrix m = random_ints(128, width, -100, 100, 7);
    const Smem s = store_swizzled(m);
    for (int row0 = 0; row0 < 128; row0 += 16)
      for (int col0 = 0; col0 < width; col0 += 16) {
        const FragA a = load_a(s, width, row0, col0);
        const FragA at = load_a_trans(s, width, row0, col0);
        const std::array<FragB, 2> bnk = load_b_nk(s, width, row0, col0);
        const std::array<FragB, 2> bkn = load_b_kn(s, width, row0, col0);
        for (int lane = 0; lane < kLanes; ++lane) {
          for (int i = 0; i < 8; ++i) {
            const Coord x = mma_a(lane, i);
            ASSERT_EQ(a[lane][i], m.at(row0 + x.row, col0 + x.col));   // A = stored
            ASSERT_EQ(at[lane][i], m.at(row0 + x.col, col0 + x.row));  // A = stored^T
          }
          for (int t = 0; t < 2; ++t)
            for (int i = 0; i < 4; ++i) {
              const Coord x = mma_b(lane, i);  // (k, n) of tile t
              ASSERT_EQ(bnk[t][lane][i], m.at(row0 + 8 * t + x.col, col0 + x.row));
              ASSERT_EQ(bkn[t][lane][i], m.at(row0 + x.row, col0 + 8 * t + x.col));
            }
        }
      }
  }
}

// --- The kernels' loops, one warp at a time -------------------------------------------------

// Forward, one key tile: S = Q K^T with Q fragments loaded once, K by the (kc, np) loop; P = S
// (integers, exact in bf16) reused from the accumulators; O = P V with V transposed on load.
template <int D>
void forward_tile() {
  using Tiles = fa2::ForwardTiles<D>;
  constexpr int kBr = Tiles::kQueryRows, kBc = Tiles::kKeyRows, d = D;
  const Matrix q = random_ints(kBr, d, -1, 1, 11), k = random_ints(kBc, d, -1, 1, 12);
  const Matrix v = random_ints(kBc, d, -2, 2, 13);
  const Smem qs = store_swizzled(q), ks = store_swizzled(k), vs = store_swizzled(v);
  const Matrix s_want = product(q, transpose(k));
  const Matrix o_want = product(s_want, v);
  for (int warp = 0; warp < Tiles::kWarps; ++warp) {
    std::vector<FragA> qf;
    for (int kc = 0; kc < d / 16; ++kc) qf.push_back(load_a(qs, d, 16 * warp, 16 * kc));
    std::vector<FragC> s(kBc / 8, zero_c());
    for (int kc = 0; kc < d / 16; ++kc)
      for (int np = 0; np < kBc / 16; ++np) {
        const std::array<FragB, 2> kb = load_b_nk(ks, d, 16 * np, 16 * kc);
        s[2 * np] = mma(qf[kc], kb[0], s[2 * np]);
        s[2 * np + 1] = mma(qf[kc], kb[1], s[2 * np + 1]);
      }
    expect_accumulators(s, s_want, 16 * warp, "S");
    std::vector<FragC> o(d / 8, zero_c());
    for (int kc = 0; kc < kBc / 16; ++kc) {
      const FragA pa = a_from_accumulators(s, kc);
      for (int dp = 0; dp < d / 16; ++dp) {
        const std::array<FragB, 2> vb = load_b_kn(vs, d, 16 * kc, 16 * dp);
        o[2 * dp] = mma(pa, vb[0], o[2 * dp]);
        o[2 * dp + 1] = mma(pa, vb[1], o[2 * dp + 1]);
      }
    }
    expect_accumulators(o, o_want, 16 * warp, "O");
  }
}

TEST(FlashFragments, ForwardWarpLoopsComputeSAndPV) {
  forward_tile<64>();
  forward_tile<128>();
}

// Backward, one (key block, query tile) pair: per warp S^T = K_w Q^T and dP^T = V_w dO^T, dV =
// P^T dO and dK = dS^T Q from the accumulators (P^T = S^T and dS^T = dP^T here: integers), dS^T
// stored as the kernel stores it; then, per warp, its block of dQ = dS K from shared memory.
template <int D>
void backward_tile() {
  using Tiles = fa2::BackwardTiles<D>;
  constexpr int kBr = Tiles::kQueryRows, kBc = Tiles::kKeyRows;
  const Matrix q = random_ints(kBr, D, -1, 1, 21), dout = random_ints(kBr, D, -1, 1, 22);
  const Matrix k = random_ints(kBc, D, -1, 1, 23), v = random_ints(kBc, D, -1, 1, 24);
  const Smem qs = store_swizzled(q), dos = store_swizzled(dout);
  const Smem ks = store_swizzled(k), vs = store_swizzled(v);
  const Matrix st_want = product(k, transpose(q));      // S^T  [key][query]
  const Matrix dpt_want = product(v, transpose(dout));  // dP^T [key][query]
  const Matrix dv_want = product(st_want, dout), dk_want = product(dpt_want, q);
  const Matrix dq_want = product(transpose(dpt_want), k);
  Smem ds_t(static_cast<std::size_t>(kBc) * kBr, 0.0);
  for (int warp = 0; warp < Tiles::kWarps; ++warp) {
    std::vector<FragC> st(kBr / 8, zero_c()), dpt(kBr / 8, zero_c());
    for (int kc = 0; kc < D / 16; ++kc) {
      const FragA ka = load_a(ks, D, 16 * warp, 16 * kc), va = load_a(vs, D, 16 * warp, 16 * kc);
      for (int np = 0; np < kBr / 16; ++np) {
        const std::array<FragB, 2> qb = load_b_nk(qs, D, 16 * np, 16 * kc);
        const std::array<FragB, 2> ob = load_b_nk(dos, D, 16 * np, 16 * kc);
        for (int t = 0; t < 2; ++t) {
          st[2 * np + t] = mma(ka, qb[t], st[2 * np + t]);
          dpt[2 * np + t] = mma(va, ob[t], dpt[2 * np + t]);
        }
      }
    }
    expect_accumulators(st, st_want, 16 * warp, "S^T");
    expect_accumulators(dpt, dpt_want, 16 * warp, "dP^T");
    std::vector<FragC> dv(D / 8, zero_c()), dk(D / 8, zero_c());
    for (int kc = 0; kc < kBr / 16; ++kc) {
      const FragA pa = a_from_accumulators(st, kc), da = a_from_accumulators(dpt, kc);
      for (int lane = 0; lane < kLanes; ++lane)
        for (int r = 0; r < 4; ++r) {  // the kernel's dS^T store, one bf16 pair per register
          const int tile = 2 * kc + acc_tile_of_a(r), e = acc_elem_of_a(r);
          const Coord c = mma_c(lane, e);
          const int at = swizzle(16 * warp + c.row, 8 * tile + c.col, kBr);
          ds_t[static_cast<std::size_t>(at)] = da[lane][2 * r];
          ds_t[static_cast<std::size_t>(at) + 1] = da[lane][2 * r + 1];
        }
      for (int dp = 0; dp < D / 16; ++dp) {
        const std::array<FragB, 2> ob = load_b_kn(dos, D, 16 * kc, 16 * dp);
        const std::array<FragB, 2> qb = load_b_kn(qs, D, 16 * kc, 16 * dp);
        for (int t = 0; t < 2; ++t) {
          dv[2 * dp + t] = mma(pa, ob[t], dv[2 * dp + t]);
          dk[2 * dp + t] = mma(da, qb[t], dk[2 * dp + t]);
        }
      }
    }
    expect_accumulators(dv, dv_want, 16 * warp, "dV");
    expect_accumulators(dk, dk_want, 16 * warp, "dK");
  }
  for (int warp = 0; warp < Tiles::kWarps; ++warp) {
    const int dq_rows = warp % Tiles::kDqRowBlocks * 16;
    const int dq_cols = warp / Tiles::kDqRowBlocks * Tiles::kDqCols;
    std::vector<FragC> dq(Tiles::kDqCols / 8, zero_c());
    for (int kc = 0; kc < kBc / 16; ++kc) {
      const FragA sa = load_a_trans(ds_t, kBr, 16 * kc, dq_rows);
      for (int dp = 0; dp < Tiles::kDqCols / 16; ++dp) {
        const std::array<FragB, 2> kb = load_b_kn(ks, D, 16 * kc, dq_cols + 16 * dp);
        for (int t = 0; t < 2; ++t) dq[2 * dp + t] = mma(sa, kb[t], dq[2 * dp + t]);
      }
    }
    Matrix want(16, Tiles::kDqCols);
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < Tiles::kDqCols; ++c) want.at(r, c) = dq_want.at(dq_rows + r, dq_cols + c);
    expect_accumulators(dq, want, 0, "dQ");
  }
}

TEST(FlashFragments, BackwardWarpLoopsComputeAllFiveProducts) {
  backward_tile<64>();
  backward_tile<128>();
}

// --- Tiles and dispatch -------------------------------------------------------------------------

// H100 / H200: 227 KiB of shared memory per block (opt-in), 228 KiB per SM of which each resident
// block also takes 1 KiB for the system; 64 K registers per SM.
constexpr std::size_t kHopperBlock = 232448;
constexpr std::size_t kHopperSm = 233472;
constexpr fa2::DeviceLimits kH100{9, kHopperBlock};

template <int D>
void check_forward_tiles() {
  using T = fa2::ForwardTiles<D>;
  EXPECT_EQ(T::kQueryRows, 16 * T::kWarps);  // a warp per m16 block of queries
  EXPECT_EQ(T::kSharedBytes, std::size_t{2} * 2 * T::kKeyRows * D * 2);  // 2 stages of K and V
  EXPECT_LE(std::size_t{T::kQueryRows} * D * 2, T::kSharedBytes - T::kQStagingOffset);
  EXPECT_LE(T::kMinBlocks * (T::kSharedBytes + 1024), kHopperSm) << "the CTAs it asks for fit";
  // The registers it caps ptxas at still hold Q (D/4), O (D/2) and S (kKeyRows/2) per thread.
  EXPECT_GE(65536 / (T::kThreads * T::kMinBlocks), D / 4 + D / 2 + T::kKeyRows / 2);
}

template <int D>
void check_backward_tiles() {
  using T = fa2::BackwardTiles<D>;
  EXPECT_EQ(T::kKeyRows, 16 * T::kWarps);                        // a warp per m16 block of keys
  const std::size_t want = 2 * std::size_t{T::kKeyRows} * D * 2  // K, V
                           + 2 * (2 * std::size_t{T::kQueryRows} * D * 2    // Q, dO
                                  + 2 * std::size_t{T::kQueryRows} * 4)     // lse, delta
                           + std::size_t{T::kKeyRows} * T::kQueryRows * 2;  // dS^T
  EXPECT_EQ(T::kSharedBytes, want);
  EXPECT_LE(T::kSharedBytes, kHopperBlock);
  for (std::size_t offset : {T::kV, T::kStage0, T::kStage0 + T::kStageBytes, T::kDsT, T::kStageDo,
                             T::kStageLse, T::kStageDelta})
    EXPECT_EQ(offset % 128, 0u) << "tiles start on 128-byte lines";
  // dQ's warps tile the query tile exactly once.
  EXPECT_EQ(T::kDqRowBlocks * 16, T::kQueryRows);
  EXPECT_EQ(T::kDqColGroups * T::kDqCols, D);
  EXPECT_EQ(T::kDqRowBlocks * T::kDqColGroups, T::kWarps);
}

TEST(FlashFa2Tiles, LayoutsFitAndAddUp) {
  check_forward_tiles<64>();
  check_forward_tiles<128>();
  check_backward_tiles<64>();
  check_backward_tiles<128>();
  EXPECT_EQ(fa2::ForwardTiles<128>::kSharedBytes, 65536u);
  EXPECT_EQ(fa2::BackwardTiles<128>::kSharedBytes, 148480u);
}

TEST(FlashFa2Tiles, DispatchTakesBf16At64And128Only) {
  // Llama-3-8B: 32 heads, 8 kv heads, seq 4096, head_dim 128.
  EXPECT_TRUE(fa2::forward_applies(true, 128, 4096, 32, 0.088f, kH100));
  EXPECT_TRUE(fa2::backward_applies(true, 128, 4096, 8, kH100));
  EXPECT_TRUE(fa2::forward_applies(true, 64, 200, 8, 0.125f, kH100));
  EXPECT_TRUE(fa2::backward_applies(true, 64, 1, 1, kH100));
  // f32, other head dims, non-positive scales, older GPUs: the general kernels.
  EXPECT_FALSE(fa2::forward_applies(false, 128, 4096, 32, 0.088f, kH100));
  EXPECT_FALSE(fa2::backward_applies(false, 128, 4096, 8, kH100));
  for (int d : {6, 24, 32, 80, 96, 256}) {
    EXPECT_FALSE(fa2::forward_applies(true, d, 4096, 32, 0.1f, kH100)) << d;
    EXPECT_FALSE(fa2::backward_applies(true, d, 4096, 8, kH100)) << d;
  }
  EXPECT_FALSE(fa2::forward_applies(true, 128, 4096, 32, 0.0f, kH100));
  EXPECT_FALSE(fa2::forward_applies(true, 128, 4096, 32, 0.088f, {7, kHopperBlock}));
  EXPECT_FALSE(fa2::backward_applies(true, 128, 4096, 8, {7, kHopperBlock}));
  // 100 KiB per block (an sm_86 part): the forward's 64 KiB fits, the backward's 145 KiB not.
  EXPECT_TRUE(fa2::forward_applies(true, 128, 4096, 32, 0.088f, {8, 101376}));
  EXPECT_FALSE(fa2::backward_applies(true, 128, 4096, 8, {8, 101376}));
  EXPECT_TRUE(fa2::backward_applies(true, 64, 4096, 8, {8, 101376}));
  // Grids on gridDim.x alone: more than INT_MAX CTAs go to the general kernels.
  EXPECT_FALSE(fa2::forward_applies(true, 128, std::int64_t{1} << 30, 65535, 0.088f, kH100));
  EXPECT_EQ(fa2::forward_blocks(4096, 32), 64 * 32);
  EXPECT_EQ(fa2::forward_blocks(200, 8), 4 * 8);
  EXPECT_EQ(fa2::backward_blocks(4096, 8), 32 * 8);
  EXPECT_EQ(fa2::backward_blocks(129, 1), 2);
}

}  // namespace
}  // namespace ppbench::cuda::frag
