"""The coordinator's heartbeats (`launch.supervision.heartbeat`) against
real Courier servers in processes of their own, stopped, continued and
killed with signals."""

import re
import signal
import threading
import time
import types
from typing import List, Tuple

import portpicker
import pytest
from courier.python import client as courier_client

from launch.supervision import heartbeat
from launch.runs import faults as fault_records
from launch.supervision import platforms
from tests import helpers


@pytest.fixture
def server():
  process, port = helpers.start_heartbeat_server()
  yield types.SimpleNamespace(process=process, address=f'localhost:{port}')
  helpers.kill_group(process)


def _node(address):
  return types.SimpleNamespace(address=address)


def _watch(address, **kwargs):
  node = _node(address)
  return heartbeat.HeartbeatWatch(
      {'learner': [node], 'counter': [node], 'actor': [node, node]}, **kwargs)


def _pings(address) -> int:
  return courier_client.Client(address, call_timeout=30).count()


class _Seen:
  """A watch's heartbeats as the test sees them, through the watch's Courier
  calls (`heartbeat._courier_call`) and its clock (`heartbeat.time`).

  Every call sent to a watched node is kept, in order (`sent`, one list per
  node); a call sent while the node's previous call had not ended (answered,
  failed or timed out) is noted in `overlapping`. The watch's thread reads
  the clock once a round of heartbeats: `rounds` counts them.

  The clock is the real one, unless `live_clock`: it then starts at 0 and
  moves on by one period at each round that finds every node's latest call
  answered, and stands still otherwise (a round that finds a call still
  waiting, held up by a loaded machine; the test thread's reads). Time on
  it is time during which the node answered every heartbeat, however long
  that took.
  """

  def __init__(self, monkeypatch, period: float, live_clock: bool = False):
    self._period = period
    self._live_clock = live_clock
    self.ticks = 0  # Periods the live clock has moved on.
    self.rounds = 0
    self.sent: List[List] = []
    self.overlapping: List[Tuple[int, int]] = []
    monkeypatch.setattr(heartbeat, '_courier_call',
                        self._counted(heartbeat._courier_call))  # pylint: disable=protected-access
    monkeypatch.setattr(heartbeat, 'time', self)

  def _counted(self, courier_call):
    def make(address, timeout):
      call = courier_call(address, timeout)
      node, calls = len(self.sent), []
      self.sent.append(calls)

      def send():
        if calls and not calls[-1].done():
          self.overlapping.append((node, len(calls)))
        answer = call()
        calls.append(answer)
        return answer
      return send
    return make

  def _all_answered(self) -> bool:
    return all(calls and calls[-1].done() and calls[-1].exception() is None
               for calls in self.sent)

  def time(self) -> float:
    in_round = threading.current_thread().name == 'heartbeats'
    if in_round:
      self.rounds += 1
    if not self._live_clock:
      return time.time()
    if in_round and self.sent and self._all_answered():
      self.ticks += 1
    return self.ticks * self._period


def test_a_live_node_is_never_gone(server, monkeypatch):
  # Gone means silent for `timeout` on the watch's clock, which here runs
  # only while the node answers (`_Seen`'s live clock): a server or a watch
  # held up by a loaded machine stops it instead of looking silent. Ten
  # timeouts on it are ten timeouts' worth of rounds of heartbeats, all
  # answered, and at every check the node must not be gone: a watch that
  # measured silence from anything but each node's latest answer would see
  # it gone after one timeout.
  seen = _Seen(monkeypatch, period=0.15, live_clock=True)
  watch = _watch(server.address, timeout=1.5, period=0.15)

  def ten_timeouts_never_gone():
    assert watch.dead() is None
    assert watch.dead_actors() == []
    return seen.ticks * 0.15 >= 10 * 1.5
  helpers.wait_for(ten_timeouts_never_gone, 600, 'ten timeouts of answered beats')
  # Each period the clock moved on, every node's call of the period before
  # had been answered: so the server says too.
  assert _pings(server.address) >= 4 * 100
  watch.close()


