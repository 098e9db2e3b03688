"""Transfers as futures, and copies with asyncio, for :class:`isometry.Client`
(mixed into it): a copy submitted without waiting becomes a
``concurrent.futures.Future`` resolved by its completion event (the Attach
stream's, or a local session's ``Wait``), and ``await client.acopy(...)``
awaits the same future on the running event loop. No thread per transfer:
the client's one completion reader resolves them all.
"""

import asyncio
import concurrent.futures
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from .errors import IsometryError, TransferError
from .records import BoundsLike, InstanceLike, TransferInfo, TransferLike, _id

__all__ = ["FuturesMixin"]


def _settle(future: "concurrent.futures.Future[TransferInfo]", info: TransferInfo,
            check: bool) -> None:
    if future.done():  # cancelled by its holder
        return
    if check and info.state != "done":
        future.set_exception(TransferError(info))
    else:
        future.set_result(info)


class FuturesMixin:
    """Future and asyncio forms of :meth:`copy` and :meth:`wait`."""

    if TYPE_CHECKING:  # what Client provides
        _lock: threading.Lock
        _completions: Dict[int, TransferInfo]

        def copy(self, src: InstanceLike, dst: InstanceLike, priority: int = ...,
                 box: Optional[BoundsLike] = ..., via: Optional[Sequence[Tuple[str, str]]] = ...,
                 wait: bool = ..., timeout: Optional[float] = ..., check: bool = ...) -> Any: ...

        def cancel(self, transfer: TransferLike) -> None: ...

    def _futures_init(self) -> None:
        # Transfer id -> the futures waiting on it (with their `check`);
        # completions whose futures are due, settled outside the lock (a
        # future's callbacks may call this client).
        self._futures: Dict[int, List[Tuple["concurrent.futures.Future[TransferInfo]", bool]]] = {}
        self._due: List[Tuple["concurrent.futures.Future[TransferInfo]", TransferInfo, bool]] = []
        self._futures_failed: Optional[IsometryError] = None

    def _futures_due_locked(self, info: TransferInfo) -> None:
        """A completion arrived (lock held): its futures are due."""
        for future, check in self._futures.pop(info.id, ()):
            self._due.append((future, info, check))

    def _settle_futures(self) -> None:
        """Resolves the due futures (lock not held)."""
        with self._lock:
            due, self._due = self._due, []
        for future, info, check in due:
            _settle(future, info, check)

    def _fail_futures(self, why: Optional[IsometryError], transfer: Optional[int] = None) -> None:
        """Fails the futures of `transfer` (its local ``Wait`` failed), or
        of every transfer (the session ended: no completion comes now),
        with `why` (None: the client closed, or the session ended)."""
        if why is None:
            why = (IsometryError("CANCELLED", "the client closed") if transfer is None else
                   IsometryError("UNAVAILABLE", f"no completion for transfer {transfer}: the "
                                 "session ended"))
        with self._lock:
            if transfer is None:
                pending = [f for fs in self._futures.values() for f, _ in fs]
                self._futures.clear()
                self._futures_failed = why
            else:
                pending = [f for f, _ in self._futures.pop(transfer, ())]
        for future in pending:
            if not future.done():
                future.set_exception(why)

    def transfer_future(self, transfer: TransferLike,
                        check: bool = True) -> "concurrent.futures.Future[TransferInfo]":
        """A future of one of this session's transfers: its final
        TransferInfo once it ends (:class:`TransferError` instead unless it
        ended ``done``, with ``check``). Cancelling the future cancels the
        transfer. The session's end fails it with the reason."""
        tid = _id(transfer, "transfer_future")
        future: "concurrent.futures.Future[TransferInfo]" = concurrent.futures.Future()
        with self._lock:
            info = self._completions.get(tid)
            failed = self._futures_failed
            if info is None and failed is None:
                self._futures.setdefault(tid, []).append((future, check))
        if info is not None:
            _settle(future, info, check)
        elif failed is not None:
            future.set_exception(failed)
        else:
            future.add_done_callback(lambda f: self._cancel_quietly(tid) if f.cancelled() else None)
        return future

    def _cancel_quietly(self, tid: int) -> None:
        try:
            self.cancel(tid)
        except IsometryError:
            pass  # it ended meanwhile, or the session did

    def copy_future(self, src: InstanceLike, dst: InstanceLike, priority: int = 0,
                    box: Optional[BoundsLike] = None,
                    via: Optional[Sequence[Tuple[str, str]]] = None,
                    check: bool = True) -> "concurrent.futures.Future[TransferInfo]":
        """Submits a copy (as :meth:`copy` with ``wait=False``; a refusal
        raises at once) and returns :meth:`transfer_future` of it."""
        tid = self.copy(src, dst, priority=priority, box=box, via=via, wait=False)
        return self.transfer_future(tid, check)

    async def acopy(self, src: InstanceLike, dst: InstanceLike, priority: int = 0,
                    box: Optional[BoundsLike] = None,
                    via: Optional[Sequence[Tuple[str, str]]] = None,
                    check: bool = True) -> TransferInfo:
        """``await client.acopy(src, dst)``: the copy's final TransferInfo,
        awaited on the running event loop (the submission itself is one
        short call; the wait blocks no thread). Cancelling the task cancels
        the transfer."""
        return await asyncio.wrap_future(self.copy_future(src, dst, priority, box, via, check))

    async def await_transfer(self, transfer: TransferLike, check: bool = True) -> TransferInfo:
        """``await client.await_transfer(tid)``: :meth:`wait` for asyncio."""
        return await asyncio.wrap_future(self.transfer_future(transfer, check))
