"""The report's layout by paper: which paper each schedule family reproduces, and the numbered
sections, contents list and heading anchors of the Markdown that scripts/report.py writes.

Schedule order still comes from the registry (`ppbench list --format json`); this file only
says under which paper's section a family's tables go. A family named here by no paper lands in
"Other schedules", so no record is left out of the report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Paper:
    key: str
    title: str
    citation: str
    # The families whose bubble tables and measured runs go under this paper.
    schedules: frozenset[str] = frozenset()


GPIPE = Paper("gpipe", "GPipe",
              "Huang et al., GPipe: Efficient Training of Giant Neural Networks using Pipeline "
              "Parallelism, NeurIPS 2019 (arXiv 1811.06965); naive model parallelism is its "
              "baseline (Fig. 2b)", frozenset({"naive", "gpipe"}))
ONE_F_ONE_B = Paper("1f1b", "PipeDream-Flush / 1F1B (DAPPLE)",
                    "Narayanan et al., Memory-Efficient Pipeline-Parallel DNN Training "
                    "(PipeDream-Flush), ICML 2021; Fan et al., DAPPLE, PPoPP 2021",
                    frozenset({"1f1b"}))
MEGATRON = Paper("megatron", "Megatron-LM interleaved 1F1B",
                 "Narayanan et al., Efficient Large-Scale Language Model Training on GPU Clusters "
                 "Using Megatron-LM, SC 2021 (arXiv 2104.04473), section 2.2.2",
                 frozenset({"interleaved-1f1b"}))
BREADTH_FIRST = Paper("breadth-first", "Breadth-first pipeline",
                      "Lamy-Poirier, Breadth-First Pipeline Parallelism, 2022 (arXiv 2211.05953)",
                      frozenset({"looped-bfs"}))
CHIMERA = Paper("chimera", "Chimera",
                "Li & Hoefler, Chimera: Efficiently Training Large-Scale Neural Networks with "
                "Bidirectional Pipelines, SC 2021 (arXiv 2107.06925)",
                frozenset({"chimera", "chimera-doubling"}))
ZERO_BUBBLE = Paper("zero-bubble", "Zero Bubble",
                    "Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024 (arXiv 2401.10241)",
                    frozenset({"zb-h1", "zb-h2", "zb-1p", "zb-2p", "zb-v", "interleaved-zb"}))
V_SHAPES = Paper("v-shapes", "Pipeline parallelism with controllable memory (V-Half, V-Min)",
                 "Qi, Wan, Amar & Lin, Pipeline Parallelism with Controllable Memory, NeurIPS "
                 "2024 (arXiv 2405.15362)", frozenset({"v-half", "v-min"}))
DUALPIPE = Paper("dualpipe", "DualPipe",
                 "DeepSeek-AI, DeepSeek-V3 Technical Report (arXiv 2412.19437), Table 2; "
                 "deepseek-ai/DualPipe", frozenset({"dualpipe", "dualpipev"}))
LECTURES = Paper("lectures", "The lectures' textbook examples",
                 "pipeline-parallelism lectures' worked examples (D = 4 GPUs, N = 8 "
                 "micro-batches; an 8B transformer's memory)")
DATA_PIPELINE = Paper("data-pipeline", "Data x pipeline parallelism",
                      "predicted with ppbench's simulator from datasheet rates")

# The order of the report's paper sections: by publication, the lectures and the data x pipeline
# predictions after the papers.
PAPERS: tuple[Paper, ...] = (GPIPE, ONE_F_ONE_B, MEGATRON, BREADTH_FIRST, CHIMERA, ZERO_BUBBLE,
                             V_SHAPES, DUALPIPE, LECTURES, DATA_PIPELINE)


def paper_of(schedule: str) -> Paper | None:
    return next((p for p in PAPERS if schedule in p.schedules), None)


def slug(title: str) -> str:
    """The anchor GitHub gives a heading (lower case, punctuation dropped, spaces to hyphens);
    report_html gives its headings the same ids, so the contents links work in both."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return text.replace(" ", "-")


@dataclass
class Section:
    """One top-level section: an introduction, then titled subsections (title, lines)."""
    title: str
    intro: list[str] = field(default_factory=list)
    subsections: list[tuple[str, list[str]]] = field(default_factory=list)

    def add(self, title: str, lines: list[str]) -> None:
        if lines:
            self.subsections.append((title, lines))

    def empty(self) -> bool:
        return not self.subsections


def render(sections: list[Section]) -> tuple[list[str], list[str]]:
    """(contents list, body) of the sections that have content, numbered in order: "## 3. T",
    "### 3.1 S"."""
    contents, body = ["## Contents", ""], []
    number = 0
    for s in sections:
        if s.empty():
            continue
        number += 1
        heading = f"{number}. {s.title}"
        contents.append(f"- [{heading}](#{slug(heading)})")
        body += [f"## {heading}", ""] + s.intro
        for k, (title, lines) in enumerate(s.subsections, 1):
            body += [f"### {number}.{k} {title}", ""] + lines
            if lines[-1] != "":
                body.append("")
    return contents + [""], body
