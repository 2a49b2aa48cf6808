/* The spans of a `pathgrade.spans` message value, read from its protobuf bytes in one pass.
 *
 * `read_traces(value)` walks the wire format of an OTLP TracesData (an
 * ExportTraceServiceRequest has the same shape: resource_spans is field 1 of both) and
 * returns what content/otlp.py's decoder takes from upb's parse, as Python objects:
 *
 *   [(resource_attributes, [(scope_name, scope_version, [span, ...]), ...]), ...]
 *   span  = (trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, trace_state,
 *            attributes, status_code, status_message, events, links, flags)
 *   event = (time_ns, name, attributes)
 *   link  = (trace_id, span_id, trace_state, attributes)
 *
 * Ids are lowercase hex (bytes.hex()), kind and status code the wire's int32 numbers,
 * flags the span's fixed32 `flags` (0 when absent; bits 8-9 say whether its parent is remote),
 * attribute values what `otlp.any_value` gives, events and links None when a span has
 * none; the spans of one resource share one attributes dict; a short ASCII string or an id
 * read_traces or read_logs read before (in this value or an earlier one) may be the same
 * str object (`cached_text`, `cached_hex_text`). The values are exactly the
 * ones upb and the Python walk give, or the answer is None and the caller runs that path
 * (which raises on malformed bytes). None for: a value that is not bytes, malformed or
 * truncated wire data, a group, a varint longer than 64 bits, invalid UTF-8 in any string
 * field (upb rejects it in proto3, in fields this reader does not return too), a singular
 * message field present twice (upb merges the two), an AnyValue with two value fields or
 * a string_value_strindex, arrays and key-value lists nested deeper than
 * MAX_VALUE_DEPTH. Unknown fields, and known ones with another wire type, are skipped as
 * upb skips them; a scalar field present twice keeps its last value, as in upb.
 * `read_logs(value)` reads an OTLP LogsData (or ExportLogsServiceRequest) the same way,
 * for content/otlp_logs.py:
 *
 *   [(resource_attributes, [(scope_name, scope_version, [record, ...]), ...]), ...]
 *   record = (trace_id, span_id, time_ns, observed_ns, event_name, severity_number,
 *             severity_text, body, attributes, flags)
 *
 * (the body's value as `otlp.any_value` gives it, None for none).
 * `read_value(value)` reads one AnyValue's bytes the same way (the collector reads a log
 * record's structured content with it), and `messages_json(value, member)` writes one
 * that is an array of key-value lists as the JSON text json.dumps writes of its value
 * (the collector's facts read a log record's messages as that text).
 * tests/unit/content/test_otlp_reader.py and test_otlp_logs_reader.py hold the answers
 * to the Python path's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

/* Arrays and key-value lists nested deeper than this are left to upb. Its own limit (100
 * nested messages) is further: a key-value list is three messages deep (KeyValueList,
 * KeyValue, AnyValue), an event attribute's value starts seven deep, 7 + 3 * 20 < 100. */
#define MAX_VALUE_DEPTH 20

/* Wire types. */
enum { VARINT = 0, I64 = 1, LEN = 2, I32 = 5 };

/* A field's tag as the wire holds it: number and wire type. */
#define TAG(number, wire_type) ((uint64_t)(number) << 3 | (wire_type))

/* Bytes not yet read: a message's, or a length-delimited field's. */
typedef struct {
    const uint8_t *p, *end;
} Bytes;

/* One field: its tag, and its value (varint or fixed-width) or bytes (length-delimited). */
typedef struct {
    uint64_t tag;
    uint64_t scalar;
    Bytes bytes;
} Field;

/* ------------------------------------------------------------------ the wire format */

/* Reads a varint; -1 when truncated, longer than 10 bytes, or past 64 bits (upb drops a
 * 10th byte's extra bits: such bytes are left to it). */
static int read_varint(Bytes *in, uint64_t *value) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64 && in->p < in->end; shift += 7) {
        uint8_t byte = *in->p++;
        x |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            if (shift == 63 && byte > 1) return -1;
            *value = x;
            return 0;
        }
    }
    return -1;
}

/* Reads a little-endian fixed-width value of `size` bytes (4 or 8). */
static int read_fixed(Bytes *in, int size, uint64_t *value) {
    if (in->end - in->p < size) return -1;
    uint64_t x = 0;
    for (int i = size - 1; i >= 0; i--) x = x << 8 | in->p[i];
    in->p += size;
    *value = x;
    return 0;
}

/* Reads the next field of `in` into `f`: 1, or 0 at the end of `in`, or -1 on malformed
 * bytes, field number 0, a tag upb would not read (over 5 bytes or 32 bits) or a group
 * (upb skips unknown groups: left to it). */
static int next_field(Bytes *in, Field *f) {
    if (in->p == in->end) return 0;
    const uint8_t *start = in->p;
    if (read_varint(in, &f->tag) < 0 || in->p - start > 5 || f->tag > UINT32_MAX ||
        f->tag >> 3 == 0)
        return -1;
    switch (f->tag & 7) {
        case VARINT: return read_varint(in, &f->scalar) < 0 ? -1 : 1;
        case I64: return read_fixed(in, 8, &f->scalar) < 0 ? -1 : 1;
        case I32: return read_fixed(in, 4, &f->scalar) < 0 ? -1 : 1;
        case LEN: {
            uint64_t size;
            if (read_varint(in, &size) < 0 || size > (uint64_t)(in->end - in->p)) return -1;
            f->bytes.p = in->p;
            f->bytes.end = in->p + size;
            in->p += size;
            return 1;
        }
        default: return -1;
    }
}

