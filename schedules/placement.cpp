#include "schedules/placement.h"

#include <utility>

namespace ppbench {

int Placement::twin_rank(int stage) const {
  for (int st = 0; st < stages(); ++st)
    if (st != stage && part(st) == part(stage) && stage_rank[st] != stage_rank[stage])
      return stage_rank[st];
  return -1;
}

namespace {

void add_chain(Placement& p, int length, int microbatches) {
  int begin = p.stages();
  int chain = p.chains();
  p.chain_begin.push_back(begin);
  p.chain_end.push_back(begin + length);
  p.chain_microbatches.push_back(microbatches);
  p.stage_rank.resize(begin + length, -1);
  p.stage_chain.resize(begin + length, chain);
}

}  // namespace

Placement Placement::linear(int ranks, int microbatches) {
  return interleaved(ranks, 1, microbatches);
}

Placement Placement::interleaved(int ranks, int chunks, int microbatches) {
  Placement p;
  p.ranks = ranks;
  add_chain(p, ranks * chunks, microbatches);
  for (int s = 0; s < p.stages(); ++s) p.stage_rank[s] = s % ranks;
  return p;
}

Placement Placement::v_shape(int ranks, int microbatches) {
  Placement p;
  p.ranks = ranks;
  add_chain(p, 2 * ranks, microbatches);
  for (int r = 0; r < ranks; ++r) {
    p.stage_rank[r] = r;
    p.stage_rank[2 * ranks - 1 - r] = r;
  }
  return p;
}

Placement Placement::bidirectional(int ranks, int microbatches_down, int microbatches_up) {
  Placement p;
  p.ranks = ranks;
  add_chain(p, ranks, microbatches_down);
  add_chain(p, ranks, microbatches_up);
  for (int s = 0; s < ranks; ++s) p.stage_rank[s] = s;
  for (int j = 0; j < ranks; ++j) p.stage_rank[ranks + j] = ranks - 1 - j;
  return p;
}

Placement Placement::single_chain(int ranks, std::vector<int> stage_rank, int microbatches) {
  Placement p;
  p.ranks = ranks;
  add_chain(p, static_cast<int>(stage_rank.size()), microbatches);
  p.stage_rank = std::move(stage_rank);
  return p;
}

}  // namespace ppbench
