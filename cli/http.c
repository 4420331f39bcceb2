/*
 * http.c — see http.h.
 *
 * One socket, non-blocking so that every wait is a poll() with what is left
 * of the deadline; the answer is gathered in one buffer and parsed as it
 * grows, so a server that keeps the connection open after a complete answer
 * does not hold us up. Over TLS, OpenSSL reads and writes the same socket
 * and says which way it must wait (a TLS read may need to write, and the
 * other way round).
 */
#include "cli/http.h"

#include "base/url.h"

#include "runtime/runtime.h"

#include <ctype.h>
#include <errno.h>
#include <arpa/inet.h>
#include <limits.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_ANSWER (64u << 20)
#define MAX_HEAD (64u << 10)

/* ---- URLs ------------------------------------------------------------------------- */

int http_url_parse(const char *url, http_url *out, sf_error *e)
{
    memset(out, 0, sizeof *out);
    if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        return sf_fail(e, HTTP_EURL, "'%s' is not an http:// or https://HOST:PORT URL", url);
    sf_url u;
    if (sf_url_parse(url, &u, e) != 0) { /* sf_url_parse's words, the client's code */
        if (e != NULL)
            e->code = HTTP_EURL;
        return HTTP_EURL;
    }
    size_t plen = strlen(u.path);
    while (plen > 0 && u.path[plen - 1] == '/')
        plen--;
    if (plen >= sizeof out->prefix || memchr(u.path, '?', plen) != NULL || memchr(u.path, '#', plen) != NULL)
        return sf_fail(e, HTTP_EURL, "'%s': only a plain path may follow HOST:PORT", url);
    memcpy(out->prefix, u.path, plen);
    out->tls = u.tls;
    snprintf(out->host, sizeof out->host, "%s", u.host);
    snprintf(out->port, sizeof out->port, "%d", u.port);
    snprintf(out->origin, sizeof out->origin, "%s", u.origin);
    return 0;
}

int http_query_escape(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf), start = n;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
        if (n + (plain ? 1 : 3) >= cap) {
            buf[start] = '\0';
            return -1;
        }
        if (plain) {
            buf[n++] = (char)c;
        } else {
            snprintf(buf + n, 4, "%%%02X", c);
            n += 3;
        }
    }
    buf[n] = '\0';
    return 0;
}

/* ---- time ------------------------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = { .fd = fd, .events = events };
        int n = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
        if (n > 0)
            return 1;
        if (n == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* strerror with a lower-case first letter, as the rest of a message. */
static const char *reason_of(int errnum, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", strerror(errnum));
    if (buf[0] != '\0' && buf[1] != '\0' && !isupper((unsigned char)buf[1]))
        buf[0] = (char)tolower((unsigned char)buf[0]);
    return buf;
}

/* ---- connecting ------------------------------------------------------------------- */

/* Connects to one of the host's addresses, trying each in turn, within
 * timeout_ms for all of them. Returns the socket or an HTTP_E* code. */
static int dial(const http_url *url, int timeout_ms, sf_error *e)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *list = NULL;
    int rc = getaddrinfo(url->host, url->port, &hints, &list);
    if (rc != 0)
        return sf_fail(e, HTTP_ERESOLVE, "cannot reach %s: cannot resolve '%s': %s", url->origin, url->host,
            rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    int64_t deadline = now_ms() + timeout_ms;
    int last = ECONNREFUSED;
    bool timed_out = false;
    int fd = -1;
    for (struct addrinfo *a = list; a != NULL && fd < 0; a = a->ai_next) {
        int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (s < 0) {
            last = errno;
            continue;
        }
        if (connect(s, a->ai_addr, a->ai_addrlen) == 0) {
            fd = s;
            break;
        }
        if (errno != EINPROGRESS) {
            last = errno;
            close(s);
            continue;
        }
        int w = wait_fd(s, POLLOUT, deadline);
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (w == 1 && getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0) {
            fd = s;
            break;
        }
        if (w == 0)
            timed_out = true;
        else
            last = w < 0 ? errno : soerr;
        close(s);
    }
    freeaddrinfo(list);
    if (fd >= 0)
        return fd;
    char why[128];
    if (timed_out)
        return sf_fail(e, HTTP_ETIMEDOUT, "cannot reach %s: no connection within %d s", url->origin,
            (timeout_ms + 999) / 1000);
    return sf_fail(e, HTTP_ECONNECT, "cannot reach %s: %s", url->origin, reason_of(last, why, sizeof why));
}

