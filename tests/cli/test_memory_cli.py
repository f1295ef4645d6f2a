#!/usr/bin/env python3
"""`ppbench memory` for Llama-3-8B against numbers computed here from the published shape.

Llama-3-8B: hidden 4096, 32 layers, 32 heads of 128, 8 KV heads, FFN 14336, vocabulary 128256,
untied embedding and LM head: 8,030,261,248 parameters. The convention (docs/metrics.md, "Memory
of a whole step"): bf16 parameters 2 B and gradients 2 B; adamw keeps m and v at fp32 (8 B) and
an fp32 master copy (4 B) per parameter. Run by ctest with the path of the ppbench binary;
standard library only.
"""
import json
import re
import subprocess
import sys
import unittest
from cli_checks import one_line_refusal  # the directory of this script is on sys.path

PPBENCH = sys.argv[1] if len(sys.argv) > 1 else "build/ppbench"

H, LAYERS, HEADS, KV_HEADS, FFN, VOCAB, SEQ = 4096, 32, 32, 8, 14336, 128256, 8192
HEAD_DIM = H // HEADS
EMBEDDING = VOCAB * H
# q and o: h x h; k and v: h x (kv_heads head_dim); gate, up, down: h x ffn; two RMSNorm gains.
DECODER = 2 * H * H + 2 * H * KV_HEADS * HEAD_DIM + 3 * H * FFN + 2 * H
LM_HEAD = H + VOCAB * H  # final RMSNorm and the output projection
TOTAL = EMBEDDING + LAYERS * DECODER + LM_HEAD
BF16 = 2
PARAM, GRAD, ADAMW = 2, 2, 4 + 4 + 4  # m, v and the master copy at fp32
HIDDEN_MESSAGE = 1 * SEQ * H * BF16  # one micro-batch's hidden states (or their gradient)


def run(*args):
    return subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=120)


def memory_json(*args, dtype="bf16"):
    r = run("memory", "--workload", "transformer", "--preset", "llama3-8b", "--dtype", dtype,
            *args, "--format", "json")
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return json.loads(r.stdout)


