"""Version 2's packed rows (docs/trace-format.md, "Packed rows"): the one
codec in Python of the trace's "calls" and "checks" objects (the same
encoding, each object its own prev[] and strings), standard library only.

    unpack_rows(obj, what="calls") -> rows   {"encoding": "trshim-rows-1", "rows", "strings", "data"}
                                             -> version 1's rows
    pack_rows(rows) -> obj                   version 1's rows -> the object
    unpack_trace(trace) -> trace             a parsed trace's "calls" and "checks" as version 1's rows,
                                             in place, each checked against the trace's version

A row is version 1's JSON array of a call or a check: ints, "0x..."
addresses, other strings, null, booleans and [a, b] pairs of ints (signal).
unpack_rows raises ValueError naming the field (what: "calls" or "checks"),
the row and the byte of the data on anything the format calls damaged;
pack_rows raises ValueError("not packable: ...") on a value the format
cannot hold. unpack_rows(pack_rows(rows)) == rows.
"""
import base64
import binascii
import re

ENCODING = "trshim-rows-1"
MAX_VALUES = 64                 # values in a row (include/trshim/trace_format.h TRSHIM_ROWS_MAX_VALUES)
T_NULL, T_BOOL, T_INT, T_ADDR, T_STR, T_PAIR = range(6)

_M64 = (1 << 64) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_B64 = re.compile(r"[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?\Z")
_ADDR = re.compile(r"0x(?:0|[1-9a-f][0-9a-f]{0,15})\Z")     # "0x%x" of a 64-bit value, exactly


def _varint(buf, pay):
    """pay (0 <= pay < 2**64) as an unsigned LEB128 varint"""
    while pay >= 0x80:
        buf.append((pay & 0x7f) | 0x80)
        pay >>= 7
    buf.append(pay)


def _value(buf, tag, pay):
    """a tagged value: tag, the low 4 bits of pay, then 7 bits per byte"""
    if pay < 16:
        buf.append(tag | pay << 4)
        return
    buf.append(tag | 8 | (pay & 15) << 4)
    _varint(buf, pay >> 4)


def _zigzag(d):
    return (d << 1) ^ (d >> 63)


def pack_rows(rows):
    """version 1's rows (a list of lists) -> version 2's "calls" or "checks" object"""
    if not isinstance(rows, (list, tuple)):
        raise ValueError("not packable: the rows are a %s, not a list" % type(rows).__name__)
    buf = bytearray()
    strings, index = [], {}
    prev = [0] * MAX_VALUES
    value, varint, addr = _value, _varint, _ADDR.match
    for i, row in enumerate(rows):
        if not isinstance(row, (list, tuple)):
            raise ValueError("not packable: row %d is a %s, not a list" % (i, type(row).__name__))
        k = len(row)
        if k > MAX_VALUES:
            raise ValueError("not packable: row %d has %d values (at most %d)" % (i, k, MAX_VALUES))
        buf.append(k)              # (k <= 64: one byte)
        for p, v in enumerate(row):
            t = type(v)
            if t is int:
                if not _I64_MIN <= v <= _I64_MAX:
                    raise ValueError("not packable: row %d position %d: %d is outside 64-bit integers" % (i, p, v))
                d = (v - prev[p]) & _M64
                prev[p] = v & _M64
                value(buf, T_INT, (d << 1) & _M64 if d < 1 << 63 else ((_M64 - d) << 1) | 1)
            elif t is str:
                if v[:2] == "0x" and addr(v):
                    u = int(v[2:], 16)
                    d = (u - prev[p]) & _M64
                    prev[p] = u
                    value(buf, T_ADDR, (d << 1) & _M64 if d < 1 << 63 else ((_M64 - d) << 1) | 1)
                else:
                    j = index.get(v)
                    if j is None:
                        j = index[v] = len(strings)
                        strings.append(v)
                    value(buf, T_STR, j)
            elif v is None:
                buf.append(T_NULL)
            elif t is bool:
                buf.append(T_BOOL | (16 if v else 0))
            elif t is list and len(v) == 2 and type(v[0]) is int and type(v[1]) is int:
                a, b = v
                if not (_I64_MIN <= a <= _I64_MAX and _I64_MIN <= b <= _I64_MAX):
                    raise ValueError("not packable: row %d position %d: %r is outside 64-bit integers" % (i, p, v))
                value(buf, T_PAIR, _zigzag(a))
                varint(buf, _zigzag(b))
            else:
                raise ValueError("not packable: row %d position %d: %s" % (i, p, _short(v)))
    return {"encoding": ENCODING, "rows": len(rows), "strings": strings,
            "data": base64.b64encode(bytes(buf)).decode("ascii")}


def _short(v):
    s = repr(v)
    return "%s %s" % (type(v).__name__, s if len(s) <= 60 else s[:57] + "...")


WHATS = ("calls", "checks")       # the packed fields: what names them in every message


