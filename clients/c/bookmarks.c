/*
 * bookmarks.c — ScopeFS bookmarks for C (SPEC S25-S27, S31).
 *
 * Creating a bookmark is a getxattr(2) of "user.scopefs.bookmark" on the
 * item; resolving one is a JSON request on the daemon's control socket
 * (docs/API.md "Item metadata and bookmarks"). The answer is read with the
 * small JSON reader below, which keeps only the members it needs.
 */
#include "scopefs.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define SCOPEFS_EXPORT __attribute__((visibility("default")))
#define MAX_ANSWER (1 << 20)
#define MAX_DEPTH 32

/* ---------------------------------------------------------------------- */
/* creating */

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

/* ---------------------------------------------------------------------- */
/* a small JSON reader: the members of the resolve and pick answers, nothing else */

struct answer {
    int ok;            /* "ok": true */
    long code;         /* "code": N */
    char *path;        /* "path" (top level) */
    char *path_in_app; /* "resolution"."pathInApp" */
    int is_stale;      /* "resolution"."isStale" */
    int has_resolution;
    int has_picked;    /* "picked": {...} */
    int cancelled;     /* "picked"."cancelled" */
    char **paths;      /* "picked"."paths": [...], NULL-terminated */
    size_t npaths;
    unsigned long long cursor; /* "cursor": N (watch) */
    unsigned long long claim;  /* "claim": N (coordinate) */
    int in_notices;            /* reading "notices": [...] */
    struct notice *notices;    /* "notices": [{"kind", "path", "oldPath", "grant"}] */
    size_t nnotices;
    int in_results;            /* reading "results": [...] (query) */
    struct query_result *results;
    size_t nresults;
    char *digest;              /* "digest" (query) */
};

struct query_result {
    char *url;
    char *local;   /* url_in_local_container */
    char *display; /* container_display_name */
    int external;  /* is_external_document */
};

struct notice {
    char *kind;
    char *path;
    char *old_path;
    long long grant;
};

struct reader {
    const char *s;
    size_t i, n;
};

static void skip_space(struct reader *r)
{
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\r' || r->s[r->i] == '\n'))
        r->i++;
}

static int hex4(struct reader *r, unsigned *out)
{
    *out = 0;
    for (int k = 0; k < 4; k++, r->i++) {
        char c;

        if (r->i >= r->n)
            return -1;
        c = r->s[r->i];
        *out <<= 4;
        if (c >= '0' && c <= '9')
            *out |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            *out |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            *out |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    return 0;
}

static void put_utf8(char *out, size_t *len, unsigned cp)
{
    if (cp < 0x80) {
        out[(*len)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*len)++] = (char)(0xC0 | (cp >> 6));
        out[(*len)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*len)++] = (char)(0xE0 | (cp >> 12));
        out[(*len)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*len)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*len)++] = (char)(0xF0 | (cp >> 18));
        out[(*len)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*len)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*len)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* A string at r->i (on the opening quote). With out, a malloc'd copy. */
static int read_string(struct reader *r, char **out)
{
    char *buf = NULL;
    size_t len = 0;

    if (r->i >= r->n || r->s[r->i] != '"')
        return -1;
    r->i++;
    if (out) {
        buf = malloc(r->n - r->i + 1); /* unescaping never grows a string */
        if (!buf)
            return -1;
    }
    while (r->i < r->n && r->s[r->i] != '"') {
        char c = r->s[r->i++];

        if ((unsigned char)c < 0x20)
            goto bad;
        if (c != '\\') {
            if (buf)
                buf[len++] = c;
            continue;
        }
        if (r->i >= r->n)
            goto bad;
        c = r->s[r->i++];
        if (c == 'u') {
            unsigned cp, low;

            if (hex4(r, &cp) < 0)
                goto bad;
            if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
                if (r->i + 1 >= r->n || r->s[r->i] != '\\' || r->s[r->i + 1] != 'u')
                    goto bad;
                r->i += 2;
                if (hex4(r, &low) < 0 || low < 0xDC00 || low > 0xDFFF)
                    goto bad;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
                /* A path's byte that is not UTF-8, as the daemon sends it
                 * (Python's surrogateescape, docs/API.md "Paths are
                 * bytes", SPEC S33a): the raw byte. */
                if (buf)
                    buf[len++] = (char)(cp & 0xFF);
                continue;
            }
            if (buf)
                put_utf8(buf, &len, cp);
            continue;
        }
        switch (c) {
        case '"': case '\\': case '/': break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        default: goto bad;
        }
        if (buf)
            buf[len++] = c;
    }
    if (r->i >= r->n)
        goto bad;
    r->i++; /* closing quote */
    if (out) {
        buf[len] = '\0';
        *out = buf;
    }
    return 0;
