"""Urchin's MCP server: every tool, over stdio (`urchin mcp`) and streamable HTTP (the daemon's /mcp).

Built on the official `mcp` SDK's low-level `Server`. `schemas` holds the strict input and
output schemas and the agent-facing descriptions, `tools` the one-`Memory`-call-per-tool logic,
`server` the transports.
"""

from urchin.mcp_server.server import LOOPBACK, McpHttp, build_server, serve_stdio, streamable_http_app
from urchin.mcp_server.tools import TOOL_NAMES, check_arguments, run_tool

__all__ = ["build_server", "serve_stdio", "streamable_http_app", "McpHttp", "LOOPBACK", "TOOL_NAMES",
           "check_arguments", "run_tool"]
