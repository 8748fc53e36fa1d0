"""Workspace commands: roots, ranged file reads, curated memories."""

from __future__ import annotations

from typing import Any

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import call, json_option, operation_options, print_json, print_text
from urchin.contract.render import render_context, render_memories, render_memory, render_overview


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
def workspace_add(app: CliState, path: str, name: str | None, allow_secret_files: bool) -> None:
    """Add a folder as a workspace root (again: change its settings)."""
    root = app.memory().workspace_add(path, name, allow_secret_files)
    click.echo(f"added {root.name} → {root.path}" + (" (secret-store files allowed)" if allow_secret_files else ""))
    click.echo("run `urchin index` to index its files (a running daemon does it by itself)", err=True)


@workspace.command("list")
@json_option
@click.pass_obj
def workspace_list(app: CliState, as_json: bool) -> None:
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
def workspace_remove(app: CliState, name: str) -> None:
    """Stop indexing a workspace root (its files are not touched)."""
    root = app.memory().workspace_remove(name)
    click.echo(f"removed {root.name} ({root.path})")


@main.command("get-file")
@operation_options("get_file")
@json_option
@click.pass_obj
def get_file(app: CliState, as_json: bool, **params: Any) -> None:
    """Read a range of lines of a workspace file: `<root>/<path>`, or `<path>` when one root holds it."""
    window = call("get_file", app.memory(), params)
    print_json(window.to_dict()) if as_json else click.echo(window.render())


@main.command("query-source")
@operation_options("query_source")
@json_option
@click.pass_obj
def query_source(app: CliState, as_json: bool, **params: Any) -> None:
    """Search one source only: a journal source (claude, git, ...) or a workspace root's files."""
    memory = app.memory()
    try:
        result = call("query_source", memory, params)
    finally:
        memory.close()
    print_json(result.to_dict()) if as_json else click.echo(render_context(result.to_dict()))


@main.command("fetch-document")
@operation_options("fetch_document")
@json_option
@click.pass_obj
def fetch_document(app: CliState, as_json: bool, **params: Any) -> None:
    """Print one whole document: an event by id, or a workspace root's file by its path."""
    doc = call("fetch_document", app.memory(), params)
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
def memory_create(app: CliState, slug: str, use_when: str, title: str | None, files: tuple[str, ...],
                  folders: tuple[str, ...], queries: tuple[str, ...], source: str | None, hours: float | None,
                  replace: bool) -> None:
    """Create a curated memory named SLUG."""
    from urchin.workspace.curated import Member

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
def memory_edit(app: CliState, slug: str, use_when: str | None, title: str | None, files: tuple[str, ...],
                folders: tuple[str, ...], queries: tuple[str, ...], source: str | None, hours: float | None) -> None:
    """Change the curated memory SLUG: what you give replaces what it held (members as a whole)."""
    from urchin.workspace.curated import Member

    members = ([Member("file", path=f) for f in files] + [Member("folder", path=f) for f in folders]
               + [Member("query", query=q, source=source, hours=hours) for q in queries])
    if not (members or use_when is not None or title is not None):
        raise click.UsageError("say what to change: --use-when, --title, or members (--file, --folder, --query)")
    edited = app.memory().memory_edit(slug, use_when=use_when, members=members or None, title=title)
    click.echo(f"edited {edited.slug} ({len(edited.members)} members) in {edited.path}")


@memory.command("delete")
@click.argument("slug")
@click.pass_obj
def memory_delete(app: CliState, slug: str) -> None:
    """Delete the curated memory SLUG (its definition only: files and events stay)."""
    deleted = app.memory().memory_delete(slug)
    click.echo(f"deleted {deleted.slug}")


@memory.command("list")
@json_option
@click.pass_obj
def memory_list(app: CliState, as_json: bool) -> None:
    """List curated memories: slug, title, when to use, member count."""
    items = [item.summary() for item in app.memory().memory_list()]
    print_json({"memories": items}) if as_json else print_text(render_memories(items))


@memory.command("show")
@operation_options("get_memory")
@json_option
@click.pass_obj
def memory_show(app: CliState, as_json: bool, **params: Any) -> None:
    """Every member's current contents, with notes on what was left out."""
    result = call("get_memory", app.memory(), params)
    print_json(result) if as_json else click.echo(render_memory(result))


@main.command()
@json_option
@click.pass_obj
def overview(app: CliState, as_json: bool) -> None:
    """Start here in a new workspace: files and folders, recent changes, sources, memories."""
    info = app.memory().overview()
    print_json(info) if as_json else print_text(render_overview(info))
