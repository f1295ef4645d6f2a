#include "schedules/registry.h"

#include <array>

#include "core/error.h"

namespace ppbench {

namespace {

constexpr std::string_view kGroupSizeFamily = "interleaved-1f1b";

constexpr std::array kSchedules = {
    ScheduleInfo{"naive",
                 "naive model parallelism: one micro-batch through the whole pipeline at a time",
                 "GPipe paper's baseline (Huang et al. 2019, Fig. 2b)", "D >= 1, N >= 1",
                 kLayoutOnePerRank, Backward::kWhole, false, generate_naive, closed_form_naive},
    ScheduleInfo{"gpipe", "GPipe: all forwards, then all backwards (Huang et al. 2019)",
                 "GPipe (Huang et al. 2019, Fig. 2c: backwards in reverse micro-batch order)",
                 "D >= 1, N >= 1", kLayoutOnePerRank, Backward::kWhole, false, generate_gpipe,
                 closed_form_gpipe},
    ScheduleInfo{
        "1f1b", "1F1B / PipeDream-Flush / DAPPLE, Megatron's warm-up of D-r-1 forwards",
        "Narayanan et al. 2021; Megatron-LM forward_backward_pipelining_without_interleaving",
        "N >= D", kLayoutOnePerRank, Backward::kWhole, false, generate_1f1b, closed_form_1f1b},
    ScheduleInfo{"interleaved-1f1b",
                 "Megatron's interleaved 1F1B (virtual pipeline), v chunks per rank",
                 "Narayanan et al. 2021; Megatron-LM forward_backward_pipelining_with_interleaving",
                 "--chunks v >= 2 (default 2); --group-size g (default D, or N when N < D), "
                 "1 <= g <= N; g < D or N mod g != 0 only where it cannot deadlock",
                 kLayoutInterleaved, Backward::kWhole, true, generate_interleaved_1f1b,
                 closed_form_interleaved_1f1b},
    ScheduleInfo{"looped-bfs",
                 "Breadth-first looping: every micro-batch through a chunk before the next",
                 "Lamy-Poirier 2022 (arXiv:2211.05953); PyTorch ScheduleLoopedBFS",
                 "--chunks v >= 1 (default 2); any N >= 1", kLayoutInterleaved, Backward::kWhole,
                 true, generate_looped_bfs, closed_form_looped_bfs},
    ScheduleInfo{"interleaved-zb",
                 "Interleaved zero bubble (ZB1P on v chunks per rank), backward split into I and W",
                 "Qi et al., ICLR 2024; PyTorch ScheduleInterleavedZeroBubble",
                 "--chunks v >= 1 (default 2); N a multiple of its rounds max(1, floor(N/D)): "
                 "N < 2D, or N mod D a multiple of floor(N/D) (D=4: N=10 is 2 rounds of 5, "
                 "N=9 is refused)",
                 kLayoutInterleaved, Backward::kSplit, true, generate_interleaved_zb,
                 closed_form_interleaved_zb},
    ScheduleInfo{
        "chimera", "Chimera: two bidirectional pipelines, 2x parameters (Li & Hoefler 2021)",
        "Li & Hoefler, SC'21: direct concatenation of basic units", "D even, N a multiple of D",
        kLayoutTwoDirections, Backward::kWhole, false, generate_chimera, closed_form_chimera},
    ScheduleInfo{"chimera-doubling",
                 "Chimera with forward doubling: two forwards per slot, D micro-batches per "
                 "direction and unit",
                 "Li & Hoefler, SC'21, forward doubling; Shigangli/Chimera "
                 "main_with_runtime_forward_doubling.py",
                 "D even, N a multiple of 2D", kLayoutTwoDirections, Backward::kWhole, false,
                 generate_chimera_doubling, closed_form_chimera_doubling},
    ScheduleInfo{"zb-h1", "Zero Bubble ZB-H1: 1F1B with W deferred, 1F1B's memory (Qi et al. 2024)",
                 "Qi et al., ICLR 2024, handcrafted ZB-H1", "N >= D", kLayoutOnePerRank,
                 Backward::kSplit, false, generate_zb_h1, closed_form_zb_h1},
    ScheduleInfo{"zb-h2",
                 "Zero Bubble ZB-H2: extra warm-up forwards fill the bubble, 2D-1 activations",
                 "Qi et al., ICLR 2024, handcrafted ZB-H2", "N >= 2D-1", kLayoutOnePerRank,
                 Backward::kSplit, false, generate_zb_h2, closed_form_zb_h2},
    ScheduleInfo{"zb-1p",
                 "Zero Bubble ZB-1p: heuristic search for the costs, D activations per rank",
                 "Qi et al., ICLR 2024, automatic scheduling; sail-sg/zero-bubble-pipeline-"
                 "parallelism zerobubble/scheduler/zb.py manual_order",
                 "N >= 1; --memory-limit >= 1 (default D); 0 <= --w-memory <= 1", kLayoutOnePerRank,
                 Backward::kSplit, false, generate_zb_1p, closed_form_zb_auto, true},
    ScheduleInfo{
        "zb-2p", "Zero Bubble ZB-2p: heuristic search for the costs, 2D activations per rank",
        "Qi et al., ICLR 2024, automatic scheduling; sail-sg/zero-bubble-pipeline-"
        "parallelism zerobubble/scheduler/zb.py manual_order",
        "N >= 1; --memory-limit >= 1 (default 2D); 0 <= --w-memory <= 1", kLayoutOnePerRank,
        Backward::kSplit, false, generate_zb_2p, closed_form_zb_auto, true},
    ScheduleInfo{"zb-v", "Zero Bubble ZB-V: V-shaped placement, two stages per rank",
                 "Qi et al. 2024; sail-sg/zero-bubble-pipeline-parallelism get_zb_v_schedule",
                 "any N >= 1 (zero bubble needs N >= 2D-1)", kLayoutV, Backward::kSplit, false,
                 generate_zb_v, closed_form_zb_v},
    ScheduleInfo{"v-half",
                 "V-Half: V-shape building block, about half of 1F1B's activations (Qi et al. "
                 "2024)",
                 "Qi, Wan, Amar & Lin, NeurIPS 2024 (arXiv 2405.15362); sail-sg "
                 "zero-bubble-pipeline-parallelism zbv_greedy.py, mem setup 'half'",
                 "D >= 1, N >= 1", kLayoutV, Backward::kSplit, false, generate_v_half,
                 closed_form_v_half, /*cost_aware=*/false, /*packs_slot_rows=*/true},
    ScheduleInfo{"v-min",
                 "V-Min: V-shape building block, about a third of 1F1B's activations (Qi et al. "
                 "2024)",
                 "Qi, Wan, Amar & Lin, NeurIPS 2024 (arXiv 2405.15362); sail-sg "
                 "zero-bubble-pipeline-parallelism zbv_greedy.py, mem setup 'min'",
                 "D >= 1, N >= 1", kLayoutV, Backward::kSplit, false, generate_v_min,
                 closed_form_v_min, /*cost_aware=*/false, /*packs_slot_rows=*/true},
    ScheduleInfo{"dualpipe", "DeepSeek DualPipe: two directions, overlapped F&B, eight steps",
                 "DeepSeek-V3 report; deepseek-ai/DualPipe dualpipe.py DualPipe.step",
                 "D even, N even, N >= 2D", kLayoutTwoDirections, Backward::kSplit, false,
                 generate_dualpipe, closed_form_dualpipe},
    ScheduleInfo{"dualpipev", "DeepSeek DualPipeV: DualPipe folded into a V on D ranks",
                 "deepseek-ai/DualPipe dualpipev.py DualPipeV.step", "N >= 2D", kLayoutV,
                 Backward::kSplit, false, generate_dualpipev, closed_form_dualpipev},
};

std::string known_names() {
  std::string names;
  for (const auto& s : kSchedules) {
    if (!names.empty()) names += ", ";
    names += s.name;
  }
  return names;
}

std::string chunked_names() {
  std::string names;
  for (const auto& s : kSchedules) {
    if (!s.uses_chunks) continue;
    if (!names.empty()) names += ", ";
    names += s.name;
  }
  return names;
}

}  // namespace

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

std::span<const ScheduleInfo> all_schedules() { return kSchedules; }

const ScheduleInfo* lookup_schedule(std::string_view name) {
  for (const auto& s : kSchedules)
    if (s.name == name) return &s;
  return nullptr;
}

int layout_stages_per_chain(const ScheduleParams& p) {
  const ScheduleInfo* info = lookup_schedule(p.name);
  if (info == nullptr) return 0;
  if (info->layout == kLayoutInterleaved) return (p.chunks > 0 ? p.chunks : 2) * p.devices;
  if (info->layout == kLayoutV) return 2 * p.devices;
  return p.devices;
}

const ScheduleInfo& find_schedule(std::string_view name) {
  for (const auto& s : kSchedules)
    if (s.name == name) return s;
  throw UsageError("unknown schedule " + quoted(name) + " (known: " + known_names() + ")");
}

Schedule generate(const ScheduleParams& p) {
  const ScheduleInfo& info = find_schedule(p.name);
  require(p.devices >= 1, "--devices must be >= 1, got " + std::to_string(p.devices));
  require(p.microbatches >= 1,
          "--microbatches must be >= 1, got " + std::to_string(p.microbatches));
  if (!info.uses_chunks)
    require(p.chunks == 0 || p.chunks == 1, "--chunks " + std::to_string(p.chunks) +
                                                " is not allowed for '" + std::string(p.name) +
                                                "': only " + chunked_names() + " take --chunks");
  // Megatron's micro-batch group size is interleaved-1f1b's own knob; the other chunked
  // families fix their rounds as their reference does.
  require(p.group_size == 0 || info.name == kGroupSizeFamily,
          "--group-size is not allowed for '" + std::string(p.name) + "': only " +
              std::string(kGroupSizeFamily) + " takes --group-size");
  if (!info.cost_aware) {
    require(p.memory_limit == 0, "--memory-limit is not allowed for '" + std::string(p.name) +
                                     "': only zb-1p and zb-2p take it");
    require(p.w_memory == 1, "--w-memory is not allowed for '" + std::string(p.name) +
                                 "': only zb-1p and zb-2p take it");
  }
  // The generator's parameters, as it resolved them (interleaving's default chunks and group
  // size), so that records say what ran.
  Schedule s = info.generate(p);
  s.params.name = std::string(info.name);
  return s;
}

}  // namespace ppbench
