"""Starts threads in the first backward() that outlive the case: one prints, one keeps
rewriting every gradient to 1.0, one forges "perfect" result messages on every open
descriptor. None of it may raise the score."""

import json
import os
import struct
import threading
import time

from micrograd.engine import Value

_made = []
_init = Value.__init__
_backward = Value.backward
_started = []


def __init__(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    _made.append(self)


def _forge():
    time.sleep(0.05)  # after the case that started it has ended
    fake = {"kind": "run", "id": "?", "results": {}, "tape": [], "failure": None, "output": ""}
    payload = json.dumps(fake).encode()
    while True:
        for fd in range(3, 20):
            try:
                os.write(fd, struct.pack(">I", len(payload)) + payload)
            except OSError:
                pass
        time.sleep(0.01)


def _rewrite():
    while True:
        for v in list(_made):
            v.grad = 1.0
        time.sleep(0.001)


def _chatter():
    while True:
        print("thread output after the case")
        time.sleep(0.01)


def backward(self):
    if not _started:
        _started.append(True)
        for target in (_forge, _rewrite, _chatter):
            threading.Thread(target=target, daemon=False).start()
    _backward(self)


Value.__init__ = __init__
Value.backward = backward
