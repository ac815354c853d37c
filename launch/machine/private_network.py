"""A local run's own network: its servers reachable from nowhere else.

Every node of a program serves gRPC on every interface: the replay's Reverb
server and each Courier node (learner, counter, actors, evaluator,
coordinator). Neither Reverb 0.7 nor Courier can be told to bind to
loopback, neither asks who calls, and Courier's deserializer rebuilds
whatever object a caller describes by calling what the caller names: a host
that reaches a Courier port runs code as the user (docs/security.md).

So a program launched on this machine (local_mp, local_mt) first moves
itself, before it starts anything, into a network namespace of its own whose
only interface is loopback. Every process it then starts (the nodes, their
Reverb servers, the stop watchdogs) inherits it: the nodes reach each other
on 127.0.0.1 as before, and no other host, nor any other process of this
machine outside the program, can connect to them. What the user does with a
run goes through its workdir and the terminal, not the network: Ctrl-C,
`programs/stop.py` (a request file), TensorBoard, `evaluate.py` and
`plot.py` (the files), resuming.

An unprivileged user makes the namespace inside a user namespace of its own
that maps only its own user and group (as `unshare --user --net` does), so
files keep their owner; root needs no user namespace. Creating a user
namespace needs a process with one thread, so this runs before NumPy (whose
OpenBLAS starts threads at import) is imported: first thing in the program,
from the command line alone (`isolate_launch`). Standard library only.

Where the system allows neither (user namespaces turned off or restricted,
as by Ubuntu 24.04's AppArmor setting, or a container's seccomp profile),
the program says so and stops before anything starts, unless it is given
`--allow_network_exposure`.
"""

import ctypes
import errno
import fcntl
import os
import socket
import struct
import sys
from typing import List, Optional, Sequence

ALLOW_FLAG = 'allow_network_exposure'
LAUNCH_TYPES = ('local_mp', 'local_mt')
# Flags with which a program prints something and exits, starting nothing.
_PRINT_ONLY = ('print_config', 'list_presets', 'help', 'helpfull', 'helpshort',
               'helpxml', 'only_check_args')
DOCS = 'docs/security.md'

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = '16sH22x'  # struct ifreq: the name, then ifr_flags, padded to 40.


class Unavailable(Exception):
  """This system does not let this process make a network of its own: the
  message says why and what to change."""


def interfaces() -> List[str]:
  """The network interfaces of this process's network namespace."""
  return sorted(name for _, name in socket.if_nameindex())


def is_private() -> bool:
  """True when loopback is the only interface this process can reach the
  network through (a namespace such as `enter` makes)."""
  return interfaces() == ['lo']


def _threads() -> int:
  with open('/proc/self/status') as f:
    for line in f:
      if line.startswith('Threads:'):
        return int(line.split()[1])
  return 1


def _read(path: str) -> Optional[str]:
  try:
    with open(path) as f:
      return f.read().strip()
  except OSError:
    return None


def _why_not(error: int) -> str:
  """The likely cause of a failed unshare, with its fix, from the settings
  that decide it."""
  if _read('/proc/sys/user/max_net_namespaces') == '0':
    return ('network namespaces are turned off (user.max_net_namespaces=0); '
            'allow them: sudo sysctl -w user.max_net_namespaces=1024')
  if _read('/proc/sys/user/max_user_namespaces') == '0':
    return ('user namespaces are turned off (user.max_user_namespaces=0); '
            'allow them: sudo sysctl -w user.max_user_namespaces=1024')
  if _read('/proc/sys/kernel/unprivileged_userns_clone') == '0':
    return ('unprivileged user namespaces are turned off '
            '(kernel.unprivileged_userns_clone=0); allow them: sudo sysctl '
            '-w kernel.unprivileged_userns_clone=1')
  if _read('/proc/sys/kernel/apparmor_restrict_unprivileged_userns') == '1':
    return ('AppArmor restricts unprivileged user namespaces '
            '(kernel.apparmor_restrict_unprivileged_userns=1, as on Ubuntu '
            '24.04); allow them: sudo sysctl -w '
            'kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor '
            'profile with "userns," for this Python')
  return (f'the kernel refused a network namespace ({os.strerror(error)}), '
          'as a container\'s seccomp profile does without CAP_SYS_ADMIN')


def _unshare(libc, flags: int) -> int:
  """0, or the errno of unshare(flags)."""
  if libc.unshare(flags) == 0:
    return 0
  return ctypes.get_errno()


def _write(path: str, text: str):
  with open(path, 'w') as f:
    f.write(text)


def _loopback_up():
  """Brings up `lo` of this (new) namespace: 127.0.0.1 and ::1."""
  with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
    request = struct.pack(_IFREQ, b'lo', 0)
    flags = struct.unpack(_IFREQ, fcntl.ioctl(sock, _SIOCGIFFLAGS,
                                              request))[1]
    fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, b'lo',
                                                 flags | _IFF_UP))


