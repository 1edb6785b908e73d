"""API keys: what looks like one, so that it is never printed, logged or recorded.

An option that takes the *name* of an environment variable holding a key
(``--bcas-api-key-env``, ``bcas rejudge --api-key-env``) is sometimes given the key
itself.  Such a value is refused with a message that does not echo it.
"""

from __future__ import annotations

import re

# Prefixes of the keys of common providers (OpenAI, Anthropic, Hugging Face, GitHub, GitLab,
# Slack, Google, AWS).
KEY_PREFIXES = ("sk-", "sk_", "hf_", "ghp_", "gho_", "ghs_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "AIza", "AKIA")
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KEY_LIKE = (
    "looks like a key, not a variable name (give the NAME of the variable that holds the key, e.g. OPENAI_API_KEY)"
)
NOT_A_NAME = "is not an environment variable name (letters, digits and _, not starting with a digit)"


def looks_like_key(value: str) -> bool:
    """Whether ``value`` looks like a secret rather than the name of an environment variable.

    A known provider prefix; a long value no variable could be named (``-``, ``.``, ``/``);
    or a long name mixing lower case, upper case and digits, as random tokens do and
    variable names (``OPENAI_API_KEY``) do not.
    """
    text = value.strip()
    if text.startswith(KEY_PREFIXES):
        return True
    if not VARIABLE_NAME.fullmatch(text):
        return len(text) >= 16
    mixed = any(c.islower() for c in text) and any(c.isupper() for c in text) and any(c.isdigit() for c in text)
    return len(text) >= 24 and mixed


def key_name_problem(value: str | None) -> str | None:
    """Why ``value`` cannot be a variable name, in words that never repeat it; None when it can."""
    if value is None:
        return None
    if looks_like_key(value):
        return KEY_LIKE
    if not VARIABLE_NAME.fullmatch(value.strip()):
        return NOT_A_NAME
    return None


__all__ = ["KEY_LIKE", "NOT_A_NAME", "key_name_problem", "looks_like_key"]