/* An int32 field's value: the varint's low 32 bits in two's complement, as upb reads it. */
static long long as_int32(uint64_t x) {
    uint32_t low = (uint32_t)x;
    return low <= INT32_MAX ? (long long)low : (long long)low - 4294967296LL;
}

/* An int64 field's value: the varint's 64 bits in two's complement. */
static long long as_int64(uint64_t x) {
    return x <= INT64_MAX ? (long long)x : -(long long)~x - 1;
}

/* A double field's value: its fixed 64 bits. */
static double as_double(uint64_t bits) {
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* ------------------------------------------------------------------ Python values */

/* The str of UTF-8 `b`: NULL without an exception when `b` is not UTF-8 (upb rejects
 * it), NULL with one on another error. */
static PyObject *text(Bytes b) {
    PyObject *s = PyUnicode_DecodeUTF8((const char *)b.p, b.end - b.p, NULL);
    if (!s && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return s;
}

/* Short ASCII strings read before, one per slot of a direct-mapped table by hash: most
 * attribute keys, span names and short values (a method, a host, a model, a database)
 * repeat from span to span, and a repeated one is then one str for every span that holds
 * it, its hash computed once (dict inserts and lookups reuse it), instead of a str made,
 * hashed and freed per span. A slot keeps its last string (strs are immutable: sharing
 * one is invisible but for `is`). */
#define TEXT_CACHE_SLOTS 4096
#define TEXT_CACHE_LENGTH 64
static PyObject *text_cache[TEXT_CACHE_SLOTS];

/* Whether strings go through the table: only while read_traces or read_logs reads a
 * value (what the consumers of `pathgrade.spans` and `pathgrade.logs` read, content the
 * collector redacted); read_value and messages_json read the collector's raw content,
 * which no table keeps past the call. */
static int use_text_cache = 0;

/* `text(b)`, from the table when `b` is short ASCII (put there when not yet). */
static PyObject *cached_text(Bytes b) {
    Py_ssize_t n = b.end - b.p;
    if (!use_text_cache || n > TEXT_CACHE_LENGTH) return text(b);
    uint64_t h = (uint64_t)n, seen = 0, word; /* hashed and checked 8 bytes at a time */
    const uint8_t *p = b.p;
    for (; b.end - p >= 8; p += 8) {
        memcpy(&word, p, 8);
        seen |= word;
        h = (h ^ word) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
    }
    word = 0;
    memcpy(&word, p, b.end - p);
    seen |= word;
    if (seen & 0x8080808080808080ULL) return text(b); /* not ASCII */
    h = (h ^ word) * 0x9E3779B97F4A7C15ULL;
    PyObject **slot = &text_cache[(h ^ h >> 32) & (TEXT_CACHE_SLOTS - 1)];
    PyObject *s = *slot;
    if (s && PyUnicode_GET_LENGTH(s) == n && memcmp(PyUnicode_1BYTE_DATA(s), b.p, n) == 0)
        return Py_NewRef(s);
    if (!(s = PyUnicode_New(n, 127))) return NULL;
    memcpy(PyUnicode_1BYTE_DATA(s), b.p, n);
    Py_XSETREF(*slot, Py_NewRef(s));
    return s;
}

/* 0 when `b` is UTF-8, as upb requires of every string field, those not returned too. */
static int check_text(Bytes b) {
    const uint8_t *p = b.p;
    while (p < b.end && *p < 0x80) p++;
    if (p == b.end) return 0;
    PyObject *s = text(b);
    Py_XDECREF(s);
    return s ? 0 : -1;
}

/* Reads a string field into `*slot`, replacing an earlier occurrence's (the last wins). */
static int set_text(PyObject **slot, Bytes b) {
    PyObject *s = cached_text(b), *old = *slot;
    if (!s) return -1;
    *slot = s;
    Py_XDECREF(old);
    return 0;
}

/* Fills an absent string field's `*slot` with "". */
static int fill_empty(PyObject **slot) {
    if (!*slot) *slot = PyUnicode_New(0, 0);
    return *slot ? 0 : -1;
}

/* An id's bytes as lowercase hex, as bytes.hex() gives them ("" for none). */
static PyObject *hex_text(Bytes b) {
    static const char digits[] = "0123456789abcdef";
    Py_ssize_t n = b.end - b.p;
    PyObject *s = PyUnicode_New(2 * n, 127);
    if (!s) return NULL;
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        out[2 * i] = (Py_UCS1)digits[b.p[i] >> 4];
        out[2 * i + 1] = (Py_UCS1)digits[b.p[i] & 15];
    }
    return s;
}

/* Ids read before, as the table of short strings keeps those: a trace's id is on each of
 * its spans, a span's id on each of its children (as their parent's), so most ids are
 * read more than once in a message, and a slot (by the id's last 8 bytes, random in a
 * W3C id) keeps its last id's bytes and hex. */
#define ID_CACHE_SLOTS 1024
#define ID_CACHE_LENGTH 16
typedef struct {
    uint8_t raw[ID_CACHE_LENGTH];
    Py_ssize_t n;
    PyObject *hex;
} CachedId;
static CachedId id_cache[ID_CACHE_SLOTS];

/* `hex_text(b)`, from the table (put there when not yet) for ids of 1 to 16 bytes. */
static PyObject *cached_hex_text(Bytes b) {
    Py_ssize_t n = b.end - b.p;
    if (n == 0 || n > ID_CACHE_LENGTH) return hex_text(b);
    uint64_t h = 0;
    Py_ssize_t tail = n < 8 ? n : 8;
    memcpy(&h, b.end - tail, tail);
    CachedId *slot = &id_cache[(h ^ h >> 29) & (ID_CACHE_SLOTS - 1)];
    if (slot->hex && slot->n == n && memcmp(slot->raw, b.p, n) == 0) return Py_NewRef(slot->hex);
    PyObject *s = hex_text(b);
    if (!s) return NULL;
    memcpy(slot->raw, b.p, n);
    slot->n = n;
    Py_XSETREF(slot->hex, Py_NewRef(s));
    return s;
}

/* Appends `item` (a new reference, or NULL after a failure) to `list`, consuming it. */
static int append_new(PyObject *list, PyObject *item) {
    if (!item) return -1;
    int r = PyList_Append(list, item);
    Py_DECREF(item);
    return r;
}

/* Appends `item` as append_new does to the list at `*slot`, made at the first item (a span
 * without events or links keeps None). */
static int append_lazily(PyObject **slot, PyObject *item) {
    if (item && !*slot && !(*slot = PyList_New(0))) {
        Py_DECREF(item);
        return -1;
    }
    return append_new(*slot, item);
}

/* Drops the references of `items`. */
static void clear(Py_ssize_t n, PyObject **items) {
    for (Py_ssize_t i = 0; i < n; i++) Py_CLEAR(items[i]);
}

/* A tuple of `items` (new references, none NULL), consuming them. */
static PyObject *tuple_of(Py_ssize_t n, PyObject **items) {
    PyObject *tuple = PyTuple_New(n);
    if (!tuple) {
        clear(n, items);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(tuple, i, items[i]);
    return tuple;
}

/* ------------------------------------------------------------------ common.proto */

static PyObject *read_any_value(Bytes in, int depth);

/* Reads a KeyValue into `dict` as `dict[key] = value` does (a repeated key keeps its last
 * value at its first one's place); key_strindex is skipped. */
static int read_key_value(Bytes in, PyObject *dict, int depth) {
    PyObject *key = NULL, *value = NULL;
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0) {
        if (f.tag == TAG(1, LEN)) {
            if (set_text(&key, f.bytes) < 0) goto fail;
        } else if (f.tag == TAG(2, LEN)) {
            if (value || !(value = read_any_value(f.bytes, depth))) goto fail;
        }
    }
    if (more < 0 || fill_empty(&key) < 0) goto fail;
    int r = PyDict_SetItem(dict, key, value ? value : Py_None);
    Py_DECREF(key);
    Py_XDECREF(value);
    return r;
fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    return -1;
}

/* An ArrayValue's values as a list. */
static PyObject *read_array(Bytes in, int depth) {
    if (depth > MAX_VALUE_DEPTH) return NULL;
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0)
        if (f.tag == TAG(1, LEN) && append_new(list, read_any_value(f.bytes, depth)) < 0) break;
    if (more == 0) return list;
    Py_DECREF(list);
    return NULL;
}

