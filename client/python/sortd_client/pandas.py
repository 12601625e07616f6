"""pandas on sortd: `sort_values(df, by, ...)` returns exactly what
`df.sort_values(by, ascending=..., na_position=..., kind="stable")` returns,
with the rows ordered by a sortd server (SortTable). Only the key columns
travel; the frame is reordered here with `take`, so every column, dtype and
the index (a RangeIndex or any other) come back as pandas would give them.

Key columns are sent as pandas sorts them:
- missing values (NaN, None, NaT, pd.NA) are nulls, placed by na_position;
- -0.0 and +0.0 are one value (pandas compares them equal; sortd's own
  float order puts -0.0 first, so the key sent is +0.0 for both);
- nullable integer, float and boolean columns send their values and mask;
- strings (object or string dtype) travel as UTF-8;
- categoricals sort by their categories' order (their codes), as pandas
  does;
- timezone-aware datetimes by their UTC instant.
pandas comes from Debian's python3-pandas; it is imported on first use.
"""
import numpy as np


def _key_column(series):
    """(values, mask or None) for one key column, in pandas' order."""
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
    elif dtype == object or isinstance(dtype, pd.StringDtype):
        filled = series.where(~mask, "")
        kinds = {type(x) for x in filled}
        if kinds <= {str}:
            values = np.array(filled.tolist(), dtype=str) if len(filled) else np.array([], dtype="U1")
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
                timeout=None):
    """df sorted by the columns `by` (a name or a list, most significant
    first) on a sortd server: `client` (a sortd_client.Client) or `target`
    (a gRPC target, for a client made and closed here)."""
    from .client import Client

    if na_position not in ("last", "first"):
        raise ValueError("na_position must be 'last' or 'first', got %r" % (na_position,))
    keys = [by] if not isinstance(by, (list, tuple)) else list(by)
    if not keys:
        raise ValueError("by: at least one column")
    if isinstance(ascending, (list, tuple)) and len(ascending) != len(keys):
        raise ValueError("ascending: %d values for %d keys" % (len(ascending), len(keys)))
    columns = {}
    for i, key in enumerate(keys):
        if key not in df.columns:
            raise KeyError(key)
        values, mask = _key_column(df[key])
        columns["%d:%s" % (i, key)] = values if mask is None else np.ma.MaskedArray(values, mask)
    own = client is None
    if own:
        if target is None:
            raise ValueError("pass client= or target=")
        client = Client(target)
    try:
        kwargs = {} if timeout is None else {"timeout": timeout}
        perm = client.sort_table(columns, by=list(columns), ascending=ascending,
                                 nulls=na_position, **kwargs)
    finally:
        if own:
            client.close()
    return df.take(perm)
