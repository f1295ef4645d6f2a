#include "workloads/cpu/layernorm.h"

namespace ppbench::cpu {

template <typename T>
LayerNorm<T>::LayerNorm(std::int64_t features, double eps)
    : RowNorm<T>("layernorm", features, eps, /*centered=*/true) {}

template class LayerNorm<float>;
template class LayerNorm<double>;

}  // namespace ppbench::cpu
