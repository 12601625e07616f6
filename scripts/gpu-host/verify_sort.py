#!/usr/bin/env python3
"""Exact checker of one sortd answer against the contract (docs/api.md).

  verify_sort.py check --input IN --output OUT [--indices IDX] --order asc|desc
                       [--type T] [--label TEXT]
  verify_sort.py gen --type T --count N --seed S --out FILE
  verify_sort.py --selftest

check: IN is the array that was sent (.npy for the numeric types, or raw
little-endian with --type; for bytes, text with one key per line, as
sortctl --format=text reads it), OUT the sorted keys sortctl wrote, IDX the
permutation (raw little-endian uint64 as `sortctl --indices_out=*.bin`
writes it, or .npy). It requires, exactly:
  - IDX is a permutation of 0..n-1;
  - IDX is the stable permutation in the contract order: integers by value;
    floats -inf < ... < -0.0 < +0.0 < ... < +inf < NaN, every NaN (any sign,
    any payload) one key; byte strings unsigned lexicographic, a proper
    prefix first; equal keys in input order in BOTH orders;
  - OUT is bit for bit IN[IDX] (raw bytes compared: -0.0 vs +0.0 and NaN
    payloads count), and IN in the reference order.
Without --indices only the keys are checked (bit for bit, reference order).
Prints one line starting with OK and exits 0, or prints FAIL lines and
exits 1 (2 for bad arguments or unreadable files).

The reference for numbers is a stable argsort of an order-preserving
unsigned key (floats: sign-flip mapping, every NaN mapped to one value above
+inf), of its bitwise complement for descending. --selftest checks that
reference against a comparison sort written from the contract and shows
that the checker fails on each kind of wrong answer (stability, -0.0/+0.0,
NaN placement and payloads, keys, permutation, lengths, byte strings).

gen writes an input with many equal keys, for floats also +-0.0, +-inf,
NaNs of both signs with several payloads (quiet and signalling), denormals:
the cases a stability or special-value bug shows on. Needs python3 + numpy.
"""
import argparse
import functools
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

NUMERIC = {"uint32": "<u4", "int32": "<i4", "float32": "<f4",
           "uint64": "<u8", "int64": "<i8", "float64": "<f8"}
TYPES = list(NUMERIC) + ["bytes"]
MAX_SHOWN = 3


class Usage(Exception):
    """Bad arguments or unreadable input: exit 2."""


# ---------------------------------------------------------------- files

def is_npy(path):
    with open(path, "rb") as f:
        return f.read(6) == b"\x93NUMPY"


def type_of_dtype(dtype):
    for name, descr in NUMERIC.items():
        if np.dtype(descr) == dtype:
            return name
    raise Usage("unsupported dtype %s (sortd types: %s)" % (dtype, " ".join(NUMERIC)))


def load_numeric(path, type_name):
    """(array, type name) from .npy, or raw little-endian when type_name is given."""
    if is_npy(path):
        a = np.load(path, allow_pickle=False)
        if a.ndim != 1:
            raise Usage("%s: shape %s, expected one dimension" % (path, a.shape))
        t = type_of_dtype(a.dtype)
        if type_name and type_name != t:
            raise Usage("%s holds %s, --type says %s" % (path, t, type_name))
        return np.ascontiguousarray(a), t
    if type_name not in NUMERIC:
        raise Usage("%s is not .npy: give a numeric --type for raw little-endian data" % path)
    raw = open(path, "rb").read()
    width = np.dtype(NUMERIC[type_name]).itemsize
    if len(raw) % width:
        raise Usage("%s: %d bytes is not a multiple of %d" % (path, len(raw), width))
    return np.frombuffer(raw, dtype=NUMERIC[type_name]).copy(), type_name


def load_lines(path):
    """Keys of a text file as sortctl reads it (std::getline: split on \\n;
    a final \\n ends the last key and does not start another; \\r is kept)."""
    data = open(path, "rb").read()
    if not data:
        return []
    keys = data.split(b"\n")
    if data.endswith(b"\n"):
        keys.pop()
    return keys


