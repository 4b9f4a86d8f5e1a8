"""WADO-RS retrieval of a series instance by instance through a bounded pool of concurrent requests: at most
`MEDCOPILOT_PACS_WORKERS` requests in flight, each under the same limits as a whole-series answer (deadline,
silent-read limit, part size, one part per answer, the instance asked for), each instance kept under a file name
fixed by its place in instance order, whatever order the answers come in. The first failure stops the others
and is raised once every request has ended (no part file is left behind)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from copilot.pacs.cache import CacheBudget
from copilot.pacs.client import PacsClient
from copilot.pacs.limits import Deadline
from copilot.pacs.writer import InstanceWriter, RetrievalStopped, next_index

Arrived = Callable[[int, Path, Any], None]  # place in instance order, file, its dataset as checked (or None)


class SeriesProgress(Protocol):
    """Told what a retrieval lists and what arrives: a series' instance count, then each instance kept (its place
    in instance order, its file, its dataset as read to check it or None), from the retrieving threads."""

    def listed(self, series: str, total: int) -> None: ...

    def arrived(self, series: str, position: int, path: Path, dataset: Any = None) -> None: ...


class _Shared:
    """What the pool's threads share: the cache budget and the held instances behind one lock, the stop flag
    and the first failure."""

    def __init__(self, budget: CacheBudget, held: dict[str, Path]) -> None:
        self.lock = threading.Lock()
        self.budget, self.held = budget, held
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def take(self, n: int) -> None:
        with self.lock:
            self.budget.take(n)

    def give(self, n: int) -> None:
        with self.lock:
            self.budget.give(n)

    def keep(self, uid: str, path: Path) -> None:
        with self.lock:
            self.held[uid] = path

    def fail(self, exc: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = exc
        self.stop.set()


def retrieve_pooled(
    client: PacsClient, study: str, series: str, folder: Path, listing: list[tuple[str, int | None]],
    held: dict[str, Path], budget: CacheBudget, deadline: Deadline, on_instance: Arrived | None = None,
) -> None:  # fmt: skip
    """Retrieve the listed instances `held` lacks into `folder` with at most `client.limits.workers` requests at
    once; `held` gains each as it is kept and `on_instance` hears of it (held ones first). The first failure
    (a named `pacs_*` refusal) is raised after all requests have ended; the instances kept stay."""
    shared = _Shared(budget, held)
    base = next_index(folder)
    missing = [(pos, uid) for pos, (uid, _) in enumerate(listing) if uid not in held]
    for pos, (uid, _) in enumerate(listing):
        if uid in held and on_instance is not None:
            on_instance(pos, held[uid], None)

    def one(k: int, pos: int, uid: str) -> None:
        if shared.stop.is_set():
            return
        writer = InstanceWriter(folder, series, uid, base + k, shared.take, shared.give, shared.stop)
        try:
            client.retrieve_instance(study, series, uid, writer, deadline)
            path = writer.commit()  # the answer ended properly with this one instance
            shared.keep(uid, path)
            if on_instance is not None:
                on_instance(pos, path, writer.dataset)
        except RetrievalStopped:
            writer.discard()
        except BaseException as exc:  # the first one is raised in the caller's thread
            writer.discard()
            shared.fail(exc)

    workers = max(1, min(client.limits.workers, len(missing)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pacs-wado") as pool:
        for future in [pool.submit(one, k, pos, uid) for k, (pos, uid) in enumerate(missing)]:
            future.result()
    if shared.error is not None:
        raise shared.error