bad:
    free(buf);
    return -1;
}

static int literal(struct reader *r, const char *word)
{
    size_t len = strlen(word);

    if (r->n - r->i < len || memcmp(r->s + r->i, word, len) != 0)
        return -1;
    r->i += len;
    return 0;
}

/* Where a value sits: its depth, its member name, its parent's member name. */
static int read_value(struct reader *r, struct answer *a, int depth, const char *key, const char *parent);

static int read_object(struct reader *r, struct answer *a, int depth, const char *key)
{
    r->i++; /* { */
    skip_space(r);
    if (r->i < r->n && r->s[r->i] == '}') {
        r->i++;
        return 0;
    }
    for (;;) {
        char *member = NULL;
        int rc;

        skip_space(r);
        if (read_string(r, &member) < 0)
            return -1;
        skip_space(r);
        if (r->i >= r->n || r->s[r->i] != ':') {
            free(member);
            return -1;
        }
        r->i++;
        skip_space(r);
        rc = read_value(r, a, depth + 1, member, key);
        free(member);
        if (rc < 0)
            return -1;
        skip_space(r);
        if (r->i < r->n && r->s[r->i] == ',') {
            r->i++;
            continue;
        }
        if (r->i < r->n && r->s[r->i] == '}') {
            r->i++;
            return 0;
        }
        return -1;
    }
}

static int read_array(struct reader *r, struct answer *a, int depth, const char *key)
{
    r->i++; /* [ */
    skip_space(r);
    if (r->i < r->n && r->s[r->i] == ']') {
        r->i++;
        return 0;
    }
    for (;;) {
        skip_space(r);
        /* Elements know their array's name as their parent's. */
        if (read_value(r, a, depth + 1, NULL, key) < 0)
            return -1;
        skip_space(r);
        if (r->i < r->n && r->s[r->i] == ',') {
            r->i++;
            continue;
        }
        if (r->i < r->n && r->s[r->i] == ']') {
            r->i++;
            return 0;
        }
        return -1;
    }
}

