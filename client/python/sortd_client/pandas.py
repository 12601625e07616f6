"""pandas on sortd: `sort_values(df, by, ...)` returns exactly what
`df.sort_values(by, ascending=..., na_position=..., kind="stable")` returns,
with the rows ordered by a sortd server (SortTable). Only the key columns
travel; the frame is reordered here as `take` does (numpy and masked
columns gathered on every core for large frames), so every column, dtype
and the index (a RangeIndex or any other) come back as pandas would give
them.

Key columns are sent as pandas sorts them:
- missing values (NaN, None, NaT, pd.NA) are nulls, placed by na_position;
- -0.0 and +0.0 are one value (pandas compares them equal; sortd's own
  float order puts -0.0 first, so the key sent is +0.0 for both);
- nullable integer, float and boolean columns send their values and mask;
- strings (object or string dtype) and bytes are dictionary-encoded here:
  pandas' factorize (a hash pass) finds the distinct values, sortd sorts
  those (as UTF-8, code-point order; bytes unsigned), and each row's key is
  its value's rank, an integer column (the packed path, and a table
  session when large) instead of a string per row;
- categoricals sort by their categories' order (their codes), as pandas
  does;
- timezone-aware datetimes by their UTC instant.
pandas comes from Debian's python3-pandas; it is imported on first use.
"""
import numpy as np


def _ranks(series, mask, argsort):
    """(ranks, nulls): each row's rank among the distinct strings (or
    bytes) of `series`, int32 (int64 past 2^31 distinct values) codes whose
    order is the values' order; `argsort(distinct)` sorts the distinct
    values."""
    import pandas as pd

    codes, uniques = pd.factorize(series)
    distinct = list(uniques)
    kinds = {type(x) for x in distinct}
    if kinds <= {str}:
        # As UTF-8 bytes (code-point order), not numpy U: U drops trailing
        # NULs and pads every string to the longest.
        values = np.empty(len(distinct), dtype=object)
        values[:] = [x.encode("utf-8", "surrogatepass") for x in distinct]
    elif kinds <= {bytes}:
        values = np.empty(len(distinct), dtype=object)
        values[:] = distinct
    else:
        raise TypeError("column %r: values of types %s; sortd sorts one type a column"
                        % (series.name, ", ".join(sorted(k.__name__ for k in kinds))))
    dtype = np.int32 if len(distinct) < (1 << 31) else np.int64
    rank = np.empty(len(distinct), dtype)
    if distinct:
        rank[np.asarray(argsort(values), dtype=np.int64)] = np.arange(len(distinct), dtype=dtype)
    codes = np.asarray(codes)
    nulls = codes < 0
    values = rank[np.maximum(codes, 0)] if distinct else np.zeros(len(codes), dtype)
    return np.where(nulls, 0, values).astype(dtype, copy=False), nulls | mask


def _key_column(series, argsort=None):
    """(values, mask or None) for one key column, in pandas' order.
    argsort (of an array of distinct strings or bytes) dictionary-encodes
    string columns; None sends their values."""
    import pandas as pd

    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        codes = np.asarray(series.cat.codes, dtype=np.int64)
        return codes, codes < 0
    if isinstance(dtype, pd.DatetimeTZDtype):
        return series.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy("M8[ns]"), None
    mask = np.asarray(series.isna(), dtype=bool)
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and hasattr(series.array, "_data"):
        # Nullable Int*/UInt*/Float*/boolean: their values and mask.
        values = np.asarray(series.array._data)
    elif (dtype == object or isinstance(dtype, pd.StringDtype)) and argsort is not None:
        values, mask = _ranks(series, mask, argsort)
    elif dtype == object or isinstance(dtype, pd.StringDtype):
        filled = series.where(~mask, "")
        kinds = {type(x) for x in filled}
        if kinds <= {str}:
            # UTF-8 bytes (code-point order); numpy U would drop trailing NULs.
            values = np.empty(len(filled), dtype=object)
            values[:] = [x.encode("utf-8", "surrogatepass") for x in filled.tolist()]
        elif kinds <= {bytes}:
            values = np.array(filled.tolist(), dtype=object)
        else:
            raise TypeError("column %r: values of types %s; sortd sorts one type a column"
                            % (series.name, ", ".join(sorted(k.__name__ for k in kinds))))
    else:
        values = series.to_numpy()
    if values.dtype.kind == "f":
        # -0.0 == +0.0 in pandas; a null's value is not read.
        values = np.where((values == 0) | mask, np.zeros((), values.dtype), values)
    return values, (mask if mask.any() else None)