def load_indices(path):
    if is_npy(path):
        a = np.load(path, allow_pickle=False)
        if a.dtype.kind not in "ui":
            raise Usage("%s: indices of dtype %s" % (path, a.dtype))
        return np.ascontiguousarray(a).astype(np.uint64)
    raw = open(path, "rb").read()
    if len(raw) % 8:
        raise Usage("%s: %d bytes is not a multiple of 8 (raw uint64 indices)" % (path, len(raw)))
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64)


# ---------------------------------------------------------------- reference

def order_key(a):
    """Unsigned integers whose unsigned order is the contract order of a."""
    width = a.dtype.itemsize
    udt = np.dtype("<u%d" % width)
    bits = np.ascontiguousarray(a).view(udt)
    if a.dtype.kind == "u":
        return bits.copy()
    sign = udt.type(1 << (8 * width - 1))
    if a.dtype.kind == "i":
        return bits ^ sign
    # Floats: negative -> complement (more negative sorts lower, -0.0 just
    # below +0.0), non-negative -> sign bit set; every NaN -> all ones,
    # above +inf (0xff800000 / 0xfff0000000000000 after the mapping).
    key = np.where((bits & sign) != 0, ~bits, bits | sign).astype(udt)
    key[np.isnan(a)] = np.iinfo(udt).max
    return key


def reference_numeric(a, descending):
    key = order_key(a)
    if descending:
        key = ~key  # descending, still stable: equal keys keep input order
    return np.argsort(key, kind="stable").astype(np.uint64)


def reference_bytes(keys, descending):
    # sorted() is stable, reverse=True included (equal keys keep input
    # order); bytes compare unsigned lexicographically, a prefix first.
    return sorted(range(len(keys)), key=keys.__getitem__, reverse=descending)


# ---------------------------------------------------------------- checks

def describe(a, i):
    i = int(i)
    v = a[i]
    bits = a[i:i + 1].view("<u%d" % a.dtype.itemsize)[0]
    return "%r (bits 0x%0*x)" % (v.item(), 2 * a.dtype.itemsize, int(bits))


def first_differences(mask):
    bad = np.flatnonzero(mask)
    return len(bad), bad[:MAX_SHOWN]


def check_permutation(idx, n):
    if len(idx) != n:
        return ["indices: %d entries for %d keys" % (len(idx), n)]
    if n == 0:
        return []
    out_of_range = np.flatnonzero(idx >= np.uint64(n))
    if len(out_of_range):
        i = out_of_range[0]
        return ["indices: not a permutation: %d out of range, first indices[%d] = %d"
                % (len(out_of_range), i, int(idx[i]))]
    counts = np.bincount(idx.astype(np.int64), minlength=n)
    if (counts != 1).any():
        rep = np.flatnonzero(counts > 1)
        missing = np.flatnonzero(counts == 0)
        return ["indices: not a permutation: %d values repeated (first %d), %d missing (first %d)"
                % (len(rep), int(rep[0]), len(missing), int(missing[0]))]
    return []


def check_numeric(inp, out, idx, descending):
    errors = []
    n = len(inp)
    ref = reference_numeric(inp, descending)
    if out.dtype != inp.dtype:
        return ["keys: output dtype %s, input %s" % (out.dtype, inp.dtype)]
    udt = "<u%d" % inp.dtype.itemsize
    in_bits = inp.view(udt)
    if len(out) != n:
        errors.append("keys: %d output keys for %d input keys" % (len(out), n))
    else:
        count, first = first_differences(out.view(udt) != in_bits[ref])
        if count:
            errors.append("keys: %d of %d differ bitwise from the input in the reference order" % (count, n))
            for i in first:
                errors.append("  keys[%d] = %s, expected %s (input[%d])"
                              % (i, describe(out, i), describe(inp, ref[i]), int(ref[i])))
    if idx is None:
        return errors
    perm_errors = check_permutation(idx, n)
    errors += perm_errors
    if perm_errors:
        return errors
    count, first = first_differences(idx != ref)
    if count:
        errors.append("indices: %d of %d differ from the stable reference permutation" % (count, n))
        for i in first:
            errors.append("  indices[%d] = %d (key %s), expected %d (key %s)"
                          % (i, int(idx[i]), describe(inp, idx[i]), int(ref[i]),
                             describe(inp, ref[i])))
    if len(out) == n:
        count, first = first_differences(out.view(udt) != in_bits[idx])
        if count:
            errors.append("keys: %d of %d are not bitwise input[indices]" % (count, n))
            for i in first:
                errors.append("  keys[%d] = %s, input[indices[%d] = %d] = %s"
                              % (i, describe(out, i), i, int(idx[i]), describe(inp, idx[i])))
    return errors


