"""The plumbing of every request the local stack answers: moto's lookup of a response class's
actions, and botocore's cleaning of the parts of its User-Agent header. Both compute the same
answer from the same input on every request; here each is computed once.

A local run's handlers make thousands of DynamoDB calls, each a full botocore request answered by
moto: moto lists the public functions of the response class (``inspect.getmembers`` over a few
hundred attributes) on every call, and botocore cleans each User-Agent component character by
character (about thirty of them per request).
"""

from __future__ import annotations

import functools
import threading
from typing import Callable

from longstep_kit.local.moto_patches.registry import generation, patch, speed

_names: dict[type, tuple[int, list[str]]] = {}
_names_lock = threading.Lock()


@speed
def response_actions_listed_once() -> None:
    """moto's ``call_action`` lists each response class's functions once, not on every request.

    Keeps identical: the list is moto's own ``method_names_from_class`` of the class (same names,
    same order), and it is listed again whenever any patch of the local stack is applied or
    undone (a patch can add an API to a response class: :func:`registry.generation` counts
    them), so a cached list never misses an action a class has.
    """
    from moto.core import responses

    patch(responses, "method_names_from_class", listing_once(responses.method_names_from_class))


def listing_once(list_names: Callable[[type], list[str]]) -> Callable[[type], list[str]]:
    """``list_names`` (moto's ``method_names_from_class``), each class listed once per patch generation."""

    def names(cls: type) -> list[str]:
        now = generation()
        found = _names.get(cls)
        if found is None or found[0] != now:
            found = (now, list_names(cls))
            with _names_lock:
                _names[cls] = found
        return list(found[1])  # a copy: the caller may change its list

    return names


@speed
def user_agent_parts_cleaned_once() -> None:
    """botocore cleans each distinct User-Agent component once (its own function, remembered).

    ``sanitize_user_agent_string_component`` is a pure function of its two arguments (a string
    and a flag) that returns a new string: remembering its answers gives the same header.
    Bounded: a process sees a few dozen distinct components (SDK, Python, OS versions, features).
    """
    from botocore import useragent

    patch(useragent, "sanitize_user_agent_string_component", functools.lru_cache(maxsize=1024)(useragent.sanitize_user_agent_string_component))
