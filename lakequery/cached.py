"""``cached_property`` without a lock.

Python 3.11's ``functools.cached_property`` holds one lock per property for every
instance of the class: a thread planning a large scan made every other thread's plan of
any table wait for it, and a ``fork()`` while one thread planned left the lock held in
the child for good (its first plan hung). Python 3.12 dropped the lock; this is that
descriptor. Two threads may both compute a value the first time; each gets an equal one
(everything cached here is a pure function of the instance), and one is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class cached_property(Generic[T]):
    """Computes the attribute on first access and stores it in the instance's
    ``__dict__``, which then answers every later access."""

    def __init__(self, func: Callable[[Any], T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> cached_property[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> Any:
        if instance is None:
            return self
        cache = instance.__dict__
        if self.name in cache:
            return cache[self.name]
        value = self.func(instance)
        cache[self.name] = value
        return value


__all__ = ["cached_property"]
