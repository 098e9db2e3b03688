"""Copies and their transfers from :class:`isometry.Client`: copies between
instances (through the native rings where they can), distributed instances
and redistribution, and waiting on, cancelling and listing transfers;
mixed into Client.
"""

import collections
import concurrent.futures
import threading
from typing import (TYPE_CHECKING, Any, List, Literal, Optional, Sequence, Tuple, Union, cast,
                    overload)

from . import isometry_pb2 as pb
from .distributed import DimLike, distribution_spec
from .errors import IsometryError, TransferError
from .native import NativePath
from .records import BoundsLike, InstanceLike, TransferInfo, TransferLike, _box, _id
from .ring import completion

__all__ = ["TransfersMixin"]


class TransfersMixin:
    """Copy and transfer calls of :class:`isometry.Client`."""

    if TYPE_CHECKING:  # what Client provides
        call_timeout: Optional[float]
        _lock: threading.Lock
        _native: Optional[NativePath]
        _closed: bool
        _completions: "collections.OrderedDict[int, TransferInfo]"

        @property
        def _over_local_socket(self) -> bool: ...

        def _call(self, method: str, request: Any, timeout: Any = ...,
                  stream: bool = False) -> Any: ...

        def _check_open(self) -> None: ...

        def _watch(self, tid: int) -> None: ...

        def _record_locked(self, info: TransferInfo) -> None: ...

        def _settle_futures(self) -> None: ...

    @overload
    def copy(self, src: InstanceLike, dst: InstanceLike, priority: int = ...,
             box: Optional[BoundsLike] = ..., via: Optional[Sequence[Tuple[str, str]]] = ...,
             wait: Literal[True] = ..., timeout: Optional[float] = ...,
             check: bool = ...) -> TransferInfo: ...

    @overload
    def copy(self, src: InstanceLike, dst: InstanceLike, priority: int = ...,
             box: Optional[BoundsLike] = ..., via: Optional[Sequence[Tuple[str, str]]] = ..., *,
             wait: Literal[False], timeout: Optional[float] = ..., check: bool = ...) -> int: ...

    @overload
    def copy(self, src: InstanceLike, dst: InstanceLike, priority: int = ...,
             box: Optional[BoundsLike] = ..., via: Optional[Sequence[Tuple[str, str]]] = ...,
             wait: bool = ..., timeout: Optional[float] = ...,
             check: bool = ...) -> Union[TransferInfo, int]: ...

    def copy(
        self,
        src: InstanceLike,
        dst: InstanceLike,
        priority: int = 0,
        box: Optional[BoundsLike] = None,
        via: Optional[Sequence[Tuple[str, str]]] = None,
        wait: bool = True,
        timeout: Optional[float] = None,
        check: bool = True,
    ) -> Union[TransferInfo, int]:
        """Copies ``src`` into ``dst`` (both registered by this session),
        converting between their layouts.

        Args:
            src, dst: the source and destination instances.
            priority: higher runs first.
            box: the part of the index space to copy (same forms as
                ``bounds``); None copies the source's whole index space.
            via: forced intermediate hops ``[(memory, layout), ...]``; None
                lets the planner choose.
            wait: if true, return when the transfer has ended.
            timeout: with ``wait``, seconds to wait before giving up with
                ``DEADLINE_EXCEEDED`` (None: no limit). The daemon then
                cancels the transfer, as it does whenever a waiting call
                ends first; to let a copy outlive the wait, copy with
                ``wait=False`` and :meth:`wait` for it with a timeout.
            check: with ``wait``, raise :class:`TransferError` unless the
                transfer ended ``done``.

        Returns:
            with ``wait``, the final ``TransferInfo``; otherwise the transfer
            id (an int) for :meth:`wait` or :meth:`cancel`. A finished
            ``TransferInfo`` holds ``predicted_bytes_per_s`` (the planner's
            model; 0 when it has no estimate) beside
            ``measured_bytes_per_s`` (bytes over the copy's wall time).

        On the native path a waited copy between two instances registered
        on mapped allocations or private ranges, with no box, hops or
        timeout, goes through the shared-memory rings; its ``TransferInfo``
        then carries ``id``, ``state``, ``code`` and ``message`` only
        (:meth:`transfer` has the daemon's full report while it keeps it).
        ``copy(wait=False)`` of such a pair goes through the rings too: the
        daemon reports the transfer id as it accepts the copy, and the
        ring's completion answers :meth:`completed` and :meth:`wait`.
        With the client's ``in_process``, the hops of a waited copy that
        touch this client's own ranges run on this thread, and one from a range
        another process published into an own range is read directly
        (``id`` 0: no transfer of the daemon's). Every other copy goes over
        gRPC.
        """
        native = self._native
        if native is not None and (timeout is None or not wait) and box is None and not via:
            if wait:
                if self._closed:
                    raise IsometryError("FAILED_PRECONDITION", "this client is closed")
                # The extension first: one call for Instance records and ids.
                done = native.copy_first(src, dst, priority)
                if done is None:
                    done = native.copy(src, dst, priority)
                if done is not None:
                    return self._native_answer(done, check)
            else:
                ends = native.instances(_id(src, "copy src"), _id(dst, "copy dst"))
                if ends is not None:
                    return self._copy_native_later(ends, priority)
        req = pb.CopyRequest(
            src_instance=_id(src, "copy src"),
            dst_instance=_id(dst, "copy dst"),
            priority=priority,
            wait=wait,
        )
        if box is not None:
            req.box.CopyFrom(_box(box, "box"))
        for hop in via or ():
            memory, layout = hop
            req.via.append(pb.Hop(memory=memory, layout=layout))
        return self._start_transfer("Copy", req, wait, timeout, check)

    @staticmethod
    def _native_answer(done: Any, check: bool) -> TransferInfo:
        """A waited ring copy's answer (NativePath.copy's), as a waited gRPC
        Copy gives it: a refusal raises IsometryError, a transfer that ended
        other than done TransferError (with ``check``)."""
        if type(done) is not tuple:
            return cast(TransferInfo, done)
        transfer, code, message = done
        failed, outcome = completion(transfer, code, message, check)
        if failed:
            raise outcome
        return cast(TransferInfo, outcome)

    def _copy_native_later(self, ends: Tuple[Any, Any], priority: int) -> int:
        """A copy queued on the rings without waiting, as ``copy(wait=False)``
        over gRPC: its transfer id once the daemon accepted it (a refusal
        raises IsometryError), its completion kept for :meth:`completed`
        and :meth:`wait` when the ring hands it over."""
        self._check_open()
        assert self._native is not None
        future: "concurrent.futures.Future[TransferInfo]" = concurrent.futures.Future()
        future.add_done_callback(self._keep_ring_completion)
        return self._native.ring.submit_with_id(ends[0], ends[1], priority, (future, False, None))

    def _keep_ring_completion(self, future: "concurrent.futures.Future[TransferInfo]") -> None:
        if future.cancelled() or future.exception() is not None:
            return  # the session ended: wait() asks the daemon
        with self._lock:
            self._record_locked(future.result())
        self._settle_futures()

    def _start_transfer(self, method: str, req: Any, wait: bool, timeout: Optional[float],
                        check: bool) -> Union[TransferInfo, int]:
        """Calls Copy or Redistribute: the transfer id at once, or with
        ``wait`` its final TransferInfo (TransferError unless done, when
        ``check``)."""
        r = self._call(method, req, timeout=timeout if wait else self.call_timeout)
        if not wait:
            if self._over_local_socket:
                self._watch(r.transfer)
            return int(r.transfer)
        if check and r.info.state != "done":
            raise TransferError(r.info)
        return r.info

    # ---- distributed instances (docs/guides/redistribution.md, "Redistributing between jobs") ----

    def join_distributed(
        self,
        name: str,
        extents: Sequence[int],
        dists: Sequence[DimLike],
        grid: Sequence[int],
        element_bytes: int,
        rank: int,
        instance: Optional[InstanceLike],
        column_major: bool = False,
        grant: bytes = b"",
    ) -> "pb.JoinDistributedResponse":
        """Joins distributed instance ``name`` as ``rank`` with ``instance``.

        ``instance`` is an instance of this session whose bounds are the
        rank's local extents (any strided layout; None for a rank that holds
        no element). Every rank gives the same ``extents``, ``dists``
        (see :mod:`isometry.distributed`), ``grid``, ``column_major`` (rank
        order over the grid) and ``element_bytes``. Returns the daemon's
        ``distribution`` text, ``ranks`` and ``joined`` so far. The
        distributed instance ends when any of its ranks' sessions ends.

        ``grant`` (16 to 256 bytes, :func:`isometry.distributed.new_grant`)
        is the job's secret: gRPC sessions share one namespace of names, so
        a rank joining from another session than the one that made the
        instance must give the grant it was made with (PERMISSION_DENIED
        otherwise), and a job whose ranks join on several nodes needs one.
        """
        req = pb.JoinDistributedRequest(
            name=name,
            distribution=distribution_spec(extents, dists, grid, column_major),
            element_bytes=element_bytes,
            rank=rank,
            instance=0 if instance is None else _id(instance, "join_distributed instance"),
            grant=bytes(grant),
        )
        return self._call("JoinDistributed", req)

    @overload
    def redistribute(self, producer: str, consumer: str, wait: Literal[True] = ...,
                     timeout: Optional[float] = ..., check: bool = ...,
                     producer_grant: bytes = ..., consumer_grant: bytes = ...) -> TransferInfo: ...

    @overload
    def redistribute(self, producer: str, consumer: str, *, wait: Literal[False],
                     timeout: Optional[float] = ..., check: bool = ...,
                     producer_grant: bytes = ..., consumer_grant: bytes = ...) -> int: ...

    @overload
    def redistribute(self, producer: str, consumer: str, wait: bool = ...,
                     timeout: Optional[float] = ..., check: bool = ...,
                     producer_grant: bytes = ...,
                     consumer_grant: bytes = ...) -> Union[TransferInfo, int]: ...

    def redistribute(self, producer: str, consumer: str, wait: bool = True,
                     timeout: Optional[float] = None, check: bool = True,
                     producer_grant: bytes = b"",
                     consumer_grant: bytes = b"") -> Union[TransferInfo, int]:
        """Moves complete distributed instance ``producer`` into ``consumer``
        as one transfer (this session a rank of either); ``wait``,
        ``timeout`` and ``check`` and the answer are as for :meth:`copy`.
        While it runs, :meth:`transfer` shows the piece copies done.

        The side this session joined no rank of is another job's: give
        its grant (``producer_grant`` or ``consumer_grant``, see
        :meth:`join_distributed`), or PERMISSION_DENIED.
        """
        req = pb.RedistributeRequest(producer=producer, consumer=consumer, wait=wait,
                                     producer_grant=bytes(producer_grant),
                                     consumer_grant=bytes(consumer_grant))
        return self._start_transfer("Redistribute", req, wait, timeout, check)

    def completed(self, transfer: TransferLike) -> Optional[TransferInfo]:
        """The final TransferInfo of one of this session's transfers if its
        completion event has arrived (on the Attach stream, or for a local
        session the answer of its ``Wait`` call), else None. An event the
        daemon dropped because this client fell behind reading its stream
        (see ``daemon.max_attach_backlog_bytes``) never arrives: :meth:`wait`
        and futures ask the daemon instead."""
        tid = _id(transfer, "completed")
        with self._lock:
            return self._completions.get(tid)

    def wait(self, transfer: TransferLike, timeout_ms: int = 0, check: bool = True) -> TransferInfo:
        """Waits until a transfer has ended and returns its final TransferInfo.

        Completions already delivered on the session's Attach stream answer
        at once; otherwise the daemon is asked (``Wait``).

        Args:
            transfer: a transfer id (or TransferInfo).
            timeout_ms: give up after this many milliseconds with
                IsometryError ``DEADLINE_EXCEEDED`` (0: wait until it ends).
            check: raise :class:`TransferError` unless it ended ``done``.
        """
        tid = _id(transfer, "wait")
        info = self.completed(tid)
        if info is None:
            # The daemon's own timer answers DEADLINE_EXCEEDED; the gRPC
            # deadline is only a backstop in case it does not.
            deadline = None if timeout_ms <= 0 else timeout_ms / 1000.0 + 10.0
            try:
                info = self._call(
                    "Wait", pb.WaitRequest(transfer=tid, timeout_ms=timeout_ms), timeout=deadline
                )
            except IsometryError as e:
                # A completion may have raced the call (e.g. the record was
                # already forgotten by the daemon).
                info = self.completed(tid)
                if info is None:
                    raise e
        if check and info.state != "done":
            raise TransferError(info)
        return info

    def cancel(self, transfer: TransferLike) -> None:
        """Cancels one of this session's transfers (any transfer, with the
        operator token). PERMISSION_DENIED for another client's."""
        self._call("Cancel", pb.CancelRequest(transfer=_id(transfer, "cancel")))

    def transfer(self, transfer: TransferLike) -> TransferInfo:
        """The current TransferInfo of one of this session's transfers (any,
        with the operator token); the daemon keeps ended transfers for a
        while. PERMISSION_DENIED for another client's."""
        return self._call("GetTransfer", pb.GetTransferRequest(transfer=_id(transfer, "transfer")))

    def transfers(self, recent: bool = False) -> List[TransferInfo]:
        """The daemon's transfers in flight (waiting or running), every
        client's, as TransferInfo messages with their ``owner`` (session
        number, client name, uid, pid; never a credential); ended ones are
        found with :meth:`transfer` or :meth:`wait`.

        With ``recent``: instead the final reports of the transfers that
        ended last (done, failed or cancelled; every client's), newest
        first, as many as the daemon keeps (``daemon.transfer_history``);
        no hops."""
        return list(self._call("ListTransfers", pb.ListTransfersRequest(recent=recent)).transfers)
