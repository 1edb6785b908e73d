"""The end-of-run line ``generation cache: X of Y answers written by this session came from the
cache`` reports this session's own figures from run.json, whichever sessions came before or after."""

from __future__ import annotations

from bcas.run.finalize import cache_lines


def _session(token: str, written: int, cached: int) -> dict[str, object]:
    return {"session": token, "command": "pytest", "records_written": written, "answers_from_cache": cached}


def test_the_cache_line_reports_this_sessions_figures() -> None:
    manifest = {"sessions": [_session("s1", 10, 0), _session("s2", 7, 5), _session("s3", 4, 1)]}
    expected = {"s1": (0, 10), "s2": (5, 7), "s3": (1, 4)}
    for token, (cached, written) in expected.items():
        assert cache_lines(manifest, token) == [
            f"generation cache: {cached} of {written} answers written by this session came from the cache"
        ], token
    # a session that wrote nothing (or is not in run.json) has no line, whatever the others wrote
    assert cache_lines({"sessions": [*manifest["sessions"], _session("s4", 0, 0)]}, "s4") == []
    assert cache_lines(manifest, "s9") == []
    assert cache_lines(None, "s1") == []
