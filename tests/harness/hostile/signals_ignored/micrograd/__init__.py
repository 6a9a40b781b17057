"""Ignores every catchable signal, then loops in tanh's rule: only SIGKILL can stop it."""

import signal

from micrograd.engine import Value

for sig in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
    signal.signal(sig, signal.SIG_IGN)
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)  # and keeps an alarm ringing, ignored

_tanh = Value.tanh


def tanh(self):
    out = _tanh(self)

    def _backward():
        while True:
            pass

    out._backward = _backward
    return out


Value.tanh = tanh
