"""Workspace commands: roots, ranged file reads, curated memories."""

from __future__ import annotations

import click

from urchin.cli.group import AppContext, main
from urchin.cli.options import json_option, print_json


@main.group()
def workspace() -> None:
    """Folders whose files Urchin indexes and reads (workspace roots)."""


@workspace.command("add")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--name", default=None, help="Name of the root (default: the folder's name).")
@click.option("--allow-secret-files", is_flag=True,
              help="Also index and serve secret stores (.env, keys, credentials), still redacted. "
                   "Adding the same folder again without it withdraws the opt-in.")
@click.pass_obj
def workspace_add(app: AppContext, path: str, name: str | None, allow_secret_files: bool) -> None:
    """Add a folder as a workspace root (again: change its settings)."""
    root = app.memory().workspace_add(path, name, allow_secret_files)
    click.echo(f"added {root.name} → {root.path}" + (" (secret-store files allowed)" if allow_secret_files else ""))
    click.echo("run `urchin index` to index its files (a running daemon does it by itself)", err=True)


@workspace.command("list")
@json_option
@click.pass_obj
def workspace_list(app: AppContext, as_json: bool) -> None:
    """List the workspace roots."""
    for root in app.memory().workspace_list():
        if as_json:
            print_json(root.to_dict())
        else:
            extra = "\tsecret-store files allowed" if root.allow_secret_files else ""
            click.echo(f"{root.name}\t{root.path}{extra}")


@workspace.command("remove")
@click.argument("name")
@click.pass_obj
def workspace_remove(app: AppContext, name: str) -> None:
    """Stop indexing a workspace root (its files are not touched)."""
    root = app.memory().workspace_remove(name)
    click.echo(f"removed {root.name} ({root.path})")


@main.command("get-file")
@click.argument("path")
@click.option("--from-line", default=1, show_default=True, type=int, help="First line to show (1-based).")
@click.option("--max-lines", default=200, show_default=True, type=int, help="Lines to show (at most 2000).")
@json_option
@click.pass_obj
def get_file(app: AppContext, path: str, from_line: int, max_lines: int, as_json: bool) -> None:
    """Read a range of lines of a workspace file: `<root>/<path>`, or `<path>` when one root holds it."""
    window = app.memory().get_file(path, from_line, max_lines)
    print_json(window.to_dict()) if as_json else click.echo(window.render())


@main.command("query-source")
@click.argument("source")
@click.argument("query")
@click.option("--limit", default=10, show_default=True, type=int, help="Most results.")
@json_option
@click.pass_obj
def query_source(app: AppContext, source: str, query: str, limit: int, as_json: bool) -> None:
    """Search one source only: a journal source (claude, git, ...) or a workspace root's files."""
    memory = app.memory()
    try:
        result = memory.query_source(source, query, limit)
    finally:
        memory.close()
    from urchin.cli.context import print_context

    print_context(result, as_json)


@main.command("fetch-document")
@click.argument("source")
@click.argument("doc_id", metavar="ID")
@json_option
@click.pass_obj
def fetch_document(app: AppContext, source: str, doc_id: str, as_json: bool) -> None:
    """Print one whole document: an event by id, or a workspace root's file by its path."""
    doc = app.memory().fetch_source_document(source, doc_id)
    print_json(doc) if as_json else click.echo(doc["content"])


@main.group()
def memory() -> None:
    """Curated memories: complete sets of files, folders and saved queries for known workflows."""


@memory.command("create")
@click.argument("slug")
@click.option("--use-when", required=True, help="When an agent should read this memory.")
@click.option("--title", default=None, help="A human title (default: from the slug).")
@click.option("--file", "files", multiple=True, help="A workspace file (repeatable).")
@click.option("--folder", "folders", multiple=True, help="A whole workspace folder (repeatable).")
@click.option("--query", "queries", multiple=True, help="A saved journal search (repeatable).")
@click.option("--source", default=None, help="With --query: only this source.")
@click.option("--hours", default=None, type=float, help="With --query: window in hours (default: a year).")
@click.option("--replace", is_flag=True, help="Overwrite a memory with the same slug.")
@click.pass_obj
def memory_create(app: AppContext, slug: str, use_when: str, title: str | None, files: tuple[str, ...],
                  folders: tuple[str, ...], queries: tuple[str, ...], source: str | None, hours: float | None,
                  replace: bool) -> None:
    """Create a curated memory named SLUG."""
    from urchin.workspace.memories import Member

    members = ([Member("file", path=f) for f in files] + [Member("folder", path=f) for f in folders]
               + [Member("query", query=q, source=source, hours=hours) for q in queries])
    created = app.memory().memory_create(slug, use_when, members, title, replace)
    click.echo(f"created {created.slug} ({len(created.members)} members) in {created.path}")


@memory.command("edit")
@click.argument("slug")
@click.option("--use-when", default=None, help="New text for when an agent should read it.")
@click.option("--title", default=None, help="A new title.")
@click.option("--file", "files", multiple=True, help="A workspace file (repeatable; members given replace all).")
@click.option("--folder", "folders", multiple=True, help="A whole workspace folder (repeatable).")
@click.option("--query", "queries", multiple=True, help="A saved journal search (repeatable).")
@click.option("--source", default=None, help="With --query: only this source.")
@click.option("--hours", default=None, type=float, help="With --query: window in hours (default: a year).")
@click.pass_obj
def memory_edit(app: AppContext, slug: str, use_when: str | None, title: str | None, files: tuple[str, ...],
                folders: tuple[str, ...], queries: tuple[str, ...], source: str | None, hours: float | None) -> None:
    """Change the curated memory SLUG: what you give replaces what it held (members as a whole)."""
    from urchin.workspace.memories import Member

    members = ([Member("file", path=f) for f in files] + [Member("folder", path=f) for f in folders]
               + [Member("query", query=q, source=source, hours=hours) for q in queries])
    if not (members or use_when is not None or title is not None):
        raise click.UsageError("say what to change: --use-when, --title, or members (--file, --folder, --query)")
    edited = app.memory().memory_edit(slug, use_when=use_when, members=members or None, title=title)
    click.echo(f"edited {edited.slug} ({len(edited.members)} members) in {edited.path}")


@memory.command("delete")
@click.argument("slug")
@click.pass_obj
def memory_delete(app: AppContext, slug: str) -> None:
    """Delete the curated memory SLUG (its definition only: files and events stay)."""
    deleted = app.memory().memory_delete(slug)
    click.echo(f"deleted {deleted.slug}")


@memory.command("list")
@json_option
@click.pass_obj
def memory_list(app: AppContext, as_json: bool) -> None:
    """List curated memories: slug, title, when to use, member count."""
    for item in app.memory().memory_list():
        summary = item.summary()
        if as_json:
            print_json(summary)
        else:
            click.echo(f"{item.slug}\t{item.title} ({summary['members']} members) — use when: {item.use_when}")


@memory.command("show")
@click.argument("slug")
@click.option("--token-budget", default=8000, show_default=True, type=int, help="Most tokens (4 chars each).")
@json_option
@click.pass_obj
def memory_show(app: AppContext, slug: str, token_budget: int, as_json: bool) -> None:
    """Every member's current contents, with notes on what was left out."""
    result = app.memory().memory_get(slug, token_budget)
    if as_json:
        print_json(result)
        return
    click.echo(f"# {result['title']} — use when: {result['useWhen']}")
    for part in result["members"]:
        click.echo(f"\n## {part['member']}\n{part['content']}")
    for note in result["coverage"]:
        click.echo(f"\n[coverage] {note['member']}: {note['status']} ({note['reason']})")


@main.command()
@json_option
@click.pass_obj
def overview(app: AppContext, as_json: bool) -> None:
    """Start here in a new workspace: files and folders, recent changes, sources, memories."""
    info = app.memory().overview()
    if as_json:
        print_json(info)
        return
    for root in info["roots"]:
        click.echo(f"{root['name']} ({root['path']}): {root['files']} files in {root['folders']} folders, "
                   f"{root['bytes'] / 1e6:.1f} MB")
        for folder in root["largestFolders"]:
            click.echo(f"  {folder['folder']:<24} {folder['files']:>6} files {folder['bytes'] / 1e6:>8.1f} MB")
        click.echo("  recently changed:")
        for change in root["recentChanges"][:5]:
            click.echo(f"    {change['updatedAt']}  {change['path']}")
    journal = info["journal"]
    click.echo(f"journal: {journal['events']} events ({journal['firstTimestamp']} … {journal['lastTimestamp']})")
    for memory in info["memories"]:
        click.echo(f"memory {memory['slug']}: {memory['title']} — use when: {memory['useWhen']}")
    for source in info.get("sources", []):
        click.echo(f"source {source['name']}: {source.get('events', 0)} events, last run {source.get('lastRun')}")
    if "index" in info:
        click.echo("index: " + ", ".join(f"{k}={v}" for k, v in info["index"].items()))