def check_bytes(keys, out, idx, descending):
    errors = []
    n = len(keys)
    ref = reference_bytes(keys, descending)
    if len(out) != n:
        errors.append("keys: %d output lines for %d input keys" % (len(out), n))
    else:
        bad = [i for i in range(n) if out[i] != keys[ref[i]]]
        if bad:
            errors.append("keys: %d of %d differ from the input in the reference order" % (len(bad), n))
            for i in bad[:MAX_SHOWN]:
                errors.append("  keys[%d] = %r, expected %r (input[%d])" % (i, out[i][:40], keys[ref[i]][:40], ref[i]))
    if idx is None:
        return errors
    perm_errors = check_permutation(idx, n)
    errors += perm_errors
    if perm_errors:
        return errors
    got = idx.tolist()
    bad = [i for i in range(n) if got[i] != ref[i]]
    if bad:
        errors.append("indices: %d of %d differ from the stable reference permutation" % (len(bad), n))
        for i in bad[:MAX_SHOWN]:
            errors.append("  indices[%d] = %d (key %r), expected %d (key %r)"
                          % (i, got[i], keys[got[i]][:40], ref[i], keys[ref[i]][:40]))
    if len(out) == n:
        bad = [i for i in range(n) if out[i] != keys[got[i]]]
        if bad:
            errors.append("keys: %d of %d are not input[indices]" % (len(bad), n))
            for i in bad[:MAX_SHOWN]:
                errors.append("  keys[%d] = %r, input[indices[%d] = %d] = %r"
                              % (i, out[i][:40], i, got[i], keys[got[i]][:40]))
    return errors


def run_check(input_path, output_path, indices_path, order, type_name=None):
    """(type name, n, error lines)."""
    if order not in ("asc", "desc"):
        raise Usage("order: expected asc or desc, got %r" % order)
    descending = order == "desc"
    for p in (input_path, output_path, indices_path):
        if p is not None and not os.path.isfile(p):
            raise Usage("%s: no such file" % p)
    idx = load_indices(indices_path) if indices_path else None
    if type_name == "bytes" or (type_name is None and not is_npy(input_path)):
        keys = load_lines(input_path)
        return "bytes", len(keys), check_bytes(keys, load_lines(output_path), idx, descending)
    inp, t = load_numeric(input_path, type_name)
    out, _ = load_numeric(output_path, t)
    return t, len(inp), check_numeric(inp, out, idx, descending)


# ---------------------------------------------------------------- inputs

def gen_numeric(type_name, n, seed):
    dt = np.dtype(NUMERIC[type_name])
    width = dt.itemsize
    udt = np.dtype("<u%d" % width)
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, np.iinfo(udt).max, size=n, dtype=udt, endpoint=True)
    if n == 0:
        return bits.view(dt)
    if dt.kind in "ui":
        # Half the keys from a pool of 1000 values (equal keys: stability),
        # with the type's extremes, 0 and -1 among them.
        info = np.iinfo(dt)
        pool = rng.integers(info.min, info.max, size=1000, dtype=dt, endpoint=True)
        pool[:4] = [info.min, info.max, 0, -1 if dt.kind == "i" else 1]
        vals = bits.view(dt).copy()
        dup = rng.random(n) < 0.5
        vals[dup] = pool[rng.integers(0, len(pool), size=int(dup.sum()))]
        return vals
    mant = 23 if width == 4 else 52
    sign = 1 << (8 * width - 1)
    exp_all = ((1 << (8 * width - 1 - mant)) - 1) << mant
    specials = [0, sign, exp_all, sign | exp_all,  # +-0.0, +-inf
                exp_all | (1 << (mant - 1)), sign | exp_all | (1 << (mant - 1)),  # +-qNaN
                exp_all | 1, sign | exp_all | 5,  # signalling NaNs
                exp_all | (1 << (mant - 1)) | 0xBEEF, (1 << (8 * width)) - 1,  # payloads
                1, sign | 1, (1 << mant) - 1,  # denormals
                exp_all - 1, sign | (exp_all - 1)]  # +-largest finite
    specials = np.array(specials, dtype=udt)
    # Small values with many duplicates (halves in -50..50, -0.0 included).
    small = (rng.integers(-100, 101, size=n) * 0.5).astype(dt)
    small[rng.random(n) < 0.05] = -0.0
    normal = rng.standard_normal(n).astype(dt)
    pick = rng.random(n)
    out = bits.copy()  # 20%: random bit patterns (NaNs with random payloads too)
    m = pick < 0.15
    out[m] = specials[rng.integers(0, len(specials), size=int(m.sum()))]
    m = (pick >= 0.15) & (pick < 0.55)
    out[m] = small.view(udt)[m]
    m = (pick >= 0.55) & (pick < 0.80)
    out[m] = normal.view(udt)[m]
    return out.view(dt)


