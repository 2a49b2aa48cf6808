/* The collector's facts over the raw bytes of an OTLP export request.
 *
 * `Kernel.request(body, key, key_id, tenant)` walks the protobuf wire format of an
 * ExportTraceServiceRequest once and, for every span in request order, answers what
 * `content.facts_producer.compute_facts` (through `collector.facts.FactMaker`) answers for
 * it, without making a Python object of any value it reads:
 *
 *   None                  the span has no facts and no content that holds personal data
 *   a Declined            this kernel does not decide the span: run the Python fact maker
 *                         (`schemas.decline`; the instance handed over for its reason:
 *                         `declined_unread`, `declined_repeated`, `declined_fallback`)
 *   bytes                 the facts as encoded `Span.attributes` entries, the version and
 *                         the pii.dropped record of its content included (merged into the
 *                         span as they are): `drops_all` (nothing is captured), a span
 *                         without events and with text content only
 *   (bytes | None, dict)  else: the facts (the version included), and the personal data
 *                         the scanner finds in each content value ({key: {kind: count}},
 *                         keys with any; None for a value that is not text, which Python
 *                         reads if it drops it)
 *
 * With `whole` (nothing captured), each span's whole encoding as the collector forwards it,
 * where the redactor would scrub nothing in it: content removed, each string of a key the
 * allow-list does not allow as its withheld mark, `pathgrade.redacted.keys` and the facts
 * added; the allow-list's verdict of a key is asked of the redactor (`forwarding(key)`,
 * remembered under `forwarding_id`), never decided here; any other span is declined
 * (`declined_whole`: the redactor redacts it in Python).
 *
 * `Kernel.records(contents, ...)` answers the same for log records, from each record's raw
 * content as Python values (`collector.facts.record_content`), read into the view a span's
 * attributes are read into; the facts come as `LogRecord.attributes` entries.
 *
 * Every definition stays in Python and is handed over at construction: the convention
 * mapping's keys and tables, the lexicons (their anchors pre-check here; a text holding an
 * anchor goes to the Python lexicon), the personal-data scanner (a text that cannot hold
 * personal data by its own pre-checks is answered here; any other goes to the scanner),
 * the fact names. What this file defines is only how the bytes are read: the protobuf
 * wire format, JSON, the canonical JSON text of fingerprints and the facts' JSON text
 * (`json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`), HMAC-SHA256.
 * Anything outside the common case (flattened messages, values that are not text, JSON
 * that is invalid or holds NaN, big integers, lone surrogates or duplicate keys past a
 * bound) is left to Python for that span (declined): the answers are the Python fact
 * maker's, tests/unit/collector/test_facts_kernel.py checks them against it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ byte buffers */

typedef struct {
    char *data;
    size_t len, cap;
    int failed; /* out of memory */
} Buf;

static int buf_reserve(Buf *b, size_t more) {
    if (b->failed) return -1;
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->len + more) cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (!data) {
        b->failed = 1;
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline void buf_put(Buf *b, const void *p, size_t n) {
    if (n == 0 || buf_reserve(b, n) < 0) return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static inline void buf_putc(Buf *b, char c) {
    if (b->len < b->cap) {
        b->data[b->len++] = c;
        return;
    }
    buf_put(b, &c, 1);
}
static void buf_puts(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }
static void buf_free(Buf *b) {
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

static void buf_varint(Buf *b, uint64_t v) {
    char tmp[10];
    int n = 0;
    do {
        tmp[n++] = (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    buf_put(b, tmp, n);
}

static void buf_int64(Buf *b, long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", v);
    buf_put(b, tmp, (size_t)n);
}

/* ------------------------------------------------------------------ SHA-256, HMAC */

typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
} Sha256;

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_compress(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) +
                      K256[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

static void sha256_init(Sha256 *s) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->bytes = 0;
    s->fill = 0;
}

static void sha256_update(Sha256 *s, const uint8_t *p, size_t n) {
    s->bytes += n;
    if (s->fill) {
        size_t take = 64 - s->fill < n ? 64 - s->fill : n;
        memcpy(s->block + s->fill, p, take);
        s->fill += take;
        p += take;
        n -= take;
        if (s->fill < 64) return;
        sha256_compress(s->h, s->block);
        s->fill = 0;
    }
    for (; n >= 64; p += 64, n -= 64) sha256_compress(s->h, p);
    memcpy(s->block, p, n);
    s->fill = n;
}

static void sha256_final(Sha256 *s, uint8_t out[32]) {
    uint64_t bits = s->bytes * 8;
    uint8_t pad = 0x80, zero = 0, len[8];
    sha256_update(s, &pad, 1);
    while (s->fill != 56) sha256_update(s, &zero, 1);
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(s, len, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

/* Fingerprints of short texts, remembered: identities, ids and argument values repeat
 * (`content.fingerprints.TenantKey` remembers them too). Direct-mapped. */
#define FP_SLOTS 1024
#define FP_TEXT 48

typedef struct {
    uint8_t used, len, prefix_len;
    char prefix[24];
    char text[FP_TEXT];
    char hex[32];
} FpSlot;

/* HMAC-SHA256 with the key's inner and outer states computed once per request. */
typedef struct {
    Sha256 inner, outer;
    char prefix[24]; /* "<key id>:" */
    size_t prefix_len;
    FpSlot *remembered; /* or NULL */
} Hmac;

static void hmac_init(Hmac *m, const uint8_t *key, size_t key_len) {
    uint8_t block[64] = {0}, pad[64];
    if (key_len > 64) {
        Sha256 s;
        sha256_init(&s);
        sha256_update(&s, key, key_len);
        sha256_final(&s, block);
    } else {
        memcpy(block, key, key_len);
    }
    for (int i = 0; i < 64; i++) pad[i] = block[i] ^ 0x36;
    sha256_init(&m->inner);
    sha256_update(&m->inner, pad, 64);
    for (int i = 0; i < 64; i++) pad[i] = block[i] ^ 0x5c;
    sha256_init(&m->outer);
    sha256_update(&m->outer, pad, 64);
}

#define DIGEST_BYTES 16 /* content.fingerprints.DIGEST_BYTES */

/* Append `<key id>:<first 128 bits of HMAC in hex>` of `text` to `out`. */
static void fingerprint(const Hmac *m, const char *text, size_t n, Buf *out) {
    static const char hex[] = "0123456789abcdef";
    FpSlot *slot = NULL;
    if (m->remembered && n <= FP_TEXT) {
        uint64_t h = 14695981039346656037ULL;
        for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)text[i]) * 1099511628211ULL;
        for (size_t i = 0; i < m->prefix_len; i++) h = (h ^ (uint8_t)m->prefix[i]) * 1099511628211ULL;
        slot = &m->remembered[(h ^ (h >> 32)) % FP_SLOTS];
        if (slot->used && slot->len == n && slot->prefix_len == m->prefix_len &&
            memcmp(slot->text, text, n) == 0 && memcmp(slot->prefix, m->prefix, m->prefix_len) == 0) {
            buf_put(out, m->prefix, m->prefix_len);
            buf_put(out, slot->hex, 32);
            return;
        }
    }
    uint8_t digest[32];
    Sha256 s = m->inner;
    sha256_update(&s, (const uint8_t *)text, n);
    sha256_final(&s, digest);
    s = m->outer;
    sha256_update(&s, digest, 32);
    sha256_final(&s, digest);
    char tmp[2 * DIGEST_BYTES];
    for (int i = 0; i < DIGEST_BYTES; i++) {
        tmp[2 * i] = hex[digest[i] >> 4];
        tmp[2 * i + 1] = hex[digest[i] & 15];
    }
    buf_put(out, m->prefix, m->prefix_len);
    buf_put(out, tmp, sizeof tmp);
    if (slot) {
        slot->used = 1;
        slot->len = (uint8_t)n;
        slot->prefix_len = (uint8_t)m->prefix_len;
        memcpy(slot->prefix, m->prefix, m->prefix_len);
        memcpy(slot->text, text, n);
        memcpy(slot->hex, tmp, 32);
    }
}

/* ------------------------------------------------------------------ JSON */

enum { J_NULL, J_FALSE, J_TRUE, J_INT, J_FLOAT, J_STR, J_ARR, J_OBJ };

typedef struct {
    uint8_t type;
    uint32_t n;     /* J_ARR: items; J_OBJ: members; J_STR: bytes */
    uint32_t first; /* J_ARR / J_OBJ: index in kids; J_STR: offset in text */
    union {
        long long i;
        double d;
    } v;
} JNode;

#define MAX_DEPTH 64
#define MAX_MEMBERS 256 /* object members deduplicated here; more: left to Python */

typedef struct {
    const char *src, *p, *end;
    JNode *nodes;
    size_t n_nodes, cap_nodes;
    uint32_t *kids; /* children of containers, contiguous per container */
    size_t n_kids, cap_kids;
    uint32_t *stack; /* children of the containers being parsed */
    size_t n_stack, cap_stack;
    Buf text; /* decoded strings */
    int unsupported;
} Json;

static void json_free(Json *j) {
    PyMem_Free(j->nodes);
    PyMem_Free(j->kids);
    PyMem_Free(j->stack);
    buf_free(&j->text);
    memset(j, 0, sizeof *j);
}

/* Empty `j` for the next text, keeping its memory. */
static void json_reset(Json *j) {
    j->n_nodes = j->n_kids = j->n_stack = 0;
    j->text.len = 0;
    j->text.failed = 0;
    j->unsupported = 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap * 2 : 64;
    while (cap2 < need) cap2 *= 2;
    void *q = PyMem_Realloc(*p, cap2 * size);
    if (!q) return -1;
    *p = q;
    *cap = cap2;
    return 0;
}

static long json_node(Json *j, uint8_t type) {
    if (grow((void **)&j->nodes, &j->cap_nodes, j->n_nodes + 1, sizeof(JNode)) < 0) return -1;
    JNode *node = &j->nodes[j->n_nodes];
    memset(node, 0, sizeof *node);
    node->type = type;
    return (long)j->n_nodes++;
}

static int json_push(Json *j, uint32_t index) {
    if (grow((void **)&j->stack, &j->cap_stack, j->n_stack + 1, sizeof(uint32_t)) < 0)
        return -1;
    j->stack[j->n_stack++] = index;
    return 0;
}

static void skip_ws(Json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

static void put_utf8(Buf *b, uint32_t cp) {
    char t[4];
    if (cp < 0x80) {
        t[0] = (char)cp;
        buf_put(b, t, 1);
    } else if (cp < 0x800) {
        t[0] = (char)(0xc0 | cp >> 6);
        t[1] = (char)(0x80 | (cp & 0x3f));
        buf_put(b, t, 2);
    } else if (cp < 0x10000) {
        t[0] = (char)(0xe0 | cp >> 12);
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        t[2] = (char)(0x80 | (cp & 0x3f));
        buf_put(b, t, 3);
    } else {
        t[0] = (char)(0xf0 | cp >> 18);
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        t[3] = (char)(0x80 | (cp & 0x3f));
        buf_put(b, t, 4);
    }
}

/* A JSON string (at the opening quote) as json.loads(strict=True) reads it; a lone
 * surrogate escape is unsupported (Python makes a string UTF-8 cannot hold). */
static long parse_string(Json *j) {
    const char *p = j->p + 1;
    const char *run = p;
    while (p < j->end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
    if (p < j->end && *p == '"') { /* no escape: the string is its source bytes */
        j->p = p + 1;
        long index = json_node(j, J_STR);
        if (index < 0) return -1;
        j->nodes[index].first = (uint32_t)(run - j->src);
        j->nodes[index].n = (uint32_t)(p - run);
        j->nodes[index].v.i = 1;
        return index;
    }
    p = run;
    size_t start = j->text.len;
    for (;;) {
        const char *run = p;
        while (p < j->end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
        buf_put(&j->text, run, (size_t)(p - run));
        if (p >= j->end || (unsigned char)*p < 0x20) return -1;
        if (*p == '"') break;
        if (++p >= j->end) return -1;
        char c = *p++;
        switch (c) {
            case '"': buf_putc(&j->text, '"'); break;
            case '\\': buf_putc(&j->text, '\\'); break;
            case '/': buf_putc(&j->text, '/'); break;
            case 'b': buf_putc(&j->text, '\b'); break;
            case 'f': buf_putc(&j->text, '\f'); break;
            case 'n': buf_putc(&j->text, '\n'); break;
            case 'r': buf_putc(&j->text, '\r'); break;
            case 't': buf_putc(&j->text, '\t'); break;
            case 'u': {
                if (j->end - p < 4) return -1;
                int cp = read_hex4(p);
                if (cp < 0) return -1;
                p += 4;
                if (cp >= 0xd800 && cp < 0xdc00 && j->end - p >= 6 && p[0] == '\\' &&
                    p[1] == 'u') {
                    int low = read_hex4(p + 2);
                    if (low >= 0xdc00 && low < 0xe000) {
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                        p += 6;
                    }
                }
                if (cp >= 0xd800 && cp < 0xe000) {
                    j->unsupported = 1;
                    return -1;
                }
                put_utf8(&j->text, (uint32_t)cp);
                break;
            }
            default: return -1;
        }
    }
    j->p = p + 1;
    long index = json_node(j, J_STR);
    if (index < 0) return -1;
    j->nodes[index].first = (uint32_t)start;
    j->nodes[index].n = (uint32_t)(j->text.len - start);
    return index;
}

static long parse_number(Json *j) {
    const char *p = j->p, *start = p;
    int is_float = 0;
    if (p < j->end && *p == '-') p++;
    if (p >= j->end) return -1;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < j->end && *p >= '0' && *p <= '9') p++;
    } else {
        if (*p == 'I') j->unsupported = 1; /* -Infinity */
        return -1;
    }
    if (p + 1 < j->end && *p == '.' && p[1] >= '0' && p[1] <= '9') {
        is_float = 1;
        p++;
        while (p < j->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < j->end && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        if (q < j->end && (*q == '+' || *q == '-')) q++;
        if (q < j->end && *q >= '0' && *q <= '9') {
            is_float = 1;
            p = q;
            while (p < j->end && *p >= '0' && *p <= '9') p++;
        }
    }
    char tmp[64];
    size_t n = (size_t)(p - start);
    if (n >= sizeof tmp) {
        j->unsupported = 1; /* a big integer, or a float Python reads digit by digit */
        return -1;
    }
    memcpy(tmp, start, n);
    tmp[n] = 0;
    long index = json_node(j, is_float ? J_FLOAT : J_INT);
    if (index < 0) return -1;
    if (is_float) {
        double d = PyOS_string_to_double(tmp, NULL, NULL);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            j->unsupported = 1;
            return -1;
        }
        if (!isfinite(d)) {
            j->unsupported = 1;
            return -1;
        }
        j->nodes[index].v.d = d;
    } else {
        if (n > 18) {
            j->unsupported = 1; /* past int64 (Python: a big integer) */
            return -1;
        }
        j->nodes[index].v.i = strtoll(tmp, NULL, 10);
    }
    j->p = p;
    return index;
}

/* A string node's bytes: in the source when it had no escape (v.i = 1), else decoded. */
#define STR(j, node) ((node)->v.i ? (j)->src + (node)->first : (j)->text.data + (node)->first)

static int same_key(Json *j, uint32_t a, uint32_t b) {
    JNode *x = &j->nodes[a], *y = &j->nodes[b];
    return x->n == y->n && memcmp(STR(j, x), STR(j, y), x->n) == 0;
}

static long parse_value(Json *j, int depth);

/* Close the container `index` whose children are on the stack from `base`. */
static int close_container(Json *j, long index, size_t base) {
    size_t count = j->n_stack - base;
    if (grow((void **)&j->kids, &j->cap_kids, j->n_kids + count, sizeof(uint32_t)) < 0)
        return -1;
    if (count) /* an empty container: no kids, and maybe no arrays yet */
        memcpy(j->kids + j->n_kids, j->stack + base, count * sizeof(uint32_t));
    j->nodes[index].first = (uint32_t)j->n_kids;
    j->nodes[index].n = (uint32_t)(j->nodes[index].type == J_OBJ ? count / 2 : count);
    j->n_kids += count;
    j->n_stack = base;
    return 0;
}

static long parse_container(Json *j, int depth, int object) {
    if (depth > MAX_DEPTH) {
        j->unsupported = 1;
        return -1;
    }
    long index = json_node(j, object ? J_OBJ : J_ARR);
    if (index < 0) return -1;
    size_t base = j->n_stack;
    char close = object ? '}' : ']';
    j->p++;
    skip_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return close_container(j, index, base) < 0 ? -1 : index;
    }
    for (;;) {
        skip_ws(j);
        long key = -1;
        if (object) {
            if (j->p >= j->end || *j->p != '"') return -1;
            key = parse_string(j);
            if (key < 0) return -1;
            skip_ws(j);
            if (j->p >= j->end || *j->p != ':') return -1;
            j->p++;
            skip_ws(j);
        }
        long value = parse_value(j, depth + 1);
        if (value < 0) return -1;
        if (object) {
            /* a repeated key keeps its first place and its last value, as a dict does */
            size_t members = (j->n_stack - base) / 2, m;
            if (members >= MAX_MEMBERS) {
                j->unsupported = 1;
                return -1;
            }
            for (m = 0; m < members; m++)
                if (same_key(j, j->stack[base + 2 * m], (uint32_t)key)) break;
            if (m < members) {
                j->stack[base + 2 * m + 1] = (uint32_t)value;
            } else if (json_push(j, (uint32_t)key) < 0 || json_push(j, (uint32_t)value) < 0) {
                return -1;
            }
        } else if (json_push(j, (uint32_t)value) < 0) {
            return -1;
        }
        skip_ws(j);
        if (j->p >= j->end) return -1;
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p != close) return -1;
        j->p++;
        return close_container(j, index, base) < 0 ? -1 : index;
    }
}

static int literal(Json *j, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return 0;
    j->p += n;
    return 1;
}

static long parse_value(Json *j, int depth) {
    if (j->p >= j->end) return -1;
    switch (*j->p) {
        case '"': return parse_string(j);
        case '{': return parse_container(j, depth, 1);
        case '[': return parse_container(j, depth, 0);
        case 'n': return literal(j, "null") ? json_node(j, J_NULL) : -1;
        case 't': return literal(j, "true") ? json_node(j, J_TRUE) : -1;
        case 'f': return literal(j, "false") ? json_node(j, J_FALSE) : -1;
        case 'N':
        case 'I': j->unsupported = 1; return -1; /* NaN, Infinity */
        default: return parse_number(j);
    }
}

/* Parse `n` bytes of JSON text (json.loads: whitespace around the value allowed).
 * Returns the root's index; -1 when invalid or unsupported (`j->unsupported`). Either
 * way the caller frees `j`. */
static long json_parse(Json *j, const char *text, size_t n) {
    json_reset(j);
    j->src = j->p = text;
    j->end = text + n;
    skip_ws(j);
    long root = parse_value(j, 0);
    if (root < 0) return -1;
    skip_ws(j);
    if (j->p != j->end) return -1;
    if (j->text.failed) {
        j->unsupported = 1;
        return -1;
    }
    return root;
}

#define NODE(j, i) (&(j)->nodes[i])
#define KID(j, node, k) ((j)->kids[(node)->first + (k)])

/* The member `name` of object `obj`, or -1. */
static long member(Json *j, long obj, const char *name) {
    JNode *o = NODE(j, obj);
    if (o->type != J_OBJ) return -1;
    size_t n = strlen(name);
    for (uint32_t m = 0; m < o->n; m++) {
        JNode *k = NODE(j, KID(j, o, 2 * m));
        if (k->n == n && memcmp(STR(j, k), name, n) == 0) return KID(j, o, 2 * m + 1);
    }
    return -1;
}

static int is_str(Json *j, long i, const char *s) {
    if (i < 0 || NODE(j, i)->type != J_STR) return 0;
    JNode *node = NODE(j, i);
    return node->n == strlen(s) && memcmp(STR(j, node), s, node->n) == 0;
}

/* Python truth of a JSON value (absent: false). */
static int truthy(Json *j, long i) {
    if (i < 0) return 0;
    JNode *node = NODE(j, i);
    switch (node->type) {
        case J_NULL:
        case J_FALSE: return 0;
        case J_TRUE: return 1;
        case J_INT: return node->v.i != 0;
        case J_FLOAT: return node->v.d != 0.0;
        default: return node->n != 0;
    }
}

static void put_float_repr(Buf *out, double d) {
    char *text = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (!text) {
        PyErr_Clear();
        out->failed = 1;
        return;
    }
    buf_puts(out, text);
    PyMem_Free(text);
}

/* `str(value)` in Python of a scalar (str as is, True, None, 5, 1.5); 0 for a container. */
static int put_py_str(Json *j, long i, Buf *out) {
    JNode *node = NODE(j, i);
    switch (node->type) {
        case J_NULL: buf_puts(out, "None"); return 1;
        case J_FALSE: buf_puts(out, "False"); return 1;
        case J_TRUE: buf_puts(out, "True"); return 1;
        case J_INT: buf_int64(out, node->v.i); return 1;
        case J_FLOAT: put_float_repr(out, node->v.d); return 1;
        case J_STR: buf_put(out, STR(j, node), node->n); return 1;
        default: return 0;
    }
}

/* A JSON string literal as json's encoder writes it with ensure_ascii=False. */
static void put_json_string(Buf *out, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    buf_putc(out, '"');
    const char *run = s;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        buf_put(out, run, (size_t)(s + k - run));
        run = s + k + 1;
        switch (c) {
            case '"': buf_puts(out, "\\\""); break;
            case '\\': buf_puts(out, "\\\\"); break;
            case '\n': buf_puts(out, "\\n"); break;
            case '\r': buf_puts(out, "\\r"); break;
            case '\t': buf_puts(out, "\\t"); break;
            case '\b': buf_puts(out, "\\b"); break;
            case '\f': buf_puts(out, "\\f"); break;
            default: {
                char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                buf_put(out, u, 6);
            }
        }
    }
    buf_put(out, run, (size_t)(s + n - run));
    buf_putc(out, '"');
}

/* Order of object members by key bytes (UTF-8 order is code point order, as Python
 * sorts str keys). Members are deduplicated at parse time. */
typedef struct {
    const char *key;
    uint32_t len;
    uint32_t value;
    uint32_t order;
} Member;

static int member_cmp(const void *a, const void *b) {
    const Member *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->order < y->order ? -1 : (x->order > y->order);
}

/* Canonical JSON text (`content.fingerprints.canonical_text` of a non-string: sorted
 * keys, no spaces, floats holding an integer below 2**63 as integers). */
static int put_canonical(Json *j, long i, Buf *out) {
    JNode *node = NODE(j, i);
    switch (node->type) {
        case J_NULL: buf_puts(out, "null"); return 0;
        case J_FALSE: buf_puts(out, "false"); return 0;
        case J_TRUE: buf_puts(out, "true"); return 0;
        case J_INT: buf_int64(out, node->v.i); return 0;
        case J_FLOAT:
            if (node->v.d == floor(node->v.d) && fabs(node->v.d) < 9223372036854775808.0)
                buf_int64(out, (long long)node->v.d);
            else
                put_float_repr(out, node->v.d);
            return 0;
        case J_STR: put_json_string(out, STR(j, node), node->n); return 0;
        case J_ARR:
            buf_putc(out, '[');
            for (uint32_t k = 0; k < node->n; k++) {
                if (k) buf_putc(out, ',');
                put_canonical(j, KID(j, node, k), out);
                node = NODE(j, i);
            }
            buf_putc(out, ']');
            return 0;
        default: {
            uint32_t n = node->n;
            Member *members = PyMem_Malloc((n ? n : 1) * sizeof(Member));
            if (!members) {
                out->failed = 1;
                return -1;
            }
            for (uint32_t m = 0; m < n; m++) {
                JNode *key = NODE(j, KID(j, node, 2 * m));
                members[m] = (Member){STR(j, key), key->n, KID(j, node, 2 * m + 1), m};
            }
            qsort(members, n, sizeof(Member), member_cmp);
            buf_putc(out, '{');
            for (uint32_t m = 0; m < n; m++) {
                if (m) buf_putc(out, ',');
                put_json_string(out, members[m].key, members[m].len);
                buf_putc(out, ':');
                put_canonical(j, members[m].value, out);
            }
            buf_putc(out, '}');
            PyMem_Free(members);
            return 0;
        }
    }
}

/* ------------------------------------------------------------------ the kernel */

#define MAX_LEXICON 32
#define MEMORY_SLOTS 1024          /* trace input memories (`GrowingArrays`' bound) */
#define MEMORY_MAX_TEXT (64 << 10) /* longer inputs are read whole each time */

typedef struct {
    char **keys;
    size_t *lens;
    size_t n;
    int *slots; /* each key's place in the kernel's key table (`key_slots`), or NULL */
} KeyList;

typedef struct {
    KeyList key; /* one key */
    PyObject *table; /* dict str -> str */
    int lowercase_unknown, upper;
    PyObject *unknown_value; /* str */
} KindSource;

/* What was read of a trace's growing message array (`messages.GrowingArrays`): the text,
 * and what it answered (the instruction mask, or the personal data found). */
typedef struct {
    char *tenant, *key; /* the attribute's key ("" for the instruction memory) */
    size_t tenant_len, key_len;
    uint8_t trace_id[16];
    char *text;
    size_t text_len;
    long result;      /* instructions: -3 no untrusted part, else a mask */
    PyObject *counts; /* personal data: {kind: count} */
    int used;
} Memory;

/* Forwarding verdicts of attribute keys (`Redactor.forwarding`), remembered per callable:
 * agents repeat their keys. Direct-mapped; a key longer than VERDICT_KEY is asked each time. */
#define VERDICT_SLOTS 1024
#define VERDICT_KEY 64

typedef struct {
    uint8_t used, len;
    long verdict;
    char key[VERDICT_KEY];
} VerdictSlot;

/* Attribute keys the kernel reads, by class. */
enum { KEY_OTHER = 0, KEY_CONTENT = 1, KEY_CONTEXT = 2, KEY_FACT = 3 };
#define KEY_SLOTS 256

/* Flags of a key in the table. */
enum { KEY_PRIVATE = 1, KEY_MESSAGES_FALLBACK = 2 };

typedef struct {
    const char *key; /* owned by the key lists */
    size_t len;
    int cls, flags;
} KeySlot;

/* A lexicon's anchors, with the byte pairs that open one (a position whose pair opens
 * none is skipped). */
typedef struct {
    KeyList list;
    uint8_t pairs[65536 / 8];
    int short_anchor; /* an anchor of fewer than two bytes: every text may match */
} Anchors;

static uint8_t lower_ascii[256];

static int keylist_from(KeyList *l, PyObject *iterable);

static int anchors_from(Anchors *a, PyObject *iterable) {
    if (keylist_from(&a->list, iterable) < 0) return -1;
    for (size_t k = 0; k < a->list.n; k++) {
        if (a->list.lens[k] < 2) {
            a->short_anchor = 1;
            continue;
        }
        unsigned pair = (unsigned)(uint8_t)a->list.keys[k][0] << 8 | (uint8_t)a->list.keys[k][1];
        a->pairs[pair >> 3] |= (uint8_t)(1u << (pair & 7));
    }
    return 0;
}

typedef struct {
    PyObject_HEAD
    KeyList content_keys, content_prefixes, context_keys, identity_keys, message_fallback_keys;
    KeyList fact_keys; /* the facts' own keys: a producer that set one leaves its span to Python */
    KeyList operations, message_operations, model_operations, finish_reason_keys;
    KeyList tool_argument_keys, tool_result_keys, untrusted_markers, untrusted_part_types;
    KeyList named_part_types; /* `content.messages.NAMED_PART_TYPES`: any other is generic */
    KeyList final_answer_tools; /* a call of one in a model's output is its answer */
    KeyList message_events; /* span events holding content: their spans are left to Python */
    Anchors instruction_anchors, claim_anchors, ask_anchors;
    KeyList operation_key, confirmed_key, input_key, output_key, documents_key, arguments_key,
        result_key; /* one key each */
    char *execute_tool;
    KindSource sources[8];
    int n_sources;
    PyObject *instruction_names; /* tuple of str, lexicon order */
    PyObject *instruction_hits, *claim_hits, *ask_hits, *pii_find, *pii_clean; /* callables */
    PyObject *fact_names; /* tuple: tool args, session, confirmed, instructions, output, version */
    PyObject *redacted_key; /* str: the count of the attributes removed from a span */
    long facts_version;
    uint8_t card_map[256];
    char *triggers;          /* bytes that send a text to the scanner (`pii.TRIGGERS`) */
    char *openers;           /* opening brackets of an obfuscated word (`(at)`) */
    char *spelt_dot;         /* the word of an address spelt out (`dot`) */
    size_t spelt_dot_len;
    KeyList obfuscation_words;
    uint8_t encoded_map[256]; /* base64 / base64url characters */
    int encoded_min, encoded_hex_min;
    int card_min, card_max, exact_pii, skeleton_depth, skeleton_items;
    int decline_inputs; /* request patterns are set: spans with input messages go to Python */
    PyObject *declined_unread;   /* the answers of a span this kernel declines (Declined), */
    PyObject *declined_repeated; /* by reason: message events or past MAX_ATTRS attributes, */
    PyObject *declined_fallback; /* a content key twice, content read otherwise than here */
    PyObject *declined_whole;    /* a whole encoding declined: the redactor redacts the span */
    uint8_t payment_digit[16]; /* digits a card starts with (`pii` major industries) */
    long verdict_allowed, verdict_context, verdict_identifier, verdict_withheld;
    char *withheld_prefix, *withheld_suffix; /* a withheld string's mark around its fingerprint */
    size_t withheld_prefix_len, withheld_suffix_len;
    VerdictSlot *verdicts; /* VERDICT_SLOTS, the forwarding verdicts of keys asked */
    long verdicts_of;      /* the id of the forwarding callable they are of (0: none yet) */
    KeySlot key_table[KEY_SLOTS];
    FpSlot *fingerprints; /* FP_SLOTS, remembered fingerprints */
    Memory instructions[MEMORY_SLOTS]; /* by (tenant, trace) */
    Memory pii[MEMORY_SLOTS];          /* by (tenant, trace, attribute key) */
} Kernel;

static void keylist_free(KeyList *l) {
    for (size_t i = 0; i < l->n; i++) PyMem_Free(l->keys[i]);
    PyMem_Free(l->keys);
    PyMem_Free(l->lens);
    PyMem_Free(l->slots);
    memset(l, 0, sizeof *l);
}

static char *copy_str(PyObject *s, size_t *len) {
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (!u) return NULL;
    char *c = PyMem_Malloc((size_t)n + 1);
    if (!c) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(c, u, (size_t)n + 1);
    if (len) *len = (size_t)n;
    return c;
}

/* A key list from any iterable of str (sorted, so sets hand over in a fixed order). */
static int keylist_from(KeyList *l, PyObject *iterable) {
    PyObject *list = PySequence_List(iterable);
    if (!list) return -1;
    Py_ssize_t n = PyList_GET_SIZE(list);
    l->keys = PyMem_Calloc((size_t)n + 1, sizeof(char *));
    l->lens = PyMem_Calloc((size_t)n + 1, sizeof(size_t));
    if (!l->keys || !l->lens) {
        Py_DECREF(list);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyUnicode_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "kernel config: expected str keys");
            Py_DECREF(list);
            return -1;
        }
        l->keys[i] = copy_str(item, &l->lens[i]);
        if (!l->keys[i]) {
            Py_DECREF(list);
            return -1;
        }
        l->n++;
    }
    Py_DECREF(list);
    return 0;
}

