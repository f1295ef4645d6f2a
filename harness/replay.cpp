#include "harness/replay.h"

#include <array>

namespace ppbench {

namespace {

struct Mean {
  double sum = 0;
  long count = 0;
  void add(double v) { sum += v, ++count; }
  bool any() const { return count > 0; }
  double value() const { return count ? sum / static_cast<double>(count) : 0; }
};

}  // namespace

CostModel costs_from_trace(const Trace& trace, const Placement& placement) {
  // Per stage: F, B, I, W, and overlapped pairs keyed by their forward stage.
  std::vector<std::array<Mean, 5>> m(placement.stages());
  for (const auto& e : trace.compute) {
    const double d = e.end - e.start;
    if (e.action.paired)
      m[e.action.task.stage][4].add(d);
    else
      m[e.action.task.stage][static_cast<int>(e.action.task.op)].add(d);
  }
  Mean comm;
  for (const auto& c : trace.comm) comm.add(c.end - c.start);

  std::vector<StageCost> stages(placement.stages());
  for (int s = 0; s < placement.stages(); ++s) {
    auto& [f, b, i, w, fb] = m[s];
    StageCost& c = stages[s];
    c.f = f.value();
    c.i = i.any() ? i.value() : b.value() / 2;
    c.w = w.any() ? w.value() : b.value() / 2;
    c.b = b.any() ? b.value() : c.i + c.w;
    c.fb = fb.any() ? fb.value() : c.f + c.b;
    c.comm = comm.value();
  }
  return CostModel(std::move(stages));
}

}  // namespace ppbench