static int is(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static int read_value(struct reader *r, struct answer *a, int depth, const char *key, const char *parent)
{
    int top = depth == 1;
    int in_resolution = depth == 2 && is(parent, "resolution");
    int in_picked = depth == 2 && is(parent, "picked");
    int a_picked_path = depth == 3 && key == NULL && is(parent, "paths");

    if (depth > MAX_DEPTH || r->i >= r->n)
        return -1;
    switch (r->s[r->i]) {
    case '{':
        if (top && is(key, "resolution"))
            a->has_resolution = 1;
        if (top && is(key, "picked"))
            a->has_picked = 1;
        if (depth == 2 && key == NULL && a->in_results) { /* a query result: a new slot */
            struct query_result *grown = realloc(a->results, (a->nresults + 1) * sizeof *grown);

            if (!grown)
                return -1;
            a->results = grown;
            memset(&a->results[a->nresults++], 0, sizeof *grown);
        }
        if (depth == 2 && key == NULL && a->in_notices) { /* a notice: a new slot */
            struct notice *grown = realloc(a->notices, (a->nnotices + 1) * sizeof *grown);

            if (!grown)
                return -1;
            a->notices = grown;
            memset(&a->notices[a->nnotices++], 0, sizeof *grown);
        }
        return read_object(r, a, depth, key);
    case '[': {
        int rc;

        a->in_notices = top && is(key, "notices");
        a->in_results = top && is(key, "results");
        rc = read_array(r, a, depth, key);
        a->in_notices = 0;
        a->in_results = 0;
        return rc;
    }
    case '"': {
        char **slot = NULL;

        if (a_picked_path && a->has_picked) {
            char **grown = realloc(a->paths, (a->npaths + 2) * sizeof *grown);

            if (!grown)
                return -1;
            a->paths = grown;
            a->paths[a->npaths + 1] = NULL;
            if (read_string(r, &a->paths[a->npaths]) < 0)
                return -1;
            a->npaths++;
            return 0;
        }

        if (top && is(key, "path"))
            slot = &a->path;
        else if (top && is(key, "digest"))
            slot = &a->digest;
        else if (in_resolution && is(key, "pathInApp"))
            slot = &a->path_in_app;
        if (depth == 3 && a->in_notices && a->nnotices > 0) {
            struct notice *n = &a->notices[a->nnotices - 1];

            slot = is(key, "kind") ? &n->kind : is(key, "path") ? &n->path : is(key, "oldPath") ? &n->old_path : NULL;
        }
        if (depth == 3 && a->in_results && a->nresults > 0) {
            struct query_result *q = &a->results[a->nresults - 1];

            slot = is(key, "url") ? &q->url : is(key, "urlInLocalContainer") ? &q->local
                 : is(key, "containerDisplayName") ? &q->display : NULL;
        }
        if (slot && *slot) { /* a duplicate member: keep the last */
            free(*slot);
            *slot = NULL;
        }
        return read_string(r, slot);
    }
    case 't':
    case 'f': {
        int value = r->s[r->i] == 't';

        if (literal(r, value ? "true" : "false") < 0)
            return -1;
        if (top && is(key, "ok"))
            a->ok = value;
        else if (in_resolution && is(key, "isStale"))
            a->is_stale = value;
        else if (in_picked && is(key, "cancelled"))
            a->cancelled = value;
        else if (depth == 3 && a->in_results && a->nresults > 0 && is(key, "isExternalDocument"))
            a->results[a->nresults - 1].external = value;
        return 0;
    }
    case 'n':
        return literal(r, "null");
    default: {
        char *end;
        long number = strtol(r->s + r->i, &end, 10);

        if (end == r->s + r->i)
            return -1;
        /* skip a fraction or exponent: no member we read has one */
        while (*end == '.' || *end == 'e' || *end == 'E' || *end == '+' || *end == '-' ||
               (*end >= '0' && *end <= '9'))
            end++;
        if (top && is(key, "cursor"))
            a->cursor = strtoull(r->s + r->i, NULL, 10);
        else if (top && is(key, "claim"))
            a->claim = strtoull(r->s + r->i, NULL, 10);
        else if (depth == 3 && a->in_notices && a->nnotices > 0 && is(key, "grant"))
            a->notices[a->nnotices - 1].grant = number;
        r->i = (size_t)(end - r->s);
        if (top && is(key, "code"))
            a->code = number;
        return 0;
    }
    }
}

/* Reads the first line of a daemon's answer into *a; -1 when it is not one
 * JSON object. */
static int read_answer(const char *text, size_t text_len, struct answer *a)
{
    const char *newline = memchr(text, '\n', text_len);
    struct reader r = { text, 0, newline ? (size_t)(newline - text) : text_len };

    skip_space(&r);
    if (!newline || r.i >= r.n || text[r.i] != '{')
        return -1;
    return read_value(&r, a, 0, NULL, NULL);
}

/* ---------------------------------------------------------------------- */
/* the control socket */

static char *state_socket_path(const char *state_dir)
{
    const char *env = getenv("SCOPEFS_STATE");
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    char cwd[4096] = "";
    char *out = NULL;
    int n;

    if (state_dir == NULL || !*state_dir)
        state_dir = (env && *env) ? env : NULL;
    if (state_dir) {
        if (state_dir[0] != '/' && !getcwd(cwd, sizeof cwd))
            return NULL;
        n = state_dir[0] == '/' ? asprintf(&out, "%s/control.sock", state_dir)
                                : asprintf(&out, "%s/%s/control.sock", cwd, state_dir);
    } else if (xdg && xdg[0] == '/') {
        n = asprintf(&out, "%s/scopefs/control.sock", xdg);
    } else {
        n = asprintf(&out, "%s/.local/state/scopefs/control.sock", home ? home : "");
    }
    if (n < 0) {
        errno = ENOMEM;
        return NULL;
    }
    return out;
}

/* {"op":"resolve","bookmark":"..."}\n with the token JSON-escaped. */
static char *resolve_request(const char *bookmark, size_t *len)
{
    size_t cap = strlen(bookmark) * 6 + 64, n = 0;
    char *out = malloc(cap);
    static const char head[] = "{\"op\":\"resolve\",\"bookmark\":\"";

    if (!out)
        return NULL;
    memcpy(out, head, sizeof head - 1);
    n = sizeof head - 1;
    for (const unsigned char *p = (const unsigned char *)bookmark; *p; p++) {
        if (*p == '"' || *p == '\\') {
            out[n++] = '\\';
            out[n++] = (char)*p;
        } else if (*p < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", *p);
        } else {
            out[n++] = (char)*p;
        }
    }
    memcpy(out + n, "\"}\n", 3);
    *len = n + 3;
    return out;
}

static char *exchange(const char *socket_path, const char *request, size_t request_len, size_t *answer_len)
{
    struct sockaddr_un address;
    char *answer = NULL;
    size_t len = 0, sent = 0;
    int fd, err;

    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    if (strlen(socket_path) >= sizeof address.sun_path) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    strcpy(address.sun_path, socket_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) {
        /* A missing socket (ENOENT) would read as "item deleted": any
         * failure to connect means one thing, no daemon. */
        errno = ECONNREFUSED;
        goto fail;
    }
    while (sent < request_len) {
        ssize_t n = send(fd, request + sent, request_len - sent, MSG_NOSIGNAL);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            goto fail;
        }
        sent += (size_t)n;
    }
    answer = malloc(MAX_ANSWER + 1);
    if (!answer) {
        errno = ENOMEM;
        goto fail;
    }
    while (len < MAX_ANSWER && !memchr(answer, '\n', len)) {
        ssize_t n = recv(fd, answer + len, MAX_ANSWER - len, 0);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            goto fail;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    answer[len] = '\0';
    *answer_len = len;
    return answer;
fail:
    err = errno;
    free(answer);
    close(fd);
    errno = err;
    return NULL;
}

SCOPEFS_EXPORT char *scopefs_bookmark_resolve(const char *bookmark, const char *state_dir, int *is_stale)
{
    struct answer a = { 0 };
    char *socket_path, *request, *text, *result = NULL;
    const char *app_root = getenv("SCOPEFS_MOUNT");
    size_t request_len, text_len;
    int err = EPROTO;

    if (bookmark == NULL) {
        errno = EINVAL;
        return NULL;
    }
    socket_path = state_socket_path(state_dir);
    if (!socket_path)
        return NULL;
    request = resolve_request(bookmark, &request_len);
    if (!request) {
        free(socket_path);
        errno = ENOMEM;
        return NULL;
    }
    text = exchange(socket_path, request, request_len, &text_len);
    err = errno;
    free(request);
    free(socket_path);
    if (!text) {
        errno = err;
        return NULL;
    }
    err = EPROTO;
    if (read_answer(text, text_len, &a) < 0)
        goto done;
    if (!a.ok || !a.has_resolution || !a.path || !a.path_in_app) {
        /* The daemon's codes are the CLI's exit codes (docs/API.md). */
        err = a.code == 65 ? EBADMSG : a.code == 66 ? ENOENT : a.code == 77 ? EPERM : EPROTO;
        goto done;
    }
    /* Inside `scopefs run`, $SCOPEFS_MOUNT is the app's view of the mount
     * (MOUNT/APP, or the sandbox's path); "path" is as seen outside a sandbox. */
    if (app_root && app_root[0] == '/') {
        if (asprintf(&result, "%s/%s", app_root, a.path_in_app) < 0) {
            result = NULL;
            err = ENOMEM;
            goto done;
        }
    } else {
        result = a.path;
        a.path = NULL;
    }
    if (is_stale)
        *is_stale = a.is_stale;
done:
    free(a.path);
    free(a.path_in_app);
    free(text);
    if (!result)
        errno = err;
    return result;
}

/* ---------------------------------------------------------------------- */
/* asking the user to pick (issue 17) */

/* Appends s to the buffer as a JSON string. */
static int put_json_string(char **out, size_t *n, size_t *cap, const char *s)
{
    size_t need = *n + strlen(s) * 6 + 8;

    if (need > *cap) {
        char *grown = realloc(*out, need * 2);

        if (!grown)
            return -1;
        *out = grown;
        *cap = need * 2;
    }
    (*out)[(*n)++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            (*out)[(*n)++] = '\\';
            (*out)[(*n)++] = (char)*p;
        } else if (*p < 0x20) {
            *n += (size_t)snprintf(*out + *n, *cap - *n, "\\u%04x", *p);
        } else {
            (*out)[(*n)++] = (char)*p;
        }
    }
    (*out)[(*n)++] = '"';
    return 0;
}

