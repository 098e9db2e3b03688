"""Transfers as futures, and copies with asyncio, for :class:`isometry.Client`
(mixed into it): a copy submitted without waiting becomes a
``concurrent.futures.Future`` resolved by its completion event (the Attach
stream's, or a local session's ``Wait``), and ``await client.acopy(...)``
awaits the same future on the running event loop. No thread per transfer:
the client's one completion reader resolves them all.

On the native path, ``copy_future`` and ``acopy`` between two instances
registered on its mapped allocations (no box, no hops) go through the
shared-memory rings instead (:mod:`isometry.ring`): no gRPC call at all,
and ``acopy``'s futures are the event loop's own, settled in batches.

Example::

    >>> import asyncio
    >>> import isometry
    >>> with isometry.connect("/run/isometry/grpc.sock",
    ...                       local_socket="/run/isometry/isometry.sock") as c:
    ...     s, d = (c.register_instance(c.allocate("sys0", 4096), [4096], [("v", 1)], "F,x")
    ...             for _ in range(2))
    ...     c.copy_future(s, d).result(timeout=30).state
    ...     async def many():
    ...         return await asyncio.gather(*(c.acopy(s, d) for _ in range(100)))
    ...     len(asyncio.run(many()))
    'done'
    100
"""

import asyncio
import concurrent.futures
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set, Tuple

import grpc

from . import isometry_pb2 as pb
from .errors import IsometryError, TransferError
from .native import NativePath
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
        _native: Optional[NativePath]
        _closed: bool
        _stub: Any
        _session_id: int

        def _metadata(self) -> Tuple[Tuple[str, str], ...]: ...

        def _check_open(self) -> None: ...

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
        raises at once) and returns :meth:`transfer_future` of it.

        On the native path a copy between two instances on its mapped
        allocations, with no box or hops, is queued on the rings instead:
        a refusal then fails the future, cancelling the future leaves the
        copy running (the ring names its transfer only at the end; for a
        copy to cancel, ``transfer_future(copy(src, dst, wait=False))``
        has the id at once), futures resolve in submission order, and the
        call never blocks (a copy the full ring cannot take yet waits its
        turn in this process; ``close()`` fails it ``CANCELLED``)."""
        ends = self._ring_ends(src, dst, box, via)
        if ends is not None:
            assert self._native is not None
            future: "concurrent.futures.Future[TransferInfo]" = concurrent.futures.Future()
            self._native.ring.submit(ends[0], ends[1], priority, future, check)
            return future
        tid = self.copy(src, dst, priority=priority, box=box, via=via, wait=False)
        return self.transfer_future(tid, check)

    def acopy(self, src: InstanceLike, dst: InstanceLike, priority: int = 0,
              box: Optional[BoundsLike] = None,
              via: Optional[Sequence[Tuple[str, str]]] = None,
              check: bool = True) -> "asyncio.Future[TransferInfo]":
        """``await client.acopy(src, dst)``: the copy's final TransferInfo,
        awaited on the running event loop. Called in a coroutine, it
        submits the copy at once (a refusal over gRPC raises here) and
        returns an ``asyncio.Future`` of the loop's, not a coroutine, so
        ``asyncio.gather`` of many makes no task per copy. The wait blocks
        no thread. Cancelling the future, or the task awaiting it, cancels
        the transfer (on the native rings the copy runs to its end: see
        :meth:`copy_future`). On the native rings it never blocks the
        loop: while the submission ring is full the copy waits its turn in
        this process."""
        native = self._native
        if native is not None and box is None and not via:
            if self._closed:  # _check_open, inline: every small copy comes here
                raise IsometryError("FAILED_PRECONDITION", "this client is closed")
            # The extension first: one call for Instance records and ids.
            future: "Optional[asyncio.Future[TransferInfo]]" = native.acopy_first(
                src, dst, priority, check)
            if future is None:
                future = native.acopy(src, dst, priority, check)
            if future is not None:
                return future
        loop = asyncio.get_running_loop()  # outside a loop: raises before copying
        return asyncio.wrap_future(self.copy_future(src, dst, priority, box, via, check),
                                   loop=loop)

    def _cancel_ring_copies(self, timeout: float = 10.0) -> None:
        """A native session closing with ring copies in flight: cancels this
        session's transfers over gRPC first (the ring names a transfer only
        at its end), until every ring copy has completed, so that closing
        does not wait for them to run out. A copy still on the submission
        ring is not listed yet: the loop cancels it once the daemon took
        it. Called by NativePath.close, after the client is marked closed."""
        md = self._metadata()
        cancelled: Set[int] = set()
        deadline = time.monotonic() + timeout
        try:
            while (self._native is not None and self._native.session.ring_pending
                   and time.monotonic() < deadline):
                listed = self._stub.ListTransfers(pb.ListTransfersRequest(), timeout=timeout,
                                                  metadata=md)
                for t in listed.transfers:
                    if t.owner.session_id == self._session_id and t.id not in cancelled:
                        cancelled.add(t.id)
                        self._stub.Cancel(pb.CancelRequest(transfer=t.id), timeout=timeout,
                                          metadata=md)
                time.sleep(0.002)
        except grpc.RpcError:
            pass  # the daemon is gone: the close goes on

    def _ring_ends(self, src: InstanceLike, dst: InstanceLike, box: Optional[BoundsLike],
                   via: Optional[Sequence[Tuple[str, str]]]) -> Optional[Tuple[Any, Any]]:
        """The native instances of a copy the rings can take, or None."""
        if self._native is None or box is not None or via:
            return None
        self._check_open()
        return self._native.instances(_id(src, "copy src"), _id(dst, "copy dst"))

    async def await_transfer(self, transfer: TransferLike, check: bool = True) -> TransferInfo:
        """``await client.await_transfer(tid)``: :meth:`wait` for asyncio."""
        return await asyncio.wrap_future(self.transfer_future(transfer, check))
