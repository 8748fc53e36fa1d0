"""`Delegated`: a method that is another object's method as it is, declared instead of written out.

`index_files = Delegated(HybridIndex.index_files, "_index")` makes `Memory.index_files` its index
part's: the same signature and docstring, and mypy types it as that method, so a Protocol the class
must satisfy checks it like a method written out. The object is looked up on each call (`_index`
may be built on first use). A `Delegated` may itself be delegated to (the daemon client's methods
that the in-process `Memory` runs). Standard library only: any layer may use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

__all__ = ["Delegated"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class Delegated(Generic[T, P, R]):
    """The method named like `method` of the object held in the attribute `to`, as a method of the
    class that declares this (under the name it is declared as: its `__name__`)."""

    @overload
    def __init__(self: Delegated[T, P, R], method: Callable[Concatenate[T, P], R], to: str) -> None: ...

    @overload
    def __init__(self: Delegated[Any, P, R], method: Delegated[Any, P, R], to: str) -> None: ...

    def __init__(self, method: Any, to: str) -> None:
        self.to = to
        self.method = method.__name__      # a function's name, or a delegated method's declared name
        self.__name__ = self.method
        self.__doc__ = method.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.__name__ = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Delegated[T, P, R]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self.to), self.method)
