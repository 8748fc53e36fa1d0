"""Shared fixtures (embedder branch: only the real embedding server; the lead's conftest adds the rest)."""

from embedder_fixture import embedder_url  # noqa: F401
