"""The plan's estimate of the parameters' egress
(`launch.cloud.capacity.parameter_egress`, which `--dry_run`
prints) and the variable cachers it chooses, against hand-worked figures."""

import pytest

from launch.cloud import capacity

MEASURED = {1: 200.0, 16: 800.0}  # Steps/s of one actor core with K envs.
MB = 1_000_000


def test_egress_caps_are_2_gbps_per_vcpu_up_to_32():
  assert capacity.egress_cap_gbps(2) == 4.0
  assert capacity.egress_cap_gbps(8) == 16.0  # Google's n1-standard-8 example.
  assert capacity.egress_cap_gbps(16) == 32.0
  assert capacity.egress_cap_gbps(96) == 32.0


def test_an_actor_pulls_once_per_period_of_its_loop():
  # K=1: 200 steps/s, a pull every 100: 2 pulls/s.
  assert capacity.actor_pulls_per_second(1, 100, MEASURED) == 2.0
  # K=16: 800 steps/s are 50 iterations/s of the loop (one step of each
  # environment), a pull every 100 iterations: 0.5/s.
  assert capacity.actor_pulls_per_second(16, 100, MEASURED) == 0.5


def test_the_learner_alone_sends_every_actor_its_copies():
  # 100 actors x 10 MB x 2 pulls/s = 2,000 MB/s = 16 Gbps.
  egress = capacity.parameter_egress(10 * MB, 100, 1, 100, 0, 0.5,
                                     steps_per_second=MEASURED)
  assert egress.learner_bytes_per_second == 2_000 * MB
  assert capacity.gbps(egress.learner_bytes_per_second) == 16.0
  assert egress.cacher_bytes_per_second == 0.0
  # Half an n1-standard-8's 16 Gbps is 8: it does not fit.
  assert not egress.fits(16.0, 4.0)


def test_cachers_take_the_actors_copies_off_the_learner():
  # 3 cachers, each copying 2 times a second (every 0.5 s): 3 x 10 MB x 2
  # = 60 MB/s from the learner; each serves ceil(100 / 3) = 34 actors: 34 x
  # 10 MB x 2 = 680 MB/s = 5.44 Gbps.
  egress = capacity.parameter_egress(10 * MB, 100, 1, 100, 3, 0.5,
                                     steps_per_second=MEASURED)
  assert egress.actors_per_cacher == 34
  assert egress.learner_bytes_per_second == 60 * MB
  assert egress.cacher_bytes_per_second == 680 * MB
  assert capacity.gbps(egress.cacher_bytes_per_second) == pytest.approx(5.44)


def test_a_puller_copies_at_most_once_per_learner_update():
  # Pulls every 10 steps at 200 steps/s: 20/s, but a learner of 5 updates/s
  # has only 5 new versions a second to copy; a cacher pulling every 0.1 s
  # (10/s) copies 5 too.
  egress = capacity.parameter_egress(MB, 10, 1, 10, 2, 0.1,
                                     learner_updates=5.0,
                                     steps_per_second=MEASURED)
  assert egress.actor_pulls_per_second == 20.0
  assert egress.copies_per_actor == 5.0
  assert egress.copies_per_cacher == 5.0
  assert egress.learner_bytes_per_second == 2 * MB * 5
  assert egress.cacher_bytes_per_second == 5 * MB * 5


def test_the_fewest_cachers_that_keep_every_sender_within_half_its_cap():
  # 100 actors x 10 MB x 2/s; learner cap 16 Gbps (half: 1,000 MB/s),
  # cacher cap 4 Gbps (half: 250 MB/s). A cacher serves at most 12 actors
  # (12 x 20 MB/s = 240 MB/s; 13 would send 260): ceil(100 / 12) = 9
  # cachers, each serving ceil(100 / 9) = 12; the learner sends 9 x 20 =
  # 180 MB/s.
  rates = dict(cacher_period=0.5, steps_per_second=MEASURED)
  assert capacity.fewest_cachers(10 * MB, 100, 1, 100, 16.0, 4.0,
                                 **rates) == 9
  # 10 actors: the learner alone sends 200 MB/s, within its half.
  assert capacity.fewest_cachers(10 * MB, 10, 1, 100, 16.0, 4.0,
                                 **rates) == 0
  # A learner of 2 vCPUs (4 Gbps, half: 250 MB/s) can feed at most 12
  # cachers (240 MB/s), each of which 12 actors: 144 actors at most.
  assert capacity.fewest_cachers(10 * MB, 144, 1, 100, 4.0, 4.0,
                                 **rates) == 12
  assert capacity.fewest_cachers(10 * MB, 145, 1, 100, 4.0, 4.0,
                                 **rates) is None


def test_the_plan_chooses_cachers_or_warns_of_too_few():
  # The figures of the program's own table (`ACTOR_STEPS_PER_SECOND`).
  bytes_, actors = 10 * MB, 256
  learner, cacher = ('n1-standard-8', 8), ('n1-highmem-2', 2)
  needed = capacity.fewest_cachers(bytes_, actors, 1, 100, 16.0, 4.0,
                                   cacher_period=0.5)
  chosen, text = capacity.parameter_advice(bytes_, actors, 1, 100, learner,
                                           cacher, None, 0.5)
  assert chosen == needed > 0
  assert f'--variable_cachers={needed}: the fewest' in text
  assert 'A cacher adds up to 0.5 s to the age of the parameters' in text
  assert capacity.EGRESS_SOURCE in text
  given, text = capacity.parameter_advice(bytes_, actors, 1, 100, learner,
                                          cacher, 2, 0.5)
  assert given == 2
  assert (f'Warning: --variable_cachers=2 is too few: each cacher would '
          f'pass 50% of its egress cap; --variable_cachers={needed} does '
          'not.') in text
  _, text = capacity.parameter_advice(bytes_, actors, 1, 100, learner,
                                      cacher, 0, 0.5)
  assert 'Warning: --variable_cachers=0 is too few: the learner' in text
