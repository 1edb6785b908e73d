"""What each model of a run serves, beside the name it was asked for.

The name a run is given is a request: llama.cpp's server answers any name with the one
GGUF it loaded, so ``--bcas-model Qwen/Qwen3-8B`` against a server of SmolLM2 gets
SmolLM2's answers.  Every artifact therefore names the model that answered beside the
one that was asked for:

* a served model (``openai``): the name its server reports (:meth:`ServerFacts.name
  <bcas.llm.served.ServerFacts.name>`, read by the preflight): the GGUF's file name from
  llama.cpp's ``/props`` ``model_path``, vLLM's ``root``, else the id the server answered
  with; ``None`` when the run skipped its preflight (``--bcas-no-preflight``);
* an embedded model: its GGUF's file name (the shipped one when none is named);
* a test double (``mock``): its label (``mock-gold``);
* any other backend (``vllm``): the model it was given (a local folder's name, a hub id).

When the served name is not the requested one (:func:`differs`: their label forms
differ, beyond a variant suffix such as ``-Q4_K_M``; :func:`bcas.identity.same_model`), the case ids carry both, ``qwen3-8b~smollm2-135m-instruct-q4_1-...``
(:meth:`bcas.run.plan.Plan.with_served`); the model's label, and so its records, price
and baseline, stay the requested name's.  ``run.json`` holds ``served`` per model, the
summary rows ``served`` per row and the report shows it beside the model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any

from bcas.identity import same_model
from bcas.llm import backend_meta
from bcas.run.settings import ModelSpec


def _first_url(base_url: str | None) -> str | None:
    from bcas.llm.multi_endpoint import split_base_urls

    urls = split_base_urls(base_url)
    return urls[0] if urls else None


def served_name(spec: ModelSpec, preflight: Iterable[Mapping[str, Any]]) -> str | None:
    """The name of what ``spec`` serves (see the module docstring); ``None``: not known."""
    if backend_meta(spec.backend, "needs_base_url"):
        first = _first_url(spec.base_url)  # several servers of one model serve one (checked by the preflight)
        for result in preflight:
            if result.get("base_url") == first and result.get("model") == spec.model:
                name = result.get("served_name")
                return str(name) if name else None
        return None
    if backend_meta(spec.backend, "identity") == "gguf":
        if spec.model:
            return PurePath(spec.model).name
        from bcas.llm import ModelError
        from bcas.llm.embedded import default_gguf_path

        try:
            return default_gguf_path().name
        except ModelError:  # the shipped model is not installed: the run says so when it loads it
            return None
    if spec.model and not backend_meta(spec.backend, "label_prefix"):  # a checkpoint: its folder, or its hub id
        return PurePath(spec.model).name if spec.model.startswith((".", "/")) else spec.model
    return spec.label  # a test double (mock): its label, mock-gold


def differs(spec: ModelSpec, served: str | None) -> bool:
    """``served`` is not what ``spec`` asked for, by its name or its label (:func:`bcas.identity.same_model`)."""
    if not served or not spec.model:
        return False
    return not (same_model(spec.model, served) or same_model(spec.label, served))


def served_names(models: Iterable[ModelSpec], preflight: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Label -> served name of each model that serves something other than its requested name."""
    results = list(preflight)
    names = {}
    for spec in models:
        name = served_name(spec, results)
        if name is not None and differs(spec, name):
            names[spec.label] = name
    return names


__all__ = ["differs", "served_name", "served_names"]