def test_a_frozen_node_is_gone_after_the_timeout_and_back_if_continued(
    server, monkeypatch):
  seen = _Seen(monkeypatch, period=0.2)
  watch = _watch(server.address, timeout=4.0, period=0.2)
  # Every watched node answered before the stop (a node that never has is
  # still starting, not gone).
  helpers.wait_for(watch.all_answered.is_set, 60, 'first answers')
  server.process.send_signal(signal.SIGSTOP)
  # All four are gone (in turn: their last answers may have been seen a
  # round apart); the learner is named first.
  helpers.wait_for(lambda: len(watch.gone_labels()) == 4, 60,
            'the frozen node to be gone')
  gone = watch.dead()
  silent = float(re.search(r'for (\d+) s', gone).group(1))
  assert gone.startswith('the learner has not answered its heartbeats')
  assert silent >= 4.0
  assert watch.dead_actors() == [0, 1]
  # Frozen for a while longer, 15 more rounds of heartbeats (3 s), at each
  # of which a watch that did not wait for a node's call to end would have
  # sent it another: at most one call per watched node waited.
  rounds = seen.rounds
  helpers.wait_for(lambda: seen.rounds >= rounds + 15, 60, '15 more rounds')
  server.process.send_signal(signal.SIGCONT)
  assert seen.overlapping == [], seen.overlapping
  helpers.wait_for(lambda: watch.dead() is None, 60, 'the node to be back')
  watch.close()


def test_a_killed_node_is_gone(server):
  watch = _watch(server.address, timeout=3.0, period=0.2)
  helpers.wait_for(lambda: _pings(server.address) >= 8, 60, 'first answers')
  helpers.kill_group(server.process)
  gone = helpers.wait_for(watch.dead, 60, 'the killed node to be gone')
  assert 'has not answered its heartbeats' in gone
  watch.close()


def test_a_node_that_never_answers_is_starting_until_the_start_timeout():
  address = f'localhost:{portpicker.pick_unused_port()}'  # Nothing there.
  # Before the watch, whose clock starts as it is made: timed from after,
  # a slow construction (a loaded machine) made 6 s look shorter.
  started = time.time()
  watch = _watch(address, timeout=1.0, period=0.2, start_timeout=6.0)
  gone = helpers.wait_for(watch.dead, 60, 'the start timeout')
  assert time.time() - started >= 6.0
  assert gone == ('the learner never answered its heartbeats in 6 s (it did '
                  'not start)')
  watch.close()


def test_a_node_that_starts_after_the_watch_is_watched_from_its_first_answer():
  port = portpicker.pick_unused_port()
  address = f'localhost:{port}'
  watch = _watch(address, timeout=2.0, period=0.2, start_timeout=600)
  time.sleep(3.0)  # Longer than the timeout, before the node exists.
  assert watch.dead() is None
  assert not watch.all_answered.is_set()
  process, served = helpers.start_heartbeat_server(port)
  try:
    assert served == port
    helpers.wait_for(lambda: _pings(address) >= 40, 60, 'pings')
    assert watch.dead() is None
    assert watch.all_answered.is_set()
    process.send_signal(signal.SIGSTOP)
    helpers.wait_for(watch.dead, 60, 'the frozen node to be gone')
  finally:
    helpers.kill_group(process)
    watch.close()


class _Kept(platforms.KeptNodeRecords):
  """The coordinator's records of a kept node, written to `workdir` as
  under local_mp, whose process is the one the test says is current (as a
  node's pid file names its process from the start of its setup, before it
  serves)."""

  def __init__(self, workdir: str):
    super().__init__(workdir)
    self.pid = None

  def process(self, label: str):
    return self.pid

  def stopped_for(self, label: str) -> float:
    return 0.0

  def end(self, label: str, cause: str):
    raise AssertionError(f'the {label} was ended: {cause}')


