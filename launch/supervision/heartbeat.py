"""Liveness over the program's own RPC: the coordinator's heartbeats.

Pid files and /proc see only the processes of one machine, and not even
there a frozen node (a SIGSTOP, a deadlock: the process is there, and does
nothing). The coordinator instead calls every node it cannot go on without,
once a `period`, with the cheapest call each serves: `ping()` over Courier
(a Python method, so that a node whose interpreter is stuck does not answer
either) for the learner, the counter, the variable cachers and the actors,
and Reverb's `server_info` for replay. At most one call per node is
outstanding, so that a silent node does not collect calls.

A node that has answered once and then not for `timeout` seconds is gone
(dead or frozen). A node that has never answered is still starting (a
Courier node serves only once its constructor has run, e.g. a learner
restoring a checkpoint; Vertex AI starts replicas minutes apart), until
`start_timeout`. A node can be at work before its first answer is seen: a
client's connection to a node that was not yet up retries with gRPC's
growing back-off (up to minutes apart). The watch logs when it has heard
from every node ("Heartbeats: every watched node has answered").
"""

from concurrent import futures
import threading
import time
import types
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from absl import logging

from launch import node_groups

# How long a node may take to answer its first heartbeat.
START_TIMEOUT_SECONDS = 600.0


# How long closing a watch waits for the heartbeats still in flight.
CLOSE_WAIT_SECONDS = 2.0
# Clients (with their calls) still in flight when their watch was closed.
_KEPT = []


def end_call(call: futures.Future):
  """Ends a Courier call in flight without cancelling its future.

  Courier (0.5) sets a call's result from its own thread without checking
  whether the future was cancelled: a result that arrives just as its
  future is cancelled raises InvalidStateError inside Courier's C++
  callback, and the process aborts ("terminate called after throwing an
  instance of 'pybind11::error_already_set'"). A call merely given up on
  stays in flight instead, and a client destroyed with a call in flight
  aborts the process too. So the call itself is cancelled, not its future:
  Courier's own done-callback cancels the call once told that its future
  was, and is told so by a stand-in. Courier then ends the future with
  CANCELLED (or with the answer, if that came first) like any other end.
  A future that is not Courier's (a Reverb heartbeat's, from a thread
  pool) is left to end by itself.
  """
  told_cancelled = types.SimpleNamespace(cancelled=lambda: True)
  for callback in list(getattr(call, '_done_callbacks', ())):
    callback(told_cancelled)


class _Beat:
  """One watched node: its call, and when it last answered."""

  def __init__(self, name: str, label: str,
               call: Callable[[], futures.Future]):
    self.name = name
    self.label = label
    self._call = call
    self._pending: Optional[futures.Future] = None
    self.answered: Optional[float] = None
    # Under a keeper: the process doing the node's work, and when it was
    # first seen (a node started again is starting until it answers).
    self.process: Optional[int] = None
    self.started: Optional[float] = None
    self.value = None  # The last answer.
    # The last answer of the process before a fault, until the new process
    # has answered (None: no fault under way).
    self.before_fault: Optional[Dict[str, int]] = None
    # A call sent before the node's process was seen to be a new one.
    self._stale: Optional[futures.Future] = None

  def restart(self, process: Optional[int], now: float):
    """The node's process is a new one: it is starting, from `now`. The
    call in flight, sent before, may bring the old process's last answer:
    it is not taken as the new process's first."""
    self.process = process
    self.started = now
    self.answered = None
    self._stale = self._pending

  def beat(self, now: float):
    """Sends a call unless one is outstanding; notes an answer."""
    if self._pending is not None:
      if not self._pending.done():
        return
      if self._pending.exception() is None and self._pending is not (
          self._stale):
        # When the answer was seen (at most a period late), not when the
        # call went out: a call that waited for a starting node (or for a
        # server that was slow) proves it alive at its answer.
        self.answered = now
        self.value = self._pending.result()
      self._pending = self._stale = None
    try:
      self._pending = self._call()
    except Exception as error:  # pylint: disable=broad-except
      logging.warning('Heartbeat to the %s failed to go out: %r', self.name,
                      error)

  @property
  def pending(self) -> Optional[futures.Future]:
    """The outstanding call, if any."""
    return self._pending

  def call_now(self) -> Optional[futures.Future]:
    """A call sent now, beside the periodic one; None once closed."""
    return self._call() if self._call is not None else None

  def close(self):
    """Lets go of the client (after a wait: see `HeartbeatWatch.close`). A
    Courier client destroyed with a call in flight aborts the process: one
    whose call is still in flight is kept (`_KEPT`) instead of destroyed,
    until the process ends."""
    if self._pending is not None and not self._pending.done():
      _KEPT.append((self._call, self._pending))
    self._call = None

  def silent_for(self, now: float) -> Optional[float]:
    """Seconds since the last answer; None before the first."""
    return None if self.answered is None else now - self.answered


