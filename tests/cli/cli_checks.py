"""Checks the CLI contract tests share: a refusal is one line on stderr, exit 2 for bad input."""
import resource


def one_line(test, r, code):
    """`r` (a CompletedProcess) exited `code` with one line on stderr that holds no terminal
    escape; returns the line."""
    test.assertEqual(r.returncode, code, r.stderr)
    lines = r.stderr.strip().splitlines()
    test.assertEqual(len(lines), 1, r.stderr)
    test.assertNotIn("\x1b", r.stderr)
    return lines[0]


def one_line_refusal(test, r, needle):
    """`r` exited 2 with nothing on stdout and one stderr line holding `needle`; returns it."""
    line = one_line(test, r, 2)
    test.assertEqual(r.stdout, "")
    test.assertIn(needle, line)
    return line


def address_space(limit_bytes):
    """A subprocess preexec_fn capping the child's address space: a refusal that must come before
    an allocation is told apart from the allocation (bad_alloc, exit 3) without timing it."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return limit