static int in_list(const KeyList *l, const char *s, size_t n) {
    for (size_t i = 0; i < l->n; i++)
        if (l->lens[i] == n && memcmp(l->keys[i], s, n) == 0) return 1;
    return 0;
}

static int has_prefix(const KeyList *l, const char *s, size_t n) {
    for (size_t i = 0; i < l->n; i++)
        if (l->lens[i] <= n && memcmp(l->keys[i], s, l->lens[i]) == 0) return 1;
    return 0;
}

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

#define FNV_BASIS 14695981039346656037ULL

/* A key's slot in the key table: its length and first and last 8 bytes, mixed (every
 * attribute key of every span is looked up: a hash over all its bytes cost more). */
static size_t key_hash(const char *s, size_t n) {
    uint64_t head = 0, tail = 0;
    memcpy(&head, s, n < 8 ? n : 8);
    if (n > 8) memcpy(&tail, s + n - 8, 8);
    uint64_t h = (head * 0x9e3779b97f4a7c15ULL) ^ (tail * 0xc2b2ae3d27d4eb4fULL) ^ n;
    return (size_t)((h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ULL >> 56) % KEY_SLOTS;
}

/* The place of a key in the table, or -1. */
static int key_index(const KeySlot *table, const char *s, size_t n) {
    size_t slot = key_hash(s, n);
    for (; table[slot].key; slot = (slot + 1) % KEY_SLOTS)
        if (table[slot].len == n && memcmp(table[slot].key, s, n) == 0) return (int)slot;
    return -1;
}

/* Add the keys of `l` (once each) with class `cls` (a key already there keeps its
 * class) and `flags`. */
static int key_table_add(KeySlot *table, const KeyList *l, int cls, int flags) {
    for (size_t i = 0; i < l->n; i++) {
        int known = key_index(table, l->keys[i], l->lens[i]);
        if (known >= 0) {
            table[known].flags |= flags;
            continue;
        }
        size_t slot = key_hash(l->keys[i], l->lens[i]);
        for (size_t probe = 0; table[slot].key; probe++) {
            if (probe == KEY_SLOTS) {
                PyErr_SetString(PyExc_ValueError, "kernel config: too many keys");
                return -1;
            }
            slot = (slot + 1) % KEY_SLOTS;
        }
        table[slot] = (KeySlot){l->keys[i], l->lens[i], cls, flags};
    }
    return 0;
}

/* Note each key's place in the table in `l->slots`; every key must be there. */
static int key_slots(const KeySlot *table, KeyList *l) {
    l->slots = PyMem_Calloc(l->n ? l->n : 1, sizeof(int));
    if (!l->slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < l->n; i++) {
        l->slots[i] = key_index(table, l->keys[i], l->lens[i]);
        if (l->slots[i] < 0) {
            PyErr_Format(PyExc_ValueError, "kernel config: %s is not a content or context key",
                         l->keys[i]);
            return -1;
        }
    }
    return 0;
}

/* An attribute key's class as the redactor's verdict reads it: KEY_CONTENT (the table's, or
 * by a content prefix), else the table's KEY_CONTEXT or KEY_FACT, else KEY_OTHER; its place
 * in the table in `*slot` (-1: not there). */
static int key_class(const Kernel *k, const char *key, size_t n, int *slot) {
    *slot = key_index(k->key_table, key, n);
    int cls = *slot >= 0 ? k->key_table[*slot].cls : KEY_OTHER;
    return cls != KEY_CONTENT && has_prefix(&k->content_prefixes, key, n) ? KEY_CONTENT : cls;
}

static int eq(const char *s, size_t n, const char *c) {
    return c && strlen(c) == n && memcmp(s, c, n) == 0;
}

/* ---- the pre-checks of the Python definitions */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* 1 when an opening bracket of `s` is followed (after spaces) by an obfuscation word
 * (`(at)`, `[ dot ]`: the scanner reads them as "@" and "."; the closing bracket is not
 * looked for: a superset of what the scanner replaces), or when the word of an address
 * spelt out stands between whitespace (` dot `). */
static int has_obfuscation(const Kernel *k, const char *s, size_t n) {
    for (const char *o = k->openers; *o; o++) {
        for (const char *at = memchr(s, *o, n); at; at = memchr(at + 1, *o, (size_t)(s + n - at - 1))) {
            size_t j = (size_t)(at - s) + 1;
            while (j < n && (s[j] == ' ' || s[j] == '\t')) j++;
            for (size_t w = 0; w < k->obfuscation_words.n; w++) {
                size_t len = k->obfuscation_words.lens[w], m = 0;
                while (m < len && j + m < n &&
                       lower_ascii[(unsigned char)s[j + m]] == (uint8_t)k->obfuscation_words.keys[w][m])
                    m++;
                if (m == len) return 1;
            }
            if (at + 1 >= s + n) break;
        }
    }
    /* an address spelt out: whitespace, the word, whitespace (`jane at example dot com`),
     * looked for at the word's first letter in either case */
    size_t len = k->spelt_dot_len;
    if (len == 0 || n < len + 2) return 0;
    char first[2] = {k->spelt_dot[0], (char)(k->spelt_dot[0] - 'a' + 'A')};
    for (int c = 0; c < 2; c++) {
        for (const char *at = memchr(s + 1, first[c], n - 1); at;
             at = at + 1 < s + n ? memchr(at + 1, first[c], (size_t)(s + n - at - 1)) : NULL) {
            size_t i = (size_t)(at - s);
            if (i + len >= n || !is_space(s[i - 1]) || !is_space(s[i + len])) continue;
            size_t m = 1;
            while (m < len && lower_ascii[(unsigned char)s[i + m]] == (uint8_t)k->spelt_dot[m]) m++;
            if (m == len) return 1;
        }
    }
    return 0;
}

/* 0 when the Python scanner certainly finds nothing in this text (`find`: ASCII without a
 * trigger byte or an obfuscated word, no run of card characters holding `card_min`
 * digits, no extra patterns): its own pre-checks, or supersets of them; 1 when the
 * scanner must read it. */
static int may_hold_pii(const Kernel *k, const char *s, size_t n) {
    if (!k->exact_pii) return 1;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, s + i, 8);
        if (word & 0x8080808080808080ULL) return 1; /* not ASCII */
    }
    for (; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return 1;
    for (const char *t = k->triggers; *t; t++)
        if (memchr(s, *t, n)) return 1;
    if (has_obfuscation(k, s, n)) return 1;
    /* A run of `card_min` card characters holds one of every `card_min`-th position:
     * look there, and around a card character only. */
    const uint8_t *card = k->card_map;
    size_t m = (size_t)k->card_min;
    for (size_t at = m - 1; at < n;) {
        if (!card[(unsigned char)s[at]]) {
            at += m;
            continue;
        }
        size_t start = at, stop = at;
        while (start > 0 && card[(unsigned char)s[start - 1]]) start--;
        while (stop + 1 < n && card[(unsigned char)s[stop + 1]]) stop++;
        if (stop - start + 1 >= m) {
            size_t digits = 0; /* a card needs as many digits in its run */
            for (size_t d = start; d <= stop; d++) digits += s[d] >= '0' && s[d] <= '9';
            if (digits >= m) return 1;
        }
        at = stop + 1 + m; /* the next run starts past stop + 1 */
    }
    return 0;
}

