#include "workloads/cuda/gemm.h"

#include <memory>
#include <string>
#include <type_traits>

#include "workloads/cuda/check.h"

namespace ppbench::cuda {

namespace {

cudaDataType_t cuda_type(DType t) {
  require(t != DType::kI32, "gemm: integer matrices are not supported");
  return t == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
}

void set_batch(cublasLtMatrixLayout_t l, int count, std::int64_t stride) {
  if (count <= 1) return;
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                sizeof(count)));
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof(stride)));
}

}  // namespace

void gemm(Context& ctx, std::int64_t m, std::int64_t n, std::int64_t k, const void* a, bool trans_a,
          const void* b, bool trans_b, DType ab_type, void* c, DType c_type, float alpha,
          float beta, const void* bias, GemmBatch batch) {
  require(m > 0 && n > 0 && k > 0, "gemm: empty product");
  require(c_type == ab_type || c_type == DType::kF32, "gemm: C must be the input type or f32");
  // cuBLASLt reads the bias at C's type unless told otherwise; the layers' biases are at the
  // inputs' type, so a bias is taken only where the two agree.
  require(bias == nullptr || c_type == ab_type, "gemm: a bias needs C at the input type");
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the column-major call takes
  // B first, with the same transpose flags, and M = n, N = m.
  const cudaDataType_t ab = cuda_type(ab_type), ct = cuda_type(c_type);
  const cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const auto M = static_cast<std::uint64_t>(n), N = static_cast<std::uint64_t>(m),
             K = static_cast<std::uint64_t>(k);
  // Stored (pre-op) column-major shapes: first is [M, K] or [K, M]; second [K, N] or [N, K].
  const std::uint64_t first_rows = trans_b ? K : M, first_cols = trans_b ? M : K;
  const std::uint64_t second_rows = trans_a ? N : K, second_cols = trans_a ? K : N;

  const GemmKey key{m,
                    n,
                    k,
                    trans_a,
                    trans_b,
                    static_cast<std::int64_t>(ab_type),
                    static_cast<std::int64_t>(c_type),
                    bias != nullptr,
                    beta != 0.0f,
                    batch.count,
                    batch.stride_a,
                    batch.stride_b,
                    batch.stride_c,
                    ctx.sm_count_target};
  auto found = ctx.gemm_plans.find(key);
  if (found == ctx.gemm_plans.end()) {
    auto plan = std::make_unique<GemmPlan>();
    GemmPlan& d = *plan;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                                sizeof(op_first)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                                sizeof(op_second)));
    if (ctx.sm_count_target > 0) {
      const std::int32_t sms = ctx.sm_count_target;
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms,
                                                  sizeof(sms)));
    }
    if (bias != nullptr) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    }
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.a, ab, first_rows, first_cols,
                                            static_cast<std::int64_t>(first_rows)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.b, ab, second_rows, second_cols,
                                            static_cast<std::int64_t>(second_rows)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.c, ct, M, N, static_cast<std::int64_t>(M)));
    set_batch(d.a, batch.count, batch.stride_b);
    set_batch(d.b, batch.count, batch.stride_a);
    set_batch(d.c, batch.count, batch.stride_c);

    // The preference lives only for the query; the plan keeps what it chose.
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                          decltype(&cublasLtMatmulPreferenceDestroy)>
        pref_owner(pref, &cublasLtMatmulPreferenceDestroy);
    CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &ctx.workspace_bytes, sizeof(ctx.workspace_bytes)));
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.lt, d.op, d.a, d.b, d.c, d.c, pref, 1, &result,
                                                &returned));
    if (returned == 0) {
      throw CudaError("cuBLASLt has no algorithm for gemm m=" + std::to_string(m) +
                      " n=" + std::to_string(n) + " k=" + std::to_string(k) + " (" +
                      dtype_name(ab_type) + " into " + dtype_name(c_type) + ", batch " +
                      std::to_string(batch.count) + ")");
    }
    d.algo = result.algo;
    found = ctx.gemm_plans.emplace(key, std::move(plan)).first;
  }
  const GemmPlan& d = *found->second;
  if (bias != nullptr) {
    // The one attribute that differs between calls of a shape; cuBLASLt reads it at launch.
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof(bias)));
  }
  CUBLAS_CHECK(cublasLtMatmul(ctx.lt, d.op, &alpha, b, d.a, a, d.b, &beta, c, d.c, c, d.c, &d.algo,
                              ctx.workspace, ctx.workspace_bytes, ctx.stream));
}

}  // namespace ppbench::cuda
