"""The program's stop policy: when to stop, and in which order.

The coordinator stops the program once the actors have taken
`max_actor_steps`, or `max_seconds` after the actors' first step of this
launch (the nodes' start-up, longer with more actors on few cores, is not
part of a wall-clock budget), or when asked: by `request_stop` (the
launcher's answer to Ctrl-C), or by a stop request in the workdir
(`programs/stop.py`, from anywhere that reaches the workdir; a file there
that is not a request is logged and moved aside, not taken). It stops it
as failed once every actor has given up on its environment (a learner left
alone would train on stale data, or wait forever on a rate limiter), or
once the learner, the counter, a replay shard, a variable cacher or every
actor has died (or frozen: see `heartbeat`).

It stops the nodes (unless one has died) in an order in which none waits on
a node that has already gone: first the actors and the evaluator (which
call the learner or a variable cacher, the counter and replay), then the
variable cachers (which call the learner), then the learner (which calls
replay and the counter), then, through Launchpad, the rest (replay and the
counter save their last checkpoints): each group's `stop_step` in
`launch.node_groups`. Why it stopped goes to `<workdir>/stop.json`.

Where the platform ends the program from outside before the coordinator
has stopped it (`record_outside_stop`: on Vertex AI, SIGTERM to every
replica once the job is cancelled, or once a replica has failed, which
fails the job), the coordinator still writes the stop record, naming the
nodes that no longer answer it: the one whose replica failed is among
them, and whoever reads the record learns why the run ended.
"""

from concurrent import futures
import json
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import launchpad as lp
from absl import logging

from launch.runs import run_manifest
from launch.runs import storage
from launch.supervision import heartbeat
from launch.runs import faults as fault_records
from launch import node_groups
from launch.supervision import program_stop

# Counter key: actors that stopped after repeated environment failures.
ACTORS_GIVEN_UP = 'actor_stopped_on_failures'

# How often the coordinator looks for a stop request in the workdir (a
# file read: on Vertex AI, of the Cloud Storage mount).
STOP_REQUEST_POLL_SECONDS = 2.0

# How long the stop record of a stop from outside waits for the nodes'
# answers: the platform kills the coordinator some seconds after its
# SIGTERM.
OUTSIDE_STOP_ANSWER_SECONDS = 3.0

Stop = Tuple[str, bool]  # (why, whether the run failed)


