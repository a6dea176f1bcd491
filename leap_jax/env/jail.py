"""The OS layer under the sandbox: what a worker does to itself right after
its fork, while it is still single-threaded.

`enter`: own mount, network and IPC namespaces; every mount read-only
(nosuid); fresh size-capped tmpfs on /tmp, /dev/shm and the scratch dir
(noexec, gone when the worker dies). As root that needs CAP_SYS_ADMIN; as
another user an unprivileged user namespace gives the same.
`drop_privileges` (just before the candidate runs): a uid of its own
(`uid_base + pid`: no two live workers share one, so they cannot signal or
trace each other) when started as root, no capabilities, no_new_privs, not
dumpable (its /proc files, environ included, are root's). `clean_environment`:
a fixed minimal set of variables. What could not be done is reported by name,
never silently skipped.

Native code (XLA's C++) never raises an audit event; this layer is what stops
its writes (e.g. `compile({"xla_dump_to": DIR})`) outside scratch.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
from collections.abc import Iterable, Mapping

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 0x400, 0x800, 1 << 21
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x20, 0x1000, 0x4000, 1 << 18
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID = 0x1, 0x2
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_SYS_MOUNT_SETATTR = 442  # one number on every architecture (Linux >= 5.12)
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS = 4, 38
_CAP_VERSION_3 = 0x20080522
# Per-mount options a remount must keep (the kernel refuses to drop locked ones).
_KEPT_OPTIONS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC,
                 "noatime": _MS_NOATIME, "nodiratime": _MS_NODIRATIME,
                 "relatime": _MS_RELATIME}

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                        ctypes.c_ulong, ctypes.c_char_p]
_LIBC.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
  _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
              ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


class _CapHeader(ctypes.Structure):
  _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
  _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
              ("inheritable", ctypes.c_uint32)]


@dataclasses.dataclass(frozen=True)
class JailConfig:
  """The OS layer's settings (one per pool)."""
  enabled: bool = True
  uid_base: int = 1_000_000_000      # as root: worker uid = uid_base + pid
  tmpfs_bytes: int = 64 << 20        # each of scratch, /tmp, /dev/shm
  tmpfs_inodes: int = 4096
  # Variables passed on from the pool's environment (library lookup on GPU
  # hosts); every other variable of the parent is dropped.
  passthrough: tuple[str, ...] = ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
                                  "TRITON_PTXAS_PATH")


@dataclasses.dataclass
class JailReport:
  """Which parts of the OS layer hold in this worker (sent with `ready`)."""
  mount_namespace: bool = False
  read_only: bool = False            # every mount of the namespace read-only
  private_tmp: bool = False          # fresh tmpfs on /tmp, /dev/shm, scratch
  network_namespace: bool = False
  ipc_namespace: bool = False
  user_namespace: bool = False       # not root: namespaces through a user ns
  uid: int | None = None             # the uid the candidate runs as
  own_uid: bool = False              # a uid no other process has
  unprivileged: bool = False         # set by drop_privileges
  clean_environment: bool = False
  missing: list[str] = dataclasses.field(default_factory=list)

  def summary(self) -> str:
    """One log line: what holds, then what is missing and why."""
    held = [name for name, ok in (
        ("own mount namespace", self.mount_namespace),
        ("read-only mounts", self.read_only),
        ("private tmpfs /tmp, /dev/shm and scratch", self.private_tmp),
        ("own network namespace", self.network_namespace),
        ("own IPC namespace", self.ipc_namespace),
        ("user namespace", self.user_namespace),
        (f"uid {self.uid}" if self.uid is not None else "uid unchanged",
         self.unprivileged),
        ("clean environment", self.clean_environment)) if ok]
    line = "worker OS layer: " + (", ".join(held) or "none")
    if self.missing:
      line += "; MISSING: " + "; ".join(self.missing)
    return line


def thread_count() -> int:
  return len(os.listdir("/proc/self/task"))


def _fail(what: str) -> str:
  err = ctypes.get_errno()
  return f"{what}: {errno.errorcode.get(err, err)} ({os.strerror(err)})"


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> bool:
  enc = lambda s: None if s is None else s.encode()  # noqa: E731
  return _LIBC.mount(enc(source), enc(target), enc(fstype), flags,
                     enc(data)) == 0


def _unshare(flags: int) -> bool:
  return _LIBC.unshare(flags) == 0


def _write(path: str, text: str) -> None:
  with open(path, "w") as f:
    f.write(text)


def _enter_user_namespace(flags: int) -> bool:
  """Not root: a user namespace in which this process may mount, keeping
  its own uid and gid (mapped onto themselves)."""
  uid, gid = os.getuid(), os.getgid()
  if not _unshare(_CLONE_NEWUSER | flags):
    return False
  _write("/proc/self/setgroups", "deny")
  _write("/proc/self/uid_map", f"{uid} {uid} 1")
  _write("/proc/self/gid_map", f"{gid} {gid} 1")
  return True


