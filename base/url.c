/*
 * url.c — the one URL parser (url.h).
 */
#include "base/url.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    bool tls;
} schemes[] = { { "https", true }, { "http", false }, { "wss", true }, { "ws", false } };

int sf_url_parse(const char *url, sf_url *out, sf_error *e)
{
    memset(out, 0, sizeof *out);
    const char *p = NULL;
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0] && p == NULL; i++) {
        size_t n = strlen(schemes[i].name);
        if (strncasecmp(url, schemes[i].name, n) == 0 && strncmp(url + n, "://", 3) == 0) {
            snprintf(out->scheme, sizeof out->scheme, "%s", schemes[i].name);
            out->tls = schemes[i].tls;
            p = url + n + 3;
        }
    }
    if (p == NULL)
        return sf_fail(e, SF_EURL, "'%s' is not a URL of the form SCHEME://HOST[:PORT][/PATH]", url);
    const char *authority = p, *host, *host_end;
    if (*p == '[') {
        host = p + 1;
        host_end = strchr(host, ']');
        if (host_end == NULL || memchr(host, '/', (size_t)(host_end - host)) != NULL)
            return sf_fail(e, SF_EURL, "'%s': an IPv6 address needs its closing ']'", url);
        p = host_end + 1;
    } else {
        host = p;
        p += strcspn(p, ":/?#@]");
        host_end = p;
    }
    if (strchr(authority, '@') != NULL && strchr(authority, '@') < authority + strcspn(authority, "/"))
        return sf_fail(e, SF_EURL, "'%s': user names in the URL are not supported", url);
    if (host_end == host || (size_t)(host_end - host) >= sizeof out->host)
        return sf_fail(e, SF_EURL, "'%s' names no host", url);
    memcpy(out->host, host, (size_t)(host_end - host));
    out->port = out->tls ? 443 : 80;
    if (*p == ':') {
        char *end;
        errno = 0;
        long port = strtol(p + 1, &end, 10);
        if (!isdigit((unsigned char)p[1]) || errno != 0 || port < 1 || port > 65535 || (*end != '\0' && *end != '/'))
            return sf_fail(e, SF_EURL, "'%s': the port must be a number from 1 to 65535", url);
        out->port = (int)port;
        p = end;
    }
    if (*p != '\0' && *p != '/')
        return sf_fail(e, SF_EURL, "'%s': only a path may follow HOST:PORT", url);
    if ((size_t)(p - url) >= sizeof out->origin || strlen(p) >= sizeof out->path)
        return sf_fail(e, SF_EURL, "'%s' is too long", url);
    memcpy(out->origin, url, (size_t)(p - url));
    memcpy(out->path, p, strlen(p));
    return 0;
}