/* A KeyValueList's values as a dict. */
static PyObject *read_kvlist(Bytes in, int depth) {
    if (depth > MAX_VALUE_DEPTH) return NULL;
    PyObject *dict = PyDict_New();
    if (!dict) return NULL;
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0)
        if (f.tag == TAG(1, LEN) && read_key_value(f.bytes, dict, depth) < 0) break;
    if (more == 0) return dict;
    Py_DECREF(dict);
    return NULL;
}

/* The value of one AnyValue value field, or NULL for string_value_strindex (left to upb)
 * and for a field that is not one (`*is_value` 0). */
static PyObject *value_field(const Field *f, int depth, int *is_value) {
    *is_value = 1;
    switch (f->tag) {
        case TAG(1, LEN): return cached_text(f->bytes);
        case TAG(2, VARINT): return PyBool_FromLong(f->scalar != 0);
        case TAG(3, VARINT): return PyLong_FromLongLong(as_int64(f->scalar));
        case TAG(4, I64): return PyFloat_FromDouble(as_double(f->scalar));
        case TAG(5, LEN): return read_array(f->bytes, depth + 1);
        case TAG(6, LEN): return read_kvlist(f->bytes, depth + 1);
        case TAG(7, LEN):
            return PyBytes_FromStringAndSize((const char *)f->bytes.p, f->bytes.end - f->bytes.p);
        case TAG(8, VARINT): return NULL;
        default: *is_value = 0; return NULL;
    }
}

/* The Python value of an AnyValue, as `otlp.any_value` gives it (None when no value field
 * is set); NULL when two are (upb keeps the last, and merges messages). */
