"""Linux futexes on 32-bit words in shared memory, through ``syscall(2)``.

A waiter that finds a counter behind calls :func:`wait` with the value it
saw; the kernel puts it to sleep only if the word still holds that value
(checked under the futex's hash-bucket lock), so a writer that stores a new
value and then calls :func:`wake` never loses the waiter: either the waiter
sees the new value, or it is asleep and gets woken. The futexes are not
``FUTEX_PRIVATE``: the word lives in a mapping shared between processes.

>>> import numpy as np
>>> word = np.zeros(1, dtype=np.int32)
>>> wait(word.ctypes.data, 1, 0.001)  # the word is 0, not 1: returns at once
True
>>> wait(word.ctypes.data, 0, 0.001)  # the word is 0: sleeps until the timeout
False
>>> wake(word.ctypes.data)
0
"""

from __future__ import annotations

import ctypes
import errno
import platform

#: futex(2)'s system call number, by machine
SYSCALL_NUMBERS = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}
FUTEX_WAIT, FUTEX_WAKE = 0, 1
EVERYONE = 0x7FFFFFFF


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_NUMBER = SYSCALL_NUMBERS.get(platform.machine().lower())
_syscall = ctypes.CDLL(None, use_errno=True).syscall
_syscall.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
_syscall.restype = ctypes.c_long


def available() -> bool:
    """Whether this machine's futex system call number is known."""
    return _NUMBER is not None


def wait(address: int, seen: int, timeout: float) -> bool:
    """Sleep while the int32 at ``address`` holds ``seen``, at most ``timeout``
    seconds. Returns on a wake-up, a changed value or a signal (True) or
    when the timeout expired (False); either way the caller re-reads the
    word and decides."""
    spec = _Timespec(int(timeout), int((timeout % 1) * 1e9))
    if _syscall(_NUMBER, address, FUTEX_WAIT, seen, ctypes.addressof(spec), None, 0) == -1:
        return ctypes.get_errno() != errno.ETIMEDOUT
    return True


def wake(address: int) -> int:
    """Wake every process sleeping on the int32 at ``address``; returns how many."""
    return _syscall(_NUMBER, address, FUTEX_WAKE, EVERYONE, None, None, 0)

