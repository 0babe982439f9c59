"""A client on the official Python MCP SDK (tests/servers/.venv), for tests
where what a real client makes of the wire matters (which answer it keeps
for an id, say).

    python mcp-sdk-client.py stdio COMMAND [ARG...]
    python mcp-sdk-client.py http URL

It initializes (the handshake era), lists the tools, calls `echo` when it
is listed, and prints one JSON object: {"tools": [{"name", "description"}],
"echo": TEXT} (or "echo_error").
"""

import json
import sys

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


async def main(kind: str, target: list[str]) -> None:
    if kind == "stdio":
        transport = stdio_client(StdioServerParameters(command=target[0], args=target[1:]))
    else:
        transport = streamable_http_client(target[0])
    async with transport as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            listed = await session.list_tools()
            out = {"tools": [{"name": t.name, "description": t.description} for t in listed.tools]}
            if any(t.name == "echo" for t in listed.tools):
                try:
                    result = await session.call_tool("echo", {"text": "hi"})
                    out["echo"] = " ".join(c.text for c in result.content if getattr(c, "text", None))
                except Exception as e:  # a forged answer the SDK cannot read
                    out["echo_error"] = str(e)[:200]
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2:])
