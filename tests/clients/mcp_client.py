"""The official MCP Python SDK (`mcp` from PyPI) drives `sightline serve --mcp stdio`.

Run by tests/all/serve_clients.rs on an Xvfb desktop with the accessibility test window:
lists the tools, views the screen (its element table names the window's buttons), clicks
Beta with `act`, hears a click on Delete refused, and runs a goal with a replay planner
while collecting its progress notifications. Prints one JSON line of what it saw; the Rust
test checks the window's events log. Any failed expectation exits non-zero with its reason.

Usage: mcp_client.py SIGHTLINE_BINARY REPLAY_FILE
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

# A hang guard per call, not a speed target.
CALL_TIMEOUT_S = 120


def fail(message):
    print(f"mcp_client: {message}", file=sys.stderr)
    sys.exit(1)


def expect(condition, message):
    if not condition:
        fail(message)


def structured(result):
    # The SDK's field name changed across major versions.
    for name in ("structured_content", "structuredContent"):
        value = getattr(result, name, None)
        if value is not None:
            return value
    fail(f"no structured content in {result!r}")


def is_error(result):
    for name in ("is_error", "isError"):
        if hasattr(result, name):
            return bool(getattr(result, name))
    return False


def texts(result):
    return "\n".join(b.text for b in result.content if getattr(b, "type", "") == "text")


def click(target, purpose):
    return {
        "kind": "batch",
        "purpose": purpose,
        "steps": [{"purpose": purpose, "action": {"type": "click", "target_id": target}}],
    }


async def main(binary, replay):
    # The server gets this process's whole environment: the test's DISPLAY and session bus.
    server = StdioServerParameters(
        command=binary,
        args=["serve", "--mcp", "stdio", "--replay", replay],
        env=dict(os.environ),
    )
    seen = {}
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session:
            await session.initialize()

            tools = await session.list_tools()
            names = sorted(t.name for t in tools.tools)
            expect(names == ["act", "plan", "run", "verify", "view"], f"tools: {names}")
            seen["tools"] = names

            view = await session.call_tool("view", {})
            expect(not is_error(view), f"view: {texts(view)}")
            images = [b for b in view.content if getattr(b, "type", "") == "image"]
            expect(images, "view: no image block")
            mime = getattr(images[0], "mime_type", None) or getattr(images[0], "mimeType", None)
            expect(mime == "image/png", f"view: image of type {mime}")
            doc = structured(view)
            ids = [e.get("id") for e in doc["elements"]["elements"]]
            expect("button_beta" in ids and "button_delete" in ids, f"view elements: {ids}")
            seen["view_elements"] = ids

            acted = await session.call_tool("act", {"move": click("button_beta", "press Beta")})
            expect(not is_error(acted), f"act: {texts(acted)}")
            expect(structured(acted)["outcome"] == "done", f"act: {structured(acted)}")
            seen["act"] = structured(acted)["outcome"]

            refused = await session.call_tool(
                "act", {"move": click("button_delete", "press Delete")}
            )
            expect(is_error(refused), f"a click on Delete was not refused: {texts(refused)}")
            doc = structured(refused)
            expect(doc["outcome"] == "refused", f"refused act: {doc}")
            refusal = doc["refusals"][0]
            expect("delete" in json.dumps(refusal["allow"]), f"refusal: {refusal}")
            expect("--allow" in texts(refused), f"refusal text: {texts(refused)}")
            seen["refusal"] = refusal

            progress = []

            async def on_progress(value, total, message):
                progress.append({"progress": value, "total": total, "message": message})

            ran = await session.call_tool(
                "run", {"goal": "press Alpha"}, progress_callback=on_progress
            )
            expect(not is_error(ran), f"run: {texts(ran)}")
            doc = structured(ran)
            expect(doc["outcome"]["status"] == "succeeded", f"run: {doc}")
            messages = [p["message"] or "" for p in progress]
            expect(any(m.startswith("turn 1:") for m in messages), f"progress: {messages}")
            expect(any(m.startswith("ok: click") for m in messages), f"progress: {messages}")
            expect(any(m.startswith("done: ") for m in messages), f"progress: {messages}")
            values = [p["progress"] for p in progress]
            expect(values == sorted(values), f"progress goes backwards: {values}")
            seen["progress"] = messages
    print(json.dumps(seen))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        fail(__doc__.strip().splitlines()[-1])
    asyncio.run(main(sys.argv[1], sys.argv[2]))
