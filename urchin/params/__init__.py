"""Operations' parameters as types, and their limits, declared once (a leaf: errors, checks, event only).

`limits`: every bound, default and choice an operation's parameters have. `search` and `context`: the
typed parameters of `search` and `search_context`, validated when built. The contract (`urchin/contract/`)
declares the front ends' spellings and help from these; the layers below take the typed parameters and
never check them again.
"""
