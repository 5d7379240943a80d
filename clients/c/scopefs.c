/*
 * scopefs.c — C client library of ScopeFS security scopes (SPEC S31).
 * See include/scopefs.h for the API and docs/API.md for the syscall contract.
 */
#include "scopefs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>
#include <sys/xattr.h>

#define SCOPEFS_EXPORT __attribute__((visibility("default")))

/* The control replies (docs/API.md). */
enum reply_kind { REPLY_COUNTER, REPLY_NOT_NEEDED, REPLY_UNBALANCED };

struct reply {
    enum reply_kind kind;
    long counter;
};

/*
 * One getxattr(2) of a control attribute, parsed. Each getxattr of
 * user.scopefs.start / .stop performs the action, so the usual "ask for the
 * size with 0 first" would count twice: one call with a buffer large enough
 * for every documented reply ("not-needed", "unbalanced", a counter).
 * Returns 0 and fills *out, or -1 with errno set.
 */
static int read_control(const char *path, const char *name, struct reply *out)
{
    char value[256];
    ssize_t n;
    size_t len;

    if (path == NULL) {
        errno = EINVAL;
        return -1;
    }
    n = getxattr(path, name, value, sizeof value - 1);
    if (n < 0)
        return -1;
    len = (size_t)n;
    /* Tolerate a trailing NUL or newline; the contract says there is none. */
    while (len > 0 && (value[len - 1] == '\0' || value[len - 1] == '\n' || value[len - 1] == ' '))
        len--;
    value[len] = '\0';

    if (strcmp(value, "not-needed") == 0) {
        out->kind = REPLY_NOT_NEEDED;
        out->counter = 0;
        return 0;
    }
    if (strcmp(value, "unbalanced") == 0) {
        out->kind = REPLY_UNBALANCED;
        out->counter = 0;
        return 0;
    }
    if (len == 0 || len > 18)
        goto bad;
    out->counter = 0;
    for (size_t i = 0; i < len; i++) {
        if (value[i] < '0' || value[i] > '9')
            goto bad;
        out->counter = out->counter * 10 + (value[i] - '0');
    }
    out->kind = REPLY_COUNTER;
    return 0;
bad:
    errno = EPROTO;
    return -1;
}

SCOPEFS_EXPORT int scopefs_start_accessing(const char *path)
{
    struct reply r;

    if (read_control(path, "user.scopefs.start", &r) < 0)
        return -1;
    switch (r.kind) {
    case REPLY_COUNTER:
        return 1;
    case REPLY_NOT_NEEDED:
        return 0;
    default:
        errno = EPROTO; /* "unbalanced" is not a start reply */
        return -1;
    }
}

SCOPEFS_EXPORT int scopefs_stop_accessing(const char *path)
{
    struct reply r;

    return read_control(path, "user.scopefs.stop", &r) < 0 ? -1 : 0;
}

SCOPEFS_EXPORT long scopefs_scope_count(const char *path)
{
    struct reply r;

    if (read_control(path, "user.scopefs.scope", &r) < 0)
        return -1;
    switch (r.kind) {
    case REPLY_COUNTER:
        return r.counter;
    case REPLY_NOT_NEEDED:
        return SCOPEFS_NOT_NEEDED;
    default:
        errno = EPROTO;
        return -1;
    }
}

SCOPEFS_EXPORT char *scopefs_reference_attribute(const char *path, const char *name) {
    char attribute[64];
    if (!path || !name || snprintf(attribute, sizeof attribute, "user.scopefs.%s", name) >= (int)sizeof attribute) {
        errno = EINVAL;
        return NULL;
    }
    for (size_t capacity = 256; capacity <= (1u << 20); capacity *= 16) {
        char *value = malloc(capacity + 1);
        if (!value) {
            errno = ENOMEM;
            return NULL;
        }
        ssize_t n = getxattr(path, attribute, value, capacity);
        if (n >= 0) {
            value[n] = '\0';
            return value;
        }
        free(value);
        if (errno != ERANGE) return NULL;
    }
    errno = ERANGE;
    return NULL;
}