static int put_raw(char **out, size_t *n, size_t *cap, const char *s)
{
    size_t len = strlen(s);

    if (*n + len + 1 > *cap) {
        char *grown = realloc(*out, (*n + len + 1) * 2);

        if (!grown)
            return -1;
        *out = grown;
        *cap = (*n + len + 1) * 2;
    }
    memcpy(*out + *n, s, len);
    *n += len;
    return 0;
}

SCOPEFS_EXPORT void scopefs_free_paths(char **paths)
{
    if (!paths)
        return;
    for (char **p = paths; *p; p++)
        free(*p);
    free(paths);
}

/* Appends ,"KEY":[...] with each string of a NULL-terminated list. */
static int put_string_list(char **out, size_t *n, size_t *cap, const char *key, const char *const *list)
{
    if (put_raw(out, n, cap, ",\"") < 0 || put_raw(out, n, cap, key) < 0 || put_raw(out, n, cap, "\":[") < 0)
        return -1;
    for (size_t k = 0; list && list[k]; k++) {
        if ((k > 0 && put_raw(out, n, cap, ",") < 0) || put_json_string(out, n, cap, list[k]) < 0)
            return -1;
    }
    return put_raw(out, n, cap, "]");
}

static char **pick(const char *mode, const char *const *content_types, int allows_multiple,
                   const char *const *items, const char *state_dir)
{
    struct answer a = { 0 };
    char *socket_path, *request = NULL, *text;
    char **result = NULL;
    const char *app_root = getenv("SCOPEFS_MOUNT");
    size_t n = 0, cap = 0, text_len;
    int err = ENOMEM;

    if (put_raw(&request, &n, &cap, "{\"op\":\"pick\",\"waitSeconds\":600,\"pick\":{\"mode\":") < 0 ||
        put_json_string(&request, &n, &cap, mode) < 0 ||
        put_raw(&request, &n, &cap, allows_multiple ? ",\"allowsMultipleSelection\":true" : ",\"allowsMultipleSelection\":false") < 0 ||
        put_string_list(&request, &n, &cap, "items", items) < 0 ||
        put_string_list(&request, &n, &cap, "contentTypes", content_types) < 0 ||
        put_raw(&request, &n, &cap, "}}\n") < 0)
        goto fail;
    socket_path = state_socket_path(state_dir);
    if (!socket_path)
        goto fail;
    text = exchange(socket_path, request, n, &text_len);
    err = errno;
    free(socket_path);
    free(request);
    request = NULL;
    if (!text)
        goto fail;
    err = EPROTO;
    if (read_answer(text, text_len, &a) == 0) {
        /* The daemon's codes are the CLI's exit codes (docs/API.md). */
        if (!a.ok || !a.has_picked)
            err = a.code == 64 ? EINVAL : a.code == 69 ? ENXIO : a.code == 75 ? ETIMEDOUT : a.code == 77 ? EPERM : EPROTO;
        else if (a.cancelled)
            err = ECANCELED;
        else
            err = 0;
    }
    free(text);
    if (err == 0) {
        result = calloc(a.npaths + 1, sizeof *result);
        err = result ? 0 : ENOMEM;
        for (size_t k = 0; result && k < a.npaths; k++) {
            /* Paths are in the app's view: under $SCOPEFS_MOUNT in `scopefs run`. */
            if (app_root && app_root[0] == '/') {
                if (asprintf(&result[k], "%s/%s", app_root, a.paths[k]) < 0) {
                    result[k] = NULL;
                    scopefs_free_paths(result);
                    result = NULL;
                    err = ENOMEM;
                }
            } else {
                result[k] = strdup(a.paths[k]);
            }
        }
    }
    scopefs_free_paths(a.paths);
    a.paths = NULL;
    free(a.path);
    free(a.path_in_app);
    if (!result)
        errno = err;
    return result;
fail:
    free(request);
    scopefs_free_paths(a.paths);
    errno = err;
    return NULL;
}

