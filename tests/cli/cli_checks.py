"""Checks the CLI contract tests share: a bad input is refused with exit 2 and one line."""


def one_line_refusal(test, r, needle):
    """`r` (a CompletedProcess) exited 2 with nothing on stdout and one stderr line holding needle."""
    test.assertEqual(r.returncode, 2, r.stderr)
    test.assertEqual(r.stdout, "")
    lines = r.stderr.strip().splitlines()
    test.assertEqual(len(lines), 1, r.stderr)
    test.assertIn(needle, lines[0])
