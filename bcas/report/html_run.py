"""The report's "Run" section: the run manifest (:mod:`bcas.run.manifest`) as HTML (``templates/run.html``)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from bcas.records.manifest import MANIFEST_FILE
from bcas.report.templating import render


def manifest_section(manifest: dict[str, Any] | None) -> Markup:
    """HTML of the run manifest: the latest session in full, the earlier ones in one line each."""
    if not manifest or not manifest.get("sessions"):
        return Markup()
    sessions = [s for s in manifest["sessions"] if isinstance(s, dict)]
    if not sessions:
        return Markup()
    last = sessions[-1]
    bcas = last.get("bcas") or {}
    host = last.get("host") or {}
    price = last.get("price_sheet") or {}
    commit = bcas.get("git_commit")
    rows: list[tuple[str, Any]] = [
        (
            "session",
            f"{last.get('session')} · {last.get('started_at')} → {last.get('ended_at') or 'running'}"
            + (" (interrupted: rerun the same command to resume)" if last.get("status") == "interrupted" else ""),
        ),
        (
            "bcas",
            f"{bcas.get('version')}"
            + (f" @ {commit}" + (" (modified)" if bcas.get("git_dirty") else "") if commit else ""),
        ),
        ("python", last.get("python")),
        ("packages", ", ".join(f"{k} {v}" for k, v in (last.get("packages") or {}).items() if v)),
        (
            "host",
            f"{host.get('cpu')}"
            + (f" ({' '.join(map(str, host['cpu_features']))})" if host.get("cpu_features") else "")
            + f" · GPUs: {', '.join(host.get('gpus') or []) or 'none'}",
        ),
        ("seed / epochs", f"{last.get('seed')} / {last.get('epochs')}"),
        ("price sheet", f"{price.get('path')} sha256 {str(price.get('sha256'))[:16]}" if price else "pricing off"),
    ]
    for label, model in (last.get("models") or {}).items():
        recorded = model.get("recorded_fingerprints")
        extra = f" (recorded: {', '.join(recorded)})" if recorded and recorded != [model.get("fingerprint")] else ""
        rows.append(
            (
                f"model {label}",
                f"{model.get('backend')}:{model.get('model') or 'default'}"
                + (f" · served: {model['served']}" if model.get("served") else "")  # what answered (bcas.run.served)
                + f" · {model.get('fingerprint')}{extra}",
            )
        )
    judge = last.get("judge")
    rows.append(("judge", f"{judge.get('spec')} · {judge.get('grade_id')}" if judge else "none"))
    for name, hashes in (last.get("datasets") or {}).items():
        rows.append((f"dataset {name}", ", ".join(hashes)))
    options = [
        (f"--bcas-{name}", f"{o.get('value')}  [{o.get('source')}]")
        for name, o in (last.get("options") or {}).items()
        if isinstance(o, dict)
    ]
    earlier = [
        f"{s.get('session')}: {s.get('started_at')} → {s.get('ended_at')}, exit {s.get('exit_status')}, "
        f"models {', '.join(s.get('models') or {})}, bcas "
        f"{(s.get('bcas') or {}).get('version')} @ {(s.get('bcas') or {}).get('git_commit')}"
        for s in sessions[:-1]
    ]
    return render(
        "run.html",
        manifest_file=MANIFEST_FILE,
        n_sessions=len(sessions),
        rows=[(k, "" if v is None else str(v)) for k, v in rows],
        options=options,
        earlier=earlier,
    )
