/*
 * keyfile.c — see keyfile.h.
 */
#include "node-native/keyfile.h"

#include "base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void nd_key_default_path(char *buf, size_t cap)
{
    const char *state = getenv("STATE_DIRECTORY");
    const char *xdg = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    if (state != NULL && state[0] == '/') /* a service user's: systemd made it, owned by the unit's User= */
        snprintf(buf, cap, "%.*s/node.key", (int)strcspn(state, ":"), state);
    else if (xdg != NULL && xdg[0] == '/')
        snprintf(buf, cap, "%s/simfarm/node.key", xdg);
    else
        snprintf(buf, cap, "%s/.local/share/simfarm/node.key", home ? home : ".");
}

static int mkdirs(char *path)
{
    for (char *s = path + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        int rc = mkdir(path, 0700);
        *s = '/';
        if (rc != 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1; /* a short write is followed by one that says why */
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes a fresh seed to a private temporary file beside path and links it
 * in, so that the key file is whole whenever it exists. Returns 0 when it
 * made the file, 1 when another process made it first (load that one), or
 * ND_EKEYFILE with the reason in *err. */
static int create(const char *path, uint8_t seed[32], sf_error *err)
{
    char dir[4096], tmp[4200];
    snprintf(dir, sizeof dir, "%s", path);
    if (mkdirs(dir) != 0) {
        return sf_fail(err, ND_EKEYFILE, "cannot create the directory of %s: %s", path, strerror(errno));
    }
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    int fd = mkstemp(tmp); /* mode 0600 */
    if (fd < 0) {
        return sf_fail(err, ND_EKEYFILE, "cannot create %s: %s", tmp, strerror(errno));
    }
    randombytes_buf(seed, 32);
    int rc = write_all(fd, seed, 32) == 0 && fsync(fd) == 0 ? 0 : -1;
    int e = errno;
    close(fd);
    if (rc == 0 && link(tmp, path) != 0) {
        e = errno;
        rc = e == EEXIST ? 1 : -1;
    }
    unlink(tmp);
    if (rc == 0) { /* the link itself survives a crash too */
        char *slash = strrchr(dir, '/');
        if (slash != NULL)
            *(slash == dir ? slash + 1 : slash) = '\0';
        int dfd = open(slash != NULL ? dir : ".", O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    if (rc != 0)
        sodium_memzero(seed, 32);
    if (rc < 0)
        return sf_fail(err, ND_EKEYFILE, "cannot write %s: %s", path, strerror(e));
    return rc;
}

int nd_key_load(const char *path, pr_key *k, bool *created, sf_error *err)
{
    uint8_t seed[32];
    struct stat st;
    *created = false;
    if (pr_init() != 0) {
        return sf_fail(err, PR_ECRYPTO, "libsodium failed to initialise");
    }
    if (stat(path, &st) != 0) {
        if (errno != ENOENT) {
            return sf_fail(err, ND_EKEYFILE, "cannot read %s: %s", path, strerror(errno));
        }
        int rc = create(path, seed, err);
        if (rc < 0)
            return rc;
        if (rc == 0)
            *created = true;
        else if (stat(path, &st) != 0) {
            return sf_fail(err, ND_EKEYFILE, "cannot read %s: %s", path, strerror(errno));
        }
    }
    if (!*created) {
        if (st.st_mode & (S_IRWXG | S_IRWXO)) {
            return sf_fail(err, ND_EKEYFILE, "%s can be read by other users (mode %03o): it must be 0600 "
                "(chmod 600 %s)", path, (unsigned)(st.st_mode & 0777), path);
        }
        if (st.st_size != 32) {
            return sf_fail(err, ND_EKEYFILE, "%s holds %lld bytes; a node key is a 32-byte seed", path,
                (long long)st.st_size);
        }
        int fd = open(path, O_RDONLY);
        ssize_t got = fd >= 0 ? read(fd, seed, 32) : -1;
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (got != 32) {
            return sf_fail(err, ND_EKEYFILE, "cannot read %s: %s", path,
                got >= 0 ? "it was cut short" : strerror(e));
        }
    }
    int rc = pr_key_from_seed(k, seed, 32);
    sodium_memzero(seed, sizeof seed);
    if (rc != 0) {
        return sf_fail(err, ND_EKEYFILE, "%s does not hold a usable key", path);
    }
    return 0;
}
