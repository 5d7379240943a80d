/*
 * bookmarks.c — ScopeFS bookmarks for C (SPEC S25-S27, S31).
 *
 * Creating a bookmark is a getxattr(2) of "user.scopefs.bookmark" on the
 * item; resolving one is a request on the daemon's control socket
 * (docs/API.md "Item metadata and bookmarks").
 */
#include "scopefs.h"

#include "control.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/xattr.h>

SCOPEFS_EXPORT char *scopefs_bookmark_create(const char *path, int read_only)
{
    const char *name = read_only ? "user.scopefs.bookmark-read-only" : "user.scopefs.bookmark";
    size_t capacity = 1024;

    if (path == NULL) {
        errno = EINVAL;
        return NULL;
    }
    /* Reading a bookmark performs no action, so growing on ERANGE is safe. */
    for (;;) {
        char *token = malloc(capacity + 1);
        ssize_t n;

        if (!token) {
            errno = ENOMEM;
            return NULL;
        }
        n = getxattr(path, name, token, capacity);
        if (n >= 0) {
            token[n] = '\0';
            if (strcmp(token, "not-needed") == 0) { /* a container item */
                free(token);
                errno = EINVAL;
                return NULL;
            }
            return token;
        }
        free(token);
        if (errno == ENODATA) { /* outside provider views: a container item */
            errno = EINVAL;
            return NULL;
        }
        if (errno != ERANGE || capacity >= (1u << 20))
            return NULL;
        capacity *= 16;
    }
}

/* The daemon's codes are the CLI's exit codes (docs/API.md). */
static int resolve_error(long long code)
{
    switch (code) {
    case 65: return EBADMSG;
    case 66: return ENOENT;
    case 77: return EPERM;
    default: return EPROTO;
    }
}

/*
 * The path of a resolve answer {"ok": true, "path": P, "resolution":
 * {"pathInApp": Q, "isStale": B}}: inside `scopefs run` ($SCOPEFS_MOUNT
 * set) Q in the app's view, else P (as seen outside a sandbox). NULL with
 * errno set.
 */
static char *resolved_path(json_object *answer, int *is_stale)
{
    json_object *resolution = NULL;
    const char *path = NULL, *path_in_app = NULL;
    const char *app_root = getenv("SCOPEFS_MOUNT");
    long long code = -1;
    int ok = answer_ok(answer, &code), stale = 0;
    char *result;

    if (ok == 0) {
        errno = resolve_error(code);
        return NULL;
    }
    if (ok < 0 || member_string(answer, "path", &path) != 1 ||
        member_object(answer, "resolution", &resolution) != 1 ||
        member_string(resolution, "pathInApp", &path_in_app) != 1 || member_bool(resolution, "isStale", &stale) < 0) {
        errno = EPROTO;
        return NULL;
    }
    result = app_root && app_root[0] == '/' ? path_in_app_view(path_in_app) : strdup(path);
    if (!result) {
        errno = ENOMEM;
        return NULL;
    }
    if (is_stale)
        *is_stale = stale;
    return result;
}

SCOPEFS_EXPORT char *scopefs_bookmark_resolve(const char *bookmark, const char *state_dir, int *is_stale)
{
    json_object *request, *answer;
    char *result;
    int err;

    if (bookmark == NULL) {
        errno = EINVAL;
        return NULL;
    }
    request = control_request("resolve");
    if (!request || request_add(request, "bookmark", json_object_new_string(bookmark)) < 0) {
        json_object_put(request);
        errno = ENOMEM;
        return NULL;
    }
    answer = control_ask_state(state_dir, request);
    json_object_put(request);
    if (!answer)
        return NULL;
    result = resolved_path(answer, is_stale);
    err = errno;
    json_object_put(answer);
    errno = err;
    return result;
}
