"""A job's identity (its key, its name and the other words its sources give) as it can be stored (pure).

The agent's `job_info` and a scheduler's records are input like a client's: a name of 10,000 characters, bytes
that are not UTF-8, a NUL. What every source's words go through before they are stored (the ingest's, the
scheduler sync's), so that the same job keeps one key whoever names it:

- `key_storable`: a job key that fits the column (255 characters) and holds no control character is kept as it is;
  any other (`k8s/<namespace>/<pod>` of a 250-character pod name) is cut and ends in `~` and 16 hex digits of its
  SHA-256: the same key from the agent and from the scheduler gives the same stored key, two keys two.
- `text_storable`: free text (a name, a user, an account): control characters and lone surrogates (bytes that
  were not UTF-8) become U+FFFD, and text longer than its column is cut, ending in "…".
"""

from __future__ import annotations

import hashlib
import unicodedata

TEXT_MAX = 255  # the Job's text columns: job_key, job_id, name, user, account, namespace, pod...
REPLACEMENT = "\ufffd"
CUT = "…"
_HASH_HEX = 16


def _unstorable(char: str) -> bool:
    """A character Postgres cannot hold (NUL, a lone surrogate) or a control character."""
    return unicodedata.category(char) in ("Cc", "Cs")


def key_storable(key: str) -> str:
    """The job key as stored: itself where it fits and is clean, else cut and marked with its hash."""
    if len(key) <= TEXT_MAX and not any(_unstorable(c) for c in key):
        return key
    digest = hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()[:_HASH_HEX]
    clean = "".join(REPLACEMENT if _unstorable(c) else c for c in key)
    return clean[: TEXT_MAX - _HASH_HEX - 1] + "~" + digest


def text_storable(text: str, *, limit: int = TEXT_MAX) -> tuple[str, list[str]]:
    """Free text as it can be stored and shown, and what was changed to make it so (empty: nothing)."""
    changes: list[str] = []
    if any(_unstorable(c) for c in text):
        text = "".join(REPLACEMENT if _unstorable(c) else c for c in text)
        changes.append("bytes that are not UTF-8 or control characters replaced by U+FFFD")
    if len(text) > limit:
        changes.append(f"cut from {len(text):,} to {limit} characters")
        text = text[: limit - len(CUT)] + CUT
    return text, changes
