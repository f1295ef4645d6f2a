#!/usr/bin/env python3
"""What a TCP link between two emulated nodes carries, measured from inside them
(benchmarks/allreduce_link.py runs it with `ip netns exec NODE`); standard library only.

    link_probe.py duplex ME PEER MIB   serve on ME while sending MIB MiB to PEER, both nodes at
                                       once: prints {"rx": bytes/s}, the rate it received at
    link_probe.py echo ME [BYTES]      answer each ping of BYTES (default 1) with one byte, until
                                       the client closes
    link_probe.py ping PEER ROUNDS [BYTES]
                                       prints {"rtt_min": s, "rtt_median": s, "send_call_median":
                                       s} over ROUNDS pings of BYTES (default 1)

Both directions at once because an all-reduce sends and receives at once; the bulk rate is the
link's goodput (what TCP delivers through the shaper), below its nominal rate by the headers.
Pings of more than one byte are one message each, as a pipeline's hand-over is, sent after a
pause of 20 ms (the shaper's bucket fills again, as between a pipeline's actions):
send_call_median is how long the sender's sendall took to hand it to the kernel. A peer that
never connects or answers ends the probe with an error after 60 s (exit 1).
"""
from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from script_cli import InputError, OneLineParser, ScriptError, number, run  # noqa: E402

BULK_PORT, PING_PORT = 5202, 5203
CHUNK = 1 << 20
TIMEOUT_S = 60  # a peer that never connects or never answers: give up, exit 1


def listen(addr: str, port: int) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    s.settimeout(TIMEOUT_S)
    return s


def connect(peer: str, port: int, timeout: float = 10.0) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:  # the peer may not listen yet
        try:
            c = socket.create_connection((peer, port), timeout=timeout)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return c
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def duplex(me: str, peer: str, mib: int) -> dict:
    server = listen(me, BULK_PORT)
    rx: dict = {}

    def receive() -> None:
        c, _ = server.accept()
        c.settimeout(TIMEOUT_S)
        n, start = 0, None
        while True:
            b = c.recv(CHUNK)
            if not b:
                break
            start = start or time.monotonic()
            n += len(b)
        rx["rate"] = n / (time.monotonic() - start) if start else 0.0

    # A daemon: where the peer never connects, the process still ends with the main thread.
    t = threading.Thread(target=receive, daemon=True)
    t.start()
    c = connect(peer, BULK_PORT)
    buf = b"\0" * CHUNK
    for _ in range(mib):
        c.sendall(buf)
    c.close()
    t.join(TIMEOUT_S)
    if "rate" not in rx:
        raise TimeoutError(f"nothing arrived from {peer} in {TIMEOUT_S} s")
    # The receiver's rate: the sender's sendall returns with bytes still in socket buffers.
    return {"rx": rx["rate"]}


def echo(me: str, size: int) -> None:
    server = listen(me, PING_PORT)
    c, _ = server.accept()
    c.settimeout(TIMEOUT_S)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        got = 0
        while got < size:
            b = c.recv(min(CHUNK, size - got))
            if not b:
                return
            got += len(b)
        c.sendall(b"k")


def ping(peer: str, rounds: int, size: int) -> dict:
    c = connect(peer, PING_PORT)
    message = b"x" * size
    rtts, calls = [], []
    for _ in range(rounds):
        if size > 1:
            time.sleep(0.02)
        start = time.monotonic()
        c.sendall(message)
        calls.append(time.monotonic() - start)
        if not c.recv(1):
            raise ConnectionError(f"{peer} closed before answering")
        rtts.append(time.monotonic() - start)
    c.close()
    return {"rtt_min": min(rtts), "rtt_median": statistics.median(rtts),
            "send_call_median": statistics.median(calls)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = OneLineParser(prog="link_probe", description=__doc__.splitlines()[0],
                       epilog=__doc__.split("\n\n")[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True, parser_class=OneLineParser)
    d = sub.add_parser("duplex", help="send MIB MiB to PEER while serving on ME")
    d.add_argument("me")
    d.add_argument("peer")
    d.add_argument("mib", type=number(int, 1, 1 << 20))
    e = sub.add_parser("echo", help="answer each ping of BYTES with one byte")
    e.add_argument("me")
    e.add_argument("bytes", nargs="?", type=number(int, 1, 1 << 30), default=1)
    p = sub.add_parser("ping", help="ROUNDS pings of BYTES to PEER")
    p.add_argument("peer")
    p.add_argument("rounds", type=number(int, 1, 1 << 20))
    p.add_argument("bytes", nargs="?", type=number(int, 1, 1 << 30), default=1)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        if a.mode == "duplex":
            print(json.dumps(duplex(a.me, a.peer, a.mib)))
        elif a.mode == "echo":
            echo(a.me, a.bytes)
        else:
            print(json.dumps(ping(a.peer, a.rounds, a.bytes)))
    except OSError as e:  # TimeoutError and refused connections are OSErrors
        raise ScriptError(f"{a.mode}: {e}") from None  # exit 1: the probe failed
    except ValueError as e:  # an address the socket calls refuse outright (a label too long)
        raise InputError(f"{a.mode}: not a host name or address ({e})") from None
    return 0


if __name__ == "__main__":
    sys.exit(run("link_probe", main))
