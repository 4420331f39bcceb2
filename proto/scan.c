/*
 * scan.c — the bounded pre-pass over untrusted msgpack (proto_int.h).
 *
 * msgpack-c allocates an array of objects as soon as it reads an array or
 * map header, trusting the count; a five-byte frame could ask it for 100 GB.
 * This walk runs first and refuses anything outside the limits, so by the
 * time msgpack-c sees the bytes every count is at most the number of bytes
 * left (each value takes at least one byte).
 */
#include "proto/proto_int.h"

#include "proto/error.h"
#include "proto/msg.h"

static uint64_t be(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

int pr__scan(const uint8_t *p, size_t n)
{
    /* left[d]: values still to read in the container open at depth d;
     * depth 0 is the top level, which holds exactly one value. */
    uint64_t left[PR_MAX_DEPTH + 1];
    unsigned depth = 0;
    size_t i = 0, values = 0;

    if (p == NULL && n > 0)
        return PR_EINVAL;
    left[0] = 1;
    for (;;) {
        while (depth > 0 && left[depth] == 0)
            depth--;
        if (left[depth] == 0)
            break;
        left[depth]--;
        if (i >= n)
            return PR_ETRUNC;
        if (++values > PR_MAX_OBJECTS)
            return PR_EOBJECTS;

        uint8_t b = p[i++];
        unsigned hdr = 0;         /* bytes of length/count/scalar after b */
        int kind = 0;             /* 0 scalar, 1 str, 2 bin, 3 array, 4 map */
        uint64_t len = 0;

        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
            continue;
        } else if (b <= 0x8f) {
            kind = 4, len = b & 0x0f;
        } else if (b <= 0x9f) {
            kind = 3, len = b & 0x0f;
        } else if (b <= 0xbf) {
            kind = 1, len = b & 0x1f;
        } else {
            switch (b) {
            case 0xc1: return PR_EMSGPACK;
            case 0xc4: kind = 2, hdr = 1; break;
            case 0xc5: kind = 2, hdr = 2; break;
            case 0xc6: kind = 2, hdr = 4; break;
            case 0xc7: case 0xc8: case 0xc9:
            case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
                return PR_EEXT;
            case 0xca: hdr = 4; break;
            case 0xcb: hdr = 8; break;
            case 0xcc: case 0xd0: hdr = 1; break;
            case 0xcd: case 0xd1: hdr = 2; break;
            case 0xce: case 0xd2: hdr = 4; break;
            case 0xcf: case 0xd3: hdr = 8; break;
            case 0xd9: kind = 1, hdr = 1; break;
            case 0xda: kind = 1, hdr = 2; break;
            case 0xdb: kind = 1, hdr = 4; break;
            case 0xdc: kind = 3, hdr = 2; break;
            case 0xdd: kind = 3, hdr = 4; break;
            case 0xde: kind = 4, hdr = 2; break;
            default:   kind = 4, hdr = 4; break; /* 0xdf */
            }
            if (n - i < hdr)
                return PR_ETRUNC;
            if (kind == 0) {
                i += hdr;
                continue;
            }
            len = be(p + i, hdr);
            i += hdr;
        }

        switch (kind) {
        case 1:
        case 2:
            if (kind == 1 && len > PR_MAX_STR)
                return PR_ESTRLEN;
            if (kind == 2 && len > PR_MAX_BIN)
                return PR_EBINSIZE;
            if (n - i < len)
                return PR_ETRUNC;
            i += (size_t)len;
            break;
        default: {
            if (len > PR_MAX_COUNT)
                return PR_ECOUNT;
            uint64_t entries = kind == 4 ? 2 * len : len;
            if (entries > n - i)
                return PR_ETRUNC;
            if (depth + 1 > PR_MAX_DEPTH)
                return PR_EDEPTH;
            if (entries > 0)
                left[++depth] = entries;
            break;
        }
        }
    }
    return i == n ? 0 : PR_ETRAILING;
}

bool pr__utf8_ok(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;

    while (i < n) {
        unsigned c = s[i];
        if (c == 0)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        unsigned need, min;
        uint32_t cp;
        if ((c & 0xe0) == 0xc0)
            need = 1, min = 0x80, cp = c & 0x1f;
        else if ((c & 0xf0) == 0xe0)
            need = 2, min = 0x800, cp = c & 0x0f;
        else if ((c & 0xf8) == 0xf0)
            need = 3, min = 0x10000, cp = c & 0x07;
        else
            return false;
        if (n - i - 1 < need)
            return false;
        for (unsigned k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += need + 1;
    }
    return true;
}
