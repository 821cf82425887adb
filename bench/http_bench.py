"""Closed-loop HTTP benchmark (wrk) of one MCP tools/call: the presa_trio fixture, the official
Python SDK (bench/sdk_app.py) and a raw ASGI app, all under hypercorn's trio worker.

Measures throughput, latency and server CPU per request on loopback; no profiling, no soak test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO = "2026-07-28"
HZ = os.sysconf("SC_CLK_TCK")

LUA = """wrk.method = "POST"
wrk.body = [==[{body}]==]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "{proto}"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "{tool}"
local threads = {{}}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0 end
function response(status, headers, body)
  if status ~= 200 or not body or not string.find(body, '"result"', 1, true)
     or string.find(body, '"isError":true', 1, true) then bad = bad + 1 end
end
function done(summary, latency, requests)
  local nbad = 0
  for _, t in ipairs(threads) do nbad = nbad + (t:get("bad") or 0) end
  local e = summary.errors
  io.write(string.format("RESULT %d %.6f %.3f %.3f %d %d\\n", summary.requests,
    summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    nbad, e.connect + e.read + e.write + e.timeout))
end
"""


def request_body(tool: str) -> str:
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTO,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    }
    params = {"name": tool, "arguments": {}, "_meta": meta}
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return json.dumps(msg, separators=(",", ":"))


# The servers compared: the app hypercorn serves, and its environment. The SDK runs under
# hypercorn's trio worker as it is (anyio on trio): the same worker class as the others.
APPS: dict[str, tuple[str, dict[str, str]]] = {
    "presa-out-on": ("fixtures.conformance:app", {"PRESA_VALIDATE_OUTBOUND": "1"}),
    "presa-out-off": ("fixtures.conformance:app", {"PRESA_VALIDATE_OUTBOUND": "0"}),
    "sdk": ("bench.sdk_app:app", {}),
    "folded": ("bench.folded_app:app", {}),  # presa's checks in one function: a yardstick
    "raw": ("bench.raw_app:app", {}),
}


@dataclass
class Server:
    label: str
    app: str
    env: dict[str, str]
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


@dataclass
class Run:
    label: str
    conc: int
    rep: int
    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    bad: int
    sock_err: int
    cpu_us: float


def free_port(lo: int = 3200, hi: int = 3299, taken: set[int] | None = None) -> int:
    for port in range(lo, hi + 1):
        if taken and port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {lo}-{hi}")


def pin(cpu: str) -> list[str]:
    return ["taskset", "-c", cpu] if cpu else []


def start(server: Server, cpu: str, logdir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **server.env}
    server.log = logdir / f"{server.label}.log"
    # No --access-logfile: hypercorn's access log is off unless a target is given.
    hypercorn = f"-m hypercorn --worker-class trio --bind 127.0.0.1:{server.port} {server.app}"
    cmd = [*pin(cpu), sys.executable, *hypercorn.split()]
    with server.log.open("wb") as log:
        server.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def wait_ready(server: Server, body: bytes, tool: str, timeout: float = 30.0) -> None:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTO,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        assert server.proc is not None
        if server.proc.poll() is not None:
            break
        try:
            req = urllib.request.Request(server.url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=2) as resp:
                text = resp.read().decode()
            if '"result"' not in text:
                print(f"! {server.label} answered without a result: {text[:200]}", file=sys.stderr)
            return
        except urllib.error.HTTPError as exc:  # it is up; wrk will count the bad responses
            print(f"! {server.label} answered HTTP {exc.code}", file=sys.stderr)
            return
        except OSError as exc:
            last = exc
        time.sleep(0.2)
    log = server.log.read_text(errors="replace")[-2000:] if server.log else ""
    raise RuntimeError(f"{server.label} did not answer on {server.url}: {last}\n{log}")


def stop(server: Server) -> None:
    proc = server.proc
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)  # our own session: the hypercorn master and its worker
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_seconds(pid: int) -> float:
    ticks = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / HZ


def wrk(url: str, conc: int, duration: str, threads: int, lua: Path, cpu: str) -> list[str]:
    opts = f"-t{min(threads, conc)} -c{conc} -d{duration} --timeout 10s -s {lua} {url}"
    cmd = [*pin(cpu), "wrk", *opts.split()]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return line.split()[1:]
    raise RuntimeError(f"wrk failed: {' '.join(cmd)}\n{out}")


def measure(server: Server, conc: int, rep: int, args: argparse.Namespace, lua: Path) -> Run:
    assert server.proc is not None
    t0 = cpu_seconds(server.proc.pid)
    n, secs, p50, p99, bad, sock = wrk(
        server.url, conc, args.duration, args.threads, lua, args.wrk_cpu
    )
    used = cpu_seconds(server.proc.pid) - t0
    requests, cpu_us = int(n), used * 1e6 / int(n) if int(n) else float("nan")
    return Run(server.label, conc, rep, requests, requests / float(secs), float(p50),
               float(p99), int(bad), int(sock), cpu_us)  # fmt: skip


def summary(runs: list[Run], labels: list[str], concs: list[int]) -> None:
    def med(label: str, conc: int, attr: str) -> float:
        values: list[float] = [
            getattr(r, attr) for r in runs if r.label == label and r.conc == conc
        ]
        return statistics.median(values)

    presas = [label for label in labels if label != "raw"]
    titles = {"rps": "requests/s (median)", "cpu_us": "server CPU us/request (median)"}
    for attr, title in titles.items():
        print(f"\n{title}")
        head = ["conc", *labels, *(f"{p}/raw" for p in presas)]
        print("".join(f"{h:>18}" for h in head))
        for c in concs:
            vals = {label: med(label, c, attr) for label in labels}
            cells = [f"{c:>18}", *(f"{vals[x]:>18.1f}" for x in labels)]
            cells += [f"{vals[p] / vals['raw']:>18.3f}" for p in presas]
            print("".join(cells))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--outbound",
        choices=["on", "off", "both"],
        default="both",
        help="fixture outbound schema validation (default: both, i.e. 3 servers)",
    )
    ap.add_argument(
        "--sdk",
        choices=["on", "off"],
        default="on",
        help="also serve the official MCP Python SDK's stateless app (default: on)",
    )
    ap.add_argument(
        "--folded",
        choices=["on", "off"],
        default="off",
        help="also serve bench/folded_app.py, presa's checks folded into one function",
    )
    # Many short runs, the servers taking turns: this machine's speed swings for seconds at a
    # time, and medians over 9 runs of 2 s spread half as much from run to run as those over
    # 3 runs of 5 s (bench/PERFORMANCE.md).
    ap.add_argument("--reps", type=int, default=9, help="repetitions per (server, conc)")
    ap.add_argument("--duration", default="2s", help="wrk -d per run (default 2s)")
    ap.add_argument("--warmup", default="2s", help="warm-up run per server, '0' = none")
    ap.add_argument("--concurrency", default="1,16,64", help="comma-separated wrk -c values")
    ap.add_argument("--threads", type=int, default=1, help="wrk -t (default 1)")
    ap.add_argument("--tool", default="test_simple_text", help="tool to call")
    ap.add_argument("--server-cpu", default="1", help="taskset -c for servers ('' = no pin)")
    ap.add_argument("--wrk-cpu", default="0", help="taskset -c for wrk ('' = no pin)")
    args = ap.parse_args()
    concs = [int(c) for c in args.concurrency.split(",") if c]
    needed = ["wrk", *(["taskset"] if args.server_cpu or args.wrk_cpu else [])]
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if missing:  # before any server starts: wrk's own failure says nothing (taskset runs it)
        print(f"http_bench: {' and '.join(missing)} not found; on Debian: apt-get install -y wrk"
              " (taskset is in util-linux)", file=sys.stderr)  # fmt: skip
        return 2

    chosen = [f"presa-out-{o}" for o in ("on", "off") if args.outbound in (o, "both")]
    chosen += ["sdk"] if args.sdk == "on" else []
    chosen += ["folded"] if args.folded == "on" else []
    servers = [Server(label, *APPS[label]) for label in [*chosen, "raw"]]

    # SIGTERM/SIGHUP unwind like Ctrl-C, so the finally below stops the servers.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    body = request_body(args.tool)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="http-bench-") as tmp:
        lua = Path(tmp) / "bench.lua"
        lua.write_text(LUA.format(body=body, proto=PROTO, tool=args.tool))
        try:
            for s in servers:
                s.port = free_port(taken={x.port for x in servers})
                start(s, args.server_cpu, Path(tmp))
            for s in servers:
                wait_ready(s, body.encode(), args.tool)
            print(
                f"# {time.strftime('%Y-%m-%d %H:%M:%S')}  cpus={os.cpu_count()}  "
                f"servers on cpu {args.server_cpu or 'any'}, wrk on cpu {args.wrk_cpu or 'any'}; "
                f"duration={args.duration} reps={args.reps} wrk -t{args.threads}"
            )
            for s in servers:
                pid = s.proc.pid if s.proc else None
                print(f"# {s.label}: {s.app} {s.env or ''} at {s.url} (pid {pid})")
                if args.warmup != "0":
                    wrk(s.url, max(concs), args.warmup, args.threads, lua, args.wrk_cpu)
            print(
                f"{'server':<14}{'conc':>5}{'rep':>4}{'requests':>10}{'req/s':>10}"
                f"{'p50_ms':>9}{'p99_ms':>9}{'bad':>6}{'sockerr':>8}{'cpu_us/req':>11}"
            )
            for rep in range(1, args.reps + 1):
                for c in concs:
                    for s in servers:
                        r = measure(s, c, rep, args, lua)
                        runs.append(r)
                        print(
                            f"{r.label:<14}{r.conc:>5}{r.rep:>4}{r.requests:>10}{r.rps:>10.1f}"
                            f"{r.p50_ms:>9.3f}{r.p99_ms:>9.3f}{r.bad:>6}{r.sock_err:>8}"
                            f"{r.cpu_us:>11.1f}",
                            flush=True,
                        )
        finally:
            for s in servers:
                stop(s)
    summary(runs, [s.label for s in servers], concs)
    bad, sock = sum(r.bad for r in runs), sum(r.sock_err for r in runs)
    print(
        f"\nbad responses: {bad}, socket errors: {sock}  "
        "(CPU time has 1/HZ = 10 ms tick resolution per run; compare ratios, not absolutes)"
    )
    return 1 if bad or sock else 0


if __name__ == "__main__":
    sys.exit(main())
