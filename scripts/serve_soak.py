#!/usr/bin/env python3
"""Soak `sightline serve`: sequential and concurrent `plan` calls over MCP (streamable HTTP)
with the server's resident memory read from /proc before and after, and the latency a served
`plan` adds over the command line's `plan` (same model, same screenshot).

Needs a Python with the MCP SDK (`pip install mcp==2.3.0`, as .ci/run installs). Prints the
figures; README "Serving" quotes a run of it.

    python scripts/serve_soak.py --binary target/release/sightline \\
        --model models/fixtures/tiny-b --screenshot models/fixtures/screens/ui_resize.png
"""

import argparse
import asyncio
import base64
import json
import os
import statistics
import subprocess
import sys
import threading
import time

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

GOAL = "Open the settings"
MCP_BANNER = "serving MCP (streamable HTTP) at /mcp on http://"
# A hang guard per call, not a speed target.
CALL_TIMEOUT_S = 600


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def start_server(args):
    """Starts the server on a free port; returns (process, endpoint URL)."""
    server = subprocess.Popen(
        [args.binary, "serve", "--mcp", "http://127.0.0.1:0", "--model", args.model,
         "--max-queue", str(args.concurrent)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    seen = []
    for line in server.stderr:
        if line.startswith(MCP_BANNER):
            url = "http://" + line[len(MCP_BANNER):].strip() + "/mcp"
            # Keep draining stderr so the server never blocks on it.
            threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
            return server, url
        seen.append(line)
    raise RuntimeError("the server exited before serving:\n" + "".join(seen))


async def plan(session, screenshot):
    """One served `plan`: (round trip in seconds, the server's stage times)."""
    started = time.perf_counter()
    result = await session.call_tool(
        "plan", {"goal": GOAL, "screenshot_base64": screenshot})
    elapsed = time.perf_counter() - started
    if getattr(result, "is_error", getattr(result, "isError", False)):
        raise RuntimeError(f"plan failed: {result.content}")
    doc = getattr(result, "structured_content", None) or getattr(result, "structuredContent")
    return elapsed, doc["stats"]


async def soak(url, pid, screenshot, args):
    figures = {}
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session:
            await session.initialize()
            figures["rss_kib_loaded"] = rss_kib(pid)
            # The first call's allocations (caches, the vision buffers) are the baseline.
            await plan(session, screenshot)
            figures["rss_kib_start"] = rss_kib(pid)
            latencies, stats = [], []
            for i in range(args.sequential):
                elapsed, stage_times = await plan(session, screenshot)
                latencies.append(elapsed)
                stats.append(stage_times)
                if (i + 1) % 100 == 0:
                    print(f"  {i + 1} sequential, RSS {rss_kib(pid)} KiB", file=sys.stderr)
            figures["rss_kib_after_sequential"] = rss_kib(pid)
            figures["served_plan_ms_median"] = round(statistics.median(latencies) * 1000, 1)
            # What serving itself costs: the round trip less the planner's own time.
            figures["served_planner_total_ms_median"] = round(
                statistics.median(s["total_ms"] for s in stats), 1)
            figures["served_overhead_ms_median"] = round(statistics.median(
                e * 1000 - s["total_ms"] for e, s in zip(latencies, stats)), 1)
            figures["served_prefill_reused_median"] = statistics.median(
                s["prefill_reused"] for s in stats)
            started = time.perf_counter()
            await asyncio.gather(*(plan(session, screenshot) for _ in range(args.concurrent)))
            figures["concurrent_wall_s"] = round(time.perf_counter() - started, 1)
            figures["rss_kib_end"] = rss_kib(pid)
    return figures


def cli_plan(args):
    """One `sightline plan --stats`: (wall seconds, the planner's own total in ms)."""
    started = time.perf_counter()
    out = subprocess.run(
        [args.binary, "plan", "--model", args.model, "--screenshot", args.screenshot,
         "--stats", GOAL],
        capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"), check=True)
    wall = time.perf_counter() - started
    total = next(float(line.split()[1]) for line in out.stderr.splitlines()
                 if line.startswith("total "))
    return wall, total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="target/release/sightline")
    parser.add_argument("--model", default="models/fixtures/tiny-b")
    parser.add_argument("--screenshot", default="models/fixtures/screens/ui_resize.png")
    parser.add_argument("--sequential", type=int, default=500)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--cli-runs", type=int, default=9)
    args = parser.parse_args()

    with open(args.screenshot, "rb") as f:
        screenshot = base64.b64encode(f.read()).decode()
    cli = [cli_plan(args) for _ in range(args.cli_runs)]
    figures = {
        "cli_plan_wall_ms_median": round(statistics.median(w for w, _ in cli) * 1000, 1),
        "cli_plan_total_ms_median": round(statistics.median(t for _, t in cli), 1),
    }
    server, url = start_server(args)
    try:
        figures.update(asyncio.run(soak(url, server.pid, screenshot, args)))
    finally:
        server.kill()
        server.wait()
    figures["served_adds_over_cli_total_ms"] = round(
        figures["served_plan_ms_median"] - figures["cli_plan_total_ms_median"], 1)
    figures["rss_growth_kib"] = figures["rss_kib_end"] - figures["rss_kib_start"]
    figures.update(sequential=args.sequential, concurrent=args.concurrent,
                   cli_runs=args.cli_runs, binary=args.binary, model=args.model)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
