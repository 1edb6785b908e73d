"""``bcas serve`` and ``bcas index``: local servers and retrieval indexes.

``bcas serve`` is a llama.cpp server for the ``openai`` backend (:mod:`bcas.llm.llama_server`).
It takes the arguments of ``python -m llama_cpp.server`` (its ``--help`` is the server's
own); ``bcas models --gguf`` prints the shipped GGUF's path for ``--model``::

    bcas serve --model "$(bcas models --gguf)" --host 127.0.0.1 --port 8080 --n_ctx 8192

``bcas index evaluate`` builds retrieval indexes and measures recall and MRR
(:mod:`bcas.retrieval.evaluate`); ``bcas index milvus`` runs a Milvus Lite server
(:mod:`bcas.retrieval.milvus_lite`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

import click

from bcas.cli.framework import Group, fail

if TYPE_CHECKING:
    import argparse


@click.command(
    "serve",
    help="Start a llama.cpp server (the arguments of llama_cpp.server).",  # pragma: no mutate
    add_help_option=False,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def serve(args: Sequence[str]) -> int:
    """Run the server in this process until it is stopped; llama_cpp.server reads ``sys.argv``."""
    import argparse
    from unittest import mock

    from bcas.llm.llama_server import main as server_main

    def one_line(parser: argparse.ArgumentParser, message: str) -> NoReturn:
        fail(f"{parser.prog}: {message}")  # the server's parser would print its usage over many lines

    sys.argv = ["bcas serve", *args]
    with mock.patch.object(argparse.ArgumentParser, "error", one_line):
        try:
            server_main()
        except (ValueError, OSError) as exc:  # e.g. a --model file that is not there
            fail(exc)
    return 0


@click.group("index", cls=Group, help="Retrieval indexes.")  # pragma: no mutate
def index() -> None:
    """The indexes' subcommands."""


def _modes() -> tuple[str, ...]:
    from bcas.retrieval.evaluate import MODES

    return MODES


@index.command(
    "evaluate",
    help="Build retrieval indexes of a dataset and measure recall@k and MRR of each mode.",  # pragma: no mutate
)
@click.option(
    "--dataset",
    default="hotpotqa",
    show_default=True,
    help="registered dataset name or JSONL path",  # pragma: no mutate
)
@click.option(
    "--k",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="documents retrieved",  # pragma: no mutate
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="seeded subset of items used as queries",  # pragma: no mutate
)
@click.option(
    "--modes",
    multiple=True,
    type=click.Choice(("bm25-plain", "bm25", "dense", "hybrid", "hybrid_rerank")),
    help="modes to measure (repeat the option; default: all)",  # pragma: no mutate
)
@click.option(
    "--rerank-limit",
    type=click.IntRange(min=0),
    default=40,
    show_default=True,
    help="items for hybrid_rerank (0: all)",  # pragma: no mutate
)
@click.option(
    "--rerank-candidates",
    type=click.IntRange(min=1),
    default=None,
    help="candidate pool for hybrid_rerank",  # pragma: no mutate
)
@click.option("--fusion", type=click.Choice(("rrf", "convex")), default="rrf", show_default=True)
@click.option(
    "--no-phrase-boost",
    is_flag=True,
    help="hybrid modes fuse plain BM25 instead of phrase-boosted BM25",  # pragma: no mutate
)
@click.option("--embedder", default="minilm", show_default=True, help="dense embedder")  # pragma: no mutate
@click.option("--reranker", default="llm", show_default=True, help="reranker of hybrid_rerank")  # pragma: no mutate
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the query subset")  # pragma: no mutate
@click.option("--no-progress", is_flag=True, help="no progress bars")  # pragma: no mutate
def evaluate(
    dataset: str,
    k: int,
    limit: int | None,
    modes: Sequence[str],
    rerank_limit: int,
    rerank_candidates: int | None,
    fusion: str,
    no_phrase_boost: bool,
    embedder: str,
    reranker: str,
    seed: int,
    no_progress: bool,
) -> int:
    from bcas.config import RetrievalConfig
    from bcas.data import DatasetError, load_dataset
    from bcas.retrieval.evaluate import evaluate_retrieval, format_table

    try:
        load_dataset(dataset)  # a bad name or file: one line, before any index is built
    except DatasetError as exc:
        fail(exc)
    base = RetrievalConfig(fusion=fusion, embedder=embedder, reranker=reranker, phrase_boost=not no_phrase_boost)
    from bcas.cli.records import input_errors
    from bcas.retrieval.retriever import RetrievalError

    errors: tuple[type[Exception], ...] = (RetrievalError, *input_errors())
    try:
        results = evaluate_retrieval(
            dataset,
            modes=list(modes) or list(_modes()),
            k=k,
            limit=limit,
            rerank_limit=rerank_limit or None,
            rerank_candidates=rerank_candidates,
            config=base,
            seed=seed,
            progress=not no_progress,
        )
    except errors as exc:  # an unknown embedder or reranker, an index that cannot be built: one line
        fail(exc)
    click.echo(f"dataset: {dataset}  (collection: all documents of the dataset; k = {k})")
    click.echo(format_table(results))
    return 0


@index.command("milvus", help="Start a Milvus Lite server for the search-engine index.")  # pragma: no mutate
@click.option("--data-dir", required=True, metavar="DIR", help="where the server keeps its data")  # pragma: no mutate
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=19530,
    show_default=True,
    help="0: a free port",  # pragma: no mutate
)
@click.option("--check", is_flag=True, help="start, answer one request, stop (CI's smoke check)")  # pragma: no mutate
def milvus(data_dir: str, port: int, check: bool) -> int:
    from bcas.retrieval.milvus_lite import EngineStartError, MilvusLiteServer

    try:
        server = MilvusLiteServer(data_dir, port).start()
    except EngineStartError as exc:  # the server did not come up: one line, not a traceback
        fail(exc)
    click.echo(f"milvus-lite serving {server.url} (data in {server.data_dir}; started in {server.started_in_s:.1f} s)")
    try:
        if not check:
            assert server.process is not None
            server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


__all__ = ["index", "serve"]