SCOPEFS_EXPORT char **scopefs_pick(const char *mode, const char *const *content_types, int allows_multiple,
                                   const char *state_dir)
{
    if (mode == NULL || (strcmp(mode, "open") != 0 && strcmp(mode, "import") != 0)) {
        errno = EINVAL;
        return NULL;
    }
    return pick(mode, content_types, allows_multiple, NULL, state_dir);
}

SCOPEFS_EXPORT char **scopefs_pick_items(const char *mode, const char *const *items, const char *state_dir)
{
    if (mode == NULL || (strcmp(mode, "export") != 0 && strcmp(mode, "move") != 0) || items == NULL ||
        items[0] == NULL) {
        errno = EINVAL;
        return NULL;
    }
    return pick(mode, NULL, 0, items, state_dir);
}

/* ---------------------------------------------------------------------- */
/* file coordination (issue 17) */

/* One request that answers {"ok": ...}; fills *a. Returns 0, or -1 with
 * errno set from the daemon's code (the CLI's exit codes, docs/API.md). */
static int simple_request(const char *request, size_t len, const char *state_dir, struct answer *a)
{
    char *socket_path = state_socket_path(state_dir), *text;
    size_t text_len;
    int err;

    if (!socket_path)
        return -1;
    text = exchange(socket_path, request, len, &text_len);
    err = errno;
    free(socket_path);
    if (!text) {
        errno = err;
        return -1;
    }
    err = read_answer(text, text_len, a) < 0 ? EPROTO
        : a->ok ? 0
        : a->code == 64 ? EINVAL : a->code == 66 ? ENOENT : a->code == 67 ? ESRCH : a->code == 75 ? ETIMEDOUT
        : a->code == 77 ? EPERM : EPROTO;
    free(text);
    free(a->path);
    free(a->path_in_app);
    free(a->digest);
    a->path = a->path_in_app = a->digest = NULL;
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

SCOPEFS_EXPORT unsigned long long scopefs_coordinate(const char *path, enum scopefs_intent intent,
                                                     double timeout_seconds, const char *state_dir)
{
    struct answer a = { 0 };
    char *request = NULL, number[64];
    size_t n = 0, cap = 0;
    int rc;

    if (path == NULL || (intent != SCOPEFS_READING && intent != SCOPEFS_WRITING) || !(timeout_seconds >= 0)) {
        errno = EINVAL;
        return 0;
    }
    snprintf(number, sizeof number, ",\"waitSeconds\":%.3f}\n", timeout_seconds > 60 ? 60.0 : timeout_seconds);
    if (put_raw(&request, &n, &cap, "{\"op\":\"coordinate\",\"path\":") < 0 ||
        put_json_string(&request, &n, &cap, path) < 0 ||
        put_raw(&request, &n, &cap, intent == SCOPEFS_WRITING ? ",\"intent\":\"write\"" : ",\"intent\":\"read\"") < 0 ||
        put_raw(&request, &n, &cap, number) < 0) {
        free(request);
        errno = ENOMEM;
        return 0;
    }
    rc = simple_request(request, n, state_dir, &a);
    free(request);
    if (rc < 0)
        return 0;
    if (a.claim == 0) {
        errno = EPROTO;
        return 0;
    }
    return a.claim;
}

SCOPEFS_EXPORT int scopefs_release(unsigned long long claim, const char *state_dir)
{
    struct answer a = { 0 };
    char request[96];
    int len = snprintf(request, sizeof request, "{\"op\":\"release\",\"claim\":%llu}\n", claim);

    if (claim == 0) {
        errno = EINVAL;
        return -1;
    }
    return simple_request(request, (size_t)len, state_dir, &a);
}

/* ---------------------------------------------------------------------- */
/* presenters (issue 17) */

static void free_notices(struct answer *a)
{
    for (size_t k = 0; k < a->nnotices; k++) {
        free(a->notices[k].kind);
        free(a->notices[k].path);
        free(a->notices[k].old_path);
    }
    free(a->notices);
    a->notices = NULL;
    a->nnotices = 0;
}

/* One watch request; fills *a (the caller frees with free_notices). */
static int watch_once(const char *socket_path, int subscribe, unsigned long long after, double wait, struct answer *a)
{
    char request[160];
    char *text;
    size_t n, text_len;

    n = subscribe ? (size_t)snprintf(request, sizeof request, "{\"op\":\"watch\"}\n")
                  : (size_t)snprintf(request, sizeof request, "{\"op\":\"watch\",\"after\":%llu,\"waitSeconds\":%.3f}\n",
                                     after, wait);
    text = exchange(socket_path, request, n, &text_len);
    if (!text)
        return -1;
    memset(a, 0, sizeof *a);
    if (read_answer(text, text_len, a) < 0 || !a->ok) {
        int err = a->ok ? EPROTO : EPERM;

        free(text);
        free(a->path);
        free(a->path_in_app);
        free_notices(a);
        errno = err;
        return -1;
    }
    free(text);
    free(a->path);
    free(a->path_in_app);
    return 0;
}

SCOPEFS_EXPORT int scopefs_watch(scopefs_notice_handler handler, void *context, double timeout_seconds,
                                 const char *state_dir)
{
    const char *app_root = getenv("SCOPEFS_MOUNT");
    char *socket_path;
    struct answer a;
    unsigned long long cursor;
    double quiet = 0;
    int stop = 0;

    if (!handler) {
        errno = EINVAL;
        return -1;
    }
    socket_path = state_socket_path(state_dir);
    if (!socket_path)
        return -1;
    if (watch_once(socket_path, 1, 0, 0, &a) < 0)
        goto fail;
    cursor = a.cursor;
    free_notices(&a);
    while (!stop && (timeout_seconds < 0 || quiet < timeout_seconds)) {
        double wait = timeout_seconds < 0 ? 10 : timeout_seconds - quiet < 10 ? timeout_seconds - quiet : 10;

        if (watch_once(socket_path, 0, cursor, wait, &a) < 0)
            goto fail;
        cursor = a.cursor ? a.cursor : cursor;
        quiet = a.nnotices ? 0 : quiet + wait;
        for (size_t k = 0; k < a.nnotices && !stop; k++) {
            struct notice *n = &a.notices[k];
            char *path = NULL, *old_path = NULL;
            struct scopefs_notice notice;

            /* Paths are in the app's view: under $SCOPEFS_MOUNT in `scopefs run`. */
            if (app_root && app_root[0] == '/') {
                if (n->path && asprintf(&path, "%s/%s", app_root, n->path) < 0)
                    path = NULL;
                if (n->old_path && asprintf(&old_path, "%s/%s", app_root, n->old_path) < 0)
                    old_path = NULL;
            }
            notice.kind = n->kind ? n->kind : "";
            notice.path = path ? path : n->path ? n->path : "";
            notice.old_path = old_path ? old_path : n->old_path;
            notice.grant = n->grant;
            stop = handler(&notice, context);
            free(path);
            free(old_path);
        }
        free_notices(&a);
    }
    free(socket_path);
    return 0;
fail:
    free(socket_path);
    return -1;
}

/* ---------------------------------------------------------------------- */
/* live queries (issue 17) */

static void free_results(struct query_result *results, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        free(results[k].url);
        free(results[k].local);
        free(results[k].display);
    }
    free(results);
}