class Coordinator:
  """Stops the program; see the module docstring.

  Args:
    nodes: {group: its nodes' clients} of every group but the coordinator's
      (`launch.node_groups`): the counter's (whose counts it polls), the
      nodes it stops in order (Courier clients; each has `stop(timeout)`),
      the replay shards' Reverb clients (for heartbeats and for
      `end_program`'s final replay checkpoints), the variable cachers
      (`launch.variable_cache`), which are watched as the learner is
      (their actors would act on stale parameters without them).
    max_actor_steps, max_seconds: the run's budgets (None: none).
    workdir: where `stop.json` goes and stop requests come from (None:
      nowhere); a gs:// workdir is read and written through the replica's
      Cloud Storage mount.
    node_watch: None, or a factory of a watch whose `dead()` names a node
      the program cannot go on without once it has died, and whose
      `dead_actors()` are the ids of the actors that have (the platform's,
      `launch.supervision.platforms`).
    record_outside_stop: whether a stop from outside (SIGTERM) writes the
      stop record (see the module docstring).
    kept_nodes: None, or a factory of the platform's hands on nodes that
      keepers start again (`local.KeptNodes`): the heartbeats then end a
      node that froze, for its keeper to start again, instead of stopping
      the program, which stops only once a keeper gives up.
  """

  def __init__(self, nodes: Mapping[str, Sequence[Any]],
               max_actor_steps: Optional[int] = None,
               max_seconds: Optional[float] = None,
               workdir: Optional[str] = None,
               node_watch: Optional[Callable[[], Any]] = None,
               end_program: Optional[Callable[..., None]] = None,
               heartbeat_timeout: Optional[float] = None,
               record_outside_stop: bool = False,
               poll_seconds: float = 1.0,
               kept_nodes: Optional[Callable[[], Any]] = None):
    node_groups.check_known(list(nodes))
    self._nodes = {group: list(members) for group, members in nodes.items()
                   if members}
    self._counter = (self._nodes.get('counter') or [None])[0]
    self._actors = self._nodes.get('actor', [])
    self._max_actor_steps = max_actor_steps
    self._max_seconds = max_seconds
    self._workdir = storage.node_path(workdir) if workdir else None
    self._next_request_check = 0.0
    watches = [node_watch() if node_watch else None]
    self._kept_nodes = kept_nodes
    if heartbeat_timeout is not None:
      kept = kept_nodes() if kept_nodes else None
      watches.append(heartbeat.HeartbeatWatch(
          node_groups.watched(self._nodes, kept is not None),
          timeout=heartbeat_timeout, kept=kept))
    self._watch = heartbeat.EitherWatch(watches) if any(watches) else None
    # {label: client} of every replay shard.
    replays = self._nodes.get('replay', [])
    self._replays = dict(zip(node_groups.labels('replay', len(replays)),
                             replays))
    self._end_program = end_program
    self._poll_seconds = poll_seconds
    self._requested: Optional[str] = None
    self._bad_request: Optional[str] = None  # The last one reported.
    self._wake = threading.Event()
    self._node_died = False
    self._record_outside_stop = record_outside_stop
    self._stopping = False  # Set once this coordinator stops the program.
    self._last_counts: Dict[str, Any] = {}

  def ping(self) -> bool:
    """Answers the launcher's heartbeats (`launcher`): a Python method, so
    that a coordinator whose interpreter is stuck does not answer."""
    return True

  def request_stop(self, reason: str):
    """Stops the program in order, as not failed, saying `reason`."""
    self._requested = reason
    self._wake.set()

  def _dead_node(self) -> Optional[Stop]:
    if self._watch is None:
      return None
    dead = self._watch.dead()
    if dead is None:
      return None
    self._node_died = True
    return (f'{dead}; launch again with the '
            'same --workdir to resume from the newest checkpoints',
            True)

  def _counts(self) -> Tuple[Optional[Dict[str, Any]], Optional[Stop]]:
    """(the counter's counts, None), or (None, why) once a watched node has
    died: a dead counter's clients wait for it forever, so its answer is
    awaited in slices, between checks of the watched nodes."""
    requests = getattr(self._counter, 'futures', None)
    if self._watch is None or requests is None:
      return self._counter.get_counts(), None
    answer = requests.get_counts()
    while True:
      try:
        return answer.result(timeout=self._poll_seconds), None
      except futures.TimeoutError:
        dead = self._dead_node()
        if dead is not None:
          heartbeat.end_call(answer)
          return None, dead

  def _reason_to_stop(self, counts, start,
                      given_up: int) -> Optional[Stop]:
    actor_steps = counts.get('actor_steps', 0)
    num_actors = len(self._actors)
    if given_up >= num_actors:
      return (f'all {num_actors} actors stopped after repeated environment '
              'failures (their logs name the errors); fix the environment, '
              'or raise --actor_max_failures, and launch again with the same '
              '--workdir to resume', True)
    if self._max_actor_steps and actor_steps >= self._max_actor_steps:
      return (f'reached {actor_steps} actor steps (limit '
              f'{self._max_actor_steps})', False)
    if (self._max_seconds and start is not None and
        time.time() - start >= self._max_seconds):
      return (f'ran for {time.time() - start:.0f} s since the actors started '
              f'(limit {self._max_seconds:.0f} s)', False)
    if (self._requested is None and self._workdir and
        time.time() >= self._next_request_check):
      self._next_request_check = time.time() + STOP_REQUEST_POLL_SECONDS
      try:
        self._requested = run_manifest.take_stop_request(self._workdir)
      except run_manifest.BadRecord as error:
        # Not a request; moved aside, so said once (or, if it could not be
        # moved, said once and left).
        if str(error) != self._bad_request:
          self._bad_request = str(error)
          logging.error('%s', error)
    if self._requested is not None:
      return (self._requested, False)
    return self._dead_node()

  def _watch_until_stop(self, program_stopping: threading.Event
                        ) -> Tuple[Optional[Stop], Dict[str, Any]]:
    """Polls the counts until a reason to stop; (why, the last counts), why
    None once Launchpad stops the program (`program_stopping` is set)."""
    start = None  # When the actors' count first grew in this launch.
    initial = None  # A resumed run's counts.
    reported = 0
    counts = {}
    while not program_stopping.is_set():
      new_counts, stop = self._counts()
      if stop is not None:
        return stop, counts  # With the last counts seen.
      counts = self._last_counts = new_counts
      actor_steps = counts.get('actor_steps', 0)
      if initial is None:
        initial = counts
      elif start is None and actor_steps > initial.get('actor_steps', 0):
        # Said before the budget's clock starts: the line's own time is
        # never later than the budget's start.
        logging.info('The actors have started: the wall-clock budget '
                     'counts from now.')
        start = time.time()
      # Actors that gave up in an earlier launch act again in this one.
      given_up = (counts.get(ACTORS_GIVEN_UP, 0) -
                  initial.get(ACTORS_GIVEN_UP, 0))
      if given_up > reported:
        reported = given_up
        logging.warning('%d of %d actors have stopped after repeated '
                        'environment failures.', given_up, len(self._actors))
      stop = self._reason_to_stop(counts, start, given_up)
      if stop is not None:
        return stop, counts
      self._wake.wait(self._poll_seconds)
    return None, counts

  def _stop_nodes(self, nodes: Sequence[Any], what: str, timeout: float,
                  actor_ids: Sequence[Optional[int]] = ()):
    """Asks `nodes` to stop, all at once, and waits for their answers; an
    actor (`actor_ids[i]`, None for the others) that the watch sees die
    meanwhile is not waited for (a stop asked for just after an actor died,
    before the watch had confirmed it, would otherwise wait `timeout`)."""
    if not nodes:
      return
    ids = list(actor_ids) + [None] * (len(nodes) - len(actor_ids))
    answers = {node.futures.stop(timeout): actor_id
               for node, actor_id in zip(nodes, ids)}
    pending = set(answers)
    dropped = set()  # Actors seen dead while their answer was awaited.
    deadline = time.time() + timeout + 5.0
    while pending and time.time() < deadline:
      _, pending = futures.wait(pending, timeout=self._poll_seconds)
      if pending and self._watch is not None:
        dead = set(self._watch.dead_actors())
        for answer in [answer for answer in pending
                       if answers[answer] in dead]:
          logging.warning('Actor %d has died since it was asked to stop; its '
                          'answer is not waited for.', answers[answer])
          heartbeat.end_call(answer)
          pending.discard(answer)
          dropped.add(answer)
    for answer in pending:
      heartbeat.end_call(answer)
    # An answer that came as its call was ended counts.
    futures.wait(answers, timeout=heartbeat.CLOSE_WAIT_SECONDS)
    unconfirmed = [answer for answer in answers if answer not in dropped and
                   not (answer.done() and answer.exception() is None and
                        answer.result())]
    if unconfirmed:
      logging.warning('%d of %d %s did not confirm their stop within %.0f s; '
                      'the program\'s stop ends them.', len(unconfirmed),
                      len(nodes), what, timeout)

  def _stop_step(self, groups: List[str], dead_actors: Sequence[int]):
    """One step of the ordered stop: every node of `groups` at once, but
    the actors seen dead (which would never answer)."""
    members, actor_ids, titles = [], [], []
    for name in groups:
      group = node_groups.BY_NAME[name]
      titles.append(group.title + ('s' if len(self._nodes[name]) > 1 else ''))
      for index, client in enumerate(self._nodes[name]):
        if group.needed == node_groups.ALL and index in dead_actors:
          continue
        members.append(client)
        actor_ids.append(index if group.needed == node_groups.ALL else None)
    self._stop_nodes(members, ' and '.join(titles),
                     max(node_groups.BY_NAME[name].stop_seconds
                         for name in groups), actor_ids)

  def _on_outside_stop(self):
    """The program is ended from outside before this coordinator stopped
    it: the stop record says so, naming the nodes that no longer answer
    (see the module docstring). Runs in the signal handler of the thread
    that runs `run`, which it interrupts: it takes no lock `run` may hold."""
    if self._stopping or not self._workdir:
      return
    self._stopping = True
    silent = (self._watch.not_answering(OUTSIDE_STOP_ANSWER_SECONDS)
              if self._watch is not None and
              hasattr(self._watch, 'not_answering') else [])
    if silent:
      names = [f'the {name}' for name in silent]
      if len(names) > 1:
        names[-2:] = [f'{names[-2]} and {names[-1]}']
      reason = (f'ended from outside while {", ".join(names)} no '
                'longer answered (on Vertex AI a replica that fails ends '
                'the job); launch again with the same --workdir to resume '
                'from the newest checkpoints')
    else:
      reason = ('ended from outside (on Vertex AI: the job was cancelled, '
                'failed or reached its time limit); launch again with the '
                'same --workdir to resume from the newest checkpoints')
    counts = {key: int(value) for key, value in
              sorted(self._last_counts.items())}
    logging.error('Stopping: %s. Counts: %s', reason, json.dumps(counts))
    run_manifest.write_stop_record(self._workdir, reason, bool(silent),
                                   counts, outside=True)

  def _on_program_stop(self):
    """Launchpad's stop of the program, the coordinator's own `lp.stop()`
    or one from outside (the watch ends on it): an outside stop is recorded
    where the platform's stops come from outside."""
    if self._record_outside_stop:
      self._on_outside_stop()
    self._wake.set()

  def run(self):
    with program_stop.interrupt_if_stuck('The coordinator',
                                         self._on_program_stop) as stopping:
      stop, counts = self._watch_until_stop(stopping)
      if stop is None:
        return  # Stopped from outside: Launchpad stops every node at once.
      reason, failed = stop
      self._stopping = True
      counts = {key: int(value) for key, value in sorted(counts.items())}
      # The counts at the stop, for whoever reads the run's output.
      (logging.error if failed else logging.info)(
          'Stopping: %s. Counts: %s', reason, json.dumps(counts))
      if self._workdir:
        run_manifest.write_stop_record(self._workdir, reason, failed, counts,
                                       self._restarts())
      if self._node_died:
        # The others may be blocked in calls to the dead node: no order
        # helps them; the program's stop (and the stop watchdog) ends them.
        self._watch.end_gone_nodes()
        gone = self._watch.gone_labels()
        self._watch.close()
        self._end(failed, gone)
        return
      # A dead actor would never answer: it is not asked.
      dead = set(self._watch.dead_actors()) if self._watch else set()
      if dead:
        logging.warning('Actors %s have died: they are not asked to stop.',
                        sorted(dead))
      steps = node_groups.stop_steps(self._nodes)
      for step, groups in enumerate(steps):
        self._stop_step(groups, dead)
        if step == 0 and self._watch:
          # The acting nodes have stopped: their silence is no death.
          self._watch.close()
      if not steps and self._watch:
        self._watch.close()
      self._end(failed)

  def _restarts(self) -> Dict[str, int]:
    """{node: times started again in this launch} (kept nodes only)."""
    if self._kept_nodes is None or not self._workdir:
      return {}
    restarts = fault_records.restarts_by_node(self._workdir)
    if restarts:
      logging.info('Nodes started again in this launch: %s (each fault: '
                   '%s/).', json.dumps(restarts), fault_records.FAULTS)
    return restarts

  def _end(self, failed: bool, gone: Sequence[str] = ()):
    """Ends the program; `gone`: the labels of nodes seen gone, which are
    not asked for their final checkpoints (a frozen one never answers)."""
    if self._end_program is None:
      lp.stop()
    else:
      self._end_program(failed,
                        {label: client
                         for label, client in self._replays.items()
                         if label not in gone},
                        None if 'counter' in gone else self._counter)
