"""Workspace files as a view: roots, ignore rules, chunking with heading paths and line anchors,
ranged reads, and curated memories."""
