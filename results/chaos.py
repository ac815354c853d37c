"""results/chaos.md: runs under faults (`benchmarks/chaos.py`), made from
their records.

  .venv/bin/python -m results.chaos --runs=<dir>

reads each run `<dir>/<name>/` that the chaos tool has finished
(`chaos.json`), banks its small records under `results/banked/chaos/<name>/`
(chaos.json, the faults' records, stop.json, the evaluator's and the learner's
CSV logs; a banked file is never changed), gathers the page's data from
the banked copies alone into `results/chaos.json`, and writes the page
from that (`render`, as `results/pages.py` does). The runs it knows:

* `donewhen`: issue 53's run, `--preset=cartpole --max_actor_steps=150000`
  with the learner, a replay node, the counter, an actor and the evaluator
  each SIGKILLed once and the learner SIGSTOPped once, 20 s apart;
* `cartpole_faults_seed<k>` and `cartpole_nofaults_seed<k>`: the same
  preset and budget, seed k, with a seeded fault every 30 s (every kind
  of node in turn, SIGKILL or SIGSTOP at even odds) and without;
* `minatar_soak` and `minatar_twin`: a MinAtar run of at least 60 minutes
  with a fault every 2 minutes, and its twin without.
"""

import json
import os
import statistics
from typing import Any, Dict, List, Optional

from absl import app
from absl import flags

from launch.runs import faults as fault_records
from results import bank
from results import page_registry
from results import spread

# --runs, the directory of the chaos runs (<name>/ each), is
# results/bank.py's flag; without it, the page is made from the bank alone.
FLAGS = flags.FLAGS
RUNS_FLAG = bank.FLAGS['runs']

RESULTS = os.path.dirname(os.path.abspath(__file__))
BANK = os.path.join(RESULTS, 'banked', 'chaos')
PAGE = os.path.join(RESULTS, 'chaos.md')
# The final policy's episodes (programs/evaluate.py --output), where made:
# the MinAtar soak's and its twin's.
FINAL_EVALUATION = 'final_evaluation.json'
SMALL_FILES = ('chaos.json', 'faults.jsonl', 'stop.json',
               'logs/evaluator/logs.csv', 'logs/learner/logs.csv',
               FINAL_EVALUATION)
SEEDS = (0, 1, 2)


def bank_runs(runs: str) -> List[str]:
  """Copies the small records of each finished run of `runs` into the
  bank (files it holds already are left as they are); the names banked."""
  banked = []
  for name in sorted(os.listdir(runs)):
    run = os.path.join(runs, name)
    if not os.path.isfile(os.path.join(run, 'chaos.json')):
      continue
    faults = os.path.join(run, fault_records.FAULTS)
    records = [os.path.join(fault_records.FAULTS, name) for name in (
        sorted(os.listdir(faults)) if os.path.isdir(faults) else ())]
    bank.copy_missing(run, os.path.join(BANK, name), [*SMALL_FILES, *records])
    banked.append(name)
  return banked


ANALYSIS = 'chaos'
DATA = os.path.join(RESULTS, 'chaos.json')
NAMES = (['donewhen'] +
         [f'cartpole_{kind}_seed{seed}' for kind in ('faults', 'nofaults')
          for seed in SEEDS] + ['minatar_soak', 'minatar_twin'])


def _banked(name: str) -> Optional[Dict[str, Any]]:
  path = os.path.join(BANK, name, 'chaos.json')
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def _launches(name: str) -> List[float]:
  """When the run was launched, then when its relaunch check began (after
  the run's end): the launch records among the faults' records."""
  return [record['time'] for record in fault_records.read_faults(
      os.path.join(BANK, name)) if record.get('event') == 'launch']


def collect() -> Dict[str, Any]:
  """The page's data: each known run's summary, from the bank, with when
  it was launched and when its relaunch check began."""
  data = {}
  for name in NAMES:
    summary = _banked(name)
    if summary is not None:
      launches = _launches(name)
      data[name] = {**summary,
                    'launched_at': launches[0] if launches else None,
                    'relaunched_at': (launches[-1] if len(launches) > 1
                                      else None)}
      final = os.path.join(BANK, name, FINAL_EVALUATION)
      if os.path.exists(final):
        with open(final) as f:
          evaluation = json.load(f)
        data[name]['final_policy'] = {
            key: evaluation[key] for key in
            ('episodes', 'seed', 'learner_steps', 'returns', 'mean', 'std')}
  return data