static int decoded_may_hold(const Kernel *k, const uint8_t *s, size_t n, int depth);

/* The value of a base64 (or base64url) character, or -1. */
static int base64_value(uint8_t c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

static int hex_value(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* 1 when a piece of a token decodes (as `pii._decodings` reads it: an even number of at
 * least `encoded_hex_min` hex digits, or, with an upper-case letter and a lower-case one or
 * a digit, base64 read from each of its first four characters) to text the scanner would
 * read further. */
static int piece_may_hold(const Kernel *k, const uint8_t *p, size_t n, int depth) {
    while (n > 0 && p[n - 1] == '=') n--;
    uint8_t out[768];
    int hex = n % 2 == 0 && n >= (size_t)k->encoded_hex_min, lower = 0, upper = 0;
    for (size_t i = 0; i < n; i++) {
        hex &= hex_value(p[i]) >= 0;
        lower |= (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9');
        upper |= p[i] >= 'A' && p[i] <= 'Z';
    }
    if (n > 4 * sizeof out / 3) return 1; /* longer than read here: the scanner decides */
    if (hex) {
        for (size_t i = 0; i < n / 2; i++)
            out[i] = (uint8_t)(hex_value(p[2 * i]) << 4 | hex_value(p[2 * i + 1]));
        return decoded_may_hold(k, out, n / 2, depth);
    }
    if (!(upper && lower)) return 0; /* no upper case, or nothing else: not read as base64 */
    for (size_t skip = 0; skip < 4 && skip < n; skip++) {
        size_t len = n - skip;
        if (len < (size_t)k->encoded_min || len % 4 == 1) continue;
        size_t m = 0;
        uint32_t bits = 0;
        int count = 0;
        for (size_t i = skip; i < n; i++) {
            bits = bits << 6 | (uint32_t)base64_value(p[i]);
            if (++count == 4) {
                out[m++] = (uint8_t)(bits >> 16);
                out[m++] = (uint8_t)(bits >> 8);
                out[m++] = (uint8_t)bits;
                bits = 0;
                count = 0;
            }
        }
        if (count == 2) out[m++] = (uint8_t)(bits >> 4);
        if (count == 3) {
            out[m++] = (uint8_t)(bits >> 10);
            out[m++] = (uint8_t)(bits >> 2);
        }
        if (decoded_may_hold(k, out, m, depth)) return 1;
    }
    return 0;
}

/* 1 when the run `p[0..n)` is a token (`pii._ENCODED`) one of whose pieces (the run and
 * its parts between `/ + - _`) may decode to text with personal data. */
static int token_may_hold(const Kernel *k, const uint8_t *p, size_t n, int depth) {
    if (piece_may_hold(k, p, n, depth)) return 1;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/' && p[i] != '+' && p[i] != '-' && p[i] != '_') continue;
        if (i > start && i - start < n && piece_may_hold(k, p + start, i - start, depth)) return 1;
        start = i + 1;
    }
    return 0;
}

/* 1 when `s` holds a run of base64 characters the scanner decodes when it scrubs
 * (`pii._ENCODED`: at least `encoded_min` of them, with an upper-case letter and a
 * lower-case one or a digit, or `encoded_hex_min` hexadecimal digits in a row; `lower`
 * below counts digits too) and which may decode to text with
 * personal data; the scanner reads two levels of tokens (`depth` 0 and 1). */
static int has_encoded_token(const Kernel *k, const char *s, size_t n, int depth) {
    size_t run = 0, hex = 0;
    int lower = 0, upper = 0, long_hex = 0;
    for (size_t i = 0; i <= n; i++) {
        unsigned char c = i < n ? (unsigned char)s[i] : 0;
        if (i < n && k->encoded_map[c]) {
            run++;
            lower |= (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
            upper |= c >= 'A' && c <= 'Z';
            hex = hex_value(c) >= 0 ? hex + 1 : 0;
            long_hex |= hex >= (size_t)k->encoded_hex_min;
            continue;
        }
        size_t end = i; /* padding belongs to the token */
        while (end < n && s[end] == '=' && end - i < 2) end++;
        if (run >= (size_t)k->encoded_min && ((lower && upper) || long_hex) &&
            (depth >= 2 || token_may_hold(k, (const uint8_t *)s + i - run, run + end - i, depth + 1)))
            return 1;
        run = hex = 0;
        lower = upper = long_hex = 0;
    }
    return 0;
}

/* 1 when text decoded from a token may hold personal data for the scanner (`_decodings`
 * keeps it): printable UTF-8 that is not ASCII, or holds a trigger, an obfuscated word, as
 * many digits as a card, or a token to read at the next depth. */
static int decoded_may_hold(const Kernel *k, const uint8_t *s, size_t n, int depth) {
    int ascii = 1;
    size_t digits = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        if (c < 0x80) {
            if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) return 0;
            digits += c >= '0' && c <= '9';
            i++;
            continue;
        }
        ascii = 0; /* a valid UTF-8 sequence, or the text is not read */
        size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
        if (len == 0 || i + len > n) return 0;
        for (size_t j = 1; j < len; j++)
            if ((s[i + j] & 0xc0) != 0x80) return 0;
        i += len;
    }
    if (!ascii || digits >= (size_t)k->card_min) return 1;
    for (const char *t = k->triggers; *t; t++)
        if (memchr(s, *t, n)) return 1;
    return has_obfuscation(k, (const char *)s, n) || has_encoded_token(k, (const char *)s, n, depth);
}

/* 0 when scrubbing certainly leaves this forwarded text as it is (`scrub`: `may_hold_pii`,
 * and no encoded token to decode); 1 when the scanner must read it. */
static int may_need_scrub(const Kernel *k, const char *s, size_t n) {
    return may_hold_pii(k, s, n) || has_encoded_token(k, s, n, 0);
}

/* 0 when the lower-cased ASCII text holds none of the anchors (so no entry matches);
 * 1 when the Python lexicon must read it (non-ASCII text always: its lower-casing is
 * Unicode's). */
static int may_match(const Anchors *a, const char *s, size_t n) {
    const KeyList *anchors = &a->list;
    if (anchors->n == 0 || a->short_anchor) return 1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return 1;
    /* one pass: at a position whose two lower-cased bytes open an anchor, compare it */
    for (size_t i = 0; i + 1 < n; i++) {
        unsigned pair = (unsigned)lower_ascii[(unsigned char)s[i]] << 8 |
                        lower_ascii[(unsigned char)s[i + 1]];
        if (!(a->pairs[pair >> 3] & (1u << (pair & 7)))) continue;
        for (size_t k = 0; k < anchors->n; k++) {
            size_t m = anchors->lens[k], q = 0;
            if (m > n - i) continue;
            const char *anchor = anchors->keys[k];
            while (q < m && lower_ascii[(unsigned char)s[i + q]] == (unsigned char)anchor[q]) q++;
            if (q == m) return 1;
        }
    }
    return 0;
}

/* Call a Python definition with one str argument made of `n` UTF-8 bytes. */
static PyObject *call_text(PyObject *fn, const char *s, size_t n) {
    PyObject *text = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "surrogatepass");
    if (!text) return NULL;
    PyObject *result = PyObject_CallOneArg(fn, text);
    Py_DECREF(text);
    return result;
}

/* Lexicon hits of a text as a mask over `names` (INSTRUCTIONS), or the Python list
 * itself in `*list` when asked (CLAIMS). -1 on error. */
static long lexicon_mask(Kernel *k, const char *s, size_t n) {
    if (n == 0 || !may_match(&k->instruction_anchors, s, n)) return 0;
    PyObject *hits = call_text(k->instruction_hits, s, n);
    if (!hits) return -1;
    long mask = 0;
    PyObject *it = PyObject_GetIter(hits);
    Py_DECREF(hits);
    if (!it) return -1;
    PyObject *name;
    while ((name = PyIter_Next(it))) {
        Py_ssize_t index = PySequence_Index(k->instruction_names, name);
        Py_DECREF(name);
        if (index < 0) {
            Py_DECREF(it);
            return -1;
        }
        mask |= 1L << index;
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : mask;
}

/* Append `clean(text)` (`PiiScanner.clean`) to `out`. */
static int put_clean(Kernel *k, const char *s, size_t n, Buf *out) {
    if (!may_need_scrub(k, s, n)) {
        buf_put(out, s, n);
        return 0;
    }
    PyObject *clean = call_text(k->pii_clean, s, n);
    if (!clean) return -1;
    Py_ssize_t m;
    const char *u = PyUnicode_AsUTF8AndSize(clean, &m);
    if (!u) {
        Py_DECREF(clean);
        return -1;
    }
    buf_put(out, u, (size_t)m);
    Py_DECREF(clean);
    return 0;
}

/* ---- the span's attributes, as read from the wire */

enum { V_NONE, V_STR, V_INT, V_OTHER };

typedef struct {
    const char *key;
    size_t key_len;
    int slot; /* its place in the key table, -1 for a content key known by its prefix */
    int type;
    const char *s; /* V_STR: the text; V_OTHER: the AnyValue's bytes */
    size_t n;
    long long i;
    int content; /* a content key (else a context key) */
} Attr;

#define MAX_ATTRS 64

typedef struct {
    const char *name;
    size_t name_len;
    const uint8_t *trace_id;
    size_t trace_id_len;
    Attr attrs[MAX_ATTRS];
    int n_attrs;
    int overflow; /* more relevant attributes than MAX_ATTRS */
    int has_events;
    int has_message_events; /* an event holding content (content/event_content.py) */
} SpanView;

/* The span's (last) attribute at table place `slot`, or NULL. */
static const Attr *attr_at(const SpanView *v, int slot) {
    for (int i = v->n_attrs - 1; i >= 0; i--)
        if (v->attrs[i].slot == slot) return &v->attrs[i];
    return NULL;
}

/* The span's attribute of a one-key list. */
static const Attr *attr(const SpanView *v, const KeyList *key) { return attr_at(v, key->slots[0]); }

/* ---- the protobuf wire format */

static inline const uint8_t *read_varint(const uint8_t *p, const uint8_t *end, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
        uint8_t b = *p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return p;
        }
    }
    return NULL;
}

/* Fields of one encoded message, read in order: `field_next` gives the next one's number,
 * wire type, and its bytes (length-delimited) or number. */
typedef struct {
    const uint8_t *p, *end;
    uint32_t field;
    int wire;
    const uint8_t *data;
    size_t len;
    uint64_t num;
} Fields;

static inline Fields fields_of(const void *data, size_t len) {
    Fields f = {0};
    f.p = data;
    f.end = f.p + len;
    return f;
}

/* 1 with the next field in `f`, 0 at the end, -1 at a malformed or group field. */
static inline int field_next(Fields *f) {
    if (f->p >= f->end) return 0;
    uint64_t tag;
    const uint8_t *p = read_varint(f->p, f->end, &tag), *end = f->end;
    if (!p) return -1;
    f->field = (uint32_t)(tag >> 3);
    f->wire = (int)(tag & 7);
    switch (f->wire) {
        case 0: p = read_varint(p, end, &f->num); break;
        case 1:
            if (end - p < 8) return -1;
            memcpy(&f->num, p, 8);
            p += 8;
            break;
        case 2: {
            uint64_t n;
            p = read_varint(p, end, &n);
            if (!p || n > (uint64_t)(end - p)) return -1;
            f->data = p;
            f->len = (size_t)n;
            p += n;
            break;
        }
        case 5: {
            if (end - p < 4) return -1;
            uint32_t v;
            memcpy(&v, p, 4);
            f->num = v;
            p += 4;
            break;
        }
        default: return -1;
    }
    if (!p) return -1;
    f->p = p;
    return 1;
}

/* Read an AnyValue into `a` (the last field of its oneof wins, as protobuf reads it). */
static int read_any_value(const uint8_t *p, const uint8_t *end, Attr *a) {
    a->type = V_NONE;
    Fields f = fields_of(p, (size_t)(end - p));
    int more;
    while ((more = field_next(&f)) > 0) {
        if (f.field == 1 && f.wire == 2) {
            a->type = V_STR;
            a->s = (const char *)f.data;
            a->n = f.len;
        } else if (f.field == 3 && f.wire == 0) {
            a->type = V_INT;
            a->i = (long long)f.num;
        } else if (f.field >= 2 && f.field <= 7) {
            a->type = V_OTHER;
        }
    }
    return more;
}

/* ---- facts */

/* A request's working memory, reused span after span (each buffer is emptied by the one
 * function that uses it, `fresh`). */
typedef struct {
    Json json;      /* one text is parsed at a time */
    Json arguments; /* and, inside it, a requested tool call's arguments text */
    Buf scratch, out, fact, op, text, calls, span, added;
} Pool;

static void pool_free(Pool *pool) {
    json_free(&pool->json);
    json_free(&pool->arguments);
    Buf *bufs[] = {&pool->scratch, &pool->out,  &pool->fact, &pool->op,
                   &pool->text,    &pool->calls, &pool->span, &pool->added};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) buf_free(bufs[i]);
}

static Buf *fresh(Buf *b) {
    b->len = 0;
    b->failed = 0;
    return b;
}

typedef struct {
    Kernel *k;
    Hmac *hmac;
    Buf *scratch; /* stack-like: a user truncates it back to where it found it */
    Json *json;
    Pool *pool;
    int fallback; /* the span is left to Python */
} Ctx;

/* "" and absent are None for the conventions' readers (`_first`, `_text`). */
static int text_of(const Attr *a, const char **s, size_t *n, Ctx *c) {
    if (!a || a->type == V_NONE) return 0;
    if (a->type == V_STR) {
        *s = a->s;
        *n = a->n;
        return a->n > 0;
    }
    c->fallback = 1; /* a number or container where text is read: Python's str() / JSON */
    return 0;
}

static int first_text(const SpanView *v, const KeyList *keys, const char **s, size_t *n, Ctx *c) {
    for (size_t i = 0; i < keys->n; i++) {
        const Attr *a = attr_at(v, keys->slots[i]);
        if (text_of(a, s, n, c) || c->fallback) return !c->fallback;
    }
    return 0;
}

/* The operation (`conventions.content_view`'s `_operation`, then the span name's first word)
 * into `op`. -1 on a Python error; c->fallback when Python decides. */
static int operation_of(Ctx *c, const SpanView *v, Buf *op) {
    Kernel *k = c->k;
    const char *s;
    size_t n;
    if (text_of(attr(v, &k->operation_key), &s, &n, c)) {
        buf_put(op, s, n);
        return 0;
    }
    if (c->fallback) return 0;
    for (int i = 0; i < k->n_sources; i++) {
        KindSource *src = &k->sources[i];
        const Attr *a = attr(v, &src->key);
        if (!a || a->type == V_NONE || (a->type == V_STR && a->n == 0)) continue;
        if (a->type != V_STR) {
            c->fallback = 1;
            return 0;
        }
        PyObject *kind = PyUnicode_DecodeUTF8(a->s, (Py_ssize_t)a->n, "strict");
        if (!kind) return -1;
        if (src->upper) {
            PyObject *upper = PyObject_CallMethod(kind, "upper", NULL);
            Py_DECREF(kind);
            if (!upper) return -1;
            kind = upper;
        }
        PyObject *text = PyDict_GetItemWithError(src->table, kind);
        if (text) {
            Py_INCREF(text);
        } else if (PyErr_Occurred()) {
            Py_DECREF(kind);
            return -1;
        } else if (src->lowercase_unknown) {
            int unknown = PyUnicode_Compare(kind, src->unknown_value) == 0;
            text = unknown ? PyUnicode_FromString("") : PyObject_CallMethod(kind, "lower", NULL);
            if (!text) {
                Py_DECREF(kind);
                return -1;
            }
        }
        Py_DECREF(kind);
        if (!text) continue; /* "skip": the next source decides */
        Py_ssize_t m;
        const char *u = PyUnicode_AsUTF8AndSize(text, &m);
        if (u) buf_put(op, u, (size_t)m);
        Py_DECREF(text);
        if (!u) return -1;
        if (m) return 0;
        break; /* UNKNOWN: no operation named, the span name may name one */
    }
    const char *space = memchr(v->name, ' ', v->name_len);
    size_t first = space ? (size_t)(space - v->name) : v->name_len;
    if (in_list(&k->operations, v->name, first)) buf_put(op, v->name, first);
    return 0;
}

/* ---- messages (`content.messages`) */

static long parts_of(Json *j, long message) {
    long parts = member(j, message, "parts");
    return parts >= 0 && NODE(j, parts)->type == J_ARR ? parts : -1;
}

/* `message_text` of one message appended to `out` (texts joined by "\n"): its text
 * parts, tool responses, and the string content of a generic part (a type, or none, that
 * `named` does not hold). 0 when Python would make a repr. */
static int message_text(Json *j, long message, const KeyList *named, Buf *out) {
    int count = 0;
    long content = member(j, message, "content");
    if (content >= 0 && NODE(j, content)->type == J_STR) {
        buf_put(out, STR(j, NODE(j, content)), NODE(j, content)->n);
        count++;
    }
    long parts = parts_of(j, message);
    for (uint32_t p = 0; parts >= 0 && p < NODE(j, parts)->n; p++) {
        long part = KID(j, NODE(j, parts), p);
        if (NODE(j, part)->type != J_OBJ) continue;
        long type = member(j, part, "type"), text = -1;
        if (is_str(j, type, "text")) {
            text = member(j, part, "content");
        } else if (is_str(j, type, "tool_call_response")) {
            text = member(j, part, "response");
            if (!truthy(j, text)) text = member(j, part, "content");
        } else if (type >= 0 && NODE(j, type)->type == J_STR &&
                   in_list(named, STR(j, NODE(j, type)), NODE(j, type)->n)) {
            continue; /* a named part type that holds no text of the message */
        } else {
            text = member(j, part, "content"); /* a generic part: its string content */
            if (text < 0 || NODE(j, text)->type != J_STR) continue;
        }
        if (count++) buf_putc(out, '\n');
        if (truthy(j, text) && !put_py_str(j, text, out)) return 0;
    }
    return 1;
}

/* `leaf_text` of a JSON value appended to `out`. */
static int leaf_text(Json *j, long i, Buf *out, int *first) {
    JNode *node = NODE(j, i);
    if (node->type == J_ARR || node->type == J_OBJ) {
        int object = node->type == J_OBJ;
        for (uint32_t k = 0; k < node->n; k++) {
            if (!leaf_text(j, KID(j, NODE(j, i), object ? 2 * k + 1 : k), out, first)) return 0;
        }
        return 1;
    }
    if (node->type == J_NULL) return 1;
    if (!*first) buf_putc(out, '\n');
    *first = 0;
    return put_py_str(j, i, out);
}

static int leaf_text_of(Json *j, long i, Buf *out) {
    JNode *node = NODE(j, i);
    if (node->type == J_ARR || node->type == J_OBJ) {
        int first = 1;
        return leaf_text(j, i, out, &first);
    }
    return put_py_str(j, i, out);
}

/* `instructions_in_messages` over JSON messages text: -2 unsupported (fallback), -1 on a
 * Python error, -3 no untrusted part (None), else the mask of lexicon hits. */
#define NO_UNTRUSTED (-3)
#define UNSUPPORTED (-2)

static int is_untrusted_type(Kernel *k, Json *j, long type) {
    if (type < 0 || NODE(j, type)->type != J_STR) return 0;
    return in_list(&k->untrusted_part_types, STR(j, NODE(j, type)), NODE(j, type)->n);
}

