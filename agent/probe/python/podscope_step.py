"""podscope step markers for Python training loops: where each training step begins and ends.

    import podscope_step
    for step, batch in enumerate(loader):
        with podscope_step.step(step):
            loss = model(batch).sum(); loss.backward(); optimizer.step()

Or podscope_step.begin(step) / podscope_step.end(step). Nothing else to install: the module
finds libpodscope_probe.so where CUDA, NCCL and NVTX load it from (CUDA_INJECTION64_PATH,
NCCL_PROFILER_PLUGIN, NVTX_INJECTION64_PATH) once they have, or in the process's global scope (LD_PRELOAD), and calls
its podscope_probe_step_begin/end through ctypes. Without a probe a mark does nothing (a cached
check; the module looks again at most once a second for a minute, then once a minute, as CUDA and
NCCL load the probe lazily). Marks reach the agent's watch between capture windows and the
capture inside them, for jobs with no collectives too (one GPU). The same as podscope/step.h.
"""

import contextlib
import ctypes
import os
import time

__all__ = ["begin", "end", "step"]

_hooks = None  # (begin, end) once found
_first_look = None
_next_look = 0.0


def _find(library):
    try:
        begin_fn = library.podscope_probe_step_begin
        end_fn = library.podscope_probe_step_end
    except AttributeError:
        return None
    for fn in (begin_fn, end_fn):
        fn.argtypes = [ctypes.c_uint64]
        fn.restype = None
    return begin_fn, end_fn


def _look():
    global _hooks, _first_look, _next_look
    if _hooks is not None:
        return _hooks
    now = time.monotonic()
    if _first_look is not None and now < _next_look:
        return None
    if _first_look is None:
        _first_look = now
    _next_look = now + (1.0 if now - _first_look < 60 else 60.0)
    try:
        _hooks = _find(ctypes.CDLL(None))  # LD_PRELOAD, or linked into the interpreter
    except OSError:
        _hooks = None
    if _hooks is not None:
        return _hooks
    for variable in ("CUDA_INJECTION64_PATH", "NCCL_PROFILER_PLUGIN", "NVTX_INJECTION64_PATH"):
        path = os.environ.get(variable)
        if not path:
            continue
        try:
            # RTLD_NOLOAD: only a library already loaded (CUDA and NCCL load it RTLD_LOCAL).
            library = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue
        _hooks = _find(library)
        if _hooks is not None:
            break
    return _hooks


def begin(step_number):
    """Marks the start of step `step_number` (a non-negative integer) on the calling thread."""
    hooks = _look()
    if hooks is not None:
        hooks[0](int(step_number))


def end(step_number):
    """Marks the end of step `step_number` on the calling thread."""
    hooks = _look()
    if hooks is not None:
        hooks[1](int(step_number))


@contextlib.contextmanager
def step(step_number):
    """`with podscope_step.step(n):` marks the block as step n, ending it however the block ends."""
    begin(step_number)
    try:
        yield
    finally:
        end(step_number)