def gen_bytes(n, seed):
    # Lines of 0..120 bytes: shared prefixes, duplicates, 0x00, 0x0d and
    # bytes >= 0x80 (no 0x0a: one key per line).
    rng = np.random.default_rng(seed)
    alphabet = np.array([b for b in range(256) if b != 10], dtype=np.uint8)
    prefixes = [bytes(alphabet[rng.integers(0, len(alphabet), size=int(rng.integers(0, 41)))])
                for _ in range(64)]
    small = np.frombuffer(b"\x00\x01ab\x7f\x80\xff", dtype=np.uint8)
    keys = []
    for i in range(n):
        r = rng.random()
        if r < 0.1 and i > 0:
            keys.append(keys[int(rng.integers(0, i))])  # duplicates
            continue
        src = small if r < 0.3 else alphabet
        tail = bytes(src[rng.integers(0, len(src), size=int(rng.integers(0, 81)))])
        keys.append(prefixes[int(rng.integers(0, 64))] + tail if r < 0.7 else tail)
    return keys


def write_gen(type_name, n, seed, path):
    if type_name == "bytes":
        with open(path, "wb") as f:
            for k in gen_bytes(n, seed):
                f.write(k + b"\n")
    else:
        np.save(path, gen_numeric(type_name, n, seed), allow_pickle=False)


# ---------------------------------------------------------------- self-test

def contract_less(a, b):
    """The contract's order written with comparisons (as tests/core/sort_test_util.h)."""
    if isinstance(a, float):
        na, nb = math.isnan(a), math.isnan(b)
        if na or nb:
            return not na and nb
        if a != b:
            return a < b
        return math.copysign(1.0, a) < 0 < math.copysign(1.0, b)  # -0.0 < +0.0
    return a < b


def contract_order(values, descending):
    def cmp(i, j):
        a, b = values[i], values[j]
        if descending:
            a, b = b, a
        return -1 if contract_less(a, b) else (1 if contract_less(b, a) else 0)
    return sorted(range(len(values)), key=functools.cmp_to_key(cmp))


class SelfTest:
    def __init__(self, tmp):
        self.tmp = tmp
        self.failures = 0
        self.count = 0

    def expect(self, ok, what):
        self.count += 1
        if not ok:
            self.failures += 1
            print("SELFTEST FAILED: %s" % what)

    def write(self, name, inp, out, idx, type_name):
        base = os.path.join(self.tmp, name)
        if type_name == "bytes":
            for suffix, keys in (("in.txt", inp), ("out.txt", out)):
                with open(base + suffix, "wb") as f:
                    f.write(b"".join(k + b"\n" for k in keys))
            paths = (base + "in.txt", base + "out.txt")
        else:
            np.save(base + "in.npy", inp, allow_pickle=False)
            np.save(base + "out.npy", out, allow_pickle=False)
            paths = (base + "in.npy", base + "out.npy")
        with open(base + "idx.bin", "wb") as f:
            f.write(np.asarray(idx, dtype="<u8").tobytes())
        return paths + (base + "idx.bin",)

    def verdict(self, name, inp, out, idx, order, type_name, want_ok, want_text=""):
        paths = self.write(name, inp, out, idx, type_name)
        t, _, errors = run_check(paths[0], paths[1], paths[2], order)
        self.expect(t == type_name, "%s: type %s read as %s" % (name, type_name, t))
        if want_ok:
            self.expect(not errors, "%s: a correct answer failed: %s" % (name, errors[:3]))
        else:
            self.expect(bool(errors), "%s: a wrong answer passed" % name)
            self.expect(any(want_text in e for e in errors),
                        "%s: expected a message with %r, got %s" % (name, want_text, errors[:3]))

    def correct(self, inp, order):
        ref = reference_numeric(inp, order == "desc")
        return inp[ref].copy(), ref.copy()