def welch_interval(a: List[float], b: List[float]) -> Dict[str, float]:
  """mean(a) - mean(b) with its 95% Welch interval and Welch's p."""
  from scipy import stats  # pylint: disable=g-import-not-at-top
  test = stats.ttest_ind(a, b, equal_var=False)
  interval = test.confidence_interval(0.95)
  return {'difference': statistics.mean(a) - statistics.mean(b),
          'low': float(interval.low), 'high': float(interval.high),
          'p': float(test.pvalue)}


def _final_policies(soak: Dict[str, Any], twin: Dict[str, Any]) -> List[str]:
  """The two final policies' episodes side by side, if both were
  evaluated."""
  if 'final_policy' not in soak or 'final_policy' not in twin:
    return []
  faults, calm = soak['final_policy'], twin['final_policy']
  compared = welch_interval(faults['returns'], calm['returns'])
  learner = [fault for fault in soak['faults'] if fault['kind'] == 'learner'
             and 'lost' in fault]
  lost = sum(fault['lost'].get('updates', 0) for fault in learner)
  holds = compared['low'] <= 0 <= compared['high']
  return [
      f'Each run\'s final policy (its last learner checkpoint, '
      f'`programs/evaluate.py --episodes={faults["episodes"]} '
      f'--seed={faults["seed"]}`): with faults '
      f'{spread.mean_and_sd(faults["returns"])} (learner step '
      f'{int(faults["learner_steps"]):,}), without '
      f'{spread.mean_and_sd(calm["returns"])} (learner step '
      f'{int(calm["learner_steps"]):,}), over their episodes (mean ± sample '
      f'sd). With faults less without: {compared["difference"]:.1f}, 95% '
      f'interval {spread.interval_text(compared["low"], compared["high"])} '
      f'(Welch, over episodes), p = {compared["p"]:.2f}: '
      + ('no difference shown. One run each: the interval is over the '
         'episodes of one policy each, not over runs.' if holds else
         ('the run with faults ahead' if compared['low'] > 0 else
          'the run without faults ahead') +
         ' on these episodes. One run each: the interval is over the '
         'episodes of one policy each, not over runs.'),
      '',
      f'The soak\'s learner lost {lost:,} updates over its {len(learner)} '
      'faults, each within its bound (the updates since its newest '
      'checkpoint, one every `--checkpoint_every` seconds): its final '
      f'policy had made {int(faults["learner_steps"]):,} updates where the '
      f'twin\'s had made {int(calm["learner_steps"]):,}. The last rounds\' '
      'learner steps above are the counter\'s, which counts updates a fault '
      'undid and loses what its own faults undo.', '']


def _signal(fault: Dict[str, Any]) -> str:
  return 'SIGSTOP' if fault['signal'] == 'SIGSTOP' else 'SIGKILL'


def _lost(fault: Dict[str, Any]) -> str:
  lost = fault.get('lost') or {}
  bound = fault.get('bound') or {}
  if not lost:
    return 'its open n-step windows (not counted)'
  return ', '.join(
      f'{value:,} {key.replace("_", " ")}' +
      (f' (bound {bound[key]:,})' if bound.get(key) is not None else '')
      for key, value in sorted(lost.items()))


def fault_table(summary: Dict[str, Any]) -> List[str]:
  lines = ['| # | process | fault | cause seen | back after (s) | lost |',
           '|---|---|---|---|---|---|']
  for index, fault in enumerate(summary['faults'], 1):
    back = fault.get('recovery_seconds')
    lines.append(
        f'| {index} | {fault["process"]} | {_signal(fault)} | '
        f'{fault.get("cause") or "none"} | '
        f'{"not back" if back is None else f"{back:.1f}"} | '
        f'{_lost(fault) if back is not None else "-"} |')
  return lines