static PyObject *read_any_value(Bytes in, int depth) {
    PyObject *value = NULL;
    Field f;
    int more, is_value;
    while ((more = next_field(&in, &f)) > 0) {
        PyObject *read = value_field(&f, depth, &is_value);
        if (!is_value) continue; /* an unknown field, or a value field of another wire type */
        if (!read || value) {
            Py_XDECREF(read);
            more = -1;
            break;
        }
        value = read;
    }
    if (more == 0) return value ? value : Py_NewRef(Py_None);
    Py_XDECREF(value);
    return NULL;
}

/* Checks an EntityRef (four string fields) for UTF-8: nothing of it is returned. */
static int check_entity_ref(Bytes in) {
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0)
        if ((f.tag & 7) == LEN && f.tag >> 3 <= 4 && check_text(f.bytes) < 0) return -1;
    return more;
}

/* Reads an InstrumentationScope's name and version into `*name` and `*version`; its
 * attributes are read (upb checks them) and dropped. */
static int read_scope(Bytes in, PyObject **name, PyObject **version) {
    PyObject *attributes = PyDict_New();
    if (!attributes) return -1;
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0) {
        if ((f.tag == TAG(1, LEN) && set_text(name, f.bytes) < 0) ||
            (f.tag == TAG(2, LEN) && set_text(version, f.bytes) < 0) ||
            (f.tag == TAG(3, LEN) && read_key_value(f.bytes, attributes, 0) < 0)) {
            more = -1;
            break;
        }
    }
    Py_DECREF(attributes);
    return more;
}

/* ------------------------------------------------------------------ trace.proto */

/* A span's parts, in the order of the tuple read_span returns. */
enum {
    TRACE_ID, SPAN_ID, PARENT_SPAN_ID, NAME, KIND, START, END, TRACE_STATE, ATTRIBUTES,
    STATUS_CODE, STATUS_MESSAGE, EVENTS, LINKS, FLAGS, SPAN_PARTS
};

/* Reads a Status's code into `*code` and its message into `*message`. */
static int read_status(Bytes in, uint64_t *code, PyObject **message) {
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0) {
        if (f.tag == TAG(2, LEN) && set_text(message, f.bytes) < 0) return -1;
        if (f.tag == TAG(3, VARINT)) *code = f.scalar;
    }
    return more;
}

/* A Span.Event as (time_ns, name, attributes). */
static PyObject *read_event(Bytes in) {
    PyObject *items[3] = {NULL, NULL, PyDict_New()};
    if (!items[2]) return NULL;
    uint64_t time = 0;
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0) {
        if (f.tag == TAG(1, I64)) time = f.scalar;
        if ((f.tag == TAG(2, LEN) && set_text(&items[1], f.bytes) < 0) ||
            (f.tag == TAG(3, LEN) && read_key_value(f.bytes, items[2], 0) < 0))
            goto fail;
    }
    if (more < 0 || !(items[0] = PyLong_FromUnsignedLongLong(time)) || fill_empty(&items[1]) < 0)
        goto fail;
    return tuple_of(3, items);
fail:
    clear(3, items);
    return NULL;
}

/* A Span.Link as (trace_id, span_id, trace_state, attributes). */
static PyObject *read_link(Bytes in) {
    PyObject *items[4] = {NULL, NULL, NULL, PyDict_New()};
    if (!items[3]) return NULL;
    Bytes trace_id = {NULL, NULL}, span_id = {NULL, NULL};
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0) {
        if (f.tag == TAG(1, LEN)) trace_id = f.bytes;
        if (f.tag == TAG(2, LEN)) span_id = f.bytes;
        if ((f.tag == TAG(3, LEN) && set_text(&items[2], f.bytes) < 0) ||
            (f.tag == TAG(4, LEN) && read_key_value(f.bytes, items[3], 0) < 0))
            goto fail;
    }
    if (more < 0 || !(items[0] = cached_hex_text(trace_id)) ||
        !(items[1] = cached_hex_text(span_id)) ||
        fill_empty(&items[2]) < 0)
        goto fail;
    return tuple_of(4, items);
fail:
    clear(4, items);
    return NULL;
}

/* Makes a span's parts that are not read into place as Python objects: its ids as hex,
 * its numbers, "" for absent strings and None for no events or links. */
static int finish_span(PyObject **parts, const Bytes *ids, uint64_t kind, uint64_t start,
                       uint64_t end, uint64_t status_code, uint64_t flags) {
    for (int i = 0; i < 3; i++)
        if (!(parts[TRACE_ID + i] = cached_hex_text(ids[i]))) return -1;
    if (!(parts[KIND] = PyLong_FromLongLong(as_int32(kind))) ||
        !(parts[START] = PyLong_FromUnsignedLongLong(start)) ||
        !(parts[END] = PyLong_FromUnsignedLongLong(end)) ||
        !(parts[STATUS_CODE] = PyLong_FromLongLong(as_int32(status_code))) ||
        !(parts[FLAGS] = PyLong_FromUnsignedLongLong(flags)) ||
        fill_empty(&parts[NAME]) < 0 || fill_empty(&parts[TRACE_STATE]) < 0 ||
        fill_empty(&parts[STATUS_MESSAGE]) < 0)
        return -1;
    if (!parts[EVENTS]) parts[EVENTS] = Py_NewRef(Py_None);
    if (!parts[LINKS]) parts[LINKS] = Py_NewRef(Py_None);
    return 0;
}