/* ---- the connection: plain or TLS ------------------------------------------------- */

typedef struct conn {
    int fd;
    SSL_CTX *ctx;            /* NULL for plain TCP */
    SSL *ssl;
    char why[160];           /* what failed, for messages */
} conn;

enum { IO_WAIT = -1, IO_FAIL = -2 };

/* The reason of OpenSSL's last error, or dflt when it queued none. */
static const char *tls_reason(const char *dflt)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;
    return r != NULL ? r : dflt;
}

static void conn_close(conn *c)
{
    if (c->ssl != NULL)
        SSL_free(c->ssl);
    if (c->ctx != NULL)
        SSL_CTX_free(c->ctx);
    if (c->fd >= 0)
        close(c->fd);
    c->ssl = NULL;
    c->ctx = NULL;
    c->fd = -1;
}

/* Moves up to n bytes to (out) or from the server. Returns the count
 * (> 0), 0 at the end of the stream, IO_WAIT with *want set to the poll
 * event to wait for, or IO_FAIL with c->why set. */
static ssize_t conn_io(conn *c, bool out, void *buf, size_t n, short *want)
{
    if (c->ssl == NULL) {
        ssize_t k = out ? send(c->fd, buf, n, MSG_NOSIGNAL) : recv(c->fd, buf, n, 0);
        if (k >= 0)
            return k;
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
            *want = out ? POLLOUT : POLLIN;
            return IO_WAIT;
        }
        reason_of(errno, c->why, sizeof c->why);
        return IO_FAIL;
    }
    int len = n > INT_MAX ? INT_MAX : (int)n;
    ERR_clear_error();
    errno = 0;
    int k = out ? SSL_write(c->ssl, buf, len) : SSL_read(c->ssl, buf, len);
    if (k > 0)
        return k;
    switch (SSL_get_error(c->ssl, k)) {
    case SSL_ERROR_WANT_READ:
        *want = POLLIN;
        return IO_WAIT;
    case SSL_ERROR_WANT_WRITE:
        *want = POLLOUT;
        return IO_WAIT;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        if (errno != 0 && ERR_peek_last_error() == 0) {
            reason_of(errno, c->why, sizeof c->why);
            return IO_FAIL;
        }
        /* fall through */
    default:
        snprintf(c->why, sizeof c->why, "TLS: %s", tls_reason("connection failed"));
        return IO_FAIL;
    }
}