/* Paths are in the app's view: under $SCOPEFS_MOUNT in `scopefs run`. */
static int root_path(char **path, const char *app_root)
{
    char *joined;

    if (!*path || !app_root || app_root[0] != '/')
        return 0;
    if (asprintf(&joined, "%s/%s", app_root, *path) < 0)
        return -1;
    free(*path);
    *path = joined;
    return 0;
}

/* One query request (digest NULL: answer at once); fills *a. */
static int query_once(const char *socket_path, const char *base, size_t base_len, const char *digest, double wait,
                      struct answer *a)
{
    const char *app_root = getenv("SCOPEFS_MOUNT");
    char *request = NULL, *text, tail[64];
    size_t n = 0, cap = 0, text_len;
    int err = ENOMEM;

    memset(a, 0, sizeof *a);
    if (put_raw(&request, &n, &cap, base) < 0)
        goto fail;
    n = base_len;
    if (digest && (put_raw(&request, &n, &cap, ",\"digest\":") < 0 || put_json_string(&request, &n, &cap, digest) < 0))
        goto fail;
    snprintf(tail, sizeof tail, ",\"waitSeconds\":%.3f}\n", digest ? wait : 0.0);
    if (put_raw(&request, &n, &cap, tail) < 0)
        goto fail;
    text = exchange(socket_path, request, n, &text_len);
    err = errno;
    free(request);
    request = NULL;
    if (!text)
        goto fail;
    err = read_answer(text, text_len, a) < 0 ? EPROTO : !a->ok ? (a->code == 77 ? EPERM : a->code == 64 ? EINVAL : EPROTO) : 0;
    free(text);
    for (size_t k = 0; err == 0 && k < a->nresults; k++) {
        if (root_path(&a->results[k].url, app_root) < 0 || root_path(&a->results[k].local, app_root) < 0)
            err = ENOMEM;
    }
    free(a->path);
    free(a->path_in_app);
    free_notices(a);
    if (err == 0)
        return 0;
    free_results(a->results, a->nresults);
    free(a->digest);
fail:
    free(request);
    errno = err;
    return -1;
}

