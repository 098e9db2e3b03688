"""Futures of copies submitted through the native rings without waiting
(``copy_future`` and ``acopy`` of a native client, :mod:`isometry.futures`).

A copy is queued on the session's submission ring (``_native.Session.
submit``: no round trip, and it never blocks: while the ring is full the
extension keeps the copy and moves it on as completions make room, so an
event loop that submits thousands is not held up) with its future, which
the extension files by the copy and hands back with the completion. The
extension's reader thread, which never takes the GIL, collects the
completions from the completion ring and hands them over in batches
(``take``: one GIL round trip for every completion that arrived
meanwhile). An event loop that submitted (``acopy``) watches the
extension's eventfd and takes them on its own thread, settling its futures
there directly; for ``concurrent.futures`` one Python thread here, started
at the first such future, takes them (and passes an event loop's on with
one ``call_soon_threadsafe`` per batch). Nothing runs per copy but the
submission and the settling.

The ring names a copy's transfer only in its completion, so a future
cancelled before then cannot cancel the transfer: the copy runs to its
end and the future stays cancelled. Asking the daemon for every copy's id
at acceptance (``submit_with_id``, what ``copy(wait=False)`` uses) would
fix that, at a cost measured at a fifth of asyncio's small-copy rate. The
copies go on the ring in submission order and the extension waits for one
at a time, so futures resolve in submission order.
"""

import asyncio
import atexit
import concurrent.futures
import os
import threading
import weakref
from typing import Any, Dict, List, Optional, Tuple, Union

import grpc

from . import isometry_pb2 as pb
from .errors import IsometryError, TransferError
from .records import TransferInfo

__all__ = ["RingFutures", "completion"]

AnyFuture = Union["concurrent.futures.Future[TransferInfo]", "asyncio.Future[TransferInfo]"]
# A future waiting on a ticket: (future, check, its event loop or None), or
# an asyncio future alone for check=True (acopy's usual case: no tuple a
# copy for Python's cyclic collector to count).
Sink = Union[Tuple[AnyFuture, bool, Optional[asyncio.AbstractEventLoop]],
             "asyncio.Future[TransferInfo]"]
# What settles it: (True, an exception) or (False, the TransferInfo).
Outcome = Tuple[bool, Any]


def completion(transfer: int, code: str, message: str, check: bool) -> Outcome:
    """A ring completion as a waited gRPC Copy answers it: the
    ``TransferInfo`` (``id``, ``state``, ``code``, ``message``), a refusal
    (transfer 0) as IsometryError, a transfer that ended other than done as
    TransferError (with ``check``)."""
    if code == "OK":
        return False, pb.TransferInfo(id=transfer, state="done")
    if transfer == 0:
        return True, IsometryError(code, message)
    info = pb.TransferInfo(
        id=transfer,
        state="cancelled" if code == "CANCELLED" else "failed",
        code=grpc.StatusCode[code].value[0] if code in grpc.StatusCode.__members__ else 2,
        message=message,
    )
    return (True, TransferError(info)) if check else (False, info)


def _settle(future: AnyFuture, outcome: Outcome) -> None:
    if future.done():  # cancelled by its holder
        return
    failed, value = outcome
    try:
        if failed:
            future.set_exception(value)
        else:
            future.set_result(value)
    except (asyncio.InvalidStateError, concurrent.futures.InvalidStateError):
        pass  # a concurrent future its holder cancelled meanwhile


def _parts(sink: Sink) -> Tuple[AnyFuture, bool, Optional[asyncio.AbstractEventLoop]]:
    """A sink's future, check and event loop."""
    if isinstance(sink, tuple):
        return sink
    return sink, True, sink.get_loop()


def _settle_all(settled: List[Tuple[AnyFuture, Outcome]]) -> None:
    for future, outcome in settled:
        _settle(future, outcome)


