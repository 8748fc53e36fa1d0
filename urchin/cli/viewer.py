"""`urchin open`: sign a browser in to the running daemon's viewer with a one-time login URL."""

from __future__ import annotations

import click

from urchin.cli.group import CliState, main


@main.command("open")
@click.option("--no-browser", is_flag=True, help="Only print the login URL (last line of output); open nothing.")
@click.pass_obj
def open_viewer(app: CliState, no_browser: bool) -> None:
    """Open the timeline viewer of the running daemon (`urchin serve`) in your browser.

    Prints a one-time login URL: it works once, within a minute, and leaves an HttpOnly session
    cookie in that browser; the API token itself never reaches the page.
    """
    from urchin.daemon.client import login_url

    url, ttl = login_url(app.settings())
    if not no_browser:
        import webbrowser

        if not webbrowser.open(url):
            click.echo("could not start a browser here; open the URL below yourself", err=True)
    click.echo(f"one-time login link (valid {ttl:g} s, works once):")
    click.echo(url)