@pytest.mark.slow
def test_a_fault_is_measured_from_the_old_process_however_fast_the_new_starts(
    tmp_path):
  # A node killed and started again on its address after a pause (its
  # keeper's), its new process named as current just before it serves (a
  # node writes its pid file as it starts, then is constructed and serves;
  # the counter's constructor takes milliseconds), at pauses that sweep a
  # heartbeat period: its last answer before the fault is the old
  # process's and its first after the new one's, every time. With the
  # answer taken before the look for a new process, a call sent into the
  # pause and answered by the new process within the period was taken as
  # the last answer before the fault, which then lost nothing.
  port = portpicker.pick_unused_port()
  address = f'localhost:{port}'
  kept = _Kept(str(tmp_path))
  process = helpers.held_heartbeat_server(port)
  kept.pid = process.pid
  helpers.serve_held(process)
  period, restarts = 1.0, 8
  watch = heartbeat.HeartbeatWatch({'learner': [_node(address)]},
                                   timeout=30.0, period=period, kept=kept)
  pids = [process.pid]
  try:
    for restart in range(1, restarts + 1):
      following = helpers.held_heartbeat_server(port)
      helpers.wait_for(
          lambda: len(fault_records.read_faults(str(tmp_path))) == restart - 1 and
          _pings(address) >= 3, 120, 'answers of the current process')
      helpers.kill_group(process)
      kept.pid = None  # Gone: no process of the launch does its work.
      time.sleep(0.25 + period * restart / restarts)
      process = following
      kept.pid = process.pid
      helpers.serve_held(process)
      pids.append(process.pid)
      helpers.wait_for(
          lambda: len(fault_records.read_faults(str(tmp_path))) == restart, 120,
          'the restarted node to answer')
  finally:
    watch.close()
    helpers.kill_group(process)
  records = fault_records.read_faults(str(tmp_path))
  assert [record['event'] for record in records] == ['recovered'] * restarts
  for record, old, new in zip(records, pids, pids[1:]):
    assert record['answered_before_fault']['pid'] == old, record
    assert record['answered_after']['pid'] == new, record
    assert record['pid'] == new, record


def test_either_watch_ends_the_nodes_another_sees_gone():
  class Gone:
    def dead(self):
      return 'the learner is gone'
    def dead_actors(self):
      return [1]
    def gone_labels(self):
      return ['learner']

  class Local:
    ended = []
    def dead(self):
      return None
    def dead_actors(self):
      return [0]
    def end_nodes(self, labels):
      self.ended.extend(labels)

  local = Local()
  watch = heartbeat.EitherWatch([local, None, Gone()])
  assert watch.dead() == 'the learner is gone'
  assert watch.dead_actors() == [0, 1]
  watch.end_gone_nodes()
  assert local.ended == ['learner']


def test_closing_a_watch_ends_its_calls_in_flight_without_cancelling_them(
    server):
  # Courier sets a call's result without checking whether its future was
  # cancelled, and a result arriving as it is cancelled aborts the process
  # (a coordinator died so in the ordered stop); a client destroyed with a
  # call in flight aborts it too. A closed watch ends its calls in flight
  # through Courier (`heartbeat.end_call`), leaving their futures
  # uncancelled.
  watch = _watch(server.address, timeout=30.0, period=0.2)
  helpers.wait_for(lambda: _pings(server.address) >= 8, 60, 'first answers')
  server.process.send_signal(signal.SIGSTOP)
  beats = watch._single + watch._actors  # pylint: disable=protected-access
  # Every node's call now waits for the frozen server.
  helpers.wait_for(lambda: all(beat.pending is not None and not beat.pending.done()
                        for beat in beats), 60, 'calls in flight')
  calls = [beat.pending for beat in beats]
  started = time.time()
  watch.close()
  # Ended while the server is still frozen, well before their 30 s
  # timeout, by Courier (its CANCELLED status), not by cancelled futures.
  assert time.time() - started < 30
  assert all(call.done() for call in calls)
  assert not any(call.cancelled() for call in calls)
  assert all('CANCELLED' in str(call.exception()).upper() for call in calls), [
      repr(call.exception()) for call in calls]
  server.process.send_signal(signal.SIGCONT)