def _final(summary: Optional[Dict[str, Any]]) -> Optional[float]:
  if not summary:
    return None
  return summary.get('evaluation', {}).get('mean_return')


def _minutes(summary: Dict[str, Any]) -> str:
  """How long the run took, from its launch to its relaunch check."""
  if not summary.get('launched_at') or not summary.get('relaunched_at'):
    return ''
  minutes = (summary['relaunched_at'] - summary['launched_at']) / 60
  return (f' It ran {minutes:.0f} minutes from its launch to the relaunch '
          'check after its end.')


def _verdict(summary: Dict[str, Any]) -> str:
  """What the run's faults came to; a fault not recovered from is named
  with how long before the relaunch check (after the run's end) it came."""
  faults = summary['faults']
  back = [fault for fault in faults if 'recovery_seconds' in fault]
  within = all(fault.get('within_bound', False) for fault in back)
  relaunched = summary.get('relaunched_at')
  missing = [f'the {fault["process"]}\'s {_signal(fault)}' +
             (f' {relaunched - fault["time"]:.0f} s before the relaunch '
              'check' if relaunched else '')
             for fault in faults if 'recovery_seconds' not in fault]
  return (f'{len(faults)} faults injected, {len(back)} recovered from' +
          (f' (not back when the run ended: {", ".join(missing)})'
           if missing else '') +
          f'; exit status {summary["exit_status"]}; every loss within its '
          f'bound: {"yes" if within else "no"}; every checkpoint loaded in '
          f'a relaunch: {"yes" if _resumed(summary) else "no"}')


def _resumed(summary: Dict[str, Any]) -> bool:
  resume = summary.get('resume') or {}
  return (resume.get('exit_status') == 0 and
          resume.get('learner_starts_at') is not None and
          resume.get('counter_starts_from') is not None and
          bool(resume.get('replay_starts_with')))


def recovery_by_kind(summaries: List[Dict[str, Any]]) -> List[str]:
  """Median and maximum seconds from each fault to its node's first answer
  after it, by kind of node and fault."""
  times: Dict[str, List[float]] = {}
  for summary in summaries:
    for fault in summary['faults']:
      if fault.get('recovery_seconds') is not None:
        key = f'{fault["process"].split("_")[0]}' + (
            ' server' if fault['process'].endswith('_server') else '')
        times.setdefault(f'{key}, {_signal(fault)}', []).append(
            fault['recovery_seconds'])
  lines = ['| node, fault | faults | median (s) | max (s) |',
           '|---|---|---|---|']
  for key in sorted(times):
    values = times[key]
    lines.append(f'| {key} | {len(values)} | '
                 f'{statistics.median(values):.1f} | {max(values):.1f} |')
  return lines


