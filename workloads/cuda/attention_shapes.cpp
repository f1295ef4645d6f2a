#include <string>

#include "workloads/cuda/attention_core.h"
#include "workloads/cuda/check.h"
#include "workloads/cuda/dtype.h"

namespace ppbench::cuda {
namespace {

void check_heads(const DTensor& q, const DTensor& k, const DTensor& v) {
  require(q.shape().size() == 4 && k.shape() == v.shape() && k.shape().size() == 4 &&
              q.dim(0) == k.dim(0) && q.dim(2) == k.dim(2) && q.dim(3) == k.dim(3) &&
              k.dim(1) > 0 && q.dim(1) % k.dim(1) == 0,
          "fused attention: expects q [B, H, S, D], k and v [B, Hkv, S, D] with Hkv dividing H, "
          "got q " +
              shape_text(q.shape()) + ", k " + shape_text(k.shape()));
  require(k.dtype() == q.dtype() && v.dtype() == q.dtype(),
          "fused attention: q, k and v must share a dtype, got " + dtype_name(q.dtype()) + ", " +
              dtype_name(k.dtype()) + " and " + dtype_name(v.dtype()));
  require(q.dim(2) <= (std::int64_t{1} << 30) && q.dim(0) * q.dim(1) <= 65535,
          "fused attention: batch x heads must be at most 65535, got " +
              std::to_string(q.dim(0) * q.dim(1)));
}

void check_like(const DTensor& t, const char* name, const Shape& shape, DType dtype) {
  require(t.shape() == shape && t.dtype() == dtype,
          std::string("fused attention: ") + name + " must be " + shape_text(shape) + " " +
              dtype_name(dtype) + ", got " + shape_text(t.shape()) + " " + dtype_name(t.dtype()));
}

Shape rows_of(const DTensor& q) { return {q.dim(0), q.dim(1), q.dim(2)}; }

}  // namespace

void check_flash_forward(const DTensor& q, const DTensor& k, const DTensor& v, const DTensor& o,
                         const DTensor& lse) {
  check_heads(q, k, v);
  check_like(o, "o", q.shape(), q.dtype());
  check_like(lse, "lse", rows_of(q), DType::kF32);
}

void check_flash_backward(const DTensor& q, const DTensor& k, const DTensor& v, const DTensor& d_o,
                          const DTensor& lse, const DTensor& delta, const DTensor& dq,
                          const DTensor& dk, const DTensor& dv) {
  check_heads(q, k, v);
  check_like(d_o, "dO", q.shape(), q.dtype());
  check_like(lse, "lse", rows_of(q), DType::kF32);
  check_like(delta, "delta", rows_of(q), DType::kF32);
  check_like(dq, "dq", q.shape(), q.dtype());
  check_like(dk, "dk", k.shape(), k.dtype());
  check_like(dv, "dv", v.shape(), v.dtype());
}

}  // namespace ppbench::cuda