class RingFutures:
    """The futures of one native session's ring copies. Thread-safe."""

    def __init__(self, session: Any, name: str) -> None:
        self._session = session  # _native.Session
        self._name = name
        self._lock = threading.Lock()  # starts the thread once; _loops
        self._thread: Optional[threading.Thread] = None
        # The event loops watching the extension's completion eventfd.
        self._loops: List[asyncio.AbstractEventLoop] = []
        self._closed = False
        self._exiting = False  # the interpreter is exiting (_at_exit)
        _LIVE.add(self)

    def submit(self, src: Any, dst: Any, priority: int,
               future: "concurrent.futures.Future[TransferInfo]", check: bool) -> None:
        """Queues a copy between two native instances; ``future`` settles
        with its completion (on this object's thread). Never blocks;
        raises at once only when the client is closed or the daemon ended
        the session (with its reason)."""
        if self._closed:
            raise IsometryError("FAILED_PRECONDITION", "this client is closed")
        if self._thread is None:
            self._start()
        self._session.submit(src, dst, priority, (future, check, None), False)

    def submit_with_id(self, src: Any, dst: Any, priority: int, sink: Sink) -> int:
        """:meth:`submit`, and the copy's transfer id once the daemon has
        accepted it (microseconds, once earlier copies are on the ring);
        its refusal raises here (``sink`` may then be failed with it too,
        if its completion came first). ``sink`` is a concurrent future's."""
        if self._closed:
            raise IsometryError("FAILED_PRECONDITION", "this client is closed")
        if self._thread is None:
            self._start()
        return int(self._session.submit_with_id(src, dst, priority, sink))

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name=f"isometry-ring-{self._name}")
                self._thread.start()

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Has `loop` (running on this thread) take completions when the
        extension's eventfd says some wait: its futures are then settled
        on its own thread, with no other Python thread in between. The
        extension's ``acopy`` calls it with each loop it submits from that
        is not the one it submitted from last."""
        with self._lock:
            if self._closed or loop in self._loops:
                return
            self._loops = [x for x in self._loops if not x.is_closed()] + [loop]
        loop.add_reader(self._session.ring_event_fd, self._on_ready, loop)

    def _on_ready(self, loop: asyncio.AbstractEventLoop) -> None:
        """The eventfd turned readable: settles what has arrived. The
        extension settles this loop's copies that ended done itself (the
        common case, per copy: take_for_loop); the rest as _dispatch does."""
        try:
            os.read(self._session.ring_event_fd, 8)  # before take: see event_fd
        except BlockingIOError:
            pass
        rest = self._session.take_for_loop(loop)
        if rest:
            self._dispatch(rest, loop)

    def _run(self) -> None:
        """Takes completions in batches until the session is closed (then
        every copy has had its completion: those the daemon never answered
        come with the reason)."""
        while not self._exiting:
            batch = self._session.take(200, False)
            if batch is None:
                break
            self._dispatch(batch, None)

    @staticmethod
    def _dispatch(batch: List[Any], here: Optional[asyncio.AbstractEventLoop]) -> None:
        """Settles a batch of completions (take's: sink, transfer, code,
        message, four items each): concurrent futures and those of `here`
        (the loop running this) at once, each other loop's with one
        call_soon_threadsafe."""
        by_loop: Dict[asyncio.AbstractEventLoop, List[Tuple[AnyFuture, Outcome]]] = {}
        items = iter(batch)
        for sink, transfer, code, message in zip(items, items, items, items):
            future, check, loop = _parts(sink)
            outcome = completion(transfer, code, message, check)
            if loop is None or loop is here:
                _settle(future, outcome)
            else:
                by_loop.setdefault(loop, []).append((future, outcome))
        for loop, settled in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle_all, settled)
            except RuntimeError:  # that loop is closed: nobody awaits them
                pass

    def _fail_left(self, why: IsometryError) -> None:
        left: List[Sink] = self._session.drop_sinks()
        for future, _, loop in map(_parts, left):
            if loop is None:
                _settle(future, (True, why))
            else:
                try:
                    loop.call_soon_threadsafe(_settle, future, (True, why))
                except RuntimeError:
                    pass

    def close(self) -> None:
        """After the session closed (which waits for the copies in flight):
        settles what the event loops did not take, stops them watching,
        joins the thread once it has settled its futures."""
        with self._lock:
            self._closed = True
            thread = self._thread
            loops, self._loops = self._loops, []
        self._session.forget_loop()
        try:
            here: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        fd = self._session.ring_event_fd
        for loop in loops:
            try:
                if loop is here:
                    loop.remove_reader(fd)
                elif not loop.is_closed():
                    loop.call_soon_threadsafe(loop.remove_reader, fd)
            except RuntimeError:  # closed meanwhile
                pass
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        for for_loop in (False, True):
            while True:
                batch = self._session.take(0, for_loop)
                if not batch:
                    break
                self._dispatch(batch, here)
        self._fail_left(IsometryError("CANCELLED", "the client closed"))


_LIVE: "weakref.WeakSet[RingFutures]" = weakref.WeakSet()


def _forget_loops() -> None:
    """A forked child runs none of its parent's event loops, though they
    say they run on this thread (the extension's acopy keeps the last)."""
    for ring in list(_LIVE):
        ring._session.forget_loop()


os.register_at_fork(after_in_child=_forget_loops)


@atexit.register
def _at_exit() -> None:
    """A client never closed: its thread leaves the extension before the
    interpreter finalizes (a daemon thread that wakes up in C++ then could
    not take the GIL back)."""
    for ring in list(_LIVE):
        ring._exiting = True
        if ring._thread is not None:
            ring._thread.join(timeout=2)