def _check_loopback():
  """Raises OSError unless a connection on 127.0.0.1 works."""
  with socket.socket() as server, socket.socket() as client:
    server.bind(('127.0.0.1', 0))
    server.listen(1)
    client.settimeout(5.0)
    client.connect(server.getsockname())


def enter():
  """Moves this process into a new network namespace whose only interface
  is loopback, up; the processes it starts from now on inherit it.

  Raises:
    Unavailable: the system allows no such namespace (the message says why
      and how to allow it), or this process already runs threads. A
      failure after the namespace was made leaves this process without a
      network: the caller must then end it.
  """
  if _threads() != 1:
    raise Unavailable('this process already runs threads (a network '
                      'namespace must be made before NumPy or TensorFlow '
                      'is imported)')
  libc = ctypes.CDLL(None, use_errno=True)
  uid, gid = os.geteuid(), os.getegid()
  failure = errno.EPERM
  if uid == 0:  # Root needs no user namespace (nor has one to map).
    failure = _unshare(libc, _CLONE_NEWNET)
  if failure:
    failure = _unshare(libc, _CLONE_NEWUSER | _CLONE_NEWNET)
    if failure:
      raise Unavailable(_why_not(failure))
    try:  # This user and group only, as themselves: files keep owners.
      _write('/proc/self/setgroups', 'deny')
      _write('/proc/self/uid_map', f'{uid} {uid} 1')
      _write('/proc/self/gid_map', f'{gid} {gid} 1')
    except OSError as error:
      raise Unavailable(f'the user namespace could not map this user '
                        f'({error})') from error
  try:
    _loopback_up()
    _check_loopback()
  except OSError as error:
    raise Unavailable(f'loopback could not be brought up in the new network '
                      f'namespace ({error}); {_why_not(error.errno or 0)}'
                      ) from error


def _parse(argv: Sequence[str]):
  """The flags that decide isolation, read from the command line the way
  absl reads them (--flagfile too), ignoring every other flag."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  values = flags.FlagValues()
  flags.DEFINE_string('lp_launch_type', 'local_mt', '', flag_values=values)
  flags.DEFINE_bool(ALLOW_FLAG, False, '', flag_values=values)
  for name in _PRINT_ONLY:
    flags.DEFINE_bool(name, False, '', flag_values=values)
  try:
    values(list(argv), known_only=True)
  except flags.Error:
    return None  # The program's own parse reports it.
  return values


def launch_type(argv: Sequence[str]) -> Optional[str]:
  """--lp_launch_type as the program will read it from `argv` (--flagfile
  too; Launchpad's default, local_mt, without it), or None where the
  command line cannot be read (the program's own parse then says why)."""
  values = _parse(argv)
  return None if values is None else values.lp_launch_type


def refusal(cause: str) -> str:
  return (f'error: this run\'s servers cannot be kept off the network: '
          f'{cause}. Allow that, or pass --{ALLOW_FLAG} to run with every '
          f'node listening on every interface, open to any host that '
          f'reaches this one ({DOCS}).')


def isolate_launch(argv: Sequence[str]):
  """The program's first step: for a launch on this machine, moves it into
  a network of its own (`enter`); or, where the system allows none, prints
  why and exits with status 2, unless `--allow_network_exposure` is given.
  A command line that only prints (--print_config, --help) or launches
  elsewhere is left alone."""
  values = _parse(argv)
  if values is None or values.lp_launch_type not in LAUNCH_TYPES:
    return
  if values[ALLOW_FLAG].value or any(values[name].value
                                     for name in _PRINT_ONLY):
    return
  if is_private():  # Already in a network of its own (e.g. a container's).
    return
  try:
    enter()
  except Unavailable as error:
    sys.stderr.write(refusal(str(error)) + '\n')
    sys.stderr.flush()
    os._exit(2)  # pylint: disable=protected-access


def check_launch(launch_type: str, allow_exposure: bool) -> Optional[str]:
  """After the program's own flag parsing, before anything starts: a line
  to print saying how this launch is reachable; raises ValueError if a
  launch on this machine is not in a private network and was not allowed
  to be exposed (`isolate_launch` did not run first, or was misled)."""
  if launch_type not in LAUNCH_TYPES:
    return None
  if is_private():
    return ('Network: the nodes listen inside this run\'s own network '
            'namespace (loopback only); no other host or process can reach '
            f'them ({DOCS}).')
  if not allow_exposure:
    raise ValueError(
        f'this launch is not in a network of its own (interfaces: '
        f'{", ".join(interfaces())}): call '
        'launch.machine.private_network.isolate_launch(sys.argv) before '
        f'anything imports NumPy, or pass --{ALLOW_FLAG}.')
  return (f'warning: --{ALLOW_FLAG}: every node listens on every interface '
          f'({", ".join(interfaces())}) without authentication; any host that '
          f'reaches this machine can run code as {_user()} ({DOCS}).')


def _user() -> str:
  try:
    import pwd  # pylint: disable=g-import-not-at-top
    return pwd.getpwuid(os.geteuid()).pw_name
  except (ImportError, KeyError):
    return f'uid {os.geteuid()}'
