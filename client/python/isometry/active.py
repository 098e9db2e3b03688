"""Active Access from the Python client (docs/guides/active-access.md, "Active Access").

The owner of an allocation watches page-aligned regions of it; copies,
writes and reads by any client that touch a region are split at its
boundaries and act as its action says (``"apply_log"``, ``"log_only"``,
``"apply_notify"``, ``"deny"``), running its handler: the owner's access
log (``"client"``: read here with :meth:`read_access_log`, which the
daemon feeds from the log's ring, or by the C++ client from its mapping
over the local socket), or one built into the daemon (``"count"``,
``"file_log"``, ``"hash_insert"``, ``"dirty_pages"``). :meth:`active_flush`
returns once every access so far has been handled. These calls go over
gRPC; mixed into :class:`Client`.
"""

import collections
from typing import TYPE_CHECKING, Any, Deque, Iterator, List, Optional, SupportsInt, Tuple

import grpc

from . import isometry_pb2 as pb
from .errors import IsometryError, from_rpc_error

__all__ = ["ACTIONS", "HANDLERS", "AccessLogStream", "ActiveAccessMixin"]

ACTIONS = {
    "apply_log": pb.WATCH_APPLY_LOG,
    "log_only": pb.WATCH_LOG_ONLY,
    "apply_notify": pb.WATCH_APPLY_NOTIFY,
    "deny": pb.WATCH_DENY,
}
HANDLERS = {
    "client": pb.HANDLER_CLIENT,
    "count": pb.HANDLER_COUNT,
    "file_log": pb.HANDLER_FILE_LOG,
    "hash_insert": pb.HANDLER_HASH_INSERT,
    "dirty_pages": pb.HANDLER_DIRTY_PAGES,
}
_FULL = {None: pb.LOG_FULL_DEFAULT, "block": pb.LOG_FULL_BLOCK, "fail": pb.LOG_FULL_FAIL}
# ReadAccessLog's header once the daemon's reader holds the log
# (daemon/server/grpc_streams.h kLogReaderOpenKey).
_LOG_READER_OPEN = "isometry-log-reader"


# An allocation: an isometry.Allocation (which has __int__) or its id.
AllocationLike = SupportsInt


def _aid(alloc: AllocationLike) -> int:
    return int(alloc)