/* A Span as the tuple of its parts (the enum's order); its dropped counts are skipped. */
static PyObject *read_span(Bytes in) {
    PyObject *parts[SPAN_PARTS] = {NULL};
    if (!(parts[ATTRIBUTES] = PyDict_New())) return NULL;
    Bytes ids[3] = {{NULL, NULL}, {NULL, NULL}, {NULL, NULL}}; /* trace, span, parent */
    uint64_t kind = 0, start = 0, end = 0, status_code = 0, flags = 0;
    int statuses = 0;
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0) {
        int failed = 0;
        switch (f.tag) {
            case TAG(1, LEN): ids[0] = f.bytes; break;
            case TAG(2, LEN): ids[1] = f.bytes; break;
            case TAG(3, LEN): failed = set_text(&parts[TRACE_STATE], f.bytes); break;
            case TAG(4, LEN): ids[2] = f.bytes; break;
            case TAG(5, LEN): failed = set_text(&parts[NAME], f.bytes); break;
            case TAG(6, VARINT): kind = f.scalar; break;
            case TAG(7, I64): start = f.scalar; break;
            case TAG(8, I64): end = f.scalar; break;
            case TAG(9, LEN): failed = read_key_value(f.bytes, parts[ATTRIBUTES], 0); break;
            case TAG(11, LEN): failed = append_lazily(&parts[EVENTS], read_event(f.bytes)); break;
            case TAG(13, LEN): failed = append_lazily(&parts[LINKS], read_link(f.bytes)); break;
            case TAG(15, LEN): /* twice: upb merges the two statuses */
                failed = statuses++ ? -1 : read_status(f.bytes, &status_code,
                                                       &parts[STATUS_MESSAGE]);
                break;
            case TAG(16, I32): flags = f.scalar; break;
            default: break;
        }
        if (failed < 0) goto fail;
    }
    if (more < 0 || finish_span(parts, ids, kind, start, end, status_code, flags) < 0) goto fail;
    return tuple_of(SPAN_PARTS, parts);
fail:
    clear(SPAN_PARTS, parts);
    return NULL;
}

/* Reads one item of a scope: a span, a log record. */
typedef PyObject *(*ItemReader)(Bytes in);

/* A ScopeSpans (or ScopeLogs: the same fields) as (scope_name, scope_version, [item, ...]),
 * each item read by `read_item`; its schema_url is checked. */
static PyObject *read_scope_items(Bytes in, ItemReader read_item) {
    PyObject *items[3] = {NULL, NULL, PyList_New(0)};
    if (!items[2]) return NULL;
    int scopes = 0;
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0) {
        int failed = 0;
        if (f.tag == TAG(1, LEN)) /* twice: upb merges the two scopes */
            failed = scopes++ ? -1 : read_scope(f.bytes, &items[0], &items[1]);
        else if (f.tag == TAG(2, LEN))
            failed = append_new(items[2], read_item(f.bytes));
        else if (f.tag == TAG(3, LEN))
            failed = check_text(f.bytes);
        if (failed < 0) goto fail;
    }
    if (more < 0 || fill_empty(&items[0]) < 0 || fill_empty(&items[1]) < 0) goto fail;
    return tuple_of(3, items);
fail:
    clear(3, items);
    return NULL;
}

/* Reads a Resource's attributes into `attributes`; its entity refs are checked. */
static int read_resource(Bytes in, PyObject *attributes) {
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0) {
        if ((f.tag == TAG(1, LEN) && read_key_value(f.bytes, attributes, 0) < 0) ||
            (f.tag == TAG(3, LEN) && check_entity_ref(f.bytes) < 0))
            return -1;
    }
    return more;
}

/* A ResourceSpans (or ResourceLogs) as (resource_attributes, [scope, ...]): one dict for
 * all its items, each read by `read_item`. */
static PyObject *read_resource_items(Bytes in, ItemReader read_item) {
    PyObject *items[2] = {PyDict_New(), NULL};
    if (!items[0] || !(items[1] = PyList_New(0))) goto fail;
    int resources = 0;
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0) {
        int failed = 0;
        if (f.tag == TAG(1, LEN)) /* twice: upb merges the two resources */
            failed = resources++ ? -1 : read_resource(f.bytes, items[0]);
        else if (f.tag == TAG(2, LEN))
            failed = append_new(items[1], read_scope_items(f.bytes, read_item));
        else if (f.tag == TAG(3, LEN))
            failed = check_text(f.bytes);
        if (failed < 0) goto fail;
    }
    if (more < 0) goto fail;
    return tuple_of(2, items);
fail:
    clear(2, items);
    return NULL;
}

/* ------------------------------------------------------------------ logs.proto */

/* A log record's parts, in the order of the tuple read_log_record returns. */
enum {
    R_TRACE_ID, R_SPAN_ID, R_TIME, R_OBSERVED, R_EVENT_NAME, R_SEVERITY_NUMBER,
    R_SEVERITY_TEXT, R_BODY, R_ATTRIBUTES, R_FLAGS, RECORD_PARTS
};

/* A LogRecord as the tuple of its parts (the enum's order): ids as hex, "" for absent
 * strings, the body's value (None for none); its dropped count is skipped. */
