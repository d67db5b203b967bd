"""A cache keyed on the identity of an argument, for pure functions of catalog objects (frozen pydantic models whose
lists make them unhashable) and of lists built once and read many times (a GGUF file's tensors): `fit` and the
llama.cpp fit search ask for the same result of the same object dozens of times."""

from __future__ import annotations

import functools


def by_identity(maxsize: int = 64, objects: int = 1):
    """Cache fn(obj, *args) on (id(obj), args), keeping obj alive beside its result so that its id cannot be
    reused while cached; the oldest entry goes first. obj must not change after the call (catalog entries are
    frozen; the lists passed are built once). With `objects` = n, the first n arguments are keyed by identity (a
    model and a card), the rest by value."""
    def deco(fn):
        cache: dict = {}

        @functools.wraps(fn)
        def wrapper(*args):
            objs, rest = args[:objects], args[objects:]
            key = (tuple(map(id, objs)), rest)
            hit = cache.get(key)
            if hit is not None and all(a is b for a, b in zip(hit[0], objs)):
                return hit[1]
            value = fn(*args)
            if len(cache) >= maxsize:
                cache.pop(next(iter(cache)))
            cache[key] = (objs, value)
            return value

        wrapper.cache_clear = cache.clear
        return wrapper
    return deco