/* Whether host is an IPv4 or IPv6 address rather than a name. */
static bool is_address(const char *host)
{
    unsigned char a[16];
    return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

int http_ca_check(const char *path, sf_error *e)
{
    X509_STORE *store = X509_STORE_new();
    if (store == NULL)
        sf_oom(sizeof(void *));
    ERR_clear_error();
    int ok = X509_STORE_load_file(store, path);
    X509_STORE_free(store);
    if (ok == 1)
        return 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return sf_fail(e, HTTP_ETLS, "cannot read the CA file %s: %s", path, strerror(errno));
    fclose(f);
    return sf_fail(e, HTTP_ETLS, "the CA file %s holds no PEM certificate (%s)", path,
        tls_reason("nothing usable"));
}

/* Runs the TLS handshake on c->fd by deadline and checks the server's
 * certificate against ca_file (NULL: the system's CAs) and the URL's host.
 * Returns 0 or an HTTP_E* code with one line in e. */
static int tls_start(conn *c, const http_url *url, const char *ca_file, int64_t deadline, sf_error *e)
{
    c->ctx = SSL_CTX_new(TLS_client_method());
    if (c->ctx == NULL)
        return sf_fail(e, HTTP_ETLS, "cannot set up TLS: %s", tls_reason("out of memory"));
    SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
    /* A server that closes without close_notify has still said all a
     * Content-Length or chunked answer holds; a cut is seen there. */
    SSL_CTX_set_options(c->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
    if (ca_file != NULL ? SSL_CTX_load_verify_locations(c->ctx, ca_file, NULL) != 1
                        : SSL_CTX_set_default_verify_paths(c->ctx) != 1)
        return sf_fail(e, HTTP_ETLS, "cannot load the CA certificates%s%s: %s", ca_file ? " of " : "",
            ca_file ? ca_file : "", tls_reason("unknown error"));
    c->ssl = SSL_new(c->ctx);
    if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1)
        return sf_fail(e, HTTP_ETLS, "cannot set up TLS: %s", tls_reason("out of memory"));
    X509_VERIFY_PARAM *param = SSL_get0_param(c->ssl);
    if (is_address(url->host)) {
        X509_VERIFY_PARAM_set1_ip_asc(param, url->host);
    } else {
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        SSL_set1_host(c->ssl, url->host);
        SSL_set_tlsext_host_name(c->ssl, url->host);
    }
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int k = SSL_connect(c->ssl);
        if (k == 1)
            return 0;
        int se = SSL_get_error(c->ssl, k);
        if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE) {
            int w = wait_fd(c->fd, se == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
            if (w == 1)
                continue;
            if (w == 0)
                return sf_fail(e, HTTP_ETIMEDOUT, "cannot reach %s: no TLS handshake in time", url->origin);
            reason_of(errno, c->why, sizeof c->why);
            return sf_fail(e, HTTP_EIO, "cannot reach %s: %s", url->origin, c->why);
        }
        long v = SSL_get_verify_result(c->ssl);
        if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
            return sf_fail(e, HTTP_ETLS, "cannot reach %s: TLS: the server's certificate is not for %s",
                url->origin, url->host);
        if (v != X509_V_OK)
            return sf_fail(e, HTTP_ETLS, "cannot reach %s: TLS: the server's certificate is not trusted (%s); %s%s",
                url->origin, X509_verify_cert_error_string(v),
                ca_file ? "it is not signed by a CA in " : "give the CA that signed it with --ca FILE",
                ca_file ? ca_file : "");
        unsigned long q = ERR_peek_last_error();
        if (q == 0 && se == SSL_ERROR_SYSCALL && errno != 0)
            return sf_fail(e, HTTP_EIO, "cannot reach %s: %s", url->origin, reason_of(errno, c->why, sizeof c->why));
        if (q == 0)
            return sf_fail(e, HTTP_ETLS, "cannot reach %s: the server closed the connection in the TLS handshake",
                url->origin);
        bool plain = ERR_GET_LIB(q) == ERR_LIB_SSL && ERR_GET_REASON(q) == SSL_R_WRONG_VERSION_NUMBER;
        return sf_fail(e, HTTP_ETLS, "cannot reach %s: the TLS handshake failed: %s%s", url->origin,
            tls_reason("unknown error"), plain ? " (is it a plain http:// server?)" : "");
    }
}

/* ---- the answer ------------------------------------------------------------------- */

typedef struct reader {
    char *buf;
    size_t len, cap;
    size_t head_len;         /* bytes of status line and headers, 0 until seen */
    long long content_length; /* -1: none */
    bool chunked;
    bool no_body;            /* 204, 304 */
} reader;

static void append(reader *r, const char *p, size_t n)
{
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 16384;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *b = realloc(r->buf, cap);
        if (b == NULL)
            sf_oom(cap);
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, p, n);
    r->len += n;
    r->buf[r->len] = '\0';
}

