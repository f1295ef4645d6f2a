#include "workloads/cpu/concat.h"

#include "workloads/cpu/eigen_util.h"

namespace ppbench::cpu {

template <typename T>
Tensor<T> concat_channels(const std::vector<const Tensor<T>*>& xs) {
  check(!xs.empty(), "concat: nothing to concatenate");
  std::vector<std::int64_t> shape = xs[0]->shape;
  std::int64_t width = 0;
  for (const Tensor<T>* x : xs) {
    check(x->shape.size() == shape.size() && x->rows() == xs[0]->rows(),
          "concat: shapes differ outside the last dimension");
    width += x->cols();
  }
  shape.back() = width;
  Tensor<T> y(shape);
  std::int64_t at = 0;
  for (const Tensor<T>* x : xs) {
    mat(y).middleCols(at, x->cols()) = mat(*x);
    at += x->cols();
  }
  return y;
}

template <typename T>
std::vector<Tensor<T>> split_channels(const Tensor<T>& dy,
                                      const std::vector<std::int64_t>& widths) {
  std::vector<Tensor<T>> out;
  std::int64_t at = 0;
  for (std::int64_t w : widths) {
    std::vector<std::int64_t> shape = dy.shape;
    shape.back() = w;
    Tensor<T> piece(shape);
    check(at + w <= dy.cols(), "split: widths exceed the tensor");
    mat(piece) = mat(dy).middleCols(at, w);
    out.push_back(std::move(piece));
    at += w;
  }
  check(at == dy.cols(), "split: widths do not cover the tensor");
  return out;
}

template <typename T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b) {
  Tensor<T> y = a;
  add_into(y, b);
  return y;
}

template <typename T>
void add_into(Tensor<T>& a, const Tensor<T>& b) {
  check(a.shape == b.shape, "add: shapes differ");
  vec(a) += vec(b);
}

template Tensor<float> concat_channels(const std::vector<const Tensor<float>*>&);
template Tensor<double> concat_channels(const std::vector<const Tensor<double>*>&);
template std::vector<Tensor<float>> split_channels(const Tensor<float>&,
                                                   const std::vector<std::int64_t>&);
template std::vector<Tensor<double>> split_channels(const Tensor<double>&,
                                                    const std::vector<std::int64_t>&);
template Tensor<float> add(const Tensor<float>&, const Tensor<float>&);
template Tensor<double> add(const Tensor<double>&, const Tensor<double>&);
template void add_into(Tensor<float>&, const Tensor<float>&);
template void add_into(Tensor<double>&, const Tensor<double>&);

}  // namespace ppbench::cpu