def _courier_call(address: str, timeout: float):
  from courier.python import client as courier_client  # pylint: disable=g-import-not-at-top
  client = courier_client.Client(address, call_timeout=timeout)
  return lambda: client.futures.ping()


def _reverb_call(address: str, timeout: float):
  import reverb  # pylint: disable=g-import-not-at-top
  client = reverb.Client(address)
  pool = futures.ThreadPoolExecutor(1, thread_name_prefix='replay-heartbeat')

  def items():  # The items the server holds.
    tables = client.server_info(max(1, int(timeout)))
    return {'items': int(sum(table.current_size
                             for table in tables.values()))}
  return lambda: pool.submit(items)


def address_of(client) -> str:
  """The address a Courier or Reverb client calls."""
  address = getattr(client, 'address', None)
  if address is None:
    address = client._server_address  # pylint: disable=protected-access
  return address


class HeartbeatWatch:
  """A watch by heartbeats over `nodes` ({group: its nodes' clients}, as
  `launch.node_groups` names the groups); the interface of
  `local.ProgramWatch`. The coordinator's watches the nodes of
  `node_groups.watched`; the launcher's watch over the coordinator is one
  too, of the coordinator alone."""

  def __init__(self, nodes: Mapping[str, Sequence[Any]],
               timeout: float = 30.0, period: float = 1.0,
               start_timeout: float = START_TIMEOUT_SECONDS, kept=None):
    self._kept = kept
    self._timeout = timeout
    self._start_timeout = start_timeout
    self._started = time.time()
    call_timeout = max(timeout, period)
    # The nodes of a group needed whole (`node_groups.ALL`: the actors) are
    # gone only all together; each other watched node on its own, named in
    # the order of `nodes` when several are.
    self._single: List[_Beat] = []
    self._actors: List[_Beat] = []
    for name, members in nodes.items():
      group = node_groups.BY_NAME[name]
      call = (_reverb_call if group.heartbeat == node_groups.REVERB else
              _courier_call)
      beats = [_Beat(group.describe(index, len(members)),
                     group.label(index, len(members)),
                     call(address_of(client), call_timeout))
               for index, client in enumerate(members)]
      (self._actors if group.needed == node_groups.ALL else
       self._single).extend(beats)
    self._lock = threading.Lock()
    self._stop = threading.Event()
    # Set (and logged) once every watched node has answered: until then, a
    # node that dies counts as starting until `start_timeout`.
    self.all_answered = threading.Event()
    self._period = period
    self._thread = threading.Thread(target=self._run, daemon=True,
                                    name='heartbeats')
    self._thread.start()

  def _run(self):
    while not self._stop.wait(self._period):
      now = time.time()
      with self._lock:
        beats = self._single + self._actors
        for beat in beats:
          # A new process is looked for before an answer is taken. A
          # process started after the look cannot have answered yet (a
          # node's first answer comes a second or more after its process
          # starts), so the answer taken is the old process's or one seen
          # to be new: the last answer before a fault is the old process's,
          # never the new one's first, however fast that one starts.
          started_again = (self._kept is not None and
                           self._started_again(beat, now))
          beat.beat(now)
          if self._kept is not None and not started_again:
            self._heal(beat, now)
        if (not self.all_answered.is_set() and
            all(beat.answered is not None for beat in beats)):
          self.all_answered.set()
          logging.info('Heartbeats: every watched node has answered (%s).',
                       self._description())

  def _started_again(self, beat: _Beat, now: float) -> bool:
    """Under keepers: True if the node's process is a new one, which is
    then starting again (the last answer before, if a fault is not already
    under way, is what its fault is measured from)."""
    process = self._kept.process(beat.label)
    if process is None or process == beat.process:
      return False
    if beat.process is not None or beat.before_fault is not None:
      logging.info('Heartbeats: the %s runs again (pid %d).', beat.name,
                   process)
      if beat.before_fault is None:
        beat.before_fault = beat.value or {}
    beat.restart(process, now)
    return True

  def _heal(self, beat: _Beat, now: float):
    """Under keepers: a node that answers again after its fault is
    recorded; one that has stayed silent past the timeout (or never
    answered within the start timeout), or whose own process has stayed
    stopped that long (a replay node's, whose server answers), is ended,
    and its keeper starts it again."""
    if beat.before_fault is not None and beat.answered is not None:
      self._kept.recovered(beat.label, beat.before_fault, beat.value or {})
      beat.before_fault = None
    silent = beat.silent_for(now)
    stopped = self._kept.stopped_for(beat.label)
    if silent is not None and silent >= self._timeout:
      cause = (f'frozen: no answer to its heartbeats for {silent:.0f} s '
               f'(--heartbeat_timeout={self._timeout:g})')
    elif stopped >= self._timeout:  # A process that answers no heartbeat.
      cause = (f'frozen: its process stopped (SIGSTOP) for {stopped:.0f} s '
               f'(--heartbeat_timeout={self._timeout:g})')
    elif (silent is None and beat.started is not None and
          now - beat.started >= self._start_timeout):
      cause = (f'did not start: no answer to its heartbeats in '
               f'{self._start_timeout:.0f} s')
    else:
      return
    if self._kept.end(beat.label, cause) is not None:
      # Not ended again until its new process has had its time to start.
      if beat.before_fault is None:
        beat.before_fault = beat.value or {}
      beat.restart(None, now)

  def _description(self) -> str:
    names = [beat.name for beat in self._single]
    if self._actors:
      names.append(f'{len(self._actors)} actors')
    return ', '.join(names)

  def close(self):
    """Stops the heartbeats; call before the process ends."""
    self._stop.set()
    self._thread.join()
    with self._lock:
      beats = self._single + self._actors
      pending = [beat.pending for beat in beats if beat.pending]
      for call in pending:
        end_call(call)
      # The calls in flight get one shared wait to end.
      futures.wait(pending, timeout=CLOSE_WAIT_SECONDS)
      for beat in beats:
        beat.close()

  def not_answering(self, timeout: float) -> List[str]:
    """The names of the watched nodes that do not answer a call sent now
    within `timeout` seconds. Fresh calls, not the periodic ones, which can
    be a period old; and no lock taken, so that a signal handler of the
    thread that holds it can ask."""
    calls = {}
    for beat in self._single + self._actors:
      try:
        calls[beat.name] = beat.call_now()
      except Exception:  # pylint: disable=broad-except
        calls[beat.name] = None
    sent = [call for call in calls.values() if call is not None]
    futures.wait(sent, timeout=timeout)
    for call in sent:
      if not call.done():
        end_call(call)
    return [name for name, call in calls.items()
            if call is None or not call.done() or call.cancelled() or
            call.exception() is not None]

  def _gone(self, beat: _Beat, now: float) -> Optional[str]:
    if self._kept is not None:
      return None  # Ended and started again (`_heal`), never gone.
    silent = beat.silent_for(now)
    if silent is None:
      if now - self._started >= self._start_timeout:
        return (f'the {beat.name} never answered its heartbeats in '
                f'{self._start_timeout:.0f} s (it did not start)')
      return None
    if silent >= self._timeout:
      return (f'the {beat.name} has not answered its heartbeats for '
              f'{silent:.0f} s (frozen, or gone)')
    return None

  def dead(self) -> Optional[str]:
    """Which node is gone, or None."""
    now = time.time()
    with self._lock:
      for beat in self._single:
        gone = self._gone(beat, now)
        if gone:
          return gone
    if self._actors and len(self.dead_actors()) == len(self._actors):
      return (f'none of the {len(self._actors)} actors has answered its '
              f'heartbeats for {self._timeout:.0f} s (frozen, or gone)')
    return None

  def _gone_indices(self, beats: Sequence[_Beat]) -> List[int]:
    now = time.time()
    with self._lock:
      return [index for index, beat in enumerate(beats)
              if self._gone(beat, now)]

  def dead_actors(self) -> List[int]:
    """The ids of the actors that are gone."""
    return self._gone_indices(self._actors)

  def gone_labels(self) -> List[str]:
    """The labels (as in `<workdir>/nodes/`) of every node that is gone."""
    beats = self._single + self._actors
    return [beats[index].label for index in self._gone_indices(beats)]