static const char *text_or_empty(const char *s)
{
    return s ? s : "";
}

static int call(scopefs_query_handler handler, void *context, const char *event, const struct query_result *q)
{
    struct scopefs_query_result result;

    if (!q)
        return handler(event, NULL, context);
    result.url = text_or_empty(q->url);
    result.url_in_local_container = text_or_empty(q->local);
    result.container_display_name = text_or_empty(q->display);
    result.is_external_document = q->external;
    return handler(event, &result, context);
}

static const struct query_result *find_result(const struct query_result *results, size_t n, const char *local)
{
    for (size_t k = 0; k < n; k++) {
        if (strcmp(text_or_empty(results[k].local), text_or_empty(local)) == 0)
            return &results[k];
    }
    return NULL;
}

static int same_result(const struct query_result *a, const struct query_result *b)
{
    return strcmp(text_or_empty(a->url), text_or_empty(b->url)) == 0 &&
           strcmp(text_or_empty(a->display), text_or_empty(b->display)) == 0 && a->external == b->external;
}

/* Calls the handler for what changed from `known` to `now`; nonzero: stop. */
static int report_changes(scopefs_query_handler handler, void *context, const struct answer *known,
                          const struct answer *now, int *changed)
{
    for (size_t k = 0; k < now->nresults; k++) {
        const struct query_result *was = find_result(known->results, known->nresults, now->results[k].local);

        if (was && same_result(was, &now->results[k]))
            continue;
        *changed = 1;
        if (call(handler, context, was ? "changed" : "added", &now->results[k]))
            return 1;
    }
    for (size_t k = 0; k < known->nresults; k++) {
        if (find_result(now->results, now->nresults, known->results[k].local))
            continue;
        *changed = 1;
        if (call(handler, context, "removed", &known->results[k]))
            return 1;
    }
    return 0;
}

