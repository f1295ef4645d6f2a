#!/usr/bin/env python3
"""`ppbench model`, exercised as a new user would.

Bad shapes and options give exit code 2 and one line on stderr naming the bad value, with nothing
on stdout. Run by ctest with the path of the ppbench binary; standard library only.
"""
import json
import subprocess
import sys
import unittest
from cli_checks import address_space, one_line_refusal  # this script's folder is on sys.path

PPBENCH = sys.argv[1] if len(sys.argv) > 1 else "build/ppbench"


def run(*args):
    return subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=60)


def model_json(*args):
    r = run("model", *args, "--format", "json")
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return json.loads(r.stdout)


class BadInput(unittest.TestCase):
    CASES = [
        # (arguments after `model`, a word the message must contain)
        (["--workload", "resnet"], "resnet"),
        (["-w", "transformer", "--heads", "5"], "--heads 5"),
        (["-w", "transformer", "--kv-heads", "3"], "--kv-heads 3"),
        (["-w", "transformer", "--preset", "gpt5"], "gpt5"),
        (["-w", "transformer", "--hidden", "0"], "--hidden 0"),
        (["-w", "transformer", "--seq", "-4"], "--seq -4"),
        (["-w", "transformer", "--filters", "64"], "--filters"),
        (["-w", "amoebanet", "--layers", "10"], "--layers 10"),
        (["-w", "amoebanet", "--filters", "100"], "--filters 100"),
        (["-w", "amoebanet", "--image-size", "100"], "--image-size 100"),
        (["-w", "amoebanet", "--classes", "0"], "--classes 0"),
        (["-w", "amoebanet", "--width", "8"], "--width"),
        (["-w", "mlp", "--width", "0"], "--width 0"),
        (["-w", "mlp", "--layers", "-2"], "--layers -2"),
        (["-w", "mlp", "--layers", "abc"], "abc"),
        (["-w", "mlp", "--preset", "tiny-llama"], "--preset"),
        (["-w", "mlp", "--microbatch-size", "0"], "--microbatch-size 0"),
        (["-w", "mlp", "--dtype", "f16"], "f16"),
        (["-w", "mlp", "--format", "xml"], "xml"),
        (["-w", "mlp", "--layers", "4", "--stages", "6"], "6 stages"),
        (["-w", "mlp", "--layers", "4", "--stages", "6"], "4 layers"),
        (["-w", "mlp", "--layers", "4", "--stages", "2", "--partition", "1,2"], "sums to 3"),
        (["-w", "mlp", "--layers", "4", "--stages", "3", "--partition", "2,2"], "2 entries"),
        (["-w", "mlp", "--layers", "4", "--stages", "2", "--partition", "0,4"], "entry 0"),
        (["-w", "mlp", "--stages", "2", "--partition", "greedy"], "greedy"),
        (["-w", "mlp", "--partition", "uniform"], "--stages"),
        (["--layers", "4"], "--workload"),
        # Sizes: parameters, FLOPs and bytes that overflow 64 bits, and spec records that would
        # not fit in memory, are refused in one line instead of printed wrapped or allocated.
        (["-w", "mlp", "--width", "99999999999999999999"], "--width"),
        (["-w", "mlp", "--width", "9999999999"], "overflow"),
        (["-w", "transformer", "--vocab", "9223372036854775807"], "overflow"),
        (["-w", "amoebanet", "--filters", "1099511627776"], "overflow"),
        (["-w", "mlp", "--microbatch-size", "9223372036854775807"], "overflow"),
        (["-w", "mlp", "--layers", "10000000", "--format", "json"], "--layers 10000000"),
        (["-w", "mlp", "--input-dim", "0"], "--input-dim 0"),
        (["-w", "mlp", "--stages", "0"], "--stages"),
        (["-w", "mlp", "--layers", "4", "--stages", "2",
          "--partition", "999999999,999999999,999999999"], "3 entries"),
        (["-w", "mlp", "--max-memory", "lots"], "--max-memory"),
    ]

    def test_exit_2_with_one_line_naming_the_value(self):
        for args, needle in self.CASES:
            with self.subTest(args=args):
                one_line_refusal(self, run("model", *args), needle)

    def test_an_odd_head_dimension_is_refused_with_the_reason_of_its_style(self):
        # Llama: rotary embeddings rotate pairs. GPipe style has none, but the CUDA attention moves
        # each head's columns in pairs for both, so its message must not blame rotary embeddings.
        llama = one_line_refusal(self, run("model", "-w", "transformer", "--preset", "tiny-llama",
                                           "--hidden", "64", "--heads", "64", "--kv-heads", "64"),
                                 "head dimension 1")
        self.assertIn("rotary embeddings rotate pairs", llama)
        gpipe = one_line_refusal(self, run("model", "-w", "transformer", "--preset", "tiny-gpipe",
                                           "--hidden", "64", "--heads", "64", "--kv-heads", "64"),
                                 "head dimension 1")
        self.assertIn("CUDA attention moves each head's columns in pairs", gpipe)
        self.assertIn("no rotary embeddings", gpipe)
        for line in (llama, gpipe):
            self.assertIn("--hidden 64 / --heads 64", line)

    def test_the_address_space_limit_bounds_the_default_budget(self):
        # About 2.8 GiB of layer records against a 1 GiB `ulimit -v`: with MemAvailable alone as
        # the bar the spec was built and the JSON ended in bad_alloc (a destructor's: abort).
        r = subprocess.run([PPBENCH, "model", "-w", "transformer", "--preset", "tiny-llama",
                            "--layers", "300000", "--seq", "8", "--format", "json"],
                           capture_output=True, text=True, timeout=120,
                           preexec_fn=address_space(1 << 30))
        line = one_line_refusal(self, r, "needs about")
        self.assertIn("the address-space limit, ulimit -v", line)