def _mount_points() -> list[tuple[str, int]]:
  """(mount point, flags to keep) for every mount, from mountinfo."""
  out = []
  with open("/proc/self/mountinfo") as f:
    for line in f:
      fields = line.split()
      point = fields[4].encode().decode("unicode_escape")
      keep = sum(_KEPT_OPTIONS.get(o, 0) for o in fields[5].split(","))
      out.append((point, keep))
  return out


def make_read_only(use_mount_setattr: bool = True) -> list[str]:
  """Every mount of this (private) namespace read-only and nosuid; the
  mounts that could not be changed (empty: all)."""
  if use_mount_setattr:
    attr = _MountAttr(attr_set=_MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID,
                      propagation=_MS_PRIVATE)
    if _LIBC.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, b"/", _AT_RECURSIVE,
                     ctypes.byref(attr), ctypes.sizeof(attr)) == 0:
      return []
  # Kernels before 5.12: one remount per mount point.
  if not _mount(None, "/", None, _MS_REC | _MS_PRIVATE):
    return [_fail("mount --make-rprivate /")]
  failed = []
  for point, keep in _mount_points():
    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | keep
    if not _mount(None, point, None, flags) and ctypes.get_errno() != errno.ENOENT:
      failed.append(_fail(f"remount {point} read-only"))
  return failed


def _private_tmpfs(target: str, config: JailConfig, mode: str) -> bool:
  options = (f"size={config.tmpfs_bytes},nr_inodes={config.tmpfs_inodes},"
             f"mode={mode}")
  return _mount("tmpfs", target, "tmpfs",
                _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options)


def enter(scratch: str, config: JailConfig = JailConfig()) -> JailReport:
  """Namespaces and mounts for this worker; call right after the fork."""
  report = JailReport()
  if not config.enabled:
    report.missing.append("OS layer switched off (jail.enabled=False)")
    return report
  threads = thread_count()
  if threads > 1:  # namespaces are per thread: the others would stay outside
    report.missing.append(f"namespaces: {threads} threads already run "
                          "(start workers from the zygote)")
    return report
  flags = _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC
  if not _unshare(flags):  # needs CAP_SYS_ADMIN; else a user namespace
    refused = _fail("unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)")
    try:
      report.user_namespace = _enter_user_namespace(flags)
    except OSError as e:
      refused += f"; user namespace maps: {e}"
    if not report.user_namespace:
      report.missing.append(
          f"namespaces ({refused}; no user namespace either): native writes "
          "are capped only by RLIMIT_FSIZE, the audit hook alone blocks "
          "sockets")
      return report
  report.mount_namespace = report.network_namespace = True
  report.ipc_namespace = True
  failed = make_read_only()
  report.read_only = not failed
  report.missing += failed
  tmp_ok = all([_private_tmpfs("/tmp", config, "1777"),
                _private_tmpfs("/dev/shm", config, "1777")])
  try:  # the pool made scratch; under /tmp it is made again in the new one
    os.makedirs(scratch, exist_ok=True)
    tmp_ok = _private_tmpfs(scratch, config, "0700") and tmp_ok
  except OSError:
    tmp_ok = False
  report.private_tmp = tmp_ok
  if not tmp_ok:
    report.missing.append(_fail("private tmpfs mounts"))
  return report


def worker_uid(config: JailConfig, pid: int | None = None) -> int:
  return config.uid_base + (os.getpid() if pid is None else pid)


def drop_privileges(report: JailReport, scratch: str,
                    config: JailConfig = JailConfig()) -> None:
  """As root: setgroups/setgid/setuid to this worker's own uid (owning
  scratch); otherwise: no capabilities (those of a user namespace). Then
  no_new_privs and not dumpable."""
  if not config.enabled:
    return
  if report.user_namespace:  # the capabilities it gave go; uid stays
    data = (_CapData * 2)()
    if _LIBC.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), data) == 0:
      report.uid, report.unprivileged = os.getuid(), True
    else:
      report.missing.append(_fail("dropping capabilities"))
  elif os.geteuid() == 0:
    uid = worker_uid(config)
    try:
      os.chown(scratch, uid, uid)
      os.setgroups([])
      os.setresgid(uid, uid, uid)
      os.setresuid(uid, uid, uid)
      report.uid, report.unprivileged, report.own_uid = uid, True, True
    except OSError as e:
      report.missing.append(f"unprivileged uid: {e}")
  else:  # an ordinary user already: the pool's own uid
    report.uid, report.unprivileged = os.getuid(), True
  if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
    report.missing.append(_fail("no_new_privs"))
  _LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def minimal_environment(source: Mapping[str, str], names: Iterable[str]
                        ) -> dict[str, str]:
  """The fixed set every worker starts from, plus `names` found in source."""
  env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
         "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
         "MKL_NUM_THREADS": "1"}
  env.update({n: source[n] for n in names if n in source})
  return env


def clean_environment(config: JailConfig, extra: Mapping[str, str] = ()
                      ) -> None:
  """Replaces this process's environment (os.environ and the C environ)
  by the minimal set plus `extra`."""
  keep = minimal_environment(os.environ, config.passthrough)
  os.environ.clear()
  os.environ.update(keep)
  os.environ.update(dict(extra))