static long untrusted_hits(Ctx *c, Json *j, long value, long *mask) {
    Buf text = {0};
    long found = 0;
    if (!leaf_text_of(j, value, &text)) found = UNSUPPORTED;
    else if (text.failed) found = -1;
    else {
        long m = lexicon_mask(c->k, text.data ? text.data : "", text.len);
        if (m < 0) found = -1;
        else *mask |= m;
    }
    buf_free(&text);
    return found;
}

static long instructions_in_messages(Ctx *c, const char *s, size_t n) {
    Kernel *k = c->k;
    int marked = 0;
    for (size_t m = 0; m < k->untrusted_markers.n && !marked; m++)
        marked = memmem(s, n, k->untrusted_markers.keys[m], k->untrusted_markers.lens[m]) != NULL;
    if (!marked) return NO_UNTRUSTED;
    Json *jj = c->json;
    long root = json_parse(jj, s, n);
    if (root < 0) {
        return UNSUPPORTED;
    }
    long mask = 0, texts = 0, status = 0;
    JNode *r = NODE(jj, root);
    uint32_t count = r->type == J_ARR ? r->n : r->type == J_OBJ ? 1 : 0;
    for (uint32_t m = 0; m < count && status >= 0; m++) {
        long message = r->type == J_ARR ? (long)KID(jj, NODE(jj, root), m) : root;
        if (NODE(jj, message)->type != J_OBJ) continue;
        long parts = parts_of(jj, message);
        if (is_str(jj, member(jj, message, "role"), "tool")) {
            long content = member(jj, message, "content");
            int has_parts = 0;
            if (!truthy(jj, content) && parts >= 0)
                for (uint32_t p = 0; p < NODE(jj, parts)->n; p++)
                    has_parts |= NODE(jj, KID(jj, NODE(jj, parts), p))->type == J_OBJ;
            if (!has_parts) {
                long value = truthy(jj, content) ? content : member(jj, message, "parts");
                texts++;
                if (truthy(jj, value)) status = untrusted_hits(c, jj, value, &mask);
                continue;
            }
            for (uint32_t p = 0; p < NODE(jj, parts)->n && status >= 0; p++) {
                long part = KID(jj, NODE(jj, parts), p);
                if (NODE(jj, part)->type != J_OBJ) continue;
                long value = member(jj, part, "content");
                if (!truthy(jj, value)) value = member(jj, part, "response");
                texts++;
                if (truthy(jj, value)) status = untrusted_hits(c, jj, value, &mask);
            }
            continue;
        }
        for (uint32_t p = 0; parts >= 0 && p < NODE(jj, parts)->n && status >= 0; p++) {
            long part = KID(jj, NODE(jj, parts), p);
            if (NODE(jj, part)->type != J_OBJ || !is_untrusted_type(k, jj, member(jj, part, "type")))
                continue;
            long value = member(jj, part, "content");
            if (!truthy(jj, value)) value = member(jj, part, "response");
            texts++;
            if (truthy(jj, value)) status = untrusted_hits(c, jj, value, &mask);
        }
    }
    if (status < 0) return status;
    return texts ? mask : NO_UNTRUSTED;
}

/* The memory slot of (tenant, trace, key) in `table`, and how `s` relates to what it
 * holds: 0 nothing known, 1 the same text, 2 the text extends it by more elements (`[A,B]`
 * -> `[A,B,C]`, as `messages._extends`); `*rest` then starts at the new elements. */
static Memory *recall(Memory *table, const char *tenant, size_t tenant_len, const SpanView *v,
                      const char *key, size_t key_len, const char *s, size_t n, int *relation,
                      size_t *rest) {
    uint64_t h = hash_bytes(tenant, tenant_len, FNV_BASIS);
    h = hash_bytes(v->trace_id, v->trace_id_len, h);
    h = hash_bytes(key, key_len, h);
    Memory *slot = &table[h % MEMORY_SLOTS];
    int same = slot->used && v->trace_id_len == 16 && slot->tenant_len == tenant_len &&
               slot->key_len == key_len && memcmp(slot->tenant, tenant, tenant_len) == 0 &&
               memcmp(slot->key, key, key_len) == 0 && memcmp(slot->trace_id, v->trace_id, 16) == 0;
    size_t m = slot->text_len;
    *relation = 0;
    if (!same) return slot;
    if (m == n && memcmp(slot->text, s, n) == 0) {
        *relation = 1;
    } else if (n > m && m > 0 && slot->text[m - 1] == ']' && s[m - 1] == ',' &&
               memcmp(s, slot->text, m - 1) == 0) {
        *relation = 2;
        *rest = m;
    }
    return slot;
}

/* Remember `s` and what it answered in `slot` (replacing what it held: another thread
 * may have changed it while Python ran, which only costs a re-read). */
static void remember(Memory *slot, const char *tenant, size_t tenant_len, const SpanView *v,
                     const char *key, size_t key_len, const char *s, size_t n, long result,
                     PyObject *counts) {
    if (n > MEMORY_MAX_TEXT || v->trace_id_len != 16) return;
    char *text = PyMem_Malloc(n ? n : 1), *name = PyMem_Malloc(tenant_len + 1);
    char *attribute = PyMem_Malloc(key_len + 1);
    if (!text || !name || !attribute) {
        PyMem_Free(text);
        PyMem_Free(name);
        PyMem_Free(attribute);
        return;
    }
    PyMem_Free(slot->text);
    PyMem_Free(slot->tenant);
    PyMem_Free(slot->key);
    Py_XDECREF(slot->counts);
    memcpy(text, s, n);
    memcpy(name, tenant, tenant_len);
    memcpy(attribute, key, key_len);
    Py_XINCREF(counts);
    *slot = (Memory){name, attribute, tenant_len, key_len, {0}, text, n, result, counts, 1};
    memcpy(slot->trace_id, v->trace_id, 16);
}

/* "[" + the elements of `s` from `rest` on: the new elements as an array of their own. */
static char *new_elements(const char *s, size_t n, size_t rest, size_t *len) {
    char *part = PyMem_Malloc(n - rest + 1);
    if (!part) {
        PyErr_NoMemory();
        return NULL;
    }
    part[0] = '[';
    memcpy(part + 1, s + rest, n - rest);
    *len = n - rest + 1;
    return part;
}

/* `instructions_in_messages` of a trace's input messages, read only in their new part
 * when they extend the trace's previous input (`messages.GrowingArrays`). */
static long input_instructions(Ctx *c, const char *tenant, size_t tenant_len,
                               const SpanView *v, const char *s, size_t n) {
    int relation;
    size_t rest = 0, len;
    Memory *slot = recall(c->k->instructions, tenant, tenant_len, v, "", 0, s, n, &relation, &rest);
    if (relation == 1) return slot->result;
    long prior = slot->result, result;
    if (relation == 2) {
        char *part = new_elements(s, n, rest, &len);
        if (!part) return -1;
        long later = instructions_in_messages(c, part, len);
        PyMem_Free(part);
        if (later == -1 || later == UNSUPPORTED) return later;
        if (prior == NO_UNTRUSTED && later == NO_UNTRUSTED) result = NO_UNTRUSTED;
        else result = (prior == NO_UNTRUSTED ? 0 : prior) | (later == NO_UNTRUSTED ? 0 : later);
    } else {
        result = instructions_in_messages(c, s, n);
        if (result == -1 || result == UNSUPPORTED) return result;
    }
    remember(slot, tenant, tenant_len, v, "", 0, s, n, result, NULL);
    return result;
}

/* The personal data the scanner finds in a content value (`find`), a new reference to
 * a dict {kind: count} ({} without calling Python when its pre-checks rule it out); a
 * growing message array is read in its new elements only. NULL on error. */
static PyObject *content_pii(Kernel *k, const char *tenant, size_t tenant_len,
                             const SpanView *v, const Attr *a) {
    int growing = a->n > 0 && a->s[0] == '[';
    int relation = 0;
    size_t rest = 0, len;
    Memory *slot = growing ? recall(k->pii, tenant, tenant_len, v, a->key, a->key_len, a->s,
                                    a->n, &relation, &rest)
                           : NULL;
    if (relation == 1) return Py_NewRef(slot->counts);
    PyObject *counts;
    if (relation == 2 && slot->counts) {
        PyObject *prior = Py_NewRef(slot->counts);
        PyObject *later;
        if (!may_hold_pii(k, a->s + rest, a->n - rest)) {
            later = PyDict_New();
        } else {
            char *part = new_elements(a->s, a->n, rest, &len);
            later = part ? call_text(k->pii_find, part, len) : NULL;
            PyMem_Free(part);
        }
        counts = later ? PyDict_Copy(prior) : NULL;
        if (counts) {
            PyObject *kind, *count;
            Py_ssize_t pos = 0;
            while (PyDict_Next(later, &pos, &kind, &count)) {
                PyObject *had = PyDict_GetItemWithError(counts, kind);
                PyObject *sum = had ? PyNumber_Add(had, count) : Py_NewRef(count);
                if (!sum || PyDict_SetItem(counts, kind, sum) < 0) {
                    Py_XDECREF(sum);
                    Py_CLEAR(counts);
                    break;
                }
                Py_DECREF(sum);
            }
        }
        Py_DECREF(prior);
        Py_XDECREF(later);
    } else if (!may_hold_pii(k, a->s, a->n)) {
        counts = PyDict_New();
    } else {
        counts = call_text(k->pii_find, a->s, a->n);
    }
    if (counts && !PyDict_Check(counts)) {
        Py_DECREF(counts);
        PyErr_SetString(PyExc_TypeError, "kernel: the scanner's find must return a dict");
        return NULL;
    }
    if (counts && growing)
        remember(slot, tenant, tenant_len, v, a->key, a->key_len, a->s, a->n, 0, counts);
    return counts;
}

/* `clean(text)` as a JSON string into `out`. */
static int put_clean_json(Ctx *c, const char *s, size_t n, Buf *out) {
    size_t start = c->scratch->len;
    int status = put_clean(c->k, s ? s : "", n, c->scratch);
    put_json_string(out, c->scratch->data + start, c->scratch->len - start);
    c->scratch->len = start;
    return status;
}

/* ---- argument facts (`facts_producer._arguments`) */

/* `predicates.call_arguments`: the arguments object, OpenLLMetry's wrappers unwrapped;
 * -1 when not an object. */
static long call_arguments(Json *j, long root) {
    if (root < 0 || NODE(j, root)->type != J_OBJ) return -1;
    /* OpenLLMetry's LangChain callback wrapper: the arguments are its inputs */
    long input_str = member(j, root, "input_str"), inputs = member(j, root, "inputs");
    if (input_str >= 0 && inputs >= 0) return NODE(j, inputs)->type == J_OBJ ? inputs : -1;
    /* a Python call's bound arguments: its keywords when nothing was passed by position */
    long args = member(j, root, "args"), kwargs = member(j, root, "kwargs");
    if (kwargs >= 0 && (args < 0 || !truthy(j, args)))
        return NODE(j, kwargs)->type == J_OBJ ? kwargs : -1;
    return root;
}

/* Fingerprint of a parsed value (a string is its own text). */
static int put_value_fingerprint(Ctx *c, Json *j, long i, Buf *out) {
    JNode *node = NODE(j, i);
    if (node->type == J_STR) {
        fingerprint(c->hmac, STR(j, node), node->n, out);
        return 0;
    }
    size_t start = c->scratch->len;
    put_canonical(j, i, c->scratch);
    if (c->scratch->failed) return -1;
    fingerprint(c->hmac, c->scratch->data + start, c->scratch->len - start, out);
    c->scratch->len = start;
    return 0;
}

/* Cleaned member names of an object (its first `limit`), sorted as `put_canonical` sorts
 * members, the last of equal names kept (a dict built from them keeps the last value).
 * The names are appended to `names`, which the members point into; returns the count of
 * distinct names, -1 on error. */
static long clean_names(Ctx *c, Json *j, long obj, uint32_t limit, Buf *names, Member **out) {
    JNode *o = NODE(j, obj);
    uint32_t n = o->n < limit ? o->n : limit;
    Member *members = PyMem_Malloc((n ? n : 1) * (sizeof(Member) + sizeof(size_t)));
    if (!members) {
        PyErr_NoMemory();
        return -1;
    }
    size_t *starts = (size_t *)(members + (n ? n : 1)); /* `names` may move while it grows */
    for (uint32_t m = 0; m < n; m++) {
        JNode *key = NODE(j, KID(j, NODE(j, obj), 2 * m));
        starts[m] = names->len;
        if (put_clean(c->k, STR(j, key), key->n, names) < 0) {
            PyMem_Free(members);
            return -1;
        }
        members[m] = (Member){NULL, (uint32_t)(names->len - starts[m]),
                              KID(j, NODE(j, obj), 2 * m + 1), m};
    }
    for (uint32_t m = 0; m < n; m++) members[m].key = names->data + starts[m];
    qsort(members, n, sizeof(Member), member_cmp);
    uint32_t kept = 0;
    for (uint32_t m = 0; m < n; m++) {
        int last_of_run = m + 1 == n || members[m].len != members[m + 1].len ||
                          memcmp(members[m].key, members[m + 1].key, members[m].len) != 0;
        if (last_of_run) members[kept++] = members[m];
    }
    *out = members;
    return kept;
}

/* `predicates.argument_skeleton` of a value as JSON text (sorted keys). */
static int put_skeleton(Ctx *c, Json *j, long i, int depth, Buf *out) {
    Kernel *k = c->k;
    JNode *node = NODE(j, i);
    switch (node->type) {
        case J_OBJ: {
            if (depth >= k->skeleton_depth) {
                buf_puts(out, "{\"truncated\":true,\"type\":\"object\"}");
                return 0;
            }
            Buf names = {0};
            Member *named = NULL;
            long n = clean_names(c, j, i, (uint32_t)k->skeleton_items, &names, &named);
            if (n < 0) {
                buf_free(&names);
                return -1;
            }
            buf_puts(out, "{\"keys\":{");
            int status = 0;
            for (long m = 0; m < n && status == 0; m++) {
                if (m) buf_putc(out, ',');
                put_json_string(out, named[m].key, named[m].len);
                buf_putc(out, ':');
                status = put_skeleton(c, j, named[m].value, depth + 1, out);
            }
            buf_putc(out, '}');
            if (NODE(j, i)->n > (uint32_t)k->skeleton_items) buf_puts(out, ",\"truncated\":true");
            buf_puts(out, ",\"type\":\"object\"}");
            PyMem_Free(named);
            buf_free(&names);
            return status;
        }
        case J_ARR: {
            uint32_t n = node->n;
            if (depth >= k->skeleton_depth) {
                buf_puts(out, "{\"length\":");
                buf_int64(out, n);
                buf_puts(out, ",\"truncated\":true,\"type\":\"array\"}");
                return 0;
            }
            buf_puts(out, "{\"items\":[");
            uint32_t shown = n < (uint32_t)k->skeleton_items ? n : (uint32_t)k->skeleton_items;
            for (uint32_t m = 0; m < shown; m++) {
                if (m) buf_putc(out, ',');
                if (put_skeleton(c, j, KID(j, NODE(j, i), m), depth + 1, out) < 0) return -1;
            }
            buf_puts(out, "],\"length\":");
            buf_int64(out, n);
            if (n > (uint32_t)k->skeleton_items) buf_puts(out, ",\"truncated\":true");
            buf_puts(out, ",\"type\":\"array\"}");
            return 0;
        }
        case J_STR: {
            long long chars = 0;
            const char *s = STR(j, node);
            for (uint32_t m = 0; m < node->n; m++) chars += ((unsigned char)s[m] & 0xc0) != 0x80;
            buf_puts(out, "{\"length\":");
            buf_int64(out, chars);
            buf_puts(out, ",\"type\":\"string\"}");
            return 0;
        }
        case J_TRUE:
        case J_FALSE: buf_puts(out, "{\"type\":\"boolean\"}"); return 0;
        case J_INT: buf_puts(out, "{\"type\":\"integer\"}"); return 0;
        case J_FLOAT:
            buf_puts(out, node->v.d == floor(node->v.d) ? "{\"type\":\"integer\"}"
                                                        : "{\"type\":\"number\"}");
            return 0;
        default: buf_puts(out, "{\"type\":\"null\"}"); return 0;
    }
}

/* The `args` object ({clean(name): fingerprint}) and `fp` of arguments object `args`,
 * written as members (`"args":{...},"fp":"..."`) into `out`. */
static int put_argument_members(Ctx *c, Json *j, long args, Buf *out) {
    Buf names = {0};
    Member *named = NULL;
    long n = clean_names(c, j, args, UINT32_MAX, &names, &named);
    if (n < 0) {
        buf_free(&names);
        return -1;
    }
    buf_puts(out, "\"args\":{");
    for (long m = 0; m < n; m++) {
        if (m) buf_putc(out, ',');
        put_json_string(out, named[m].key, named[m].len);
        buf_puts(out, ":\"");
        put_value_fingerprint(c, j, named[m].value, out);
        buf_putc(out, '"');
    }
    PyMem_Free(named);
    buf_free(&names);
    buf_puts(out, "},\"fp\":\"");
    if (put_value_fingerprint(c, j, args, out) < 0) return -1;
    buf_putc(out, '"');
    return 0;
}

/* The tool.args fact of arguments text. */
static int tool_args_fact(Ctx *c, const char *s, size_t n, Buf *out) {
    Json *jj = c->json;
    long root = json_parse(jj, s, n);
    long args = call_arguments(jj, root);
    int status = 0;
    if (args < 0) {
        c->fallback = 1; /* not an object (or not JSON): the raw text's facts, in Python */
    } else {
        buf_putc(out, '{');
        status = put_argument_members(c, jj, args, out);
        buf_puts(out, ",\"skeleton\":");
        if (status == 0) status = put_skeleton(c, jj, args, 0, out);
        buf_putc(out, '}');
    }
    return status;
}

/* The confirmed fact of a `pathgrade.confirmed_action` text; 0 with nothing written when
 * it names no tool. */
static int confirmed_fact(Ctx *c, const char *s, size_t n, Buf *out, int *written) {
    Json *jj = c->json;
    long root = json_parse(jj, s, n);
    int status = 0;
    *written = 0;
    if (root < 0) {
        if (jj->unsupported) c->fallback = 1;
        return 0; /* not JSON: no confirmation */
    }
    long name = member(jj, root, "name");
    if (NODE(jj, root)->type == J_OBJ && name >= 0 && NODE(jj, name)->type == J_STR) {
        long arguments = member(jj, root, "arguments");
        long args = arguments >= 0 && NODE(jj, arguments)->type == J_OBJ
                        ? call_arguments(jj, arguments)
                        : -2; /* {} */
        buf_putc(out, '{');
        if (args == -1) {
            c->fallback = 1; /* the wrapper held no object: the fingerprint of its text */
        } else if (args == -2) {
            buf_puts(out, "\"args\":{},\"fp\":\"");
            fingerprint(c->hmac, "{}", 2, out);
            buf_putc(out, '"');
        } else {
            status = put_argument_members(c, jj, args, out);
        }
        buf_puts(out, ",\"name\":");
        if (status == 0) status = put_clean_json(c, STR(jj, NODE(jj, name)), NODE(jj, name)->n, out);
        buf_putc(out, '}');
        *written = 1;
    }
    return status;
}

/* ---- the output fact (`facts_producer._output_fact`) */