static double seconds_now(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

SCOPEFS_EXPORT int scopefs_query(const char *scope, const char *name_glob, scopefs_query_handler handler,
                                 void *context, double timeout_seconds, const char *state_dir)
{
    struct answer known, now;
    char *socket_path = NULL, *base = NULL;
    size_t base_len = 0, cap = 0;
    double quiet = 0, quiet_since;
    int stop = 0, err = ENOMEM;

    if (!handler) {
        errno = EINVAL;
        return -1;
    }
    if (put_raw(&base, &base_len, &cap, "{\"op\":\"query\",\"scope\":") < 0 ||
        put_json_string(&base, &base_len, &cap, scope ? scope : "all") < 0 ||
        (name_glob && (put_raw(&base, &base_len, &cap, ",\"name\":") < 0 ||
                       put_json_string(&base, &base_len, &cap, name_glob) < 0)) ||
        put_raw(&base, &base_len, &cap, "") < 0)
        goto fail;
    base[base_len] = '\0'; /* put_raw keeps room for it */
    socket_path = state_socket_path(state_dir);
    if (!socket_path || query_once(socket_path, base, base_len, NULL, 0, &known) < 0) {
        err = errno;
        goto fail;
    }
    for (size_t k = 0; k < known.nresults && !stop; k++)
        stop = call(handler, context, "result", &known.results[k]);
    if (!stop)
        stop = call(handler, context, "finishedGathering", NULL);
    quiet_since = seconds_now();
    while (!stop && (timeout_seconds < 0 || quiet < timeout_seconds)) {
        double wait = timeout_seconds < 0 ? 10 : timeout_seconds - quiet < 10 ? timeout_seconds - quiet : 10;
        int changed = 0;

        if (query_once(socket_path, base, base_len, known.digest, wait, &now) < 0) {
            err = errno;
            free_results(known.results, known.nresults);
            free(known.digest);
            goto fail;
        }
        stop = report_changes(handler, context, &known, &now, &changed);
        /* The daemon answers early when anything differs: time, not waits, counts. */
        if (changed)
            quiet_since = seconds_now();
        quiet = seconds_now() - quiet_since;
        free_results(known.results, known.nresults);
        free(known.digest);
        known = now;
    }
    free_results(known.results, known.nresults);
    free(known.digest);
    free(socket_path);
    free(base);
    return 0;
fail:
    free(socket_path);
    free(base);
    errno = err;
    return -1;
}
