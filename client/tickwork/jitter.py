"""A schedule's jitter: the delay added to each fire's start so that many schedules on
one expression do not all start at once.

``STABLE`` derives one delay from the schedule's name (the same on every fire, every
restart and every replica, like systemd's FixedRandomDelay or Jenkins' ``H``); ``RANDOM``
draws a new one per fire. Either lies in [0, jitter_seconds). The service and the CLI's
previews share :func:`stable_delay_s`, so a preview shows the start the service will use.
"""

from __future__ import annotations

import hashlib
import random

#: The most jitter a schedule may have, seconds (a day).
MAX_JITTER_S = 86400.0


def stable_delay_s(name: str, jitter_s: float) -> float:
    """The STABLE delay of the schedule ``name``, seconds in [0, ``jitter_s``): the first
    8 bytes of the SHA-256 of its name (UTF-8) as a fraction of 2**64, times ``jitter_s``,
    rounded down to the millisecond. 0 when ``jitter_s`` <= 0."""
    if jitter_s <= 0:
        return 0.0
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    millis = int(fraction * jitter_s * 1000)
    return min(millis / 1000, _below(jitter_s))


def random_delay_s(jitter_s: float, rng: random.Random) -> float:
    """A RANDOM delay, seconds, uniform in [0, ``jitter_s``) and rounded down to the
    microsecond; 0 when ``jitter_s`` <= 0."""
    if jitter_s <= 0:
        return 0.0
    micros = int(rng.random() * jitter_s * 1_000_000)
    return min(micros / 1_000_000, _below(jitter_s))


def delay_s(name: str, jitter_s: float, mode: str, rng: random.Random) -> float:
    """The delay of one fire of the schedule ``name``: :func:`stable_delay_s` for mode
    ``"STABLE"``, else :func:`random_delay_s`."""
    if mode == "STABLE":
        return stable_delay_s(name, jitter_s)
    return random_delay_s(jitter_s, rng)


def _below(jitter_s: float) -> float:
    """The largest microsecond count strictly below ``jitter_s``, in seconds."""
    micros = int(jitter_s * 1_000_000)
    if micros / 1_000_000 >= jitter_s:
        micros -= 1
    return max(micros, 0) / 1_000_000


def jitter_text(name: str, jitter_s: float, mode: str) -> str:
    """How a schedule's starts follow its fire times, for previews: empty without jitter,
    ``"37.25 s after each fire time (stable)"``, or ``"up to 30 s after each fire time
    (random)"``."""
    if jitter_s <= 0:
        return ""
    if mode == "STABLE":
        return f"{stable_delay_s(name, jitter_s):g} s after each fire time (stable)"
    return f"up to {jitter_s:g} s after each fire time (random)"
