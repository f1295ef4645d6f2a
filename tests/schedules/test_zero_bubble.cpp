#include <gtest/gtest.h>
#include <cstdio>
#include "harness/cost_model.h"
#include "harness/metrics.h"
#include "harness/simulator.h"
#include "schedules/registry.h"
#include "schedules/validate.h"
#include "schedules/error.h"
namespace ppbench {
TEST(ZbExplore, Print) {
  const char* env = std::getenv("ZBX");
  if (!env) GTEST_SKIP();
  std::string name; int d, n; double f, i, w;
  char buf[64];
  std::sscanf(env, "%63[^,],%d,%d,%lf,%lf,%lf", buf, &d, &n, &f, &i, &w);
  name = buf;
  Schedule s = generate({name, d, n, 0, 0});
  if (std::getenv("ZBX_PRINT")) std::printf("%s", to_text(s).c_str());
  validate(s);
  StageCost c; c.f = f; c.i = i; c.w = w; c.b = i + w; c.fb = f + i + w; c.comm = 0;
  Metrics m = compute_metrics(simulate(s, CostModel::uniform(s.stages(), c)), s.placement);
  std::printf("makespan %g bf %g zb %g\n", m.makespan, m.bubble_fraction, m.zb_bubble_rate);
  for (auto& r : m.ranks) std::printf(" r%d busy %g idle %g span_idle %g first %g last %g peak %d\n", r.rank, r.busy, r.idle, r.span_idle, r.first_start, r.last_end, r.peak_activations);
}
}
namespace ppbench {
TEST(ZbExplore, Sweep) {
  const char* env = std::getenv("ZBS");
  if (!env) GTEST_SKIP();
  std::string name = env;
  const double vals[] = {0.5, 1, 1.5, 2, 3};
  for (int d : {1, 2, 3, 4, 5, 8})
    for (int n = 1; n <= 4 * d + 3; ++n) {
      Schedule s;
      try { s = generate({name, d, n, 0, 0}); } catch (const UsageError&) { continue; }
      validate(s);
      for (double f : vals) for (double i : vals) for (double w : vals) {
        StageCost c; c.f = f; c.i = i; c.w = w; c.b = i + w; c.fb = f + i + w; c.comm = 0;
        Metrics m = compute_metrics(simulate(s, CostModel::uniform(s.stages(), c)), s.placement);
        double k = name == "zb-h1" ? 1 : 2;
        double want = (d - 1) * (f + i - k * w);
        bool mk = true, sp = true, sp0 = true;
        double maxspan = 0;
        for (auto& r : m.ranks) { if (std::abs(r.idle - want) > 1e-9) mk = false; maxspan = std::max(maxspan, r.span_idle);}
        if (std::abs(maxspan - want) > 1e-9) sp = false;
        if (std::abs(m.ranks[0].span_idle - want) > 1e-9) sp0 = false;
        std::printf("%d %d %g %g %g mk=%d span=%d span0=%d idle0=%g span0=%g zb=%g\n", d, n, f, i, w, mk, sp, sp0, m.ranks[0].idle, m.ranks[0].span_idle, m.zb_bubble_rate);
      }
    }
}
}