/* The value of header name in the head (NUL-terminated lines ending in
 * \r\n), copied into out; false when absent. */
static bool header(const char *head, size_t head_len, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    const char *end = head + head_len;
    for (const char *line = strstr(head, "\r\n"); line != NULL && line + 2 < end;) {
        line += 2;
        const char *eol = strstr(line, "\r\n");
        if (eol == NULL || eol == line)
            break;
        if ((size_t)(eol - line) > nlen && line[nlen] == ':' && strncasecmp(line, name, nlen) == 0) {
            const char *v = line + nlen + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            size_t vlen = (size_t)(eol - v);
            while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
                vlen--;
            if (vlen >= cap)
                vlen = cap - 1;
            memcpy(out, v, vlen);
            out[vlen] = '\0';
            return true;
        }
        line = eol;
    }
    return false;
}

/* Whether a Transfer-Encoding value ends with "chunked" (the coding that
 * frames the body is always the last one). */
static bool ends_with_chunked(const char *v)
{
    size_t n = strlen(v);
    return n >= 7 && strcasecmp(v + n - 7, "chunked") == 0;
}

/* Parses the status line and headers once they are all in. Returns 1 when
 * parsed, 0 when more is needed, or an HTTP_E* code. Interim 1xx answers
 * are dropped. */
static int parse_head(reader *r, http_response *res)
{
    for (;;) {
        char *end = r->len >= 4 ? strstr(r->buf, "\r\n\r\n") : NULL;
        if (end == NULL)
            return r->len > MAX_HEAD ? HTTP_EPROTO : 0;
        size_t head_len = (size_t)(end - r->buf) + 4;
        int status = 0, consumed = 0;
        if (sscanf(r->buf, "HTTP/1.%*1[01] %3d%n", &status, &consumed) != 1 || consumed != 12 || status < 100 ||
            status > 599)
            return HTTP_EPROTO;
        if (status < 200) {
            memmove(r->buf, r->buf + head_len, r->len - head_len + 1);
            r->len -= head_len;
            continue;
        }
        res->status = status;
        const char *reason = r->buf + 12;
        while (*reason == ' ')
            reason++;
        size_t rlen = strcspn(reason, "\r\n");
        if (rlen >= sizeof res->reason)
            rlen = sizeof res->reason - 1;
        memcpy(res->reason, reason, rlen);
        res->reason[rlen] = '\0';
        /* The body starts after the head; header() must not look past it. */
        char saved = r->buf[head_len - 2];
        r->buf[head_len - 2] = '\0';
        char v[64];
        r->content_length = -1;
        if (header(r->buf, head_len - 2, "Transfer-Encoding", v, sizeof v))
            r->chunked = ends_with_chunked(v);
        if (!r->chunked && header(r->buf, head_len - 2, "Content-Length", v, sizeof v)) {
            char *e;
            errno = 0;
            long long n = strtoll(v, &e, 10);
            if (*e != '\0' || e == v || n < 0 || errno != 0)
                return HTTP_EPROTO;
            r->content_length = n;
        }
        header(r->buf, head_len - 2, "Retry-After", res->retry_after, sizeof res->retry_after);
        r->buf[head_len - 2] = saved;
        r->no_body = status == 204 || status == 304;
        r->head_len = head_len;
        return 1;
    }
}

/* Decodes a chunked body from p (n bytes) into out. Returns 1 when the
 * last chunk and the trailers are in, 0 when more is needed, HTTP_EPROTO
 * on malformed framing. */
