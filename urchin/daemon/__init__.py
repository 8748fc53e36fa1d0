"""The daemon (`urchin serve`): the intake HTTP API over one long-lived, hot `Memory`.

`server.Daemon` runs it, `app.build_app` is the Starlette app, `writer.GroupWriter` shares fsyncs
between concurrent writers, `follower.Follower` keeps the views current, `client` finds and calls it.
"""