static PyObject *read_log_record(Bytes in) {
    PyObject *parts[RECORD_PARTS] = {NULL};
    if (!(parts[R_ATTRIBUTES] = PyDict_New())) return NULL;
    Bytes ids[2] = {{NULL, NULL}, {NULL, NULL}}; /* trace, span */
    uint64_t time = 0, observed = 0, severity = 0, flags = 0;
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0) {
        int failed = 0;
        switch (f.tag) {
            case TAG(1, I64): time = f.scalar; break;
            case TAG(2, VARINT): severity = f.scalar; break;
            case TAG(3, LEN): failed = set_text(&parts[R_SEVERITY_TEXT], f.bytes); break;
            case TAG(5, LEN): /* twice: upb merges the two bodies */
                failed = parts[R_BODY] || !(parts[R_BODY] = read_any_value(f.bytes, 0)) ? -1 : 0;
                break;
            case TAG(6, LEN): failed = read_key_value(f.bytes, parts[R_ATTRIBUTES], 0); break;
            case TAG(8, I32): flags = f.scalar; break;
            case TAG(9, LEN): ids[0] = f.bytes; break;
            case TAG(10, LEN): ids[1] = f.bytes; break;
            case TAG(11, I64): observed = f.scalar; break;
            case TAG(12, LEN): failed = set_text(&parts[R_EVENT_NAME], f.bytes); break;
            default: break;
        }
        if (failed < 0) goto fail;
    }
    if (more < 0 || !(parts[R_TRACE_ID] = cached_hex_text(ids[0])) ||
        !(parts[R_SPAN_ID] = cached_hex_text(ids[1])) ||
        !(parts[R_TIME] = PyLong_FromUnsignedLongLong(time)) ||
        !(parts[R_OBSERVED] = PyLong_FromUnsignedLongLong(observed)) ||
        !(parts[R_SEVERITY_NUMBER] = PyLong_FromLongLong(as_int32(severity))) ||
        !(parts[R_FLAGS] = PyLong_FromUnsignedLongLong(flags)) ||
        fill_empty(&parts[R_EVENT_NAME]) < 0 || fill_empty(&parts[R_SEVERITY_TEXT]) < 0)
        goto fail;
    if (!parts[R_BODY]) parts[R_BODY] = Py_NewRef(Py_None);
    return tuple_of(RECORD_PARTS, parts);
fail:
    clear(RECORD_PARTS, parts);
    return NULL;
}

/* The resources of a TracesData's (or LogsData's: resource_spans and resource_logs are
 * both field 1) bytes, their items read by `read_item`; None to leave them to upb. */
static PyObject *read_resource_list(PyObject *value, ItemReader read_item) {
    if (!PyBytes_Check(value)) Py_RETURN_NONE;
    const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(value);
    Bytes in = {data, data + PyBytes_GET_SIZE(value)};
    PyObject *resources = PyList_New(0);
    if (!resources) return NULL;
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0)
        if (f.tag == TAG(1, LEN) &&
            append_new(resources, read_resource_items(f.bytes, read_item)) < 0)
            break;
    if (more == 0) return resources;
    Py_DECREF(resources);
    if (PyErr_Occurred()) return NULL; /* out of memory, say: not a reason to fall back */
    Py_RETURN_NONE;
}

/* `read_resource_list` with the table of short strings in use. */
static PyObject *read_resources(PyObject *value, ItemReader read_item) {
    use_text_cache = 1;
    PyObject *resources = read_resource_list(value, read_item);
    use_text_cache = 0;
    return resources;
}

/* read_traces(value): see the top of this file. */
static PyObject *read_traces(PyObject *module, PyObject *value) {
    (void)module;
    return read_resources(value, read_span);
}

/* read_logs(value): see the top of this file. */
static PyObject *read_logs(PyObject *module, PyObject *value) {
    (void)module;
    return read_resources(value, read_log_record);
}

/* read_value(value): the Python value of an AnyValue's bytes, as (value,); None when it
 * is left to upb (what read_traces leaves to it, in a value). */
