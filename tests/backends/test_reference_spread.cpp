// How the GPU tests judge a low-precision result against the float64 reference
// (tests/common/reference_spread.h), and the perturbed reference they measure it with
// (single_device_step's ReferencePerturbation): both run without a GPU.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "harness/backends/cpu/cpu_run.h"
#include "tests/common/reference_spread.h"
#include "workloads/mlp.h"
#include "workloads/transformer.h"

namespace ppbench::precision {
namespace {

std::vector<double> scaled(const std::vector<double>& v, double f) {
  std::vector<double> out = v;
  for (double& x : out) x *= f;
  return out;
}

TEST(ReferenceSpread, ErrorIsNormWiseAgainstTheReference) {
  const std::vector<double> ref{3, -4};  // norm 5
  const ReferenceSpread s({ref}, {}, 0.02);
  EXPECT_EQ(s.error(0, ref), 0.0);
  EXPECT_NEAR(s.error(0, std::vector<double>{3, -3.9}), 0.1 / 5, 1e-12);
  EXPECT_TRUE(s.judge(0, scaled(ref, 1.01)).ok());
  EXPECT_FALSE(s.judge(0, scaled(ref, 1.5)).ok());
}

TEST(ReferenceSpread, NanAndWrongSizesNeverPass) {
  const ReferenceSpread s({{1, 2, 3}}, {}, 0.5);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(s.judge(0, std::vector<double>{1, nan, 3}).ok());
  EXPECT_FALSE(s.judge(0, std::vector<double>{1, 2}).ok());
}

// A tensor that cancels to zero is judged against a tenth of the set's largest typical element,
// not against its own (meaningless) size.
TEST(ReferenceSpread, NearZeroTensorsAreJudgedAgainstTheSetsScale) {
  const std::vector<double> big(4, 10.0), zero(4, 1e-15);  // big's rms 10: floor 1 per element
  const ReferenceSpread s({big, zero}, {}, 0.02);
  EXPECT_TRUE(s.judge(1, std::vector<double>(4, 0.01)).ok());   // error 0.01
  EXPECT_FALSE(s.judge(1, std::vector<double>(4, 0.05)).ok());  // error 0.05
  // Alone, the same tensor has nothing to be judged against but itself.
  const ReferenceSpread alone({zero}, {}, 0.02);
  EXPECT_FALSE(alone.judge(0, std::vector<double>(4, 0.01)).ok());
}

// However unstable the reference, zeros (error 1) or a result off by more than half never pass:
// they say that nothing was computed, not that a rounding moved the reference.
TEST(ReferenceSpread, TheSpreadWidensTheToleranceOnlyToTheCeiling) {
  const std::vector<double> ref{1, 2, 3, 4};
  const ReferenceSpread s({ref}, {{scaled(ref, 1.3)}}, 0.02);  // moved by 30 %: 4 x = 1.2
  EXPECT_NEAR(s.judge(0, ref).spread, 0.3, 1e-12);
  EXPECT_EQ(s.judge(0, ref).tolerance, kReferenceSpreadCeiling);
  EXPECT_TRUE(s.judge(0, scaled(ref, 1.45)).ok());
  EXPECT_FALSE(s.judge(0, scaled(ref, 1.6)).ok());
  EXPECT_FALSE(s.judge(0, std::vector<double>(4, 0.0)).ok());
  // A base tolerance the caller chose above the ceiling stays as chosen.
  EXPECT_EQ(ReferenceSpread({ref}, {{scaled(ref, 1.3)}}, 0.8).judge(0, ref).tolerance, 0.8);
}

TEST(ReferenceSpread, ToleranceWidensWithTheReferencesOwnSpread) {
  const std::vector<double> ref{1, 2, 3, 4};
  // The perturbed reference moved by 5 %: a result 15 % off is within 4 x that, 25 % is not.
  const ReferenceSpread s({ref}, {{scaled(ref, 1.05)}}, 0.02);
  EXPECT_NEAR(s.judge(0, ref).spread, 0.05, 1e-12);
  EXPECT_NEAR(s.judge(0, ref).tolerance, kSpreadFactor * 0.05, 1e-12);
  EXPECT_TRUE(s.judge(0, scaled(ref, 1.15)).ok());
  EXPECT_FALSE(s.judge(0, scaled(ref, 1.25)).ok());
  // A stable reference keeps the base tolerance.
  const ReferenceSpread stable({ref}, {{scaled(ref, 1 + 1e-6)}}, 0.02);
  EXPECT_DOUBLE_EQ(stable.judge(0, ref).tolerance, 0.02);
}

TEST(ReferenceSpread, ABrokenPerturbedRunDoesNotWidenTheTolerance) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const ReferenceSpread s({{1, 2}}, {{{1, nan}}}, 0.02);
  EXPECT_DOUBLE_EQ(s.judge(0, std::vector<double>{1, 2}).tolerance, 0.02);
}

TEST(ReferenceSpread, UnitRoundoffOfEachPrecision) {
  EXPECT_EQ(unit_roundoff(DType::kBF16), std::ldexp(1.0, -8));
  EXPECT_EQ(unit_roundoff(DType::kF32), std::ldexp(1.0, -24));
  EXPECT_EQ(unit_roundoff(DType::kF64), std::ldexp(1.0, -53));
}

WorkloadSpec small_mlp() {
  MlpConfig c;
  c.layers = 4, c.width = 16, c.input_dim = 8, c.classes = 5;
  return build_mlp(c, 3, DType::kF32);
}

double max_rel_difference(const StepValues& a, const StepValues& b) {
  double worst = 0;
  for (std::size_t t = 0; t < b.tensors.size(); ++t) {
    double d = 0, s = 0;
    for (std::size_t i = 0; i < b.tensors[t].values.size(); ++i) {
      d = std::max(d, std::abs(a.tensors[t].values[i] - b.tensors[t].values[i]));
      s = std::max(s, std::abs(b.tensors[t].values[i]));
    }
    worst = std::max(worst, d / s);
  }
  return worst;
}

TEST(ReferencePerturbation, NoneLeavesTheStepAsIs) {
  const WorkloadSpec spec = small_mlp();
  const StepValues plain = single_device_step(spec, 3, 7);
  const StepValues zero = single_device_step(spec, 3, 7, 1, {}, {.relative = 0, .seed = 99});
  EXPECT_EQ(plain.loss, zero.loss);
  EXPECT_EQ(max_rel_difference(zero, plain), 0.0);
}

// A perturbation of relative size u moves a smooth step by about u (times the model's modest
// amplification), is the same for the same seed and differs between seeds.
TEST(ReferencePerturbation, MovesTheStepByAboutItsSizeAndIsRepeatable) {
  const WorkloadSpec spec = small_mlp();
  const StepValues plain = single_device_step(spec, 3, 7);
  const ReferencePerturbation p{.relative = 1e-9, .seed = 5};
  const StepValues a = single_device_step(spec, 3, 7, 1, {}, p);
  const StepValues again = single_device_step(spec, 3, 7, 1, {}, p);
  const StepValues other = single_device_step(spec, 3, 7, 1, {}, {.relative = 1e-9, .seed = 6});
  const double moved = max_rel_difference(a, plain);
  EXPECT_GT(moved, 1e-12);
  EXPECT_LT(moved, 1e-6);
  EXPECT_EQ(max_rel_difference(again, a), 0.0);
  EXPECT_GT(max_rel_difference(other, a), 0.0);
}

// Token ids are not values: a transformer's perturbed step differs only through its parameters,
// and still runs (an id moved off its integer would be a different token or out of range).
TEST(ReferencePerturbation, LeavesTokenIdsAlone) {
  TransformerConfig c = transformer_preset("tiny-llama");
  c.layers = 2, c.hidden = 16, c.ffn = 24, c.heads = 4, c.kv_heads = 2, c.vocab = 19, c.seq = 5;
  const WorkloadSpec spec = build_transformer(c, 2, DType::kF32);
  const StepValues plain = single_device_step(spec, 2, 3);
  const StepValues p = single_device_step(spec, 2, 3, 1, {}, {.relative = 1e-6, .seed = 1});
  EXPECT_TRUE(std::isfinite(p.loss));
  EXPECT_NEAR(p.loss, plain.loss, 1e-4 * std::abs(plain.loss));
  EXPECT_GT(max_rel_difference(p, plain), 0.0);
}

}  // namespace
}  // namespace ppbench::precision