class AccessLogStream:
    """The entries of a watched allocation's access log, as the daemon reads
    them from its ring (``ReadAccessLog``): iterate to get
    ``isometry.v1.AccessLogEntry`` messages in log order (``seq`` 1, 2,
    ...; ``op`` ``ACCESS_PUT``/``ACCESS_GET``, ``offset``, ``size``,
    ``region``, ``tag``, ``source_session``, ``transfer``, ``applied``,
    ``notify``, ``data`` when ``has_data``). Iteration blocks until entries
    come and stops once the watch has ended (last region unwatched,
    allocation freed) and every entry was delivered. :meth:`cancel` (or
    leaving a ``with`` block) ends it and frees the log's one reader slot;
    iteration then stops. The daemon acknowledges entries as it sends
    them, so writers held by a full log go on while this is read.
    """

    def __init__(self, call: Any) -> None:
        self._call = call
        self._pending: Deque[Any] = collections.deque()
        self._cancelled = False

    def __iter__(self) -> Iterator["pb.AccessLogEntry"]:
        return self

    def __next__(self) -> "pb.AccessLogEntry":
        while not self._pending:
            try:
                batch = next(self._call)
            except grpc.RpcError as e:
                if self._cancelled and e.code() == grpc.StatusCode.CANCELLED:
                    raise StopIteration from None
                raise from_rpc_error(e) from None
            self._pending.extend(batch.entries)
        return self._pending.popleft()

    def cancel(self) -> None:
        """Ends the stream; entries not yet delivered stay in the log for
        the next reader."""
        self._cancelled = True
        self._call.cancel()

    close = cancel

    def __enter__(self) -> "AccessLogStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class ActiveAccessMixin:
    """Active Access calls of :class:`isometry.Client` (needs ``_call``)."""

    if TYPE_CHECKING:  # what Client provides
        _closed: bool
        _stub: Any

        def _call(self, method: str, request: Any, timeout: Any = ...,
                  stream: bool = False) -> Any: ...

        def _metadata(self) -> Tuple[Tuple[str, str], ...]: ...

    def watch(
        self,
        alloc: AllocationLike,
        offset: int,
        nbytes: int,
        action: str = "apply_log",
        handler: str = "count",
        tag: int = 0,
        log_data: bool = True,
        value_bytes: int = 8,
        file_memory: str = "",
        file: str = "",
        log_bytes: int = 0,
        full: Optional[str] = None,
    ) -> int:
        """Watches ``[offset, offset + nbytes)`` of this session's allocation
        ``alloc`` (page aligned; the end may be the allocation's end) and
        returns the region's id. With ``handler="client"`` (the proto's
        default) the entries go to the allocation's access log: read them
        with :meth:`read_access_log`, opened before the writes, or writers
        wait for room (``full``). ``full`` ("block" or "fail", None: the
        daemon's ``access_log_full``) and ``log_bytes`` apply to the
        allocation's first watch. Raises IsometryError: PERMISSION_DENIED
        (not the owner), INVALID_ARGUMENT (bounds, alignment, overlap, an
        unknown action or handler), RESOURCE_EXHAUSTED (too many regions).
        """
        if action not in ACTIONS or handler not in HANDLERS or full not in _FULL:
            raise IsometryError(
                "INVALID_ARGUMENT",
                f"watch: action is one of {sorted(ACTIONS)}, handler one of {sorted(HANDLERS)}, "
                "full one of None, 'block', 'fail'",
            )
        req = pb.WatchRequest(
            allocation=_aid(alloc), offset=offset, bytes=nbytes, action=ACTIONS[action],
            handler=HANDLERS[handler], tag=tag, no_data=not log_data, value_bytes=value_bytes,
            file_memory=file_memory, file=file, log_bytes=log_bytes, full=_FULL[full],
        )
        return int(self._call("Watch", req).region)

    def read_access_log(self, alloc: AllocationLike) -> AccessLogStream:
        """Opens the reader of ``alloc``'s access log (this session's
        allocation, watched; the entries of its ``"client"`` regions) and
        returns once the daemon holds it, so writes made after this call
        are all delivered. One reader per log: a second raises
        ALREADY_EXISTS while the first lasts; a log this session's local
        client mapped raises FAILED_PRECONDITION; NOT_FOUND without a watch.
        """
        if self._closed:
            raise IsometryError("FAILED_PRECONDITION", "this client is closed")
        call = self._stub.ReadAccessLog(pb.ReadAccessLogRequest(allocation=_aid(alloc)),
                                        metadata=self._metadata())
        # The daemon sends its headers, with this key, once the reader
        # holds the log; a refusal ends the call without it.
        headers = dict(call.initial_metadata() or ())
        if _LOG_READER_OPEN not in headers:
            code = call.code()  # the call has ended (or ends now)
            raise IsometryError(code.name, call.details() or "")
        return AccessLogStream(call)

    def unwatch(self, alloc: AllocationLike, region: int) -> None:
        """Removes a region; the allocation's last one ends its watch."""
        self._call("Unwatch", pb.UnwatchRequest(allocation=_aid(alloc), region=region))

    def watch_info(self, alloc: AllocationLike) -> "pb.WatchInfo":
        """The owner's view of the watch: regions with their counters, log
        bytes published and acknowledged."""
        return self._call("GetWatch", pb.GetWatchRequest(allocation=_aid(alloc)))

    def active_flush(self, alloc: AllocationLike, timeout_ms: int = 0) -> None:
        """Returns once every access to ``alloc``'s regions so far has been
        handled; raises DEADLINE_EXCEEDED after ``timeout_ms`` (0: the
        daemon's ``max_flush_ms``). Any session that may use ``alloc``."""
        timeout = None if timeout_ms == 0 else timeout_ms / 1000.0 + 5.0
        self._call("ActiveFlush",
                   pb.ActiveFlushRequest(allocation=_aid(alloc), timeout_ms=timeout_ms),
                   timeout=timeout)

    def dirty_pages(self, alloc: AllocationLike, clear: bool = False) -> List[int]:
        """Page numbers (4096-byte pages) written since the last clear in
        the allocation's ``dirty_pages`` regions."""
        r = self._call("DirtyPages", pb.DirtyPagesRequest(allocation=_aid(alloc), clear=clear))
        return [int(p) for p in r.pages]

    def checkpoint(self, alloc: AllocationLike, memory: str, file: str, full: bool = False,
                   compact: bool = False,
                   client_pages: Optional[List[Tuple[int, int]]] = None) -> "pb.CheckpointResponse":
        """Writes the allocation's image into ``file`` of DSK ``memory``: all
        of it the first time (or with ``full``; the delta chain is dropped),
        then only the pages written since, appended as one record to
        ``file + ".delta"``: those its ``dirty_pages`` regions saw written
        and ``client_pages``, ``(first_page, pages)`` ranges this process
        wrote itself (the C++ client tracks them with userfaultfd; Python
        has no tracker). ``compact`` merges the chain into the base after.
        The answer's ``full_reason`` says why a checkpoint was full (the
        first, asked for, no watch, another size, a damaged chain started
        over, a write the daemon's dirty set may lack: docs/guides/active-access.md, "Incremental
        checkpoints"). Restore with :meth:`restore`."""
        req = pb.CheckpointRequest(allocation=_aid(alloc), memory=memory, file=file, full=full,
                                   compact=compact)
        for first, n in client_pages or []:
            req.client_pages.add(first_page=first, pages=n)
        return self._call("Checkpoint", req)

    def restore(self, alloc: AllocationLike, memory: str, file: str) -> "pb.RestoreResponse":
        """Rebuilds ``alloc`` (this session's, the image's size) from the
        checkpoint's base and delta chain, byte-exact. A damaged, forged,
        truncated or oversized chain raises DATA_LOSS and changes nothing."""
        req = pb.RestoreRequest(allocation=_aid(alloc), memory=memory, file=file)
        return self._call("Restore", req)

    def compact_checkpoint(self, memory: str, file: str) -> "pb.CompactCheckpointResponse":
        """Merges the checkpoint's delta chain into its base."""
        req = pb.CompactCheckpointRequest(memory=memory, file=file)
        return self._call("CompactCheckpoint", req)