def render(data: Dict[str, Any]) -> str:
  """The page, from its data (`collect`) alone."""
  load = data.get
  text = ['# Runs under faults', '',
          'Made by `results/chaos.py` from the records the chaos tool '
          '(`benchmarks/chaos.py`) left, banked in `results/banked/chaos/`. '
          'A fault is SIGKILL of a node\'s process, as the out-of-memory '
          'killer sends it, or SIGSTOP held until the coordinator\'s '
          'heartbeats end the node; every node but the coordinator comes '
          'back in place under its keeper (docs/checkpoints.md). "Back '
          'after" runs from the fault to the node\'s first answer to a '
          'heartbeat, so a SIGSTOP\'s includes `--heartbeat_timeout` (30 s). '
          '"Lost" is the fall from the node\'s last answer before the fault '
          'to what its new process started from; its bound is what the '
          'node had done since its newest checkpoint (the learner\'s '
          'updates, the counter\'s actor steps) or a round (the '
          'evaluator\'s episodes). A replay node\'s items have no bound '
          'the program reports: the figure is the net fall of its table. '
          'The machine: 2 CPU cores, no GPU.', '']
  done = load('donewhen')
  text += ['## One of each fault, CartPole', '']
  if done:
    text += ['`' + ' '.join(['python -m benchmarks.chaos'] +
                            [f'--schedule={",".join(done["schedule"])}'] +
                            ['--fault_every=20', '--'] + done['command']) +
             '`', '',
             _verdict(done) + f'. The last evaluation round\'s mean return: '
             f'{_final(done):.1f} ({done["evaluation"]["episodes"]} '
             'episodes).', '']
    text += fault_table(done) + ['']
  else:
    text += ['Not run yet.', '']
  seeds = [seed for seed in SEEDS if load(f'cartpole_faults_seed{seed}')
           and load(f'cartpole_nofaults_seed{seed}')]
  faults = {seed: load(f'cartpole_faults_seed{seed}') for seed in seeds}
  clean = {seed: load(f'cartpole_nofaults_seed{seed}') for seed in seeds}
  text += ['## CartPole with a fault every 30 s, and without', '']
  if seeds:
    text += ['`--preset=cartpole --max_actor_steps=150000 --seed=<k>`, '
             'each seed with faults (`--fault_every=30 --seed=<k>`: the '
             'learner, the counter, replay, an actor and the evaluator in a '
             'shuffled cycle, SIGKILL or SIGSTOP at even odds) and without. '
             'The return is the last evaluation round\'s mean (10 episodes).'
             + (f' {len(seeds)} of the {len(SEEDS)} seeds are run so far.'
                if len(seeds) < len(SEEDS) else ''),
             '', '| seed | faults (recovered) | return with faults | '
             'return without |', '|---|---|---|---|']
    for seed in seeds:
      text.append(f'| {seed} | {faults[seed]["injected"]} '
                  f'({faults[seed]["recovered"]}) | '
                  f'{_final(faults[seed]):.1f} | {_final(clean[seed]):.1f} |')
    with_faults = [_final(faults[seed]) for seed in seeds]
    without = [_final(clean[seed]) for seed in seeds]
    for label, values in (('with faults', with_faults),
                          ('without', without)):
      value, low, high = spread.iqm_interval(values)
      text.append(f'| {label}: mean ± sd | | {spread.mean_and_sd(values)}; '
                  f'IQM {value:.1f} {spread.interval_text(low, high)} | |')
    text += ['', 'With faults against without: ' + spread.comparison(
        'with faults', 'without', with_faults, without) + '.', '']
    text += [f'Seed {seed}: {_verdict(faults[seed])}.' for seed in seeds]
    text += ['']
  else:
    text += ['Not run yet.', '']
  soak, twin = load('minatar_soak'), load('minatar_twin')
  text += ['## The MinAtar soak', '']
  if soak:
    text += ['`' + ' '.join(['python -m benchmarks.chaos',
                             f'--fault_every={soak["fault_every"]:g}', '--'] +
                            soak['command']) + '`', '',
             _verdict(soak) + '.' + _minutes(soak) + ' The last evaluation '
             f'round\'s mean return: {_final(soak):.1f} (learner step '
             f'{int(soak["evaluation"]["learner_steps"]):,}).', '']
    text += ([f'Its twin without faults: {_verdict(twin)}.{_minutes(twin)} '
              f'The last evaluation round\'s mean return: '
              f'{_final(twin):.1f} (learner step '
              f'{int(twin["evaluation"]["learner_steps"]):,}).', '']
             if twin else ['Its twin without faults is not run yet.', ''])
    text += _final_policies(soak, twin) if twin else []
    text += fault_table(soak) + ['']
  else:
    text += ['Not run yet: a MinAtar run of at least 60 minutes with a '
             'fault every 2 minutes, beside its twin without faults.', '']
  summaries = [summary for summary in
               [done, soak] + list(faults.values()) if summary]
  if summaries:
    text += ['## Time to come back, by kind of node', ''] + recovery_by_kind(
        summaries) + ['']
  return '\n'.join(text)


def main(argv):
  del argv
  if FLAGS.runs:
    print('banked:', ', '.join(bank_runs(FLAGS.runs)) or 'nothing new')
  data = collect()
  with open(DATA, 'w') as f:
    json.dump(data, f, indent=1, sort_keys=True)
    f.write('\n')
  with open(PAGE, 'w') as f:
    f.write(render(data))
  print(f'wrote {DATA} and {PAGE}')

page_registry.register(ANALYSIS, render)


if __name__ == '__main__':
  app.run(main)
