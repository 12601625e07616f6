"""The reference the e2e tests compare sortd's answers with, and their test
arrays: numpy's stable sort in the sortd order (floats by their bits, -0.0 <
+0.0, every NaN one key after +inf; descending keeps equal keys in input
order)."""
import numpy as np


def order_key(a):
    """Unsigned values whose order is the server's ascending order of `a`,
    equal exactly when the keys are one key (floats by their bits, -0.0 <
    +0.0; every NaN the same key, after +inf)."""
    if a.dtype.kind != "f":
        return a
    ubits = np.dtype("u%d" % a.itemsize)
    b = a.view(ubits)
    top = np.array(1 << (8 * a.itemsize - 1), ubits)
    mapped = np.where(b & top, ~b, b | top)
    return np.where(np.isnan(a), np.iinfo(ubits).max, mapped)


def reference_permutation(keys, descending):
    """The input position of each sorted key: stable in both directions."""
    ok = order_key(keys)
    if not descending:
        return np.argsort(ok, kind="stable")
    _, rank = np.unique(ok, return_inverse=True)
    return np.argsort(-rank.astype(np.int64), kind="stable")


def bits(a):
    """A view for bitwise comparison (floats as unsigned integers)."""
    a = np.asarray(a)
    return a.view("u%d" % a.itemsize) if a.dtype.kind == "f" else a


def make_array(rng, name, n, nans=False):
    """n elements of type `name`: half from a small pool (duplicates,
    extremes, signed zeros, infinities, subnormals; with `nans`, NaNs of
    either sign and several payloads too), half at random."""
    dt = np.dtype(name)
    if dt.kind in "ui":
        info = np.iinfo(dt)
        pool = np.concatenate([
            np.array([info.min, info.max, 0, 1, info.max - 1, info.min + 1], dt),
            rng.integers(info.min, info.max, 24, dtype=dt, endpoint=True)])
        full = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    else:
        fi = np.finfo(dt)
        specials = [np.array([-np.inf, np.inf, -0.0, 0.0, fi.max, -fi.max, fi.tiny, -fi.tiny,
                              fi.smallest_subnormal, -fi.smallest_subnormal, 1.0, -1.0], dt)]
        if nans:
            u = np.dtype("<u%d" % dt.itemsize)
            exp = (1 << (8 * dt.itemsize - 1)) - (1 << (fi.nmant))  # exponent all ones
            specials.append(np.array([exp | 1, exp | (1 << (fi.nmant - 1)),
                                      (1 << (8 * dt.itemsize - 1)) | exp | 5], u).view(dt))
        pool = np.concatenate(specials + [rng.standard_normal(24).astype(dt)])
        full = (rng.standard_normal(n) * 1e6).astype(dt)
    pick = rng.random(n) < 0.5
    out = full.copy()
    out[pick] = pool[rng.integers(0, len(pool), int(pick.sum()))]
    return out


def time_reference(a, descending, nulls):
    """Stable order of datetime64/timedelta64 `a`: NaT (a null) first or
    last in both orders, the rest by their int64 counts."""
    nat = np.flatnonzero(np.isnat(a))
    rest = np.flatnonzero(~np.isnat(a))
    values = a[rest].view(np.int64)
    if descending:
        _, rank = np.unique(values, return_inverse=True)
        rest = rest[np.argsort(-rank.astype(np.int64), kind="stable")]
    else:
        rest = rest[np.argsort(values, kind="stable")]
    return np.concatenate([nat, rest] if nulls == "first" else [rest, nat])