def sort_values(df, by, ascending=True, na_position="last", client=None, target=None,
                timeout=None, dictionary=True):
    """df sorted by the columns `by` (a name or a list, most significant
    first) on a sortd server: `client` (a sortd_client.Client) or `target`
    (a gRPC target, for a client made and closed here). dictionary=False
    sends string columns as strings (one SortTable message) instead of
    their ranks."""
    return _take(df, sort_permutation(df, by, ascending, na_position, client, target, timeout,
                                      dictionary))


def keys_and_directions(by, ascending, na_position):
    """(key names, one bool a key) of sort_values' by / ascending, checked
    with na_position."""
    if na_position not in ("last", "first"):
        raise ValueError("na_position must be 'last' or 'first', got %r" % (na_position,))
    keys = [by] if not isinstance(by, (list, tuple)) else list(by)
    if not keys:
        raise ValueError("by: at least one column")
    if not isinstance(ascending, (list, tuple)):
        return keys, [bool(ascending)] * len(keys)
    if len(ascending) != len(keys):
        raise ValueError("ascending: %d values for %d keys" % (len(ascending), len(keys)))
    return keys, [bool(a) for a in ascending]


def sort_permutation(df, by, ascending=True, na_position="last", client=None, target=None,
                     timeout=None, dictionary=True):
    """The permutation (int64 positions) that sort_values applies: row i of
    the sorted frame is df's row perm[i]. The same arguments."""
    from .client import Client

    keys, ascending = keys_and_directions(by, ascending, na_position)
    for key in keys:
        if key not in df.columns:
            raise KeyError(key)
    if len(df) == 0:
        return np.zeros(0, np.int64)
    own = client is None
    if own:
        if target is None:
            raise ValueError("pass client= or target=")
        client = Client(target)
    try:
        kwargs = {} if timeout is None else {"timeout": timeout}

        def argsort(distinct):
            return client.sort(distinct, return_indices=True, **kwargs)[1]

        columns = {}
        for i, key in enumerate(keys):
            values, mask = _key_column(df[key], argsort if dictionary else None)
            columns["%d:%s" % (i, key)] = values if mask is None else np.ma.MaskedArray(values, mask)
        perm = client.sort_table(columns, by=list(columns), ascending=ascending,
                                 nulls=na_position, **kwargs)
    finally:
        if own:
            client.close()
    return np.asarray(perm, dtype=np.int64)


# Below this many rows, one df.take.
_PARALLEL_TAKE_ROWS = 1 << 18


def _gather(values, perm, pool, workers):
    """values[perm] (a numpy array) by chunks on the pool's threads: numpy's
    take drops the GIL for plain dtypes, and a random gather of a large
    column is bound by memory latency, which threads overlap."""
    out = np.empty(len(perm), values.dtype)
    step = max(1 << 16, -(-len(perm) // (4 * workers)))
    list(pool.map(lambda lo: np.take(values, perm[lo:lo + step], out=out[lo:lo + step], mode="clip"),
                  range(0, len(perm), step)))
    return out


def _take(df, perm):
    """df.take(perm), the same frame (dtypes, index, column labels), with the
    columns that are plain numpy arrays or pandas' masked arrays (nullable
    integers, floats, booleans) gathered on every core; others, and small
    frames, by pandas' own take (single-threaded)."""
    import concurrent.futures
    import os

    import pandas as pd

    if len(perm) < _PARALLEL_TAKE_ROWS or not df.columns.is_unique:
        return df.take(perm)
    # pandas 2.1 renamed PandasArray (and warns on the old name).
    numpy_array = getattr(pd.arrays, "NumpyExtensionArray", None) or pd.arrays.PandasArray
    workers = os.cpu_count() or 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        columns = {}
        for position, name in enumerate(df.columns):
            column = df[name]
            array = column.array
            if isinstance(array, numpy_array) and column.dtype.kind in "biufcmM":
                taken = _gather(column.to_numpy(), perm, pool, workers)
            elif (hasattr(array, "_data") and hasattr(array, "_mask")
                  and isinstance(array._data, np.ndarray)
                  and type(array).__name__ in ("IntegerArray", "FloatingArray", "BooleanArray")):
                taken = type(array)(_gather(array._data, perm, pool, workers),
                                    _gather(array._mask, perm, pool, workers))
            else:
                taken = column.take(perm).array
            columns[position] = taken
        if isinstance(df.index, pd.RangeIndex):
            index = pd.Index(df.index.start + df.index.step * perm.astype(np.int64),
                             name=df.index.name)
        else:
            index = df.index.take(perm)
    # Keyed by position, labelled after: a dict with columns= converts some
    # extension arrays (datetimes) through Python objects.
    out = pd.DataFrame(columns, index=index, copy=False)
    out.columns = df.columns
    out.attrs = dict(df.attrs)
    return out
