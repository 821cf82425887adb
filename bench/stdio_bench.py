"""Closed-loop stdio benchmark of one MCP tools/call: the presa_trio fixture served by
``presa-trio serve --stdio``, the official Python SDK's stdio server (bench/sdk_stdio.py) and a
raw trio program answering fixed bytes (bench/raw_stdio.py).

Each server is a subprocess pinned to one core; this process, on another, writes requests to
its stdin and reads the answers from its stdout, keeping ``--window`` requests in flight. It
measures requests/s and the server's CPU per request (utime+stime from /proc), the servers
taking turns, and prints the medians and the ratios to the raw program.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.http_bench import ROOT, cpu_seconds, request_body

TOOL = "test_simple_text"
SDK_PROTO = "2025-06-18"  # the SDK's stdio server speaks the dated protocol with a session
COMMANDS = {
    "presa": ["-m", "presa_trio", "serve", "fixtures.conformance:server", "--stdio"],
    "sdk": ["bench/sdk_stdio.py"],
    "raw": ["-m", "bench.raw_stdio"],
}


def request_line(label: str, request_id: int) -> bytes:
    """The ``tools/call`` each server expects: presa's (and the raw program's) as
    ``http_bench.py`` sends it, with the 2026-07-28 ``_meta``; the SDK's without (it keeps
    what ``initialize`` said)."""
    message = json.loads(request_body(TOOL))
    message["id"] = request_id
    if label == "sdk":
        del message["params"]["_meta"]
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


@dataclass
class Peer:
    """One server as a subprocess, its pipes and what is read but not yet taken."""

    label: str
    proc: subprocess.Popen[bytes]
    pending: bytes = b""
    next_id: int = 1
    runs: list[tuple[int, float, float]] = field(default_factory=list)  # window, req/s, us

    @classmethod
    def start(cls, label: str, cpu: str) -> Peer:
        pin = ["taskset", "-c", cpu] if cpu else []
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [*pin, sys.executable, *COMMANDS[label]],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        peer = cls(label, proc)
        if label == "sdk":
            peer.handshake()
        return peer

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self.proc.stdin.fileno(), view) :]

    def read_lines(self) -> list[bytes]:
        """At least one whole line of output (blocking until it comes)."""
        assert self.proc.stdout is not None
        while b"\n" not in self.pending:
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"{self.label} closed its output")
            self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        return lines

    def handshake(self) -> None:
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": SDK_PROTO,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
        self.write(json.dumps(initialize).encode() + b"\n")
        (answer,) = self.read_lines()
        assert b'"result"' in answer, answer
        self.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def exchange(self, requests: int, window: int) -> tuple[float, float, int]:
        """``requests`` tools/calls with up to ``window`` in flight: req/s, server CPU us per
        request, and how many answers were not a result (or were a tool error)."""
        first, self.next_id = self.next_id, self.next_id + requests
        lines = [request_line(self.label, first + i) for i in range(requests)]
        sent = answered = bad = 0
        cpu0, t0 = cpu_seconds(self.proc.pid), time.perf_counter()
        while answered < requests:
            if sent < requests and sent - answered < window:
                burst = lines[sent : min(requests, answered + window)]
                self.write(b"".join(burst))
                sent += len(burst)
            for line in self.read_lines():
                answered += 1
                bad += b'"result"' not in line or b'"isError":true' in line
        seconds, cpu = time.perf_counter() - t0, cpu_seconds(self.proc.pid) - cpu0
        return requests / seconds, cpu * 1e6 / requests, bad

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # end of input: each server finishes and exits
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def summary(peers: list[Peer], windows: list[int]) -> None:
    for index, title in ((1, "requests/s (median)"), (2, "server CPU us/request (median)")):
        print(f"\n{title}")
        others = [p.label for p in peers if p.label != "raw"]
        head = ["window", *(p.label for p in peers), *(f"{o}/raw" for o in others)]
        print("".join(f"{h:>14}" for h in head))
        for window in windows:
            values = {
                p.label: statistics.median(r[index] for r in p.runs if r[0] == window)
                for p in peers
            }
            cells = [f"{window:>14}", *(f"{values[p.label]:>14.1f}" for p in peers)]
            raw = values["raw"] or math.nan  # a run shorter than the CPU clock's tick reads 0
            cells += [f"{values[o] / raw:>14.3f}" for o in others]
            print("".join(cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000, help="requests per run")
    parser.add_argument("--reps", type=int, default=5, help="runs per (server, window)")
    parser.add_argument("--windows", default="1,16", help="requests in flight, comma-separated")
    parser.add_argument("--sdk", choices=["on", "off"], default="on")
    parser.add_argument("--server-cpu", default="1", help="taskset -c for the servers ('' = any)")
    parser.add_argument("--client-cpu", default="0", help="this process's core ('' = any)")
    args = parser.parse_args()
    windows = [int(w) for w in args.windows.split(",") if w]
    if args.client_cpu:
        os.sched_setaffinity(0, {int(args.client_cpu)})
    labels = ["presa", *(["sdk"] if args.sdk == "on" else []), "raw"]
    peers = [Peer.start(label, args.server_cpu) for label in labels]
    bad = 0
    try:
        for peer in peers:  # warm-up: imports done, caches and validators filled
            bad += peer.exchange(500, max(windows))[2]
        print(
            f"# {time.strftime('%Y-%m-%d %H:%M:%S')}  servers on cpu {args.server_cpu or 'any'},"
            f" client on cpu {args.client_cpu or 'any'}; {args.requests} requests a run,"
            f" {args.reps} reps"
        )
        print(f"{'server':<8}{'window':>7}{'rep':>4}{'req/s':>10}{'cpu_us/req':>12}")
        for rep in range(1, args.reps + 1):
            for window in windows:
                for peer in peers:
                    rate, cpu_us, wrong = peer.exchange(args.requests, window)
                    bad += wrong
                    peer.runs.append((window, rate, cpu_us))
                    print(f"{peer.label:<8}{window:>7}{rep:>4}{rate:>10.1f}{cpu_us:>12.1f}")
    finally:
        for peer in peers:
            peer.stop()
    summary(peers, windows)
    print(f"\nbad answers: {bad}  (CPU has a 10 ms tick per run; compare ratios)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