static int is_blank(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char b = (unsigned char)s[i];
        if (b < 0x80) {
            if (!(b == ' ' || (b >= 0x09 && b <= 0x0d) || (b >= 0x1c && b <= 0x1f))) return 0;
            i++;
            continue;
        }
        uint32_t cp;
        int len = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
        if (i + (size_t)len > n) return 0;
        cp = b & (len == 4 ? 0x07 : len == 3 ? 0x0f : 0x1f);
        for (int q = 1; q < len; q++) cp = cp << 6 | ((unsigned char)s[i + q] & 0x3f);
        if (!Py_UNICODE_ISSPACE(cp)) return 0;
        i += (size_t)len;
    }
    return 1;
}

/* A Python list of str (a lexicon's or finish reasons) or a dict of counts written as
 * JSON (sorted for dicts) to `out`. */
static int put_py_json(PyObject *value, Buf *out) {
    if (PyDict_Check(value)) {
        PyObject *keys = PyDict_Keys(value);
        if (!keys || PyList_Sort(keys) < 0) {
            Py_XDECREF(keys);
            return -1;
        }
        buf_putc(out, '{');
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
            PyObject *key = PyList_GET_ITEM(keys, i);
            Py_ssize_t n;
            const char *u = PyUnicode_AsUTF8AndSize(key, &n);
            PyObject *count = PyDict_GetItem(value, key);
            if (!u || !count) {
                Py_DECREF(keys);
                return -1;
            }
            long long number = PyLong_AsLongLong(count);
            if (number == -1 && PyErr_Occurred()) {
                Py_DECREF(keys);
                return -1;
            }
            if (i) buf_putc(out, ',');
            put_json_string(out, u, (size_t)n);
            buf_putc(out, ':');
            buf_int64(out, number);
        }
        Py_DECREF(keys);
        buf_putc(out, '}');
        return 0;
    }
    buf_putc(out, '[');
    Py_ssize_t n = PySequence_Length(value);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(value, i);
        if (!item) return -1;
        Py_ssize_t len;
        const char *u = PyUnicode_AsUTF8AndSize(item, &len);
        Py_DECREF(item);
        if (!u) return -1;
        if (i) buf_putc(out, ',');
        put_json_string(out, u, (size_t)len);
    }
    buf_putc(out, ']');
    return 0;
}

typedef struct {
    const char **s;
    size_t *n;
    size_t count;
} Reasons;

/* An identifier (a tool call's id) as a JSON string into `out`: as it is when scrubbing
 * leaves it unchanged, else its fingerprint (`facts_producer._identifier`). */
static int put_identifier_json(Ctx *c, const char *s, size_t n, Buf *out) {
    if (!s) s = "";
    if (may_need_scrub(c->k, s, n)) {
        PyObject *text = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "surrogatepass");
        PyObject *clean = text ? PyObject_CallOneArg(c->k->pii_clean, text) : NULL;
        int same = clean ? PyUnicode_Check(clean) && PyUnicode_Compare(clean, text) == 0 : -1;
        Py_XDECREF(clean);
        Py_XDECREF(text);
        if (same < 0 || PyErr_Occurred()) return -1;
        if (!same) {
            size_t start = c->scratch->len;
            fingerprint(c->hmac, s, n, c->scratch);
            put_json_string(out, c->scratch->data + start, c->scratch->len - start);
            c->scratch->len = start;
            return 0;
        }
    }
    put_json_string(out, s, n);
    return 0;
}

/* The `args` and `fp` members, and a comma, of a requested call's arguments (node
 * `arguments` of `j`, -1 when absent: an object, or JSON text of one;
 * `predicates.requested_arguments`) into `out`; nothing when they are not an object. Their
 * text is parsed apart (`j` stays whole); text that is not JSON is left to Python. */
static int put_call_arguments(Ctx *c, Json *j, long arguments, Buf *out) {
    if (arguments < 0) return 0;
    JNode *node = NODE(j, arguments);
    long args;
    if (node->type == J_STR) {
        if (node->n == 0) return 0; /* no text: no arguments */
        Json *inner = &c->pool->arguments;
        long root = json_parse(inner, STR(j, node), node->n);
        if (root < 0) {
            c->fallback = 1;
            return 0;
        }
        j = inner;
        args = call_arguments(inner, root);
    } else {
        args = call_arguments(j, arguments);
    }
    if (args < 0) return 0;
    if (put_argument_members(c, j, args, out) < 0) return -1;
    buf_putc(out, ',');
    return 0;
}

/* One requested tool call, `{"args", "fp" (of its arguments, when an object; node
 * `arguments` of `j`), "id": clean(id), "name": clean(name)}`, into `calls`. */
static int put_tool_call(Ctx *c, Buf *calls, int *n_calls, const Buf *id, const Buf *name,
                         Json *j, long arguments) {
    if (in_list(&c->k->final_answer_tools, name->data ? name->data : "", name->len)) {
        c->fallback = 1; /* a final answer asked for as a tool call: Python reads its text */
        return 0;
    }
    buf_puts(calls, (*n_calls)++ ? ",{" : "{");
    int status = put_call_arguments(c, j, arguments, calls);
    buf_puts(calls, "\"id\":");
    if (status == 0) status = put_identifier_json(c, id->data, id->len, calls);
    buf_puts(calls, ",\"name\":");
    if (status == 0) status = put_clean_json(c, name->data, name->len, calls);
    buf_putc(calls, '}');
    return status;
}

/* `"label":<answer>,` into `out` when the Python definition `fn` answers the text with
 * anything (a lexicon's hits, the scanner's counts). */
static int put_python_answer(Buf *out, const char *label, PyObject *fn, const char *s, size_t n) {
    PyObject *answer = call_text(fn, s, n);
    if (!answer) return -1;
    int status = 0;
    if (PyObject_IsTrue(answer)) {
        buf_puts(out, label);
        status = put_py_json(answer, out);
        buf_putc(out, ',');
    }
    Py_DECREF(answer);
    return status;
}

static int output_fact(Ctx *c, const char *s, size_t n, const Reasons *reasons, Buf *out) {
    Kernel *k = c->k;
    Json *jj = c->json;
    long root = json_parse(jj, s, n);
    if (root < 0) {
        c->fallback = 1; /* not JSON: Python reads it as no messages */
        return 0;
    }
    JNode *r = NODE(jj, root);
    uint32_t count = r->type == J_ARR ? r->n : r->type == J_OBJ ? 1 : 0;
    Buf *text = fresh(&c->pool->text), *calls = fresh(&c->pool->calls);
    int texts = 0, n_calls = 0, status = 0;
    for (uint32_t m = 0; m < count && status == 0 && !c->fallback; m++) {
        long message = r->type == J_ARR ? (long)KID(jj, NODE(jj, root), m) : root;
        if (NODE(jj, message)->type != J_OBJ) continue;
        /* tool calls: parts of type tool_call, then OpenAI's tool_calls */
        long parts = parts_of(jj, message);
        for (uint32_t p = 0; parts >= 0 && p < NODE(jj, parts)->n && status == 0; p++) {
            long part = KID(jj, NODE(jj, parts), p);
            if (NODE(jj, part)->type != J_OBJ || !is_str(jj, member(jj, part, "type"), "tool_call"))
                continue;
            long values[2] = {member(jj, part, "id"), member(jj, part, "name")};
            Buf pair[2] = {{0}, {0}};
            for (int q = 0; q < 2; q++)
                if (truthy(jj, values[q]) && !put_py_str(jj, values[q], &pair[q])) c->fallback = 1;
            status = put_tool_call(c, calls, &n_calls, &pair[0], &pair[1], jj,
                                   member(jj, part, "arguments"));
            buf_free(&pair[0]);
            buf_free(&pair[1]);
        }
        long openai = member(jj, message, "tool_calls");
        if (truthy(jj, openai) && NODE(jj, openai)->type != J_ARR) c->fallback = 1;
        for (uint32_t q = 0; !c->fallback && truthy(jj, openai) && q < NODE(jj, openai)->n && status == 0;
             q++) {
            long call = KID(jj, NODE(jj, openai), q);
            if (NODE(jj, call)->type != J_OBJ) continue;
            long function = member(jj, call, "function");
            if (truthy(jj, function) && NODE(jj, function)->type != J_OBJ) {
                c->fallback = 1; /* Python: no .get on it */
                break;
            }
            long id = member(jj, call, "id");
            long name = truthy(jj, function) ? member(jj, function, "name") : -1;
            long arguments = truthy(jj, function) ? member(jj, function, "arguments") : -1;
            Buf pair[2] = {{0}, {0}};
            if (truthy(jj, id) && !put_py_str(jj, id, &pair[0])) c->fallback = 1;
            if (name < 0) buf_puts(&pair[1], "None"); /* str(None) */
            else if (!put_py_str(jj, name, &pair[1])) c->fallback = 1;
            status = put_tool_call(c, calls, &n_calls, &pair[0], &pair[1], jj, arguments);
            buf_free(&pair[0]);
            buf_free(&pair[1]);
        }
        /* the assistant's text (a message without a role is the assistant's) */
        long role = member(jj, message, "role");
        if (role < 0 || is_str(jj, role, "assistant")) {
            size_t start = text->len;
            if (texts) buf_putc(text, '\n');
            if (!message_text(jj, message, &c->k->named_part_types, text)) c->fallback = 1;
            if (text->len == start + (texts ? 1 : 0)) text->len = start; /* empty: not joined */
            else texts++;
        }
    }
    if (c->fallback || status < 0 || text->failed || calls->failed) {
        return status < 0 ? -1 : 0;
    }
    const char *t = text->data ? text->data : "";
    /* {"asks", "claims", "finish_reasons", "pii", "text", "tool_calls"}: sorted */
    buf_putc(out, '{');
    if (text->len && may_match(&k->ask_anchors, t, text->len))
        status = put_python_answer(out, "\"asks\":", k->ask_hits, t, text->len);
    if (status == 0 && text->len && may_match(&k->claim_anchors, t, text->len))
        status = put_python_answer(out, "\"claims\":", k->claim_hits, t, text->len);
    if (reasons->count && status == 0) {
        buf_puts(out, "\"finish_reasons\":[");
        for (size_t q = 0; q < reasons->count && status == 0; q++) {
            if (q) buf_putc(out, ',');
            status = put_clean_json(c, reasons->s[q], reasons->n[q], out);
        }
        buf_puts(out, "],");
    }
    if (status == 0 && may_hold_pii(k, t, text->len))
        status = put_python_answer(out, "\"pii\":", k->pii_find, t, text->len);
    buf_puts(out, is_blank(t, text->len) ? "\"text\":false" : "\"text\":true");
    if (n_calls) {
        buf_puts(out, ",\"tool_calls\":[");
        buf_put(out, calls->data, calls->len);
        buf_putc(out, ']');
    }
    buf_putc(out, '}');
    return status;
}

/* ---- one span */

/* Encoded `Span.attributes` entries */
static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v > 0x7f) {
        v >>= 7;
        n++;
    }
    return n;
}

/* A `Span.attributes` entry's opening: its framing, the KeyValue's key and the opening
 * of its AnyValue, which holds `value_len` bytes. */
static void put_attribute_head(Buf *out, PyObject *name, size_t value_len) {
    Py_ssize_t n;
    const char *key = PyUnicode_AsUTF8AndSize(name, &n);
    size_t key_len = key ? (size_t)n : 0;
    size_t kv_len = 1 + varint_len(key_len) + key_len + 1 + varint_len(value_len) + value_len;
    buf_putc(out, 0x4a); /* Span.attributes, length-delimited */
    buf_varint(out, kv_len);
    buf_putc(out, 0x0a); /* KeyValue.key */
    buf_varint(out, key_len);
    buf_put(out, key, key_len);
    buf_putc(out, 0x12); /* KeyValue.value */
    buf_varint(out, value_len);
}

static void put_string_fact(Buf *out, PyObject *name, const char *s, size_t n) {
    put_attribute_head(out, name, 1 + varint_len(n) + n);
    buf_putc(out, 0x0a); /* AnyValue.string_value */
    buf_varint(out, n);
    buf_put(out, s, n);
}

static void put_int_fact(Buf *out, PyObject *name, long v) {
    put_attribute_head(out, name, 1 + varint_len((uint64_t)v));
    buf_putc(out, 0x18); /* AnyValue.int_value */
    buf_varint(out, (uint64_t)v);
}

/* The bytes one text takes as an `ArrayValue.values` entry (an AnyValue.string_value). */
static size_t text_item_len(size_t len) {
    size_t item = 1 + varint_len(len) + len;
    return 1 + varint_len(item) + item;
}

/* One text as an `ArrayValue.values` entry: an AnyValue holding it as string_value. */
static void put_text_item(Buf *out, const char *u, size_t len) {
    buf_putc(out, 0x0a); /* ArrayValue.values */
    buf_varint(out, 1 + varint_len(len) + len);
    buf_putc(out, 0x0a); /* AnyValue.string_value */
    buf_varint(out, len);
    buf_put(out, u, len);
}

static void put_names_fact(Buf *out, PyObject *name, PyObject *names, long mask) {
    size_t array_len = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            put_attribute_head(out, name, 1 + varint_len(array_len) + array_len);
            buf_putc(out, 0x2a); /* AnyValue.array_value */
            buf_varint(out, array_len);
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
            if (!(mask & (1L << i))) continue;
            Py_ssize_t n;
            const char *u = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(names, i), &n);
            size_t len = u ? (size_t)n : 0;
            if (pass) put_text_item(out, u, len);
            else array_len += text_item_len(len);
        }
    }
}

#define FACT(i) PyTuple_GET_ITEM(k->fact_names, i)

/* The facts of one span into `out`; 1 when it has any. c->fallback when Python decides. */
static int span_facts(Ctx *c, const SpanView *v, const char *tenant, size_t tenant_len, Buf *out) {
    Kernel *k = c->k;
    Buf *fact = fresh(&c->pool->fact);
    int any = 0, status = 0;
    Buf *opbuf = fresh(&c->pool->op);
    const char *op = "";
    size_t op_len = 0;
    int needs_fields = 0;
    for (int i = 0; i < v->n_attrs; i++)
        if (v->attrs[i].content &&
            (v->attrs[i].slot < 0 || !(k->key_table[v->attrs[i].slot].flags & KEY_PRIVATE)))
            needs_fields = 1;
    const char *args = NULL, *result = NULL, *inputs = NULL, *outputs = NULL;
    size_t args_n = 0, result_n = 0, inputs_n = 0, outputs_n = 0;
    Reasons reasons = {NULL, NULL, 0};
    const char *reason_s[64];
    size_t reason_n[64];
    if (needs_fields) {
        if (operation_of(c, v, opbuf) < 0) {
            return -1;
        }
        if (c->fallback) goto done;
        op = opbuf->data ? opbuf->data : "";
        op_len = opbuf->len;
        int tool = eq(op, op_len, k->execute_tool);
        text_of(attr(v, &k->arguments_key), &args, &args_n, c);
        text_of(attr(v, &k->result_key), &result, &result_n, c);
        if (tool && !args_n) first_text(v, &k->tool_argument_keys, &args, &args_n, c);
        if (tool && !result_n) first_text(v, &k->tool_result_keys, &result, &result_n, c);
        text_of(attr(v, &k->input_key), &inputs, &inputs_n, c);
        text_of(attr(v, &k->output_key), &outputs, &outputs_n, c);
        if (inputs_n && k->decline_inputs) c->fallback = 1;
        if (c->fallback) goto done;
        /* finish reasons: the first key present with a value other than "" */
        for (size_t r = 0; r < k->finish_reason_keys.n; r++) {
            const Attr *a = attr_at(v, k->finish_reason_keys.slots[r]);
            if (!a || a->type == V_NONE || (a->type == V_STR && a->n == 0)) continue;
            if (a->type == V_STR) {
                reason_s[0] = a->s;
                reason_n[0] = a->n;
                reasons.count = 1;
            } else if (a->type == V_OTHER) {
                /* an array of strings: AnyValue.array_value (5) of AnyValue.string_value */
                Fields value = fields_of(a->s, a->n);
                int is_array = 0;
                while (!c->fallback && field_next(&value) > 0) {
                    if (value.field != 5 || value.wire != 2) {
                        c->fallback = 1;
                        break;
                    }
                    is_array = 1;
                    reasons.count = 0;
                    Fields items = fields_of(value.data, value.len);
                    int more;
                    while (!c->fallback && (more = field_next(&items)) != 0) {
                        Attr item;
                        if (more < 0 || items.field != 1 || items.wire != 2 || reasons.count >= 64 ||
                            read_any_value(items.data, items.data + items.len, &item) < 0 ||
                            item.type != V_STR) {
                            c->fallback = 1;
                            break;
                        }
                        reason_s[reasons.count] = item.s;
                        reason_n[reasons.count++] = item.n;
                    }
                }
                if (!is_array) c->fallback = 1;
            } else {
                c->fallback = 1;
            }
            break;
        }
        reasons.s = reason_s;
        reasons.n = reason_n;
        if (c->fallback) goto done;
        if (in_list(&k->message_operations, op, op_len) && !(inputs_n && outputs_n)) {
            for (int i = 0; i < v->n_attrs; i++)
                if (v->attrs[i].slot >= 0 &&
                    k->key_table[v->attrs[i].slot].flags & KEY_MESSAGES_FALLBACK) {
                    c->fallback = 1; /* flattened or deprecated messages: Python rebuilds */
                    goto done;
                }
        }
        if (tool && args_n) {
            status = tool_args_fact(c, args, args_n, fact);
            if (status < 0 || c->fallback) goto done;
            put_string_fact(out, FACT(0), fact->data, fact->len);
            fact->len = 0;
            any = 1;
        }
    }
    /* the session identity */
    for (size_t i = 0; i < k->identity_keys.n; i++) {
        const Attr *a = attr_at(v, k->identity_keys.slots[i]);
        if (!a || a->type == V_NONE) continue;
        if (a->type == V_STR) {
            if (!a->n) continue;
            fingerprint(c->hmac, a->s, a->n, fact);
        } else if (a->type == V_INT) {
            if (!a->i) continue;
            Buf number = {0};
            buf_int64(&number, a->i);
            fingerprint(c->hmac, number.data, number.len, fact);
            buf_free(&number);
        } else {
            c->fallback = 1;
            goto done;
        }
        put_string_fact(out, FACT(1), fact->data, fact->len);
        fact->len = 0;
        any = 1;
        break;
    }
    /* a confirmed action */
    const Attr *confirmation = attr(v, &k->confirmed_key);
    if (confirmation && confirmation->type == V_STR && confirmation->n) {
        int written;
        status = confirmed_fact(c, confirmation->s, confirmation->n, fact, &written);
        if (status < 0 || c->fallback) goto done;
        if (written) {
            put_string_fact(out, FACT(2), fact->data, fact->len);
            any = 1;
        }
        fact->len = 0;
    } else if (confirmation && confirmation->type != V_NONE && confirmation->type != V_STR) {
        c->fallback = 1;
        goto done;
    }
    if (needs_fields) {
        /* instruction-like text in what the user did not type */
        long mask = NO_UNTRUSTED;
        if (eq(op, op_len, k->execute_tool) && result_n) {
            long m = lexicon_mask(k, result, result_n);
            if (m < 0) goto error;
            mask = m;
        }
        const Attr *documents = attr(v, &k->documents_key);
        if (documents && documents->type == V_STR && documents->n) {
            long m = lexicon_mask(k, documents->s, documents->n);
            if (m < 0) goto error;
            mask = (mask == NO_UNTRUSTED ? 0 : mask) | m;
        } else if (documents && documents->type != V_NONE && documents->type != V_STR) {
            c->fallback = 1;
            goto done;
        }
        if (in_list(&k->model_operations, op, op_len) && inputs_n) {
            long m = input_instructions(c, tenant, tenant_len, v, inputs, inputs_n);
            if (m == -1) goto error;
            if (m == UNSUPPORTED) {
                c->fallback = 1;
                goto done;
            }
            if (m != NO_UNTRUSTED) mask = (mask == NO_UNTRUSTED ? 0 : mask) | m;
        }
        if (mask != NO_UNTRUSTED) {
            put_names_fact(out, FACT(3), k->instruction_names, mask);
            any = 1;
        }
        if (outputs_n) {
            status = output_fact(c, outputs, outputs_n, &reasons, fact);
            if (status < 0 || c->fallback) goto done;
            put_string_fact(out, FACT(4), fact->data, fact->len);
            fact->len = 0;
            any = 1;
        }
    }
done:
    if (status < 0) return -1;
    if (out->failed) {
        PyErr_NoMemory();
        return -1;
    }
    return any;
error:
    return -1;
}