static PyObject *read_value(PyObject *module, PyObject *value) {
    (void)module;
    if (!PyBytes_Check(value)) Py_RETURN_NONE;
    const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(value);
    PyObject *read = read_any_value((Bytes){data, data + PyBytes_GET_SIZE(value)}, 0);
    if (read) {
        PyObject *one = PyTuple_Pack(1, read);
        Py_DECREF(read);
        return one;
    }
    if (PyErr_Occurred()) return NULL; /* out of memory, say: not a reason to fall back */
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ JSON text */

/* A growing buffer of JSON text (UTF-8). */
typedef struct {
    char *data;
    Py_ssize_t size, capacity;
} Text;

/* Makes room for `n` more bytes; -1 (a MemoryError set) when memory runs out. */
static int reserve(Text *t, Py_ssize_t n) {
    if (t->size + n <= t->capacity) return 0;
    Py_ssize_t capacity = t->capacity ? t->capacity : 256;
    while (capacity < t->size + n) capacity *= 2;
    char *data = PyMem_Realloc(t->data, capacity);
    if (!data) {
        PyErr_NoMemory();
        return -1;
    }
    t->data = data;
    t->capacity = capacity;
    return 0;
}

static int put(Text *t, const char *s, Py_ssize_t n) {
    if (reserve(t, n) < 0) return -1;
    memcpy(t->data + t->size, s, n);
    t->size += n;
    return 0;
}

/* Writes UTF-8 `b` as a JSON string, escaped as json.dumps(..., ensure_ascii=False) escapes
 * it (", \, \b, \f, \n, \r, \t by name, other characters below 0x20 as \u00xx); -1 when `b`
 * is not UTF-8 (left to upb) or memory runs out. */
static int put_string(Text *t, Bytes b) {
    static const char hex[] = "0123456789abcdef";
    if (check_text(b) < 0 || reserve(t, 2 + 6 * (b.end - b.p)) < 0) return -1;
    char *out = t->data + t->size;
    *out++ = '"';
    for (const uint8_t *p = b.p; p < b.end; p++) {
        uint8_t c = *p;
        if (c >= 0x20 && c != '"' && c != '\\') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
            case '"': *out++ = '"'; break;
            case '\\': *out++ = '\\'; break;
            case '\b': *out++ = 'b'; break;
            case '\f': *out++ = 'f'; break;
            case '\n': *out++ = 'n'; break;
            case '\r': *out++ = 'r'; break;
            case '\t': *out++ = 't'; break;
            default:
                memcpy(out, "u00", 3);
                out[3] = hex[c >> 4];
                out[4] = hex[c & 15];
                out += 5;
        }
    }
    *out++ = '"';
    t->size = out - t->data;
    return 0;
}

/* Writes a double as json.dumps does: float.__repr__, NaN, Infinity, -Infinity. */
static int put_double(Text *t, double d) {
    if (d != d) return put(t, "NaN", 3);
    if (d == HUGE_VAL) return put(t, "Infinity", 8);
    if (d == -HUGE_VAL) return put(t, "-Infinity", 9);
    char *repr = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (!repr) return -1;
    int r = put(t, repr, (Py_ssize_t)strlen(repr));
    PyMem_Free(repr);
    return r;
}

static int json_any_value(Text *t, Bytes in, int depth);

/* The most keys one key-value list may hold in JSON text written here: past it (and for a
 * key found twice, which a dict keeps once) the value is left to the Python walk. */
#define MAX_JSON_KEYS 64

/* Writes an ArrayValue as a JSON array. */
static int json_array(Text *t, Bytes in, int depth) {
    if (depth > MAX_VALUE_DEPTH || put(t, "[", 1) < 0) return -1;
    Field f;
    int more, first = 1;
    while ((more = next_field(&in, &f)) > 0) {
        if (f.tag != TAG(1, LEN)) continue;
        if ((!first && put(t, ", ", 2) < 0) || json_any_value(t, f.bytes, depth) < 0) return -1;
        first = 0;
    }
    return more < 0 ? -1 : put(t, "]", 1);
}

/* A KeyValue's key (the last key field, "" for none) and value (an empty AnyValue for
 * none); -1 on malformed bytes, a key that is not UTF-8, or a value field present twice
 * (upb merges the two). */
static int key_value_parts(Bytes in, Bytes *key, Bytes *value) {
    static const uint8_t none[1] = {0};
    *key = (Bytes){none, none};
    *value = (Bytes){NULL, NULL};
    Field f;
    int more;
    while ((more = next_field(&in, &f)) > 0) {
        if (f.tag == TAG(1, LEN)) {
            if (check_text(f.bytes) < 0) return -1; /* every occurrence, as upb reads them */
            *key = f.bytes;
        } else if (f.tag == TAG(2, LEN)) {
            if (value->p) return -1;
            *value = f.bytes;
        }
    }
    if (more < 0) return -1;
    if (!value->p) *value = (Bytes){none, none}; /* an empty AnyValue: no value, null */
    return 0;
}

/* Writes a KeyValueList as a JSON object, keys in their order; -1 for a key found twice.
 * With `member` (UTF-8 bytes), `*found` gets the Python value of that key's value (a new
 * reference; None where the list has no such key). */
static int json_kvlist(Text *t, Bytes in, int depth, const Bytes *member, PyObject **found) {
    if (depth > MAX_VALUE_DEPTH || put(t, "{", 1) < 0) return -1;
    Bytes keys[MAX_JSON_KEYS];
    int count = 0, more;
    Field f;
    while ((more = next_field(&in, &f)) > 0) {
        if (f.tag != TAG(1, LEN)) continue;
        Bytes key, value;
        if (count == MAX_JSON_KEYS || key_value_parts(f.bytes, &key, &value) < 0) return -1;
        Py_ssize_t n = key.end - key.p;
        for (int i = 0; i < count; i++)
            if (keys[i].end - keys[i].p == n && memcmp(keys[i].p, key.p, n) == 0) return -1;
        keys[count++] = key;
        if ((count > 1 && put(t, ", ", 2) < 0) || put_string(t, key) < 0 || put(t, ": ", 2) < 0 ||
            json_any_value(t, value, depth) < 0)
            return -1;
        if (member && member->end - member->p == n && memcmp(member->p, key.p, n) == 0 &&
            !(*found = read_any_value(value, depth)))
            return -1;
    }
    if (more < 0) return -1;
    if (member && !*found) *found = Py_NewRef(Py_None);
    return put(t, "}", 1);
}

/* The one value field of an AnyValue (`*chosen`, its tag 0 for none); -1 on malformed
 * bytes or two value fields (upb keeps the last, and merges messages). Unknown fields, and
 * value fields of another wire type, are skipped as upb skips them. */