static int dechunk(const char *p, size_t n, reader *out)
{
    size_t i = 0;
    out->len = 0;
    for (;;) {
        const char *eol = memchr(p + i, '\n', n - i);
        if (eol == NULL)
            return n - i > 1024 ? HTTP_EPROTO : 0;
        char *e;
        errno = 0;
        unsigned long long size = strtoull(p + i, &e, 16);
        if (e == p + i || errno != 0 || size > MAX_ANSWER || (*e != ';' && *e != '\r' && *e != '\n'))
            return HTTP_EPROTO;
        i = (size_t)(eol - p) + 1;
        if (size == 0) {
            /* Trailers, then an empty line. */
            for (;;) {
                const char *t = memchr(p + i, '\n', n - i);
                if (t == NULL)
                    return 0;
                bool empty = t == p + i || (t == p + i + 1 && p[i] == '\r');
                i = (size_t)(t - p) + 1;
                if (empty)
                    return 1;
            }
        }
        if (n - i < size + 2)
            return 0;
        append(out, p + i, (size_t)size);
        i += (size_t)size;
        if (p[i] == '\r')
            i++;
        if (p[i] != '\n')
            return HTTP_EPROTO;
        i++;
    }
}

/* Whether the answer in r is complete (1), needs more (0), or is
 * malformed (HTTP_EPROTO); at_eof says the server closed the connection.
 * On 1, res->body holds the body. */
static int complete(reader *r, http_response *res, bool at_eof)
{
    const char *body = r->buf + r->head_len;
    size_t have = r->len - r->head_len;
    if (r->no_body) {
        have = 0;
    } else if (r->chunked) {
        reader d = { 0 };
        int rc = dechunk(body, have, &d);
        if (rc != 1) {
            free(d.buf);
            return rc == 0 && at_eof ? HTTP_EIO : rc;
        }
        append(&d, "", 0);
        res->body = d.buf;
        res->body_len = d.len;
        return 1;
    } else if (r->content_length >= 0) {
        if (have < (size_t)r->content_length)
            return at_eof ? HTTP_EIO : 0;
        have = (size_t)r->content_length;
    } else if (!at_eof) {
        return 0;
    }
    res->body = malloc(have + 1);
    if (res->body == NULL)
        sf_oom(have + 1);
    memcpy(res->body, body, have);
    res->body[have] = '\0';
    res->body_len = have;
    return 1;
}

/* ---- one exchange ----------------------------------------------------------------- */