def special_array(type_name, n, seed):
    """Float specials in every position class, many duplicates."""
    a = gen_numeric(type_name, n, seed)
    if NUMERIC[type_name][1] == "f" and n >= 8:
        dt = a.dtype
        udt = np.dtype("<u%d" % dt.itemsize)
        u = a.view(udt)
        nan = np.array([np.nan], dtype=dt).view(udt)[0]
        sign = udt.type(1 << (8 * dt.itemsize - 1))
        a[:6] = [np.inf, -0.0, 0.0, np.inf, -np.inf, 0.0]
        u[6] = nan
        u[7] = nan | sign | udt.type(3)
    return a


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        st = SelfTest(tmp)
        # 1. The key-based reference equals a comparison sort written from
        # the contract, every type and order, specials and duplicates.
        for t in NUMERIC:
            for n in (0, 1, 2, 7, 300, 2000):
                a = special_array(t, n, seed=n + len(t))
                values = [v.item() for v in a]
                for order in ("asc", "desc"):
                    want = contract_order(values, order == "desc")
                    got = reference_numeric(a, order == "desc").tolist()
                    st.expect(got == want, "reference %s %s n=%d differs from the comparison sort"
                              % (t, order, n))
        # 2. Correct answers pass; each kind of wrong answer fails.
        for t in NUMERIC:
            is_float = NUMERIC[t][1] == "f"
            a = special_array(t, 5000, seed=11)
            dt = a.dtype
            udt = np.dtype("<u%d" % dt.itemsize)
            for order in ("asc", "desc"):
                out, idx = st.correct(a, order)
                st.verdict("ok_%s_%s" % (t, order), a, out, idx, order, t, True)
                # Stability: two equal keys (equal bits) swapped; keys unchanged.
                ub = out.view(udt)
                eq = np.flatnonzero(ub[1:] == ub[:-1])
                st.expect(len(eq) > 0, "%s: no equal neighbours in the test input" % t)
                i = int(eq[0])
                bad = idx.copy()
                bad[i], bad[i + 1] = bad[i + 1], bad[i]
                st.verdict("stab_%s_%s" % (t, order), a, out, bad, order, t, False,
                           "stable reference permutation")
                # Descending as the reversed ascending sort (equal keys reversed).
                if order == "desc":
                    rev = reference_numeric(a, False)[::-1].copy()
                    st.verdict("revasc_%s" % t, a, a[rev], rev, order, t, False,
                               "stable reference permutation")
                # Wrong keys: one output key changed, indices right.
                wrong = out.copy()
                wrong.view(udt)[len(wrong) // 2] ^= udt.type(1)
                st.verdict("keys_%s_%s" % (t, order), a, wrong, idx, order, t, False,
                           "are not bitwise input[indices]")
                # Not a permutation / wrong lengths.
                dup = idx.copy()
                dup[0] = dup[1]
                st.verdict("dup_%s_%s" % (t, order), a, a[dup], dup, order, t, False,
                           "not a permutation")
                big = idx.copy()
                big[3] = len(a) + 5
                st.verdict("range_%s_%s" % (t, order), a, out, big, order, t, False, "out of range")
                st.verdict("short_%s_%s" % (t, order), a, out[:-1], idx[:-1], order, t, False,
                           "entries for")
                if not is_float:
                    continue
                # (named: 0.0 and -0.0 are one dict key)
                pos = {name: np.flatnonzero(out.view(udt) == np.array([k], dtype=dt).view(udt)[0])
                       for name, k in (("+0", 0.0), ("-0", -0.0), ("inf", np.inf))}
                nan_at = np.flatnonzero(np.isnan(out))
                # -0.0 and +0.0 swapped consistently in keys and indices:
                # np.array_equal would call these keys equal.
                z, nz = int(pos["+0"][0]), int(pos["-0"][0])
                bad = idx.copy()
                bad[z], bad[nz] = bad[nz], bad[z]
                st.verdict("zero_%s_%s" % (t, order), a, a[bad], bad, order, t, False,
                           "differ bitwise")
                # -0.0 written as +0.0 in the keys (indices right).
                wrong = out.copy()
                wrong[nz] = 0.0
                st.verdict("zerokey_%s_%s" % (t, order), a, wrong, idx, order, t, False,
                           "are not bitwise input[indices]")
                # A NaN moved before +inf (ascending: to the last +inf's
                # place; descending: behind the first +inf).
                bad = idx.copy()
                if order == "asc":
                    p, q = int(pos["inf"][-1]), int(nan_at[0])
                else:
                    p, q = int(nan_at[-1]), int(pos["inf"][0])
                bad[p], bad[q] = bad[q], bad[p]
                st.verdict("nan_%s_%s" % (t, order), a, a[bad], bad, order, t, False,
                           "differ bitwise")
                # NaNs ordered by payload instead of input order.
                bad = idx.copy()
                nan_idx = bad[nan_at]
                bad[nan_at] = nan_idx[np.argsort(a.view(udt)[nan_idx], kind="stable")]
                if not np.array_equal(bad, idx):
                    st.verdict("nanorder_%s_%s" % (t, order), a, a[bad], bad, order, t, False,
                               "stable reference permutation")
                # A NaN payload changed in the keys.
                wrong = out.copy()
                wrong.view(udt)[nan_at[0]] ^= udt.type(2)
                st.verdict("payload_%s_%s" % (t, order), a, wrong, idx, order, t, False,
                           "are not bitwise input[indices]")
        # 3. Keys only (no indices): right passes, a -0.0/+0.0 swap fails.
        a = special_array("float64", 1000, 4)
        out, idx = st.correct(a, "asc")
        p = st.write("keysonly", a, out, idx, "float64")
        st.expect(not run_check(p[0], p[1], None, "asc")[2], "keys-only correct answer failed")
        z = int(np.flatnonzero((out == 0) & ~np.signbit(out))[0])
        nz = int(np.flatnonzero((out == 0) & np.signbit(out))[0])
        out[z], out[nz] = out[nz], out[z]
        p = st.write("keysonly_bad", a, out, idx, "float64")
        st.expect(bool(run_check(p[0], p[1], None, "asc")[2]), "keys-only -0.0/+0.0 swap passed")
        # 4. Byte strings: prefixes, 0x00, bytes >= 0x80, \r, duplicates.
        keys = gen_bytes(3000, 9) + [b"", b"a", b"a\x00", b"a", b"\x7f", b"\x80", b"ab\r", b"", b"\xff"]
        for order in ("asc", "desc"):
            want = sorted(range(len(keys)), key=functools.cmp_to_key(
                lambda i, j: (keys[i] > keys[j]) - (keys[i] < keys[j])), reverse=order == "desc")
            ref = reference_bytes(keys, order == "desc")
            st.expect(ref == want, "bytes reference %s" % order)
            out = [keys[i] for i in ref]
            st.verdict("bytes_ok_%s" % order, keys, out, ref, order, "bytes", True)
            eq = [i for i in range(len(ref) - 1) if out[i] == out[i + 1]]
            bad = list(ref)
            bad[eq[0]], bad[eq[0] + 1] = bad[eq[0] + 1], bad[eq[0]]
            st.verdict("bytes_stab_%s" % order, keys, out, bad, order, "bytes", False,
                       "stable reference permutation")
            ia, ib = out.index(b"\x7f"), out.index(b"\x80")  # signed-char order
            bad = list(ref)
            bad[ia], bad[ib] = bad[ib], bad[ia]
            st.verdict("bytes_signed_%s" % order, keys, [keys[i] for i in bad], bad, order,
                       "bytes", False, "differ from the input")
            ia, ib = out.index(b"a"), out.index(b"a\x00")  # prefix order
            bad = list(ref)
            bad[ia], bad[ib] = bad[ib], bad[ia]
            st.verdict("bytes_prefix_%s" % order, keys, [keys[i] for i in bad], bad, order,
                       "bytes", False, "differ from the input")
            wrong = list(out)
            wrong[5] = wrong[5] + b"x"
            st.verdict("bytes_keys_%s" % order, keys, wrong, ref, order, "bytes", False,
                       "are not input[indices]")
            st.verdict("bytes_short_%s" % order, keys, out[:-1], ref[:-1], order, "bytes", False,
                       "entries for")
        # 5. The command line: exit codes and the one OK line; gen round trip.
        for t in ("float32", "int64", "bytes"):
            ext = ".txt" if t == "bytes" else ".npy"
            inp = os.path.join(tmp, "gen_" + t + ext)
            rc = subprocess.call([sys.executable, __file__, "gen", "--type", t, "--count", "4000",
                                  "--seed", "3", "--out", inp])
            st.expect(rc == 0, "gen %s exit %d" % (t, rc))
            outp = os.path.join(tmp, "gen_out_" + t + ext)
            idxp = os.path.join(tmp, "gen_idx_" + t + ".bin")
            if t == "bytes":
                k = load_lines(inp)
                st.expect(len(k) == 4000, "gen bytes wrote %d keys" % len(k))
                ref = reference_bytes(k, True)
                open(outp, "wb").write(b"".join(k[i] + b"\n" for i in ref))
            else:
                a = np.load(inp)
                st.expect(len(a) == 4000 and a.dtype == np.dtype(NUMERIC[t]), "gen %s shape" % t)
                ref = reference_numeric(a, True)
                np.save(outp, a[ref])
            open(idxp, "wb").write(np.asarray(ref, dtype="<u8").tobytes())
            cmd = [sys.executable, __file__, "check", "--input", inp, "--output", outp,
                   "--indices", idxp, "--order", "desc", "--label", "cli"]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            lines = r.stdout.decode().splitlines()
            st.expect(r.returncode == 0 and len(lines) == 1 and lines[0].startswith("OK "),
                      "cli %s correct: exit %d, %s" % (t, r.returncode, lines[:3]))
            bad = list(ref)
            bad[0], bad[1] = bad[1], bad[0]
            open(idxp, "wb").write(np.asarray(bad, dtype="<u8").tobytes())
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            st.expect(r.returncode == 1 and b"FAIL" in r.stdout,
                      "cli %s wrong indices: exit %d" % (t, r.returncode))
            r = subprocess.run(cmd[:-4] + ["--order", "up"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            st.expect(r.returncode == 2, "cli bad order: exit %d" % r.returncode)
        if st.failures:
            print("SELFTEST FAIL: %d of %d expectations" % (st.failures, st.count))
            return 1
        print("OK verify_sort selftest: %d expectations (reference vs comparison sort; "
              "stability, -0.0/+0.0, NaN placement/payload, keys, permutation, length, "
              "byte-string failures detected)" % st.count)
        return 0


# ---------------------------------------------------------------- main

def main(argv):
    if argv == ["--selftest"]:
        return selftest()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--selftest", action="store_true", help="run the self-tests")
    sub = p.add_subparsers(dest="cmd")
    c = sub.add_parser("check", help="check one answer")
    c.add_argument("--input", required=True)
    c.add_argument("--output", required=True)
    c.add_argument("--indices")
    c.add_argument("--order", required=True)
    c.add_argument("--type", choices=TYPES)
    c.add_argument("--label", default="")
    g = sub.add_parser("gen", help="write a test input")
    g.add_argument("--type", required=True, choices=TYPES)
    g.add_argument("--count", required=True, type=int)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.selftest:
        return selftest()
    if args.cmd == "gen":
        write_gen(args.type, args.count, args.seed, args.out)
        return 0
    if args.cmd != "check":
        p.print_usage(sys.stderr)
        return 2
    label = args.label + " " if args.label else ""
    try:
        t, n, errors = run_check(args.input, args.output, args.indices, args.order, args.type)
    except (Usage, OSError, ValueError) as e:
        print("FAIL %sverify_sort: %s" % (label, e))
        return 2
    what = "%s %s n=%d" % (t, args.order, n)
    if errors:
        for e in errors:
            print("FAIL %s%s: %s" % (label, what, e) if not e.startswith("  ") else "     " + e)
        return 1
    print("OK %s%s: %s" % (label, what, "indices = stable reference permutation, keys = input[indices] "
                          "bit for bit" if args.indices else "keys bit for bit in the reference order"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
