"""What a sort's progress= argument may be, and the bar progress=True draws.

progress(phase, done, total) is called as a transfer advances: phase
"upload", "sort" or "download", done and total in bytes of that phase (the
sort phase counts 0 of 1, then 1 of 1). Paths that move their arrays in one
message report nothing. progress=True draws tqdm bars (tqdm, Debian's
python3-tqdm), one a phase, once the transfer has run a second: fast sorts
print nothing.
"""

import threading
import time

BAR_DELAY_SECONDS = 1.0


class TransferBar:
    """tqdm bars over a transfer's phases, one a phase, drawn from the first
    report made BAR_DELAY_SECONDS after the transfer began (tqdm's own
    delay= counts per bar, and its reset() draws at once)."""

    def __init__(self, file=None, delay=BAR_DELAY_SECONDS, clock=time.monotonic):
        try:
            from tqdm import tqdm
        except ImportError:
            raise ValueError("progress=True draws a tqdm bar: install tqdm (Debian: "
                             "python3-tqdm), or pass a callable") from None
        self._tqdm, self._file, self._delay, self._clock = tqdm, file, delay, clock
        self._began = None
        self._bar = None
        self._phase = None
        self._lock = threading.Lock()

    def __call__(self, phase, done, total):
        with self._lock:
            now = self._clock()
            if self._began is None:
                self._began = now
            if self._bar is not None and phase != self._phase:
                self._bar.close()
                self._bar = None
            self._phase = phase
            if self._bar is None:
                if now - self._began < self._delay:
                    return
                self._bar = self._tqdm(total=total, initial=done, desc="sortd " + phase,
                                       unit="B", unit_scale=True, unit_divisor=1024,
                                       file=self._file, dynamic_ncols=True)
            else:
                self._bar.update(done - self._bar.n)

    def close(self):
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None


def resolve(progress):
    """(callable or None, close): what sort_full and sort_table call, and
    what they call when the sort ends (closes a bar of progress=True)."""
    if progress is None or progress is False:
        return None, lambda: None
    if progress is True:
        bar = TransferBar()
        return bar, bar.close
    if callable(progress):
        return progress, lambda: None
    raise TypeError("progress must be a callable(phase, done, total), True (a tqdm bar) "
                    "or None, not %r" % (progress,))