class EitherWatch:
  """Several watches as one: a node is gone once any of them says so."""

  def __init__(self, watches: Sequence[Any]):
    self._watches = [watch for watch in watches if watch is not None]

  def dead(self) -> Optional[str]:
    for watch in self._watches:
      gone = watch.dead()
      if gone:
        return gone
    return None

  def dead_actors(self) -> List[int]:
    return sorted(set().union(*[watch.dead_actors()
                                for watch in self._watches]))

  def close(self):
    for watch in self._watches:
      if hasattr(watch, 'close'):
        watch.close()

  def not_answering(self, timeout: float) -> List[str]:
    """What the watches that can call the nodes find silent now."""
    return sorted(set().union(*[watch.not_answering(timeout)
                                for watch in self._watches
                                if hasattr(watch, 'not_answering')]))

  def gone_labels(self) -> List[str]:
    """The labels of every node that a watch able to tell sees gone."""
    return sorted(set().union(*[watch.gone_labels() for watch in self._watches
                                if hasattr(watch, 'gone_labels')]))

  def end_gone_nodes(self):
    """Has the watches that can end a node (`end_nodes`, on this machine)
    end those that others see gone: a frozen process would outlive the
    program's stop, and Launchpad would then kill the whole program."""
    gone = self.gone_labels()
    for watch in self._watches:
      if gone and hasattr(watch, 'end_nodes'):
        watch.end_nodes(gone)