/* Read a span's name, trace id and relevant attributes. -1 malformed. */
static int read_span(Kernel *k, const uint8_t *p, const uint8_t *end, SpanView *v) {
    v->name = "";
    v->name_len = 0;
    v->trace_id = NULL;
    v->trace_id_len = 0;
    v->n_attrs = 0;
    v->overflow = 0;
    v->has_events = 0;
    v->has_message_events = 0;
    Fields f = fields_of(p, (size_t)(end - p));
    int more;
    while ((more = field_next(&f)) > 0) {
        if (f.wire != 2) continue;
        if (f.field == 11) {
            v->has_events = 1;
            Fields e = fields_of(f.data, f.len); /* Span.Event: its name is field 2 */
            while (field_next(&e) > 0)
                if (e.field == 2 && e.wire == 2 &&
                    in_list(&k->message_events, (const char *)e.data, e.len))
                    v->has_message_events = 1;
        } else if (f.field == 1) {
            v->trace_id = f.data;
            v->trace_id_len = f.len;
        } else if (f.field == 5) {
            v->name = (const char *)f.data;
            v->name_len = f.len;
        } else if (f.field == 9) {
            const char *key = "";
            size_t key_len = 0;
            const uint8_t *value = NULL;
            size_t value_len = 0;
            int has_value = 0, in_kv;
            Fields kv = fields_of(f.data, f.len);
            while ((in_kv = field_next(&kv)) > 0) {
                if (kv.field == 1 && kv.wire == 2) {
                    key = (const char *)kv.data;
                    key_len = kv.len;
                } else if (kv.field == 2 && kv.wire == 2) {
                    value = kv.data; /* a repeated message field merges: rare, left to Python */
                    value_len = kv.len;
                    if (has_value++) v->overflow = 1;
                }
            }
            if (in_kv < 0) return -1;
            int slot, cls = key_class(k, key, key_len, &slot);
            if (cls != KEY_CONTENT && cls != KEY_CONTEXT) continue;
            if (v->n_attrs == MAX_ATTRS) {
                v->overflow = 1;
                continue;
            }
            Attr *a = &v->attrs[v->n_attrs++];
            memset(a, 0, sizeof *a);
            a->key = key;
            a->key_len = key_len;
            a->slot = slot;
            a->content = cls == KEY_CONTENT;
            if (value && read_any_value(value, value + value_len, a) < 0) return -1;
            if (a->type == V_OTHER) {
                a->s = (const char *)value;
                a->n = value_len;
            }
        }
    }
    return more < 0 ? -1 : 0;
}

/* The pii.dropped record ({field: {kind: count}}, sorted) of `found` into `out`. */
static int put_dropped_fact(Kernel *k, PyObject *found, Buf *out) {
    PyObject *fields = PyDict_Keys(found);
    if (!fields || PyList_Sort(fields) < 0) {
        Py_XDECREF(fields);
        return -1;
    }
    Buf record = {0};
    int status = 0;
    buf_putc(&record, '{');
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(fields) && status == 0; i++) {
        PyObject *field = PyList_GET_ITEM(fields, i);
        Py_ssize_t n;
        const char *u = PyUnicode_AsUTF8AndSize(field, &n);
        if (!u) {
            status = -1;
            break;
        }
        if (i) buf_putc(&record, ',');
        put_json_string(&record, u, (size_t)n);
        buf_putc(&record, ':');
        status = put_py_json(PyDict_GetItem(found, field), &record);
    }
    buf_putc(&record, '}');
    Py_DECREF(fields);
    if (status == 0) put_string_fact(out, FACT(6), record.data, record.len);
    buf_free(&record);
    return status;
}

/* The answer for one span (see the module doc); NULL on error. `drops_all`: the
 * collector drops every content value (nothing is captured), so the pii.dropped record
 * of a span without events is written here too. */
static PyObject *span_answer(Kernel *k, const SpanView *v, Hmac *hmac, Pool *pool,
                             const char *tenant, size_t tenant_len, int drops_all) {
    if (v->overflow || v->has_message_events) return Py_NewRef(k->declined_unread);
    int has_content = 0;
    for (int i = 0; i < v->n_attrs; i++) {
        const Attr *a = &v->attrs[i];
        if (!a->content) continue;
        has_content = 1;
        for (int j = 0; j < i; j++) /* a repeated content key: each value is dropped */
            if (v->attrs[j].content && v->attrs[j].key_len == a->key_len &&
                memcmp(v->attrs[j].key, a->key, a->key_len) == 0)
                return Py_NewRef(k->declined_repeated);
    }
    if (!has_content) Py_RETURN_NONE; /* facts read content, identity and confirmations only */
    Buf *out = fresh(&pool->out);
    Ctx c = {k, hmac, fresh(&pool->scratch), &pool->json, pool, 0};
    int any = span_facts(&c, v, tenant, tenant_len, out);
    if (any < 0) {
        return NULL;
    }
    if (c.fallback) {
        return Py_NewRef(k->declined_fallback);
    }
    /* the personal data in each content value: {key: counts}, only keys with any; a value
     * that is not text maps to None (Python reads it when it drops it) */
    PyObject *found = NULL;
    int all_text = 1;
    for (int i = 0; i < v->n_attrs; i++) {
        const Attr *a = &v->attrs[i];
        if (!a->content || a->type == V_NONE || (a->type == V_STR && a->n == 0)) continue;
        all_text &= a->type == V_STR;
        PyObject *counts = a->type == V_STR ? content_pii(k, tenant, tenant_len, v, a)
                                            : Py_NewRef(Py_None);
        if (!counts) goto error;
        if (counts != Py_None && PyDict_GET_SIZE(counts) == 0) {
            Py_DECREF(counts);
            continue;
        }
        PyObject *key = PyUnicode_DecodeUTF8(a->key, (Py_ssize_t)a->key_len, "strict");
        if ((!found && !(found = PyDict_New())) || !key ||
            PyDict_SetItem(found, key, counts) < 0) {
            Py_XDECREF(key);
            Py_DECREF(counts);
            goto error;
        }
        Py_DECREF(key);
        Py_DECREF(counts);
    }
    int writes_dropped = found && drops_all && all_text && !v->has_events;
    if (writes_dropped) {
        if (put_dropped_fact(k, found, out) < 0) goto error;
        Py_CLEAR(found);
        any = 1;
    }
    if (!any && !found) {
        Py_RETURN_NONE;
    }
    if (any) put_int_fact(out, FACT(5), k->facts_version);
    if (out->failed) {
        PyErr_NoMemory();
        goto error;
    }
    PyObject *blob = any ? PyBytes_FromStringAndSize(out->data, (Py_ssize_t)out->len) : Py_NewRef(Py_None);
    if (!blob || !found) {
        Py_XDECREF(found);
        return blob;
    }
    PyObject *answer = PyTuple_Pack(2, blob, found);
    Py_DECREF(blob);
    Py_DECREF(found);
    return answer;
error:
    Py_XDECREF(found);
    return NULL;
}

/* ---- the whole redacted span: what the collector forwards of a span when every content
 * value is dropped (`drops_all`) and scrubbing changes nothing in it */

#define MAX_VALUE_DEPTH 32

/* 1 when scrubbing forwards the text as it is: by its pre-checks, else by asking the
 * scanner (`PiiScanner.clean` gives it back unchanged). 0 also when asking raised (the
 * redactor then meets the same text, and the error, itself). */
static int clean_text(const Kernel *k, const uint8_t *s, size_t n) {
    if (!may_need_scrub(k, (const char *)s, n)) return 1;
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, "surrogatepass");
    PyObject *clean = text ? PyObject_CallOneArg(k->pii_clean, text) : NULL;
    int same = clean && PyUnicode_Check(clean) && PyUnicode_Compare(clean, text) == 0;
    if (!clean) PyErr_Clear();
    Py_XDECREF(clean);
    Py_XDECREF(text);
    PyErr_Clear();
    return same;
}

static int clean_values(const Kernel *k, const uint8_t *p, size_t len, int depth, int keyed);

/* 1 when scrubbing leaves the AnyValue as it is (`Redactor._scrub_value`): its texts and
 * bytes (read as UTF-8) hold nothing, its numbers are outside the 13-19 digits where a
 * card number is looked for. Every member on the wire is checked, whichever one wins. */
static int clean_any_value(const Kernel *k, const uint8_t *p, size_t len, int depth) {
    if (depth > MAX_VALUE_DEPTH) return 0;
    Fields f = fields_of(p, len);
    int more;
    while ((more = field_next(&f)) > 0) {
        int clean = 1;
        switch (f.field) {
            case 1: /* string_value */
                clean = f.wire == 2 && clean_text(k, f.data, f.len);
                break;
            case 7: /* bytes_value: read as UTF-8 with replacement, left to Python unless plain */
                clean = f.wire == 2 && !may_need_scrub(k, (const char *)f.data, f.len);
                break;
            case 2: clean = f.wire == 0; break; /* bool_value */
            case 3: { /* int_value */
                uint64_t magnitude = (int64_t)f.num < 0 ? 0 - f.num : f.num;
                clean = f.wire == 0 && magnitude < 1000000000000ULL;
                break;
            }
            case 4: { /* double_value */
                double x;
                memcpy(&x, &f.num, sizeof x);
                clean = f.wire == 1 && !(fabs(x) >= 1e12 && fabs(x) < 1e19);
                break;
            }
            case 5: /* array_value */
            case 6: /* kvlist_value */
                clean = f.wire == 2 && clean_values(k, f.data, f.len, depth + 1, f.field == 6);
                break;
            default: break; /* an unknown field: kept unread, as protobuf keeps it */
        }
        if (!clean) return 0;
    }
    return more == 0;
}

/* 1 when scrubbing leaves a KeyValue as it is: its key and its value. */
static int clean_key_value(const Kernel *k, const uint8_t *p, size_t len, int depth) {
    Fields f = fields_of(p, len);
    int more;
    while ((more = field_next(&f)) > 0) {
        if (f.field != 1 && f.field != 2) continue;
        if (f.wire != 2) return 0;
        if (f.field == 1 ? !clean_text(k, f.data, f.len) : !clean_any_value(k, f.data, f.len, depth))
            return 0;
    }
    return more == 0;
}

/* 1 when scrubbing leaves every item as it is: the values of an ArrayValue (AnyValue) or
 * of a KeyValueList (`keyed`: KeyValue), field 1 both. */
static int clean_values(const Kernel *k, const uint8_t *p, size_t len, int depth, int keyed) {
    Fields f = fields_of(p, len);
    int more;
    while ((more = field_next(&f)) > 0) {
        if (f.field != 1) continue;
        if (f.wire != 2) return 0;
        if (!(keyed ? clean_key_value(k, f.data, f.len, depth) : clean_any_value(k, f.data, f.len, depth)))
            return 0;
    }
    return more == 0;
}

/* The class of a KeyValue's key (`key_class`). */
static int key_value_class(const Kernel *k, const uint8_t *kv, size_t len) {
    const char *key = "";
    size_t key_len = 0;
    Fields f = fields_of(kv, len);
    while (field_next(&f) > 0)
        if (f.field == 1 && f.wire == 2) {
            key = (const char *)f.data;
            key_len = f.len;
        }
    int slot;
    return key_class(k, key, key_len, &slot);
}

/* One request's walk: where it answers, and what it works with. */
typedef struct {
    Kernel *k;
    PyObject *answers;   /* list: each span's answer */
    PyObject *encodings; /* list (whole spans asked for): each span's whole encoding or
                            `declined_whole` */
    Hmac *hmac;
    Pool *pool;
    const char *tenant;
    size_t tenant_len;
    int drops_all;
    PyObject *forwarding; /* whole spans: `Redactor.forwarding`, the verdict of a key */
    long forwarding_id;   /* which forwarding it is (its verdicts are remembered under it; 0:
                           * asked every time): one id per redactor, never reused */
    long removed, with_facts, withheld; /* over the whole spans */
    PyObject *kept; /* a frozenset of content keys the redactor may keep (captured), or None */
} Walk;

/* The forwarding verdict of attribute `key` (remembered per forwarding callable); -1 with
 * an exception when asking raised. */
static long key_verdict(Walk *w, const char *key, size_t n) {
    Kernel *k = w->k;
    if (k->verdicts_of != w->forwarding_id) {
        memset(k->verdicts, 0, VERDICT_SLOTS * sizeof(VerdictSlot));
        k->verdicts_of = w->forwarding_id;
    }
    VerdictSlot *slot = NULL;
    if (n <= VERDICT_KEY && w->forwarding_id > 0) {
        uint64_t h = hash_bytes(key, n, FNV_BASIS);
        slot = &k->verdicts[(h ^ (h >> 32)) % VERDICT_SLOTS];
        if (slot->used && slot->len == n && memcmp(slot->key, key, n) == 0) return slot->verdict;
    }
    PyObject *answer = call_text(w->forwarding, key, n);
    if (!answer) return -1;
    long verdict = PyLong_AsLong(answer);
    Py_DECREF(answer);
    if (verdict == -1 && PyErr_Occurred()) return -1;
    if (slot) {
        slot->used = 1;
        slot->len = (uint8_t)n;
        slot->verdict = verdict;
        memcpy(slot->key, key, n);
    }
    return verdict;
}

/* A KeyValue's key and value, when it holds exactly one of each (wire type 2) and no other
 * field (so writing it anew gives the bytes the redactor serializes); 0 otherwise. */
static int key_and_value(const uint8_t *p, size_t len, const char **key, size_t *key_len,
                         const uint8_t **value, size_t *value_len) {
    int keys = 0, values = 0, more;
    Fields f = fields_of(p, len);
    while ((more = field_next(&f)) > 0) {
        if (f.wire != 2 || (f.field != 1 && f.field != 2)) return 0;
        if (f.field == 1) {
            *key = (const char *)f.data;
            *key_len = f.len;
            keys++;
        } else {
            *value = f.data;
            *value_len = f.len;
            values++;
        }
    }
    return more == 0 && keys == 1 && values <= 1;
}

/* How the redactor forwards a KeyValue of a span, resource or scope that is not content:
 * 1 as it is (a context key, or an allowed one, identifiers included, whose value scrubbing
 * leaves as it is), 0 not as it is (Python redacts it), -1 on error. `*verdict`: the key's
 * forwarding verdict (-2: a context key, a fact's, or a KeyValue of unusual shape). */
static int forwarded_as_is(Walk *w, const uint8_t *p, size_t len, long *verdict) {
    const Kernel *k = w->k;
    const char *key = "";
    size_t key_len = 0;
    const uint8_t *value = NULL;
    size_t value_len = 0;
    *verdict = -2;
    if (!key_and_value(p, len, &key, &key_len, &value, &value_len)) return 0;
    int slot, cls = key_class(k, key, key_len, &slot);
    if (cls == KEY_FACT || cls == KEY_CONTENT) return 0;
    if (cls == KEY_OTHER) {
        *verdict = key_verdict(w, key, key_len);
        if (*verdict == -1) return -1;
        if (*verdict != k->verdict_allowed && *verdict != k->verdict_context &&
            *verdict != k->verdict_identifier)
            return 0;
    }
    return !value || clean_any_value(k, value, value_len, 0);
}

/* 1 when the redactor forwards the ResourceSpans (depth 1) or ScopeSpans (depth 2) around
 * the spans as it is: the resource's attributes, or the scope's name, version and
 * attributes, and the schema URL; 0 not, -1 on error. */
static int clean_container(Walk *w, const uint8_t *p, size_t len, int depth) {
    const Kernel *k = w->k;
    Fields f = fields_of(p, len);
    int more;
    while ((more = field_next(&f)) > 0) {
        if (f.field == 2) continue; /* the scope spans or the spans */
        if (f.field != 1 && f.field != 3) continue;
        if (f.wire != 2) return 0;
        if (f.field == 3) {
            if (!clean_text(k, f.data, f.len)) return 0;
            continue;
        }
        Fields g = fields_of(f.data, f.len); /* the Resource or InstrumentationScope */
        int in;
        while ((in = field_next(&g)) > 0) {
            int list = depth == 1 ? g.field == 1 : g.field == 3; /* attributes */
            int text = depth == 2 && (g.field == 1 || g.field == 2); /* name, version */
            if (!list && !text) continue;
            if (g.wire != 2) return 0;
            long verdict;
            int clean = text ? clean_text(k, g.data, g.len) : forwarded_as_is(w, g.data, g.len, &verdict);
            if (clean <= 0) return clean;
        }
        if (in < 0) return 0;
    }
    return more == 0;
}

/* 1 when the Luhn check passes over `digits[0..n)` (the last digit not doubled). */
static int luhn(const uint8_t *digits, size_t n) {
    unsigned total = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = digits[n - 1 - i];
        total += i % 2 ? (2 * d) / 10 + (2 * d) % 10 : d;
    }
    return total % 10 == 0;
}

/* 1 when the hex of a trace or span id may hold a card: in a run of decimal digits,
 * `card_min` to `card_max` of them in a row that start with a payment industry's digit and
 * pass the Luhn check (a superset of `pii.id_holds_card`, which also asks the rest to be
 * padding); the redactor then decides, and maps the id if it is one. */
static int id_holds_card(const Kernel *k, const uint8_t *p, size_t n) {
    uint8_t nibbles[64];
    if (n > 32) return 1; /* not an id validation lets through: Python decides */
    for (size_t i = 0; i < n; i++) {
        nibbles[2 * i] = p[i] >> 4;
        nibbles[2 * i + 1] = p[i] & 15;
    }
    size_t count = 2 * n, min = (size_t)k->card_min, max = (size_t)k->card_max;
    for (size_t start = 0; start < count;) {
        size_t stop = start;
        while (stop < count && nibbles[stop] < 10) stop++;
        for (size_t begin = start; stop - start >= min && begin + min <= stop; begin++) {
            if (!k->payment_digit[nibbles[begin]]) continue;
            for (size_t len = min; len <= max && begin + len <= stop; len++)
                if (luhn(nibbles + begin, len)) return 1;
        }
        start = stop + 1;
    }
    return 0;
}

