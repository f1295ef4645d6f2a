// The CPU kernels keep token ids and class targets as values of the run's dtype
// (harness/backends/cpu/model_builder.h): a float holds every integer only up to 2^24, so a
// vocabulary or class count past 2^24 + 1 is refused before anything is allocated, and at the
// limit the largest target still lands on its own column.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "harness/backends/cpu/model_builder.h"
#include "workloads/amoebanet.h"
#include "workloads/cpu/cross_entropy.h"
#include "workloads/index_range.h"
#include "workloads/mlp.h"
#include "workloads/transformer.h"

namespace ppbench {
namespace {

constexpr std::int64_t kF32Limit = (std::int64_t{1} << 24) + 1;
constexpr std::int64_t kF64Limit = std::int64_t{1} << 31;

WorkloadSpec mlp(std::int64_t classes, DType dtype = DType::kF32) {
  MlpConfig c;
  c.layers = 2;
  c.width = 2;
  c.classes = classes;
  return build_mlp(c, 4, dtype);
}

WorkloadSpec transformer(std::int64_t vocab, DType dtype = DType::kF32) {
  TransformerConfig c = transformer_preset("tiny-llama");
  c.vocab = vocab;
  return build_transformer(c, 1, dtype);
}

// The refusal's one line, or "" where there is none.
template <typename T>
std::string refusal(const WorkloadSpec& spec) {
  try {
    cpu::require_exact_indices<T>(spec);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ExactIndices, LimitsAreTheIntegersEachTypeHoldsExactly) {
  EXPECT_EQ(cpu::largest_index_count<float>(), kF32Limit);
  // Ids 0 .. limit - 1 are all exact, and the next one past the limit is not.
  const auto last = static_cast<float>(kF32Limit - 1);
  EXPECT_EQ(static_cast<std::int64_t>(last), kF32Limit - 1);
  EXPECT_NE(static_cast<std::int64_t>(static_cast<float>(kF32Limit)), kF32Limit);
  // double holds far more; the int32 targets bound it.
  EXPECT_EQ(cpu::largest_index_count<double>(), kF64Limit);
  // What is compared with it: the vocabulary or the class count.
  EXPECT_EQ(index_range(mlp(7)).count, 7);
  EXPECT_EQ(index_range(mlp(7)).flag, "--classes");
  EXPECT_EQ(index_range(transformer(300)).count, 300);
  EXPECT_EQ(index_range(transformer(300)).flag, "--vocab");
}

TEST(ExactIndices, MlpClassesAtAndPastTheF32Limit) {
  EXPECT_EQ(refusal<float>(mlp(kF32Limit)), "");
  const std::string line = refusal<float>(mlp(kF32Limit + 1));
  for (const std::string needle : {"--classes 16777218", "--dtype f32", "class targets",
                                   "16777216 (2^24)", "at most 16777217", "use --dtype f64"})
    EXPECT_NE(line.find(needle), std::string::npos) << needle << " not in: " << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  // The reviewer's case, and what the message suggests for it.
  EXPECT_NE(refusal<float>(mlp(30000001)), "");
  EXPECT_EQ(refusal<double>(mlp(30000001, DType::kF64)), "");
}

TEST(ExactIndices, TransformerVocabAtAndPastTheF32Limit) {
  EXPECT_EQ(refusal<float>(transformer(kF32Limit)), "");
  const std::string line = refusal<float>(transformer(kF32Limit + 1));
  for (const std::string needle :
       {"--vocab 16777218", "--dtype f32", "token ids", "at most 16777217", "use --dtype f64"})
    EXPECT_NE(line.find(needle), std::string::npos) << needle << " not in: " << line;
  EXPECT_EQ(refusal<double>(transformer(30000001, DType::kF64)), "");
}

TEST(ExactIndices, AmoebanetClassesPastTheF32Limit) {
  AmoebaNetConfig c;
  c.layers = 3;
  c.filters = 8;
  c.image_size = 64;
  c.classes = kF32Limit;
  EXPECT_EQ(refusal<float>(build_amoebanet(c, 2, DType::kF32)), "");
  c.classes = kF32Limit + 1;
  EXPECT_NE(refusal<float>(build_amoebanet(c, 2, DType::kF32)).find("--classes 16777218"),
            std::string::npos);
}

TEST(ExactIndices, DoubleIsBoundByTheInt32Targets) {
  EXPECT_EQ(refusal<double>(mlp(kF64Limit, DType::kF64)), "");
  const std::string line = refusal<double>(mlp(kF64Limit + 1, DType::kF64));
  EXPECT_NE(line.find("--classes 2147483649"), std::string::npos) << line;
  EXPECT_NE(line.find("int32"), std::string::npos) << line;
  EXPECT_NE(line.find("at most 2147483648"), std::string::npos) << line;
  // Past what f64 holds too, f32's message does not suggest it.
  const std::string f32 = refusal<float>(mlp(kF64Limit + 1));
  EXPECT_NE(f32.find("--dtype f32"), std::string::npos) << f32;
  EXPECT_EQ(f32.find("use --dtype f64"), std::string::npos) << f32;
}

TEST(ExactIndices, TheModelsEntryPointsRefuseFirst) {
  const WorkloadSpec over = mlp(kF32Limit + 1);
  EXPECT_THROW(cpu::make_microbatch<float>(over, 1, 0), UsageError);
  EXPECT_THROW(cpu::make_pipeline_layer<float>(over, 0, 1), UsageError);
  EXPECT_THROW(cpu::make_pipeline_layer<float>(over, 1, 1), UsageError);
  const WorkloadSpec tokens = transformer(kF32Limit + 1);
  EXPECT_THROW(cpu::make_microbatch<float>(tokens, 1, 0), UsageError);
  EXPECT_THROW(cpu::make_pipeline_layer<float>(tokens, 0, 1), UsageError);
  // The same spec in f64 (and f32 at the limit) builds.
  EXPECT_NO_THROW(cpu::make_microbatch<double>(mlp(kF32Limit + 1, DType::kF64), 1, 0));
  EXPECT_NO_THROW(cpu::make_microbatch<float>(mlp(kF32Limit), 1, 0));
}

// At the limit the largest class, 2^24, is kept exactly as a float and its gradient lands on its
// own column; one past the limit (2^24 + 1 rounds to 2^24) the kernel refuses the target rather
// than move its gradient to a neighbour.
TEST(ExactIndices, CrossEntropyKeepsTheLargestTargetAtTheLimit) {
  constexpr std::int64_t top = kF32Limit - 1;
  cpu::Tensor<float> logits({1, kF32Limit});
  cpu::SoftmaxCrossEntropy<float> xent;
  cpu::Saved<float> saved;
  xent.forward(logits, {static_cast<std::int32_t>(top)}, saved);
  const cpu::Tensor<float> dz = xent.backward_input(saved);
  const float p = 1.0F / static_cast<float>(kF32Limit);  // softmax of equal logits
  EXPECT_FLOAT_EQ(dz.data[static_cast<std::size_t>(top)], p - 1.0F);
  EXPECT_FLOAT_EQ(dz.data[static_cast<std::size_t>(top - 1)], p);

  cpu::Tensor<float> wider({1, kF32Limit + 2});
  EXPECT_THROW(xent.forward(wider, {static_cast<std::int32_t>(kF32Limit)}, saved),
               std::invalid_argument);
}

}  // namespace
}  // namespace ppbench