int http_send(const http_url *url, const http_request *req, http_response *res, sf_error *e)
{
    memset(res, 0, sizeof *res);
    int connect_ms = req->connect_timeout_ms > 0 ? req->connect_timeout_ms : 5000;
    int total_ms = req->timeout_ms > 0 ? req->timeout_ms : 30000;
    reader out = { 0 };
    conn c = { .fd = dial(url, connect_ms, e) };
    if (c.fd < 0)
        return c.fd;
    int64_t deadline = now_ms() + total_ms;
    /* OpenSSL writes to the socket without MSG_NOSIGNAL: a server gone
     * away must be an error here, not the end of the program. */
    struct sigaction ignore = { .sa_handler = SIG_IGN }, pipe_was;
    if (url->tls)
        sigaction(SIGPIPE, &ignore, &pipe_was);
    int rc = url->tls ? tls_start(&c, url, req->ca_file, deadline, e) : 0;
    if (rc != 0)
        goto done;

    /* The request: head, then body. */
    bool v6 = strchr(url->host, ':') != NULL;
    const char *head[] = { req->method, " ", url->prefix, req->target, " HTTP/1.1\r\nHost: ", v6 ? "[" : "",
        url->host, v6 ? "]" : "", ":", url->port,
        "\r\nUser-Agent: simfarm-cli\r\nAccept: application/json\r\nConnection: close\r\n" };
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        append(&out, head[i], strlen(head[i]));
    if (req->bearer != NULL && req->bearer[0] != '\0') {
        append(&out, "Authorization: Bearer ", 22);
        append(&out, req->bearer, strlen(req->bearer));
        append(&out, "\r\n", 2);
    }
    if (req->key != NULL) {
        append(&out, "Idempotency-Key: ", 17);
        append(&out, req->key, strlen(req->key));
        append(&out, "\r\n", 2);
    }
    if (req->body != NULL) {
        char line[96];
        snprintf(line, sizeof line, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", req->body_len);
        append(&out, line, strlen(line));
        append(&out, req->body, req->body_len);
    } else if (strcmp(req->method, "GET") != 0) {
        append(&out, "Content-Length: 0\r\n\r\n", 21);
    } else {
        append(&out, "\r\n", 2);
    }

    /* Every step tries first and waits only when told to: OpenSSL may
     * hold bytes that poll() cannot see. */
    bool send_failed = false;
    short want = 0;
    for (size_t sent = 0; sent < out.len;) {
        ssize_t n = conn_io(&c, true, out.buf + sent, out.len - sent, &want);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        int w = n == IO_WAIT ? wait_fd(c.fd, want, deadline) : -1;
        if (w == 0) {
            rc = sf_fail(e, HTTP_ETIMEDOUT, "%s did not answer within %d s", url->origin, total_ms / 1000);
            goto done;
        }
        if (w < 0) {
            /* The server may have answered already (a refusal of a body
             * too large) and closed: read what it said. */
            if (n == IO_WAIT)
                reason_of(errno, c.why, sizeof c.why);
            else if (n == 0)
                snprintf(c.why, sizeof c.why, "the connection was closed");
            send_failed = true;
            break;
        }
    }

    reader in = { 0 };
    for (;;) {
        char buf[16384];
        ssize_t n = conn_io(&c, false, buf, sizeof buf, &want);
        if (n == IO_WAIT) {
            int w = wait_fd(c.fd, want, deadline);
            if (w == 1)
                continue;
            if (w == 0) {
                rc = sf_fail(e, HTTP_ETIMEDOUT, "%s did not answer within %d s", url->origin, total_ms / 1000);
                break;
            }
            reason_of(errno, c.why, sizeof c.why);
            n = IO_FAIL;
        }
        bool eof = n <= 0;
        if (n > 0) {
            if (in.len + (size_t)n > MAX_ANSWER) {
                rc = sf_fail(e, HTTP_ETOOBIG, "%s sent an answer over %u MiB", url->origin, MAX_ANSWER >> 20);
                break;
            }
            append(&in, buf, (size_t)n);
        }
        int h = in.head_len ? 1 : in.len ? parse_head(&in, res) : 0;
        if (h < 0) {
            rc = sf_fail(e, HTTP_EPROTO, "%s sent something that is not an HTTP/1.x answer", url->origin);
            break;
        }
        if (h == 1) {
            int k = complete(&in, res, eof);
            if (k == 1)
                break;
            if (k < 0) {
                rc = sf_fail(e, k, "%s %s", url->origin,
                    k == HTTP_EIO ? "closed the connection in the middle of the answer" : "sent a malformed chunked body");
                break;
            }
        }
        if (eof) {
            /* A TLS server drops a plain request without a word. */
            const char *hint = in.len == 0 && !url->tls ? " (is it an https:// server?)" : "";
            if (in.len == 0 && (n == IO_FAIL || send_failed))
                rc = sf_fail(e, HTTP_EIO, "%s: %s%s", url->origin, c.why, hint);
            else if (in.len == 0)
                rc = sf_fail(e, HTTP_EIO, "%s closed the connection without an answer%s", url->origin, hint);
            else
                rc = sf_fail(e, HTTP_EIO, "%s closed the connection before a complete answer", url->origin);
            break;
        }
    }
    free(in.buf);
done:
    free(out.buf);
    conn_close(&c);
    if (url->tls)
        sigaction(SIGPIPE, &pipe_was, NULL);
    if (rc != 0)
        http_response_free(res);
    return rc;
}

void http_response_free(http_response *res)
{
    free(res->body);
    res->body = NULL;
    res->body_len = 0;
}