class Contract(unittest.TestCase):
    def test_llama3_8b_parameter_count(self):
        spec = model_json("--workload", "transformer", "--preset", "llama3-8b")
        self.assertEqual(spec["params"], 8030261248)
        self.assertEqual(len(spec["layers"]), 34)
        self.assertEqual(spec["dtype"], "bf16")
        for layer in spec["layers"]:
            for key in ["name", "kind", "params", "flops", "activation_bytes",
                        "paper_activation_bytes", "boundary_bytes"]:
                self.assertIn(key, layer)
            self.assertEqual(set(layer["flops"]) >= {"F", "I", "W"}, True)
            self.assertEqual(set(layer["activation_bytes"]), {"B", "W"})
            self.assertEqual(set(layer["paper_activation_bytes"]), {"B", "W"})
        self.assertEqual(sum(layer["params"] for layer in spec["layers"]), spec["params"])

    def test_overrides_and_gpipe_transformer(self):
        spec = model_json("-w", "transformer", "--preset", "gpipe-transformer", "--layers", "3")
        self.assertEqual(spec["config"]["layers"], 3)
        h, v = 2048, 32000
        self.assertEqual(spec["params"], 3 * (12 * h * h + 13 * h) + 2 * v * h + 2 * h)
        spec = model_json("-w", "transformer", "--preset", "tiny-llama", "--hidden", "128",
                          "--heads", "8", "--kv-heads", "8")
        self.assertEqual((spec["config"]["hidden"], spec["config"]["kv_heads"]), (128, 8))

    def test_heads_alone_on_a_gpipe_preset_keeps_plain_multi_head_attention(self):
        # Its key/value heads follow --heads (it was refused: "--kv-heads 32 does not divide
        # --heads 16", a flag never given).
        spec = model_json("-w", "transformer", "--preset", "gpipe-transformer", "--layers", "2",
                          "--heads", "16")
        self.assertEqual((spec["config"]["heads"], spec["config"]["kv_heads"]), (16, 16))
        # A Llama preset keeps its grouped key/value heads; --heads they cannot group is named
        # with where the key/value heads came from.
        r = subprocess.run([PPBENCH, "model", "-w", "transformer", "--preset", "llama3-8b",
                            "--heads", "4"], capture_output=True, text=True, timeout=60)
        line = one_line_refusal(self, r, "--heads 4 is not a multiple of the 8 key/value heads "
                                         "of --preset llama3-8b")
        self.assertIn("give --kv-heads too", line)

    def test_zero_bubble_memory_formula(self):
        # GPT layer at 16 bits: M_B = sb(34h + 5as), M_W = 32sbh; b = 2. "activation_bytes" is
        # what ppbench's kernels keep (no dropout masks, 2-byte elements, the norms' rows and
        # gradients): sb(2(6h + 2h + 2f + 2) + 2as) and 2(sb(6h + 2h + 2f) + 4h) with f = 4h.
        spec = model_json("-w", "transformer", "--preset", "gpipe-transformer", "--layers", "2",
                          "--microbatch-size", "2")
        s, b, h, a = 1024, 2, 2048, 32
        layer = spec["layers"][1]
        self.assertEqual(layer["paper_activation_bytes"]["B"], s * b * (34 * h + 5 * a * s))
        self.assertEqual(layer["paper_activation_bytes"]["W"], 32 * s * b * h)
        f = 4 * h
        self.assertEqual(layer["activation_bytes"]["B"],
                         2 * (s * b * (6 * h + 2 * h + 2 * f + 2) + a * s * s * b))
        self.assertEqual(layer["activation_bytes"]["W"],
                         2 * (s * b * (6 * h + 2 * h + 2 * f) + 4 * h))
        self.assertEqual(spec["paper_activation_bytes"]["B"],
                         sum(layer["paper_activation_bytes"]["B"] for layer in spec["layers"]))
        self.assertEqual(layer["flops"]["F"], s * b * h * (24 * h + 4 * s))

    def test_amoebanet_published_size(self):
        spec = model_json("-w", "amoebanet", "--layers", "18", "--filters", "208")
        self.assertEqual(len(spec["layers"]), 24)
        self.assertAlmostEqual(spec["params"] / 82e6, 1, delta=0.01)  # GPipe Table 1: 82M
        self.assertEqual(len(spec["layers"][1]["boundary"]), 2)  # a cell passes two states

    def test_stages(self):
        spec = model_json("-w", "mlp", "--layers", "10", "--width", "64", "--stages", "4",
                          "--partition", "uniform")
        self.assertEqual([st["num_layers"] for st in spec["stages"]], [3, 3, 2, 2])
        self.assertEqual(sum(st["params"] for st in spec["stages"]), spec["params"])
        self.assertEqual(spec["stages"][-1]["boundary_bytes"], 0)
        spec = model_json("-w", "mlp", "--layers", "10", "--partition", "1,2,3,4")
        self.assertEqual(spec["partition"]["layer_counts"], [1, 2, 3, 4])
        spec = model_json("-w", "amoebanet", "--stages", "4")
        self.assertEqual(spec["partition"]["method"], "balanced")
        self.assertEqual(len(spec["stages"]), 4)

    def test_large_counts_are_printed_correctly(self):
        # 8 layers of width 10^9: 7 (w^2 + w) + 10 w + 10 parameters, just under 2^63.
        spec = model_json("-w", "mlp", "--width", "1000000000")
        self.assertEqual(spec["params"], 7000000017000000010)
        r = run("model", "-w", "mlp", "--width", "1000000000")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("7.00e+18 params (7000000017000000010)", r.stdout)
        self.assertNotRegex(r.stdout, r"-\d")  # no wrapped, negative count anywhere

    def test_text_table(self):
        r = run("model", "-w", "transformer", "--preset", "llama3-8b", "--stages", "4")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("8.03 B", r.stdout)
        self.assertIn("GFLOP", r.stdout)
        self.assertIn("partition balanced into 4 stages", r.stdout)
        self.assertEqual(run("model", "--help").returncode, 0)

    def test_each_column_set_keeps_five_digits_of_its_largest_value(self):
        # One unit per column set (FLOPs, bytes): the smallest in which its largest value, the
        # total row's, is below 100000, so that a layer's values beside the total keep their
        # digits. mlp, 8 layers of width w at bf16 and b = 1: a hidden layer keeps 4w bytes
        # (M_B) and its forward is 2 w^2 FLOPs, so the totals are about 32w bytes and 14 w^2
        # FLOPs (the loss head's are smaller).
        for width, flop, byte in ((64, "FLOP", "B"), (1024, "KFLOP", "B"),
                                  (4096, "MFLOP", "KiB")):
            with self.subTest(width=width):
                r = run("model", "-w", "mlp", "--width", str(width))
                self.assertEqual(r.returncode, 0, r.stderr)
                header = next(line for line in r.stdout.splitlines() if "M_B" in line).split()
                self.assertEqual(header[header.index("F") + 1], flop)
                self.assertEqual(header[header.index("M_B") + 1], byte)
                self.assertEqual(header[-1], byte)  # out, the boundary bytes

    def test_attention_kernels_are_named(self):
        # The s x s part decides a run's activation memory: the model says how each backend
        # computes it, for transformers only.
        r = run("model", "-w", "transformer", "--preset", "tiny-llama")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("attention, --backend cpu: materialises", r.stdout)
        self.assertIn("attention, --backend cuda:", r.stdout)
        self.assertIn("FlashAttention-style", r.stdout)
        spec = model_json("-w", "transformer", "--preset", "tiny-llama")
        self.assertIn("fused", spec["attention"]["cuda"])
        self.assertIn("materialises", spec["attention"]["cpu"])
        self.assertNotIn("attention", model_json("-w", "mlp"))
        self.assertNotIn("attention, --backend", run("model", "-w", "mlp").stdout)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=1)