/* Write `Span.attributes` entry `key` = the mark of withheld string `text` into `out`. */
static void put_withheld(Walk *w, const char *key, size_t key_len, const char *text, size_t n,
                         Buf *out) {
    const Kernel *k = w->k;
    char mark[160];
    Buf fp = {0};
    fingerprint(w->hmac, text, n, &fp);
    size_t len = 0;
    if (!fp.failed && k->withheld_prefix_len + fp.len + k->withheld_suffix_len <= sizeof mark) {
        memcpy(mark, k->withheld_prefix, k->withheld_prefix_len);
        memcpy(mark + k->withheld_prefix_len, fp.data, fp.len);
        memcpy(mark + k->withheld_prefix_len + fp.len, k->withheld_suffix, k->withheld_suffix_len);
        len = k->withheld_prefix_len + fp.len + k->withheld_suffix_len;
    } else {
        out->failed = 1;
    }
    buf_free(&fp);
    size_t any_value = 1 + varint_len(len) + len;
    size_t key_value = 1 + varint_len(key_len) + key_len + 1 + varint_len(any_value) + any_value;
    buf_putc(out, 0x4a); /* Span.attributes: field 9, length-delimited */
    buf_varint(out, key_value);
    buf_putc(out, 0x0a); /* KeyValue.key */
    buf_varint(out, key_len);
    buf_put(out, key, key_len);
    buf_putc(out, 0x12); /* KeyValue.value */
    buf_varint(out, any_value);
    buf_putc(out, 0x0a); /* AnyValue.string_value */
    buf_varint(out, len);
    buf_put(out, mark, len);
}

/* A span attribute whose key is not allowed, written into `out` as the redactor forwards
 * it: a string as its mark (when the scanner finds nothing in it: the mark then names no
 * kind), a boolean or an empty string as it is. 1 written, 0 Python redacts it, -1 error. */
static int put_withheld_attribute(Walk *w, const uint8_t *p, size_t len, Buf *out) {
    const char *key = "";
    size_t key_len = 0;
    const uint8_t *value = NULL;
    size_t value_len = 0;
    if (!key_and_value(p, len, &key, &key_len, &value, &value_len)) return 0;
    Fields f = fields_of(value, value ? value_len : 0);
    int fields = 0, is_text = 0, more;
    const char *text = "";
    size_t n = 0;
    while ((more = field_next(&f)) > 0) {
        fields++;
        if (f.field == 1 && f.wire == 2) {
            is_text = 1;
            text = (const char *)f.data;
            n = f.len;
        } else if (f.field != 2 || f.wire != 0) {
            return 0; /* not a string or a boolean */
        }
    }
    if (more < 0 || fields > 1) return 0;
    if (!is_text || n == 0) {
        buf_putc(out, 0x4a);
        buf_varint(out, len);
        buf_put(out, p, len);
        return 1;
    }
    if (may_hold_pii(w->k, text, n)) {
        PyObject *counts = call_text(w->k->pii_find, text, n);
        if (!counts) return -1;
        int none = PyDict_Check(counts) && PyDict_GET_SIZE(counts) == 0;
        Py_DECREF(counts);
        if (!none) return 0; /* its mark names what it holds: Python writes it */
    }
    put_withheld(w, key, key_len, text, n, out);
    w->withheld++;
    return 1;
}

/* What redaction adds to a span: `pathgrade.redacted.keys` when it removed any, then the
 * facts' entries. */
static void put_added(const Kernel *k, long removed, const char *facts, size_t facts_len,
                      Buf *out) {
    if (removed) put_int_fact(out, k->redacted_key, removed);
    buf_put(out, facts, facts_len);
}

/* Insert `n` bytes at offset `at` of `b`. */
static void buf_insert(Buf *b, size_t at, const char *p, size_t n) {
    if (n == 0 || buf_reserve(b, n) < 0) return;
    memmove(b->data + at + n, b->data + at, b->len - at);
    memcpy(b->data + at, p, n);
    b->len += n;
}

/* Write the span into `out` as the collector forwards it on `drops_all`: its fields as
 * they are, less its content attributes, the string values of keys that are not allowed
 * as their marks, with what `put_added` adds (built in `added`) after its attributes,
 * before its first field past `Span.attributes`, where merging and serializing put them.
 * Returns how many attributes it removed; -1 when Python redacts the span (it has events,
 * links or a status message, a fact a producer set, a key or value it does not forward
 * as it is or as a plain mark, an id whose hex may hold a card, or a string or number
 * scrubbing would change); -2 on error. */
static long put_whole(Walk *w, const uint8_t *p, size_t len, const char *facts,
                      size_t facts_len, Buf *out, Buf *added) {
    const Kernel *k = w->k;
    Fields f = fields_of(p, len);
    long removed = 0;
    size_t at = SIZE_MAX; /* where the added attributes go, once a field past 9 comes */
    int more;
    for (;;) {
        const uint8_t *before = f.p;
        if ((more = field_next(&f)) <= 0) break;
        if (f.field > 9 && at == SIZE_MAX) at = out->len;
        int keep = 1;
        switch (f.field) {
            case 1: /* trace_id */
            case 2: /* span_id */
            case 4: /* parent_span_id */
                if (f.wire != 2 || id_holds_card(k, f.data, f.len)) return -1;
                break;
            case 3: /* trace_state */
            case 5: /* name */
                if (f.wire != 2 || !clean_text(k, f.data, f.len)) return -1;
                break;
            case 9: { /* attributes */
                if (f.wire != 2) return -1;
                int cls = key_value_class(k, f.data, f.len);
                if (cls == KEY_CONTENT) {
                    keep = 0;
                    removed++;
                    break;
                }
                long verdict;
                int as_is = forwarded_as_is(w, f.data, f.len, &verdict);
                if (as_is < 0) return -2;
                if (as_is) break;
                if (verdict != k->verdict_withheld) return -1;
                int written = put_withheld_attribute(w, f.data, f.len, out);
                if (written <= 0) return written < 0 ? -2 : -1;
                keep = 0;
                break;
            }
            case 11: /* events */
            case 13: /* links */
                return -1;
            case 15: { /* status: withheld or scrubbed by the redactor when it has a message */
                if (f.wire != 2) return -1;
                Fields g = fields_of(f.data, f.len);
                int in;
                while ((in = field_next(&g)) > 0)
                    if (g.field == 2 && (g.wire != 2 || g.len > 0)) return -1;
                if (in < 0) return -1;
                break;
            }
            default: break;
        }
        if (keep) buf_put(out, before, (size_t)(f.p - before));
    }
    if (more < 0) return -1;
    put_added(k, removed, facts, facts_len, added);
    if (added->failed) out->failed = 1;
    buf_insert(out, at == SIZE_MAX ? out->len : at, added->data, added->len);
    return removed;
}

/* ---- the request */



/* The whole encoding of a span whose `answer` (its facts) is decided, as bytes, or
 * `declined_whole`. */
static PyObject *whole_encoding(Walk *w, const uint8_t *p, size_t len, PyObject *answer) {
    if (answer != Py_None && !PyBytes_Check(answer)) return Py_NewRef(w->k->declined_whole);
    const char *facts = answer != Py_None ? PyBytes_AS_STRING(answer) : "";
    size_t facts_len = answer != Py_None ? (size_t)PyBytes_GET_SIZE(answer) : 0;
    Buf *out = fresh(&w->pool->span);
    long withheld = w->withheld;
    long removed = put_whole(w, p, len, facts, facts_len, out, fresh(&w->pool->added));
    if (removed == -2) return NULL;
    if (removed < 0) {
        w->withheld = withheld; /* the marks written before it declined are not forwarded */
        return Py_NewRef(w->k->declined_whole);
    }
    if (out->failed) return PyErr_NoMemory();
    w->removed += removed;
    w->with_facts += facts_len > 0;
    return PyBytes_FromStringAndSize(out->data, (Py_ssize_t)out->len);
}

/* 1 when the span has a content attribute whose key is in `kept` (the redactor may keep
 * its value), 0 when not, -1 on error. */
static int holds_kept(PyObject *kept, const SpanView *v) {
    for (int i = 0; i < v->n_attrs; i++) {
        const Attr *a = &v->attrs[i];
        if (!a->content) continue;
        PyObject *key = PyUnicode_DecodeUTF8(a->key, (Py_ssize_t)a->key_len, "strict");
        if (!key) { /* not text: no kept key, but left to the redactor all the same */
            PyErr_Clear();
            return 1;
        }
        int in = PySet_Contains(kept, key);
        Py_DECREF(key);
        if (in) return in;
    }
    return 0;
}

/* Answer one span into the walk's lists; -1 on error, 1 malformed. A span holding a kept
 * key is answered as when not every content value is dropped, and never written whole. */
static int answer_span(Walk *w, const uint8_t *p, size_t len, int whole) {
    SpanView view;
    if (read_span(w->k, p, p + len, &view) < 0) return 1;
    int kept = w->kept != Py_None ? holds_kept(w->kept, &view) : 0;
    if (kept < 0) return -1;
    PyObject *answer = span_answer(w->k, &view, w->hmac, w->pool, w->tenant, w->tenant_len,
                                   w->drops_all && !kept);
    if (!answer) return -1;
    int failed = PyList_Append(w->answers, answer);
    if (!failed && w->encodings) {
        PyObject *encoding =
            whole && !kept ? whole_encoding(w, p, len, answer)
                           : Py_NewRef(w->k->declined_whole);
        failed = !encoding || PyList_Append(w->encodings, encoding);
        Py_XDECREF(encoding);
    }
    Py_DECREF(answer);
    return failed ? -1 : 0;
}

/* depth 0: request (resource_spans = 1); 1: ResourceSpans (scope_spans = 2);
 * 2: ScopeSpans (spans = 2). `whole`: the spans here may be answered whole (nothing
 * around them changes when scrubbed). */
static int walk(Walk *w, const uint8_t *p, const uint8_t *end, int depth, int whole) {
    static const uint32_t child_field[3] = {1, 2, 2};
    if (whole && depth > 0) {
        whole = clean_container(w, p, (size_t)(end - p), depth);
        if (whole < 0) return -1;
    }
    Fields f = fields_of(p, (size_t)(end - p));
    int more;
    while ((more = field_next(&f)) > 0) {
        if (f.wire != 2 || f.field != child_field[depth]) continue;
        int status = depth < 2 ? walk(w, f.data, f.data + f.len, depth + 1, whole)
                               : answer_span(w, f.data, f.len, whole);
        if (status) return status;
    }
    return more < 0 ? 1 : 0; /* malformed: Python decides the whole request */
}

/* The tenant key's HMAC for one call, fingerprints prefixed "<key id>:" and remembered
 * in the kernel's table; -1 with ValueError when the key id is too long. */
static int request_hmac(Kernel *k, Hmac *hmac, Py_buffer *key, const char *key_id,
                        Py_ssize_t key_id_len) {
    hmac_init(hmac, key->buf, (size_t)key->len);
    if ((size_t)key_id_len + 1 >= sizeof hmac->prefix) {
        PyErr_SetString(PyExc_ValueError, "key id too long");
        return -1;
    }
    memcpy(hmac->prefix, key_id, (size_t)key_id_len);
    hmac->prefix[key_id_len] = ':';
    hmac->prefix_len = (size_t)key_id_len + 1;
    hmac->remembered = k->fingerprints;
    return 0;
}

static PyObject *Kernel_request(Kernel *k, PyObject *args) {
    Py_buffer body, key;
    const char *key_id, *tenant;
    Py_ssize_t key_id_len, tenant_len;
    int drops_all, whole = 0;
    PyObject *forwarding = Py_None, *kept = Py_None;
    long forwarding_id = 0;
    if (!PyArg_ParseTuple(args, "y*y*s#s#p|pOlO", &body, &key, &key_id, &key_id_len, &tenant,
                          &tenant_len, &drops_all, &whole, &forwarding, &forwarding_id, &kept))
        return NULL;
    const char *wrong = whole && !PyCallable_Check(forwarding)
                            ? "whole spans need the forwarding verdict of a key"
                        : kept != Py_None && !PyFrozenSet_Check(kept)
                            ? "kept: a frozenset of content keys, or None"
                            : NULL;
    if (wrong) {
        PyBuffer_Release(&body);
        PyBuffer_Release(&key);
        PyErr_SetString(PyExc_TypeError, wrong);
        return NULL;
    }
    Hmac hmac;
    if (request_hmac(k, &hmac, &key, key_id, key_id_len) < 0) {
        PyBuffer_Release(&body);
        PyBuffer_Release(&key);
        return NULL;
    }
    Pool pool;
    memset(&pool, 0, sizeof pool);
    whole = whole && drops_all;
    Walk w = {k, PyList_New(0), whole ? PyList_New(0) : NULL, &hmac, &pool, tenant,
              (size_t)tenant_len, drops_all, forwarding, forwarding_id, 0, 0, 0, kept};
    int status = w.answers && (w.encodings || !whole)
                     ? walk(&w, body.buf, (const uint8_t *)body.buf + body.len, 0, whole)
                     : -1;
    pool_free(&pool);
    PyBuffer_Release(&body);
    PyBuffer_Release(&key);
    if (status) {
        Py_XDECREF(w.answers);
        Py_XDECREF(w.encodings);
        if (status < 0) return NULL;
        Py_RETURN_NONE;
    }
    if (!whole) return w.answers;
    PyObject *result =
        Py_BuildValue("(NNlll)", w.answers, w.encodings, w.removed, w.with_facts, w.withheld);
    return result;
}

/* ---- log records: their raw content read straight from Python values */

/* An AnyValue holding an array of the list's strings, as `Span.attributes` carries it
 * (what the kernel reads of a finish-reasons list); -1 when an item is not UTF-8. */
static int put_text_array(PyObject *list, Buf *out) {
    size_t array_len = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            buf_putc(out, 0x2a); /* AnyValue.array_value */
            buf_varint(out, array_len);
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
            Py_ssize_t n;
            const char *u = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(list, i), &n);
            if (!u) return -1;
            if (pass) put_text_item(out, u, (size_t)n);
            else array_len += text_item_len((size_t)n);
        }
    }
    return 0;
}

/* A record's raw content (`collector.facts.record_content`: {key: value}) and trace id as
 * the view `read_span` makes of a span of those attributes: 0 read, 1 when a value is
 * neither text nor a list of texts (or not UTF-8: the record is left to Python), -1 on
 * error. A list's array is written into `arrays` (which must outlive the view). */
static int read_record(Kernel *k, PyObject *trace_id, PyObject *raw, Buf *arrays,
                       SpanView *v) {
    v->name = "";
    v->name_len = 0;
    v->n_attrs = 0;
    v->overflow = 0;
    v->has_events = 0;
    v->has_message_events = 0;
    char *data;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(trace_id, &data, &len) < 0) return -1;
    v->trace_id = (const uint8_t *)data;
    v->trace_id_len = (size_t)len;
    size_t array_at[MAX_ATTRS], array_len[MAX_ATTRS];
    int has_array[MAX_ATTRS];
    PyObject *name, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(raw, &pos, &name, &value)) {
        int texts = PyList_CheckExact(value);
        for (Py_ssize_t i = 0; texts && i < PyList_GET_SIZE(value); i++)
            texts = PyUnicode_CheckExact(PyList_GET_ITEM(value, i));
        if (!texts && !PyUnicode_CheckExact(value)) return 1;
        Py_ssize_t key_len;
        const char *key = PyUnicode_AsUTF8AndSize(name, &key_len);
        if (!key) {
            PyErr_Clear();
            return 1;
        }
        int slot, cls = key_class(k, key, (size_t)key_len, &slot);
        if (cls != KEY_CONTENT && cls != KEY_CONTEXT) continue;
        if (v->n_attrs == MAX_ATTRS) {
            v->overflow = 1;
            continue;
        }
        int index = v->n_attrs++;
        Attr *a = &v->attrs[index];
        memset(a, 0, sizeof *a);
        a->key = key;
        a->key_len = (size_t)key_len;
        a->slot = slot;
        a->content = cls == KEY_CONTENT;
        has_array[index] = texts;
        if (texts) {
            a->type = V_OTHER;
            array_at[index] = arrays->len;
            if (put_text_array(value, arrays) < 0) {
                PyErr_Clear();
                return 1;
            }
            array_len[index] = arrays->len - array_at[index];
            continue;
        }
        Py_ssize_t n;
        a->s = PyUnicode_AsUTF8AndSize(value, &n);
        if (!a->s) {
            PyErr_Clear();
            return 1;
        }
        a->type = V_STR;
        a->n = (size_t)n;
    }
    if (arrays->failed) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < v->n_attrs; i++) /* the arrays' bytes stay where they were written */
        if (has_array[i]) {
            v->attrs[i].s = arrays->data + array_at[i];
            v->attrs[i].n = array_len[i];
        }
    return 0;
}

/* Encoded `Span.attributes` entries as `LogRecord.attributes` entries (the same KeyValues
 * under the record's field number), in place. */
static void as_record_attributes(PyObject *blob) {
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(blob);
    const uint8_t *end = p + PyBytes_GET_SIZE(blob);
    while (p < end && *p == 0x4a) {
        uint64_t n;
        const uint8_t *data = read_varint(p + 1, end, &n);
        if (!data || n > (uint64_t)(end - data)) return;
        *p = 0x32; /* LogRecord.attributes, length-delimited */
        p = (uint8_t *)data + n;
    }
}

/* A record's answer with its encoded facts as `LogRecord.attributes` entries: bytes, or a
 * tuple whose first item is bytes (both made by `span_answer` for this call alone). */
static PyObject *record_answer(PyObject *answer) {
    if (PyBytes_CheckExact(answer)) {
        as_record_attributes(answer);
    } else if (PyTuple_CheckExact(answer) && PyBytes_CheckExact(PyTuple_GET_ITEM(answer, 0))) {
        as_record_attributes(PyTuple_GET_ITEM(answer, 0));
    }
    return answer;
}

static PyObject *Kernel_records(Kernel *k, PyObject *args) {
    PyObject *contents, *declined;
    Py_buffer key;
    const char *key_id, *tenant;
    Py_ssize_t key_id_len, tenant_len;
    if (!PyArg_ParseTuple(args, "O!y*s#s#O", &PyList_Type, &contents, &key, &key_id, &key_id_len,
                          &tenant, &tenant_len, &declined))
        return NULL;
    Hmac hmac;
    if (request_hmac(k, &hmac, &key, key_id, key_id_len) < 0) {
        PyBuffer_Release(&key);
        return NULL;
    }
    Pool pool;
    memset(&pool, 0, sizeof pool);
    Buf arrays = {0};
    SpanView view;
    PyObject *answers = PyList_New(PyList_GET_SIZE(contents));
    for (Py_ssize_t i = 0; answers && i < PyList_GET_SIZE(contents); i++) {
        PyObject *content = PyList_GET_ITEM(contents, i), *answer = NULL;
        arrays.len = 0;
        int status = 1;
        if (content != Py_None) {
            PyObject *trace_id, *raw;
            status = PyArg_ParseTuple(content, "SO!;a record's content: (trace id, raw)",
                                      &trace_id, &PyDict_Type, &raw)
                         ? read_record(k, trace_id, raw, &arrays, &view)
                         : -1;
        }
        if (status == 0) {
            answer = span_answer(k, &view, &hmac, &pool, tenant, (size_t)tenant_len, 1);
            if (answer) answer = record_answer(answer);
        } else if (status > 0) {
            answer = Py_NewRef(declined);
        }
        if (!answer) {
            Py_CLEAR(answers);
            break;
        }
        PyList_SET_ITEM(answers, i, answer);
    }
    buf_free(&arrays);
    pool_free(&pool);
    PyBuffer_Release(&key);
    return answers;
}