class Llama3_8B(unittest.TestCase):
    def test_the_published_count(self):
        self.assertEqual(TOTAL, 8_030_261_248)

    def test_one_device_holds_everything(self):
        j = memory_json("--schedule", "1f1b", "--devices", "1", "--microbatches", "1")
        self.assertEqual(j["model_params"], TOTAL)
        self.assertEqual(len(j["ranks"]), 1)
        r = j["ranks"][0]
        self.assertEqual(r["param_count"], TOTAL)
        b = r["bytes"]
        self.assertEqual(b["params"], TOTAL * PARAM)  # 16,060,522,496
        self.assertEqual(b["grads"], TOTAL * GRAD)
        self.assertEqual(b["optimizer"], TOTAL * ADAMW)  # 96,363,134,976
        self.assertEqual(b["comm"], 0)  # nothing to send
        # One micro-batch, F then B: the peak is the whole model's M_B (what `model` reports).
        m = json.loads(run("model", "--workload", "transformer", "--preset", "llama3-8b",
                           "--dtype", "bf16", "--format", "json").stdout)
        self.assertEqual(b["activations"], m["activation_bytes"]["B"])
        self.assertEqual(b["total"], TOTAL * 16 + b["activations"])
        self.assertEqual(j["max_total_bytes"], b["total"])

    def test_eight_ranks_1f1b(self):
        d, n = 8, 16
        counts = [5, 4, 4, 4, 4, 4, 4, 5]  # embedding + 4 layers, ..., 4 layers + LM head
        j = memory_json("--schedule", "1f1b", "--devices", str(d), "--microbatches", str(n),
                        "--partition", ",".join(map(str, counts)))
        self.assertEqual(j["partition"]["layer_counts"], counts)
        expected = [EMBEDDING + 4 * DECODER] + [4 * DECODER] * 6 + [4 * DECODER + LM_HEAD]
        stages = json.loads(run("model", "--workload", "transformer", "--preset", "llama3-8b",
                                "--dtype", "bf16", "--stages", "8", "--partition",
                                ",".join(map(str, counts)), "--format", "json").stdout)["stages"]
        self.assertEqual(len(j["ranks"]), d)
        for r, rank in enumerate(j["ranks"]):
            with self.subTest(rank=r):
                b = rank["bytes"]
                self.assertEqual(rank["param_count"], expected[r])
                self.assertEqual(b["params"], expected[r] * PARAM)
                self.assertEqual(b["grads"], expected[r] * GRAD)
                self.assertEqual(b["optimizer"], expected[r] * ADAMW)
                # 1F1B: rank r keeps D - r micro-batches' activations of its stage at its peak.
                self.assertEqual(b["activations"], (d - r) * stages[r]["activation_bytes"]["B"])
                # Five messages of hidden states to each neighbour: the default mailbox's four
                # and one the sender holds while it waits for room.
                neighbours = 1 if r in (0, d - 1) else 2
                self.assertEqual(b["comm"], neighbours * 5 * HIDDEN_MESSAGE)
                self.assertEqual(b["total"], sum(b[k] for k in
                                                 ("params", "grads", "optimizer", "activations",
                                                  "comm")))
        self.assertEqual(sum(r["param_count"] for r in j["ranks"]), TOTAL)
        self.assertEqual(j["sum_over_ranks"]["params"], TOTAL * PARAM)
        self.assertEqual(j["sum_over_ranks"]["optimizer"], TOTAL * ADAMW)

    def test_default_partition_still_sums_to_the_model(self):
        j = memory_json("--schedule", "1f1b", "--pp", "8", "--microbatches", "16")
        self.assertEqual(sum(r["param_count"] for r in j["ranks"]), TOTAL)

    def test_two_copies_are_both_counted(self):
        j = memory_json("--schedule", "dualpipe", "--devices", "8", "--microbatches", "16")
        self.assertEqual(sum(r["param_count"] for r in j["ranks"]), 2 * TOTAL)
        self.assertEqual(j["param_copies"], 2)

    def test_mailboxes_hold_what_the_schedule_sends_ahead(self):
        # As `run`: 4 messages per mailbox, or the least the schedule needs where that is more
        # (looped-bfs at D = 2 sends a whole chunk before its peer takes the first).
        self.assertEqual(memory_json("-s", "1f1b", "-d", "2", "-n", "12")["channel_capacity"], 4)
        looped = memory_json("-s", "looped-bfs", "-d", "2", "-n", "12")
        self.assertGreater(looped["channel_capacity"], 4)

    def test_a_mailbox_and_its_waiting_sender_hold_one_message_more_than_the_capacity(self):
        # 1F1B's first rank sends its 16 forwards to rank 1: with room for C in the mailbox and
        # one more in the blocked sender, C + 1 hidden-state messages are in flight at most. The
        # text and the JSON's notes say so.
        for capacity in (1, 2, 4):
            j = memory_json("-s", "1f1b", "-d", "8", "-n", "16", "--channel-capacity",
                            str(capacity))
            self.assertEqual(j["ranks"][0]["bytes"]["comm"], (capacity + 1) * HIDDEN_MESSAGE)
            self.assertIn("min(channel capacity + 1, messages)", j["notes"])
        r = run("memory", "--workload", "transformer", "--preset", "llama3-8b", "-s", "1f1b",
                "-d", "8", "-n", "16", "--channel-capacity", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("per destination min(3, messages) x the largest message", r.stdout)

    def test_optimizers(self):
        args = ("--schedule", "1f1b", "--devices", "1", "--microbatches", "1")
        j = memory_json(*args, "--optimizer", "none")
        self.assertEqual(j["ranks"][0]["bytes"]["optimizer"], 0)
        # SGD keeps no moments; bf16 parameters are stepped on an fp32 master copy, f32 ones not
        j = memory_json(*args, "--optimizer", "sgd")
        self.assertEqual(j["ranks"][0]["bytes"]["optimizer"], TOTAL * 4)
        j = memory_json(*args, "--optimizer", "sgd", dtype="f32")
        self.assertEqual(j["ranks"][0]["bytes"]["optimizer"], 0)
        j = memory_json(*args, "--optimizer", "adamw", dtype="f32")
        self.assertEqual(j["ranks"][0]["bytes"]["optimizer"], TOTAL * 8)  # no master copy
        self.assertEqual(j["ranks"][0]["bytes"]["params"], TOTAL * 4)

    def test_text_table(self):
        r = run("memory", "--workload", "transformer", "--preset", "llama3-8b", "--schedule",
                "1f1b", "--devices", "8", "--microbatches", "16")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("GiB", r.stdout)
        self.assertIn("8030261248 parameters", r.stdout)
        lines = [line for line in r.stdout.splitlines() if line.startswith("   ")]
        self.assertEqual(len(lines), 8)

    def test_the_table_has_the_unit_the_largest_total_line_gives(self):
        # One unit for the table: the largest in which the largest rank total is at least 1,
        # which is the unit the "largest rank total" line gives that total on its own.
        units = ["B", "KiB", "MiB", "GiB"]
        cases = [(["-w", "mlp", "--layers", "2", "--width", "8", "--optimizer", "none"], "B"),
                 (["-w", "mlp", "--layers", "2", "--width", "64"], "KiB"),
                 (["-w", "mlp"], "MiB"),
                 (["-w", "transformer", "--preset", "llama3-8b"], "GiB")]
        for args, unit in cases:
            with self.subTest(args=args):
                r = run("memory", *args, "-s", "1f1b", "-d", "2", "-n", "2")
                self.assertEqual(r.returncode, 0, r.stderr)
                header = next(line for line in r.stdout.splitlines() if line.startswith("rank"))
                self.assertTrue(header.endswith(" total " + unit), header)
                total = re.search(r"largest rank total: \S+ (\S+) \((\d+) bytes\)", r.stdout)
                self.assertEqual(total.group(1), unit)
                rows = [line for line in r.stdout.splitlines() if line.startswith("   ")]
                largest = max(float(line.split()[-1]) for line in rows)
                scale = 1024 ** units.index(unit)
                self.assertGreaterEqual(largest, 1)
                self.assertLess(largest, 1024)
                self.assertAlmostEqual(largest * scale, int(total.group(2)), delta=0.005 * scale)


class CudaBackend(unittest.TestCase):
    """--backend cuda: ppbench's CUDA layers keep every gradient in fp32 and, in the fused
    attention, one f32 log-sum-exp per row and head instead of the [heads, seq, seq]
    probabilities in bf16; everything else as the CPU kernels."""

    def test_fp32_gradients_and_the_fused_attention(self):
        args = ("--schedule", "1f1b", "--devices", "1", "--microbatches", "1", "--seq", "4096")
        cpu = memory_json(*args)
        gpu = memory_json(*args, "--backend", "cuda")
        self.assertEqual((cpu["backend"], gpu["backend"]), ("cpu", "cuda"))
        c, g = cpu["ranks"][0]["bytes"], gpu["ranks"][0]["bytes"]
        self.assertEqual(g["params"], TOTAL * PARAM)
        self.assertEqual(g["grads"], TOTAL * 4)
        self.assertEqual(c["grads"], TOTAL * GRAD)
        self.assertEqual(g["optimizer"], c["optimizer"])
        self.assertEqual(gpu["bytes_per_param"]["grads"], 4)
        # One micro-batch alive on one device: every decoder layer's probabilities, 32 heads x
        # 4096 x 4096 in bf16, give way to 32 x 4096 floats.
        per_layer = HEADS * 4096 * 4096 * BF16 - HEADS * 4096 * 4
        self.assertEqual(c["activations"] - g["activations"], LAYERS * per_layer)
        self.assertIn("fused attention", gpu["notes"])
        # f32: gradients were 4 bytes already
        f32 = memory_json(*args, "--backend", "cuda", dtype="f32")
        self.assertEqual(f32["ranks"][0]["bytes"]["grads"], TOTAL * 4)

    def test_an_mlp_differs_only_in_its_gradients(self):
        base = ("--workload", "mlp", "-s", "1f1b", "-d", "2", "-n", "4", "--format", "json")
        cpu = json.loads(run("memory", *base).stdout)
        gpu = json.loads(run("memory", *base, "--backend", "cuda").stdout)
        for c, g in zip(cpu["ranks"], gpu["ranks"]):
            self.assertEqual(g["bytes"]["grads"], 2 * c["bytes"]["grads"])  # bf16 -> fp32
            for k in ("params", "optimizer", "activations", "comm"):
                self.assertEqual(g["bytes"][k], c["bytes"][k], k)

    def test_the_text_says_what_it_models(self):
        r = run("memory", "--workload", "mlp", "-s", "1f1b", "-d", "2", "-n", "4", "--backend",
                "cuda")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--backend cuda: ppbench's CUDA layers: gradients in fp32", r.stdout)
        self.assertIn("grads 4 B", r.stdout)


class BadInput(unittest.TestCase):
    CASES = [
        (["-w", "mlp", "-s", "1f1b", "-d", "2", "-n", "4", "--optimizer", "adam"], "adam"),
        (["-w", "mlp", "-s", "1f1b", "-d", "2", "-n", "4", "--dtype", "f16"], "f16"),
        (["-w", "mlp", "-s", "1f1b", "-d", "2", "-n", "4", "--format", "xml"], "xml"),
        (["-w", "mlp", "-s", "1f1b", "-d", "2", "-n", "4", "--channel-capacity", "0"],
         "--channel-capacity"),
        (["-w", "mlp", "-s", "nope", "-d", "2", "-n", "4"], "nope"),
        (["-w", "mlp", "-s", "1f1b", "-d", "2"], "--microbatches"),
        (["-w", "mlp", "--layers", "2", "-s", "1f1b", "-d", "4", "-n", "4"], "4 stages"),
        (["-w", "mlp", "-s", "chimera", "-d", "3", "-n", "6"], "even"),
        (["-w", "resnet", "-s", "1f1b", "-d", "2", "-n", "4"], "resnet"),
        (["-w", "mlp", "-s", "1f1b", "-d", "2", "-n", "4", "--partition", "1,2,5"], "3 entries"),
        (["-w", "mlp", "--layers", "2", "--width", "1000000000", "-s", "1f1b", "-d", "2", "-n",
          "2"], "overflow"),
        # each rank's total fits in 64 bits (about 5e18 bytes), their sum does not
        (["-w", "mlp", "--layers", "3", "--width", "560000000", "-s", "1f1b", "-d", "2", "-n",
          "2", "--format", "json"], "summed"),
        (["-w", "mlp", "--layers", "10000000", "-s", "1f1b", "-d", "2", "-n", "4",
          "--max-memory", "1M"], "needs about"),
        (["-w", "mlp", "-s", "1f1b", "-d", "2", "-n", "4", "--backend", "tpu"], "tpu"),
        (["-w", "mlp", "-s", "1f1b", "-d", "2", "-n", "4", "--backend", "cuda", "--dtype",
          "f64"], "f64"),
        (["-w", "mlp", "-s", "1f1b", "-d", "2", "-n", "4", "--backend", "cuda", "--recompute"],
         "--recompute"),
    ]

    def test_exit_2_with_one_line_naming_the_value(self):
        for args, needle in self.CASES:
            with self.subTest(args=args):
                one_line_refusal(self, run("memory", *args), needle)

    def test_more_stages_than_layers_is_refused_before_the_schedule_is_built(self):
        # Each family's stages per chain come from its layout before anything is generated: the
        # layers are refused even where the schedule itself would be (N < D for 1f1b, N < 2D for
        # dualpipe), in the words the partition uses (`model --stages` says them after it).
        cases = [(["-s", "1f1b", "-d", "8", "-n", "2"], 8),
                 (["-s", "dualpipe", "-d", "6", "-n", "6"], 6),  # two chains of D stages
                 (["-s", "zb-v", "-d", "3", "-n", "2"], 6),  # V: 2D stages
                 (["-s", "interleaved-1f1b", "-d", "3", "-n", "2"], 6),  # v = 2 by default
                 (["-s", "looped-bfs", "-d", "2", "-v", "3", "-n", "1"], 6)]
        for schedule, stages in cases:
            with self.subTest(schedule=schedule):
                line = one_line_refusal(self, run("memory", "-w", "mlp", "--layers", "4",
                                                  *schedule), "4 layers")
                model = one_line_refusal(self, run("model", "-w", "mlp", "--layers", "4",
                                                   "--stages", str(stages)), "4 layers")
                self.assertEqual(line, model)
        # As many stages as layers is allowed, whatever the layout.
        for schedule in (["-s", "chimera", "-d", "4"], ["-s", "zb-v", "-d", "2"],
                         ["-s", "interleaved-1f1b", "-d", "2"], ["-s", "dualpipev", "-d", "2"]):
            with self.subTest(schedule=schedule):
                r = run("memory", "-w", "mlp", "--layers", "4", *schedule, "-n", "4")
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_an_activation_overflow_names_its_factors_and_flags(self):
        # GPipe holds all 100000 micro-batches on each rank, each with a 30M-token sequence's
        # attention probabilities: the peak is past 2^63 bytes, and the line says how.
        line = one_line_refusal(self, run("memory", "-w", "transformer", "--seq", "30000000",
                                          "-s", "gpipe", "-d", "2", "-n", "100000"),
                                "activation peak")
        for needle in ["rank 0's activation peak, about ", "overflows 64 bits",
                       "up to 100000 micro-batches are in flight", "bytes; set by",
                       "--seq 30000000", "--microbatch-size 1", "--schedule gpipe",
                       "--microbatches 100000"]:
            self.assertIn(needle, line)
        # Parameter bytes: the count held and the bytes per parameter.
        line = one_line_refusal(self, run("memory", "-w", "mlp", "--layers", "2", "--width",
                                          "1000000000", "-s", "1f1b", "-d", "2", "-n", "2"),
                                "overflow 64 bits")
        self.assertIn("parameters held x", line)
        self.assertIn("--width 1000000000", line)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