static int only_value(Bytes in, Field *chosen) {
    Field f;
    int more;
    chosen->tag = 0;
    while ((more = next_field(&in, &f)) > 0) {
        switch (f.tag) {
            case TAG(1, LEN): case TAG(2, VARINT): case TAG(3, VARINT): case TAG(4, I64):
            case TAG(5, LEN): case TAG(6, LEN): case TAG(7, LEN): case TAG(8, VARINT):
                if (chosen->tag) return -1;
                *chosen = f;
                break;
            default: break;
        }
    }
    return more;
}

/* Writes an AnyValue as json.dumps(any_value(value), ensure_ascii=False) writes its Python
 * value; -1 where read_any_value leaves it to upb, for bytes_value (json.dumps has no
 * text for bytes), and where json_kvlist leaves a list to Python. */
static int json_any_value(Text *t, Bytes in, int depth) {
    Field f;
    if (only_value(in, &f) < 0) return -1;
    char number[32];
    switch (f.tag) {
        case 0: return put(t, "null", 4);
        case TAG(1, LEN): return put_string(t, f.bytes);
        case TAG(2, VARINT): return f.scalar ? put(t, "true", 4) : put(t, "false", 5);
        case TAG(3, VARINT):
            return put(t, number, snprintf(number, sizeof number, "%lld", as_int64(f.scalar)));
        case TAG(4, I64): return put_double(t, as_double(f.scalar));
        case TAG(5, LEN): return json_array(t, f.bytes, depth + 1);
        case TAG(6, LEN): return json_kvlist(t, f.bytes, depth + 1, NULL, NULL);
        default: return -1; /* bytes_value, string_value_strindex */
    }
}

/* Writes an AnyValue that is an array holding only key-value lists (at least one) as a
 * JSON array, appending each list's `member` value (None where it has none) to `members`;
 * -1 for any other value, and where json_any_value leaves one to Python. */
static int json_maps(Text *t, Bytes in, const Bytes *member, PyObject *members) {
    Field f, item;
    if (only_value(in, &f) < 0 || f.tag != TAG(5, LEN) || put(t, "[", 1) < 0) return -1;
    Bytes array = f.bytes;
    int more, count = 0;
    while ((more = next_field(&array, &f)) > 0) {
        if (f.tag != TAG(1, LEN)) continue;
        PyObject *found = NULL;
        if (only_value(f.bytes, &item) < 0 || item.tag != TAG(6, LEN) ||
            (count++ && put(t, ", ", 2) < 0) ||
            json_kvlist(t, item.bytes, 2, member, &found) < 0 || append_new(members, found) < 0) {
            Py_XDECREF(found);
            return -1;
        }
    }
    return more < 0 || count == 0 ? -1 : put(t, "]", 1);
}

/* messages_json(value, member): see the method table. */
static PyObject *messages_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyBytes_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "messages_json(value: bytes, member: str)");
        return NULL;
    }
    Py_ssize_t size;
    const char *name = PyUnicode_AsUTF8AndSize(args[1], &size);
    PyObject *members = name ? PyList_New(0) : NULL;
    if (!members) return NULL;
    const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    Bytes in = {data, data + PyBytes_GET_SIZE(args[0])};
    Bytes member = {(const uint8_t *)name, (const uint8_t *)name + size};
    Text t = {NULL, 0, 0};
    PyObject *answer = NULL;
    if (json_maps(&t, in, &member, members) == 0) {
        PyObject *text = PyUnicode_DecodeUTF8(t.data, t.size, NULL);
        answer = text ? PyTuple_Pack(2, text, members) : NULL;
        Py_XDECREF(text);
    } else if (!PyErr_Occurred()) {
        answer = Py_NewRef(Py_None);
    }
    PyMem_Free(t.data);
    Py_DECREF(members);
    return answer;
}

static PyMethodDef methods[] = {
    {"read_traces", read_traces, METH_O,
     "read_traces(value: bytes) -> list | None: the resources, scopes and spans of an OTLP "
     "TracesData's bytes as Python objects; None to leave the value to upb."},
    {"read_logs", read_logs, METH_O,
     "read_logs(value: bytes) -> list | None: the resources, scopes and log records of an "
     "OTLP LogsData's bytes as Python objects; None to leave the value to upb."},
    {"read_value", read_value, METH_O,
     "read_value(value: bytes) -> tuple | None: the Python value of an OTLP AnyValue's "
     "bytes as `otlp.any_value` gives it, as (value,); None to leave the value to upb."},
    {"messages_json", (PyCFunction)(void (*)(void))messages_json, METH_FASTCALL,
     "messages_json(value: bytes, member: str) -> tuple | None: the JSON text "
     "json.dumps(..., ensure_ascii=False) writes of the Python value of an OTLP AnyValue's "
     "bytes that is an array of key-value lists, and the value of `member` in each list "
     "(None where it has none), as (text, [value, ...]); None for another value, and to "
     "leave one to Python (bytes, a key twice in a list, more than 64 keys in one)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_otlp_reader",
    .m_doc = "OTLP TracesData and LogsData bytes read into Python objects in one pass.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__otlp_reader(void) { return PyModule_Create(&module); }