static PyObject *Kernel_fingerprint(Kernel *k, PyObject *args) {
    (void)k;
    Py_buffer key, text;
    const char *key_id;
    Py_ssize_t key_id_len;
    if (!PyArg_ParseTuple(args, "y*s#y*", &key, &key_id, &key_id_len, &text)) return NULL;
    Hmac hmac;
    hmac_init(&hmac, key.buf, (size_t)key.len);
    hmac.remembered = NULL;
    size_t n = (size_t)key_id_len < sizeof hmac.prefix - 1 ? (size_t)key_id_len : sizeof hmac.prefix - 2;
    memcpy(hmac.prefix, key_id, n);
    hmac.prefix[n] = ':';
    hmac.prefix_len = n + 1;
    Buf out = {0};
    fingerprint(&hmac, text.buf, (size_t)text.len, &out);
    PyBuffer_Release(&key);
    PyBuffer_Release(&text);
    PyObject *result = PyUnicode_DecodeUTF8(out.data, (Py_ssize_t)out.len, "strict");
    buf_free(&out);
    return result;
}

/* Span bytes with encoded attributes spliced in after its own (fields are written in
 * number order: after the last field numbered up to 9, `Span.attributes`), the bytes
 * `MergeFromString` of them and then `SerializeToString` give. */
static PyObject *splice_attributes(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer span, extra;
    if (!PyArg_ParseTuple(args, "y*y*", &span, &extra)) return NULL;
    const uint8_t *start = span.buf;
    Fields f = fields_of(span.buf, (size_t)span.len);
    size_t cut = (size_t)span.len;
    for (;;) {
        const uint8_t *before = f.p;
        if (field_next(&f) <= 0) break;
        if (f.field > 9) {
            cut = (size_t)(before - start);
            break;
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, span.len + extra.len);
    if (out) {
        char *o = PyBytes_AS_STRING(out);
        memcpy(o, start, cut);
        memcpy(o + cut, extra.buf, (size_t)extra.len);
        memcpy(o + cut + extra.len, start + cut, (size_t)span.len - cut);
    }
    PyBuffer_Release(&span);
    PyBuffer_Release(&extra);
    return out;
}

static PyMethodDef module_methods[] = {
    {"splice_attributes", splice_attributes, METH_VARARGS,
     "splice_attributes(span: bytes, attributes: bytes) -> bytes: the span's encoding with "
     "encoded `Span.attributes` entries after its own, as merging them would write it."},
    {NULL, NULL, 0, NULL}};

/* ------------------------------------------------------------------ construction */

/* The config's `name`; NULL with KeyError naming it when it is missing. */
static PyObject *config_item(PyObject *config, const char *name) {
    PyObject *value = PyDict_GetItemString(config, name);
    if (!value) PyErr_Format(PyExc_KeyError, "kernel config: %s missing", name);
    return value;
}

static int config_keys(PyObject *config, const char *name, KeyList *l) {
    PyObject *value = config_item(config, name);
    return value ? keylist_from(l, value) : -1;
}

static int config_anchors(PyObject *config, const char *name, Anchors *a) {
    PyObject *value = config_item(config, name);
    return value ? anchors_from(a, value) : -1;
}

/* A one-key list of the config's str `name`. */
static int config_key(PyObject *config, const char *name, KeyList *l) {
    PyObject *value = config_item(config, name);
    if (!value) return -1;
    PyObject *one = PyTuple_Pack(1, value);
    int status = one ? keylist_from(l, one) : -1;
    Py_XDECREF(one);
    return status;
}

static int config_str(PyObject *config, const char *name, char **out) {
    PyObject *value = config_item(config, name);
    if (!value) return -1;
    if (!PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, "kernel config: %s must be str", name);
        return -1;
    }
    *out = copy_str(value, NULL);
    return *out ? 0 : -1;
}

static int config_obj(PyObject *config, const char *name, PyObject **out) {
    PyObject *value = config_item(config, name);
    if (!value) return -1;
    Py_INCREF(value);
    *out = value;
    return 0;
}

static int config_int(PyObject *config, const char *name, long *out) {
    PyObject *value = config_item(config, name);
    if (!value) return -1;
    *out = PyLong_AsLong(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* The config's bytes `name` as a NUL-terminated string (no NUL inside). */
static int config_bytes_str(PyObject *config, const char *name, char **out) {
    PyObject *value = config_item(config, name);
    if (!value) return -1;
    if (!PyBytes_Check(value) || memchr(PyBytes_AS_STRING(value), 0, PyBytes_GET_SIZE(value))) {
        PyErr_Format(PyExc_TypeError, "kernel config: %s must be bytes without NUL", name);
        return -1;
    }
    *out = PyMem_Malloc((size_t)PyBytes_GET_SIZE(value) + 1);
    if (!*out) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(*out, PyBytes_AS_STRING(value), (size_t)PyBytes_GET_SIZE(value) + 1);
    return 0;
}

/* The config's 256-byte map `name` ("0" for a byte in the class) as flags. */
static int config_byte_map(PyObject *config, const char *name, uint8_t map[256]) {
    PyObject *value = config_item(config, name);
    if (!value) return -1;
    if (!PyBytes_Check(value) || PyBytes_GET_SIZE(value) != 256) {
        PyErr_Format(PyExc_ValueError, "kernel config: %s must be 256 bytes", name);
        return -1;
    }
    for (int i = 0; i < 256; i++) map[i] = PyBytes_AS_STRING(value)[i] == '0';
    return 0;
}

/* The forwarding verdicts whole spans are written for: (allowed, context, identifier,
 * withheld). */
static int config_verdicts(PyObject *config, Kernel *k) {
    PyObject *value = config_item(config, "forwarding_verdicts");
    if (!value) return -1;
    return PyArg_ParseTuple(value, "llll;kernel config: forwarding_verdicts", &k->verdict_allowed,
                            &k->verdict_context, &k->verdict_identifier, &k->verdict_withheld)
               ? 0
               : -1;
}

/* A withheld string's mark around its fingerprint: (prefix, suffix). */
static int config_withheld(PyObject *config, Kernel *k) {
    PyObject *value = config_item(config, "withheld_string");
    PyObject *prefix, *suffix;
    if (!value || !PyArg_ParseTuple(value, "UU;kernel config: withheld_string", &prefix, &suffix))
        return -1;
    k->withheld_prefix = copy_str(prefix, &k->withheld_prefix_len);
    k->withheld_suffix = copy_str(suffix, &k->withheld_suffix_len);
    return k->withheld_prefix && k->withheld_suffix ? 0 : -1;
}

static int Kernel_init(Kernel *k, PyObject *args, PyObject *kwds) {
    PyObject *config;
    static char *names[] = {"config", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!", names, &PyDict_Type, &config)) return -1;
    long card_min, card_max, exact, depth, items, encoded_min, encoded_hex_min, decline;
    if (config_keys(config, "content_keys", &k->content_keys) < 0 ||
        config_keys(config, "content_prefixes", &k->content_prefixes) < 0 ||
        config_keys(config, "context_keys", &k->context_keys) < 0 ||
        config_keys(config, "identity_keys", &k->identity_keys) < 0 ||
        config_keys(config, "message_fallback_keys", &k->message_fallback_keys) < 0 ||
        config_keys(config, "operations", &k->operations) < 0 ||
        config_keys(config, "message_operations", &k->message_operations) < 0 ||
        config_keys(config, "model_operations", &k->model_operations) < 0 ||
        config_keys(config, "finish_reason_keys", &k->finish_reason_keys) < 0 ||
        config_keys(config, "tool_argument_fallback_keys", &k->tool_argument_keys) < 0 ||
        config_keys(config, "tool_result_fallback_keys", &k->tool_result_keys) < 0 ||
        config_keys(config, "untrusted_markers", &k->untrusted_markers) < 0 ||
        config_keys(config, "untrusted_part_types", &k->untrusted_part_types) < 0 ||
        config_keys(config, "named_part_types", &k->named_part_types) < 0 ||
        config_keys(config, "final_answer_tools", &k->final_answer_tools) < 0 ||
        config_keys(config, "message_events", &k->message_events) < 0 ||
        config_anchors(config, "instruction_anchors", &k->instruction_anchors) < 0 ||
        config_anchors(config, "claim_anchors", &k->claim_anchors) < 0 ||
        config_anchors(config, "ask_anchors", &k->ask_anchors) < 0 ||
        config_key(config, "operation_key", &k->operation_key) < 0 ||
        config_key(config, "confirmed_key", &k->confirmed_key) < 0 ||
        config_key(config, "input_messages_key", &k->input_key) < 0 ||
        config_key(config, "output_messages_key", &k->output_key) < 0 ||
        config_key(config, "documents_key", &k->documents_key) < 0 ||
        config_str(config, "execute_tool", &k->execute_tool) < 0 ||
        config_key(config, "tool_arguments_key", &k->arguments_key) < 0 ||
        config_key(config, "tool_result_key", &k->result_key) < 0 ||
        config_obj(config, "instruction_names", &k->instruction_names) < 0 ||
        config_obj(config, "instruction_hits", &k->instruction_hits) < 0 ||
        config_obj(config, "claim_hits", &k->claim_hits) < 0 ||
        config_obj(config, "ask_hits", &k->ask_hits) < 0 ||
        config_obj(config, "pii_find", &k->pii_find) < 0 ||
        config_obj(config, "pii_clean", &k->pii_clean) < 0 ||
        config_obj(config, "fact_names", &k->fact_names) < 0 ||
        config_keys(config, "fact_keys", &k->fact_keys) < 0 ||
        config_obj(config, "redacted_key", &k->redacted_key) < 0 ||
        config_obj(config, "declined_unread", &k->declined_unread) < 0 ||
        config_obj(config, "declined_repeated", &k->declined_repeated) < 0 ||
        config_obj(config, "declined_fallback", &k->declined_fallback) < 0 ||
        config_obj(config, "declined_whole", &k->declined_whole) < 0 ||
        config_int(config, "facts_version", &k->facts_version) < 0 ||
        config_int(config, "card_min", &card_min) < 0 ||
        config_int(config, "exact_pii", &exact) < 0 ||
        config_int(config, "skeleton_max_depth", &depth) < 0 ||
        config_int(config, "skeleton_max_items", &items) < 0 ||
        config_int(config, "decline_inputs", &decline) < 0 ||
        config_int(config, "encoded_min", &encoded_min) < 0 ||
        config_int(config, "card_max", &card_max) < 0 ||
        config_int(config, "encoded_hex_min", &encoded_hex_min) < 0 ||
        config_keys(config, "obfuscation_words", &k->obfuscation_words) < 0 ||
        config_bytes_str(config, "pii_triggers", &k->triggers) < 0 ||
        config_bytes_str(config, "obfuscation_openers", &k->openers) < 0 ||
        config_str(config, "spelt_dot", &k->spelt_dot) < 0 ||
        config_byte_map(config, "encoded_map", k->encoded_map) < 0 ||
        config_verdicts(config, k) < 0 || config_withheld(config, k) < 0)
        return -1;
    PyObject *payment = config_item(config, "payment_digits");
    if (!payment || !PyBytes_Check(payment)) {
        if (payment) PyErr_SetString(PyExc_TypeError, "kernel config: payment_digits must be bytes");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyBytes_GET_SIZE(payment); i++) {
        char c = PyBytes_AS_STRING(payment)[i];
        if (c >= '0' && c <= '9') k->payment_digit[c - '0'] = 1;
    }
    k->card_max = (int)card_max;
    k->spelt_dot_len = strlen(k->spelt_dot);
    k->encoded_min = (int)encoded_min;
    k->encoded_hex_min = (int)encoded_hex_min;
    k->verdicts = PyMem_Calloc(VERDICT_SLOTS, sizeof(VerdictSlot));
    if (!k->verdicts) {
        PyErr_NoMemory();
        return -1;
    }
    if (!PyTuple_Check(k->instruction_names) || PyTuple_GET_SIZE(k->instruction_names) > MAX_LEXICON ||
        !PyTuple_Check(k->fact_names) || PyTuple_GET_SIZE(k->fact_names) != 7) {
        PyErr_SetString(PyExc_ValueError, "kernel config: instruction_names / fact_names");
        return -1;
    }
    k->fingerprints = PyMem_Calloc(FP_SLOTS, sizeof(FpSlot));
    if (!k->fingerprints) {
        PyErr_NoMemory();
        return -1;
    }
    KeyList *looked_up[] = {&k->operation_key, &k->confirmed_key, &k->input_key, &k->output_key,
                            &k->documents_key, &k->arguments_key, &k->result_key,
                            &k->identity_keys, &k->finish_reason_keys, &k->tool_argument_keys,
                            &k->tool_result_keys};
    if (key_table_add(k->key_table, &k->content_keys, KEY_CONTENT, 0) < 0 ||
        key_table_add(k->key_table, &k->context_keys, KEY_CONTEXT, 0) < 0 ||
        key_table_add(k->key_table, &k->identity_keys, KEY_CONTENT, KEY_PRIVATE) < 0 ||
        key_table_add(k->key_table, &k->confirmed_key, KEY_CONTENT, KEY_PRIVATE) < 0 ||
        key_table_add(k->key_table, &k->message_fallback_keys, KEY_CONTENT,
                      KEY_MESSAGES_FALLBACK) < 0 ||
        key_table_add(k->key_table, &k->fact_keys, KEY_FACT, 0) < 0)
        return -1;
    if (!PyUnicode_Check(k->redacted_key)) {
        PyErr_SetString(PyExc_ValueError, "kernel config: redacted_key must be a str");
        return -1;
    }
    for (size_t i = 0; i < sizeof looked_up / sizeof *looked_up; i++)
        if (key_slots(k->key_table, looked_up[i]) < 0) return -1;
    k->card_min = (int)card_min;
    k->exact_pii = (int)exact;
    k->skeleton_depth = (int)depth;
    k->skeleton_items = (int)items;
    k->decline_inputs = (int)decline;
    PyObject *map = PyDict_GetItemString(config, "card_run_map");
    if (!map || !PyBytes_Check(map) || PyBytes_GET_SIZE(map) != 256) {
        PyErr_SetString(PyExc_ValueError, "kernel config: card_run_map must be 256 bytes");
        return -1;
    }
    for (int i = 0; i < 256; i++) k->card_map[i] = PyBytes_AS_STRING(map)[i] != 'x';
    PyObject *sources = PyDict_GetItemString(config, "operation_sources");
    if (!sources || !PyTuple_Check(sources) || PyTuple_GET_SIZE(sources) > 8) {
        PyErr_SetString(PyExc_ValueError, "kernel config: operation_sources");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sources); i++) {
        PyObject *key, *table, *unknown_value;
        int lowercase, upper;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(sources, i), "UO!ppU", &key, &PyDict_Type,
                              &table, &lowercase, &upper, &unknown_value))
            return -1;
        KindSource *src = &k->sources[k->n_sources++];
        PyObject *one = PyTuple_Pack(1, key);
        if (!one || keylist_from(&src->key, one) < 0) {
            Py_XDECREF(one);
            return -1;
        }
        Py_DECREF(one);
        if (key_slots(k->key_table, &src->key) < 0) return -1;
        Py_INCREF(table);
        src->table = table;
        src->lowercase_unknown = lowercase;
        src->upper = upper;
        Py_INCREF(unknown_value);
        src->unknown_value = unknown_value;
    }
    return 0;
}

static void Kernel_dealloc(Kernel *k) {
    KeyList *lists[] = {&k->content_keys, &k->content_prefixes, &k->context_keys,
                        &k->identity_keys, &k->message_fallback_keys, &k->operations,
                        &k->message_operations, &k->model_operations, &k->finish_reason_keys,
                        &k->tool_argument_keys, &k->tool_result_keys, &k->untrusted_markers,
                        &k->untrusted_part_types, &k->named_part_types,
                        &k->instruction_anchors.list,
                        &k->claim_anchors.list, &k->ask_anchors.list, &k->fact_keys,
                        &k->obfuscation_words, &k->final_answer_tools, &k->message_events};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) keylist_free(lists[i]);
    KeyList *keys[] = {&k->operation_key, &k->confirmed_key, &k->input_key, &k->output_key,
                       &k->documents_key, &k->arguments_key, &k->result_key};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) keylist_free(keys[i]);
    PyMem_Free(k->execute_tool);
    for (int i = 0; i < k->n_sources; i++) {
        keylist_free(&k->sources[i].key);
        Py_XDECREF(k->sources[i].table);
        Py_XDECREF(k->sources[i].unknown_value);
    }
    PyMem_Free(k->fingerprints);
    PyMem_Free(k->verdicts);
    PyMem_Free(k->triggers);
    PyMem_Free(k->openers);
    PyMem_Free(k->spelt_dot);
    PyMem_Free(k->withheld_prefix);
    PyMem_Free(k->withheld_suffix);
    Py_XDECREF(k->instruction_names);
    Py_XDECREF(k->instruction_hits);
    Py_XDECREF(k->claim_hits);
    Py_XDECREF(k->ask_hits);
    Py_XDECREF(k->pii_find);
    Py_XDECREF(k->pii_clean);
    Py_XDECREF(k->fact_names);
    Py_XDECREF(k->redacted_key);
    Py_XDECREF(k->declined_unread);
    Py_XDECREF(k->declined_repeated);
    Py_XDECREF(k->declined_fallback);
    Py_XDECREF(k->declined_whole);
    for (int i = 0; i < MEMORY_SLOTS; i++) {
        Memory *tables[2] = {&k->instructions[i], &k->pii[i]};
        for (int t = 0; t < 2; t++) {
            PyMem_Free(tables[t]->text);
            PyMem_Free(tables[t]->tenant);
            PyMem_Free(tables[t]->key);
            Py_XDECREF(tables[t]->counts);
        }
    }
    Py_TYPE(k)->tp_free((PyObject *)k);
}

static PyMethodDef Kernel_methods[] = {
    {"request", (PyCFunction)Kernel_request, METH_VARARGS,
     "request(body, key, key_id, tenant, drops_all, whole=False, forwarding=None, "
     "forwarding_id=0, kept=None) -> list | tuple | None: each span's answer, in request "
     "order (see the module doc); with `whole` (and `drops_all`), (answers, encodings, "
     "removed, with_facts, withheld): each span's whole encoding as forwarded (each attribute "
     "key forwarded by its `forwarding(key)` verdict, remembered under `forwarding_id`), or "
     "`declined_whole`; None when the body is not read here. `kept`: a frozenset of content "
     "keys whose values may be kept (captured); a span holding one is answered as without "
     "`drops_all` and is declined whole."},
    {"records", (PyCFunction)Kernel_records, METH_VARARGS,
     "records(contents, key, key_id, tenant, declined) -> list: each log record's answer, "
     "as `request` answers with `drops_all` for a span of its raw content "
     "(`contents[i]`: (trace id, {key: value}), or None), its facts as encoded "
     "`LogRecord.attributes` entries; `declined` for a record of None or of a value that "
     "is neither text nor a list of texts."},
    {"fingerprint", (PyCFunction)Kernel_fingerprint, METH_VARARGS,
     "fingerprint(key, key_id, text: bytes) -> str: `<key id>:<digest>` of `text`."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pathgrade.collector._facts_kernel.Kernel",
    .tp_basicsize = sizeof(Kernel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The collector's facts over raw OTLP request bytes (see the module doc).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Kernel_init,
    .tp_dealloc = (destructor)Kernel_dealloc,
    .tp_methods = Kernel_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_facts_kernel",
                                    "The collector's facts over raw OTLP request bytes.", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__facts_kernel(void) {
    for (int c = 0; c < 256; c++) lower_ascii[c] = (uint8_t)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    if (PyType_Ready(&KernelType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&KernelType);
    if (PyModule_AddObject(m, "Kernel", (PyObject *)&KernelType) < 0) {
        Py_DECREF(&KernelType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