def unpack_rows(obj, what="calls"):
    """version 2's "calls" or "checks" object (what: which, the first word of
    every message) -> version 1's rows (a list of lists); ValueError on an
    object or data the format calls damaged"""
    if what not in WHATS:
        raise ValueError("unpack_rows: what is %r, not one of %s" % (what, ", ".join(WHATS)))
    if not isinstance(obj, dict):
        raise ValueError("field %s is not an object (version 2 packs the %s)" % (what, what))
    for key in ("encoding", "rows", "strings", "data"):
        if key not in obj:
            raise ValueError("field %s has no \"%s\"" % (what, key))
    enc = obj["encoding"]
    if enc != ENCODING:
        raise ValueError("field %s has an unknown encoding %s (this reader reads \"%s\")" %
                         (what, _short(enc) if not isinstance(enc, str) else '"%s"' % enc[:60], ENCODING))
    nrows = obj["rows"]
    if type(nrows) is not int or nrows < 0:
        raise ValueError("field %s.rows is not a non-negative integer" % what)
    strings = obj["strings"]
    if not isinstance(strings, list):
        raise ValueError("field %s.strings is not an array of strings" % what)
    for k, s in enumerate(strings):
        if not isinstance(s, str):
            raise ValueError("field %s.strings[%d] is not a string" % (what, k))
    text = obj["data"]
    if not isinstance(text, str):
        raise ValueError("field %s.data is not a string" % what)
    if len(text) % 4 or not _B64.match(text):
        m = re.match(r"[A-Za-z0-9+/]*", text)
        raise ValueError("field %s.data is not base64 (at its character %d)" %
                         (what, m.end() if m.end() < len(text) else len(text)))
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError("field %s.data is not base64 (%s)" % (what, e))
    return _unpack_rows(data, nrows, strings, what)


def _more(d, i, acc, shift):
    """the rest of an LEB128 payload from d[i] (acc: its bits below shift):
    (value, next i); value -1 past 64 bits (IndexError: the data ends)"""
    while True:
        c = d[i]
        i += 1
        if shift + 7 > 64 and c & (0xff << (64 - shift)) & 0xff:
            return -1, i
        acc |= (c & 0x7f) << shift
        if not c & 0x80:
            return acc, i
        shift += 7


def _unpack_rows(d, nrows, strings, what):
    def _where(row, at):
        return "%s data is damaged at row %d (byte %d of the data)" % (what, row, at)

    n = len(d)
    nstr = len(strings)
    prev = [0] * MAX_VALUES
    out = []
    append = out.append
    i = 0
    idx = 0
    try:
        while i < n:
            row_at = i
            # the row's length: an unsigned LEB128 varint (one byte when it is at most 64)
            c = d[i]
            i += 1
            k = c
            if c & 0x80:
                k, i = _more(d, i, c & 0x7f, 7)     # (-1: past 64 bits)
            if k < 0 or k > MAX_VALUES:
                raise ValueError("%s: a row of more than %d values" % (_where(idx, row_at), MAX_VALUES))
            row = []
            radd = row.append
            for p in range(k):
                at = i
                b = d[i]              # (IndexError: the data ends inside the row)
                i += 1
                tag = b & 7
                pay = b >> 4
                if b & 8:
                    pay, i = _more(d, i, pay, 4)
                    if pay < 0:
                        raise ValueError("%s: a value of more than 64 bits" % _where(idx, at))
                if tag == T_INT or tag == T_ADDR:
                    v = (prev[p] + ((pay >> 1) ^ -(pay & 1))) & _M64
                    prev[p] = v
                    if tag == T_INT:
                        radd(v - (1 << 64) if v >> 63 else v)
                    else:
                        radd("0x%x" % v)
                elif tag == T_STR:
                    if pay >= nstr:
                        raise ValueError("%s: string index %d outside strings (%d)" % (_where(idx, at), pay, nstr))
                    radd(strings[pay])
                elif tag == T_NULL:
                    if pay:
                        raise ValueError("%s: a null with payload %d" % (_where(idx, at), pay))
                    radd(None)
                elif tag == T_BOOL:
                    if pay > 1:
                        raise ValueError("%s: a bool with payload %d" % (_where(idx, at), pay))
                    radd(pay == 1)
                elif tag == T_PAIR:
                    b2, i = _more(d, i, 0, 0)
                    if b2 < 0:
                        raise ValueError("%s: a value of more than 64 bits" % _where(idx, at))
                    radd([(pay >> 1) ^ -(pay & 1), (b2 >> 1) ^ -(b2 & 1)])
                else:
                    raise ValueError("%s: unknown tag %d" % (_where(idx, at), tag))
            append(row)
            idx += 1
    except IndexError:
        raise ValueError("%s data is damaged at row %d: it ends inside a row (byte %d of %d)" % (what, idx, n, n))
    if idx != nrows:
        raise ValueError("%s data holds %d rows, rows says %d" % (what, idx, nrows))
    return out


def unpack_trace(t):
    """t (a parsed trace) with its "calls" and "checks" (those present) as
    version 1's rows, in place; the version is kept. ValueError on one not
    of its version's form (version 1: arrays; 2 and later: packed objects)
    or damaged"""
    v = t.get("version")
    for field in ("calls", "checks"):
        if field not in t:
            continue
        rows = t[field]
        if v == 1:
            if not isinstance(rows, list):
                raise ValueError("field %s is not an array%s" % (
                    field, ": version 1 with %s packed as an object" % field if isinstance(rows, dict) else ""))
        elif isinstance(rows, list):
            raise ValueError("field %s is not an object: version %s with %s as an array (version 2 packs them)"
                             % (field, v, field))
        else:
            t[field] = unpack_rows(rows, field)
    return t
