#include "workloads/cpu/rmsnorm.h"

namespace ppbench::cpu {

template <typename T>
RMSNorm<T>::RMSNorm(std::int64_t features, double eps)
    : RowNorm<T>("rmsnorm", features, eps, /*centered=*/false) {}

template class RMSNorm<float>;
template class RMSNorm<double>;

}  // namespace ppbench::cpu
