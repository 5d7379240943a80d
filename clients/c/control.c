/*
 * control.c — the daemon's control socket: finding it, one request and one
 * answer, and strict readers of the answer (see control.h).
 */
#include "control.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* An answer longer than this is not one the daemon sends: EPROTO. */
#define MAX_ANSWER (1 << 20)
/* Deeper nesting than any answer has: EPROTO (json-c's own default). */
#define MAX_DEPTH 32
#define WRITE_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* ---------------------------------------------------------------------- */
/* where the socket is */

char *control_socket_path(const char *state_dir)
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

/* ---------------------------------------------------------------------- */
/* one line each way */

/* Sends the request line and reads until the answer's newline, EOF or
 * MAX_ANSWER bytes. Returns the bytes read (NUL-terminated), NULL with errno. */
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

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The value of the four hex digits at s, or -1. */
static long hex4(const char *s)
{
    long value = 0;

    for (int k = 0; k < 4; k++) {
        int digit = hex_digit(s[k]);

        if (digit < 0)
            return -1;
        value = value * 16 + digit;
    }
    return value;
}

/*
 * The answer line with each "\udcXX" (XX 80..ff) inside a string turned
 * into the raw byte XX: the daemon sends a path's byte that is not UTF-8 so
 * (Python's surrogateescape, docs/API.md "Paths are bytes", SPEC S33a), and
 * json-c would read the lone surrogate as U+FFFD. A surrogate pair stays as
 * it is. A raw control character inside a string (JSON forbids it) makes
 * the line invalid: returns NULL with errno EPROTO (ENOMEM when out of
 * memory). The result is never longer than the line.
 */
static char *raw_path_bytes(const char *line, size_t len, size_t *out_len)
{
    char *out = malloc(len + 1);
    size_t i = 0, n = 0;
    int in_string = 0;

    if (!out) {
        errno = ENOMEM;
        return NULL;
    }
    while (i < len) {
        unsigned char c = (unsigned char)line[i];

        if (in_string && c < 0x20)
            goto bad;
        if (c == '"') {
            in_string = !in_string;
        } else if (in_string && c == '\\' && i + 1 < len) {
            long unit = line[i + 1] == 'u' && i + 6 <= len ? hex4(line + i + 2) : -1;

            if (unit >= 0xD800 && unit < 0xDC00 && i + 12 <= len && line[i + 6] == '\\' && line[i + 7] == 'u') {
                memcpy(out + n, line + i, 12); /* a pair: json-c reads it */
                n += 12;
                i += 12;
                continue;
            }
            if (unit >= 0xDC80 && unit <= 0xDCFF) {
                out[n++] = (char)(unit & 0xFF);
                i += 6;
                continue;
            }
            out[n++] = line[i++]; /* any other escape: both characters as they are */
        }
        out[n++] = line[i++];
    }
    out[n] = '\0';
    *out_len = n;
    return out;
bad:
    free(out);
    errno = EPROTO;
    return NULL;
}

/* The first line of `text` as one JSON object, or NULL with errno set. */
static json_object *parse_answer(const char *text, size_t text_len)
{
    const char *newline = memchr(text, '\n', text_len);
    json_tokener *tokener;
    json_object *answer;
    size_t len, end;
    char *line;
    int complete;

    if (!newline) { /* cut short, or longer than MAX_ANSWER */
        errno = EPROTO;
        return NULL;
    }
    line = raw_path_bytes(text, (size_t)(newline - text), &len);
    if (!line)
        return NULL;
    tokener = json_tokener_new_ex(MAX_DEPTH);
    if (!tokener) {
        free(line);
        errno = ENOMEM;
        return NULL;
    }
    json_tokener_set_flags(tokener, JSON_TOKENER_STRICT);
    answer = json_tokener_parse_ex(tokener, line, (int)len);
    complete = json_tokener_get_error(tokener) == json_tokener_success;
    end = json_tokener_get_parse_end(tokener);
    json_tokener_free(tokener);
    while (complete && end < len && (line[end] == ' ' || line[end] == '\t' || line[end] == '\r'))
        end++;
    free(line);
    if (!complete || end != len || !json_object_is_type(answer, json_type_object)) {
        json_object_put(answer);
        errno = EPROTO;
        return NULL;
    }
    return answer;
}

json_object *control_ask(const char *socket_path, json_object *request)
{
    size_t request_len, text_len;
    const char *body = json_object_to_json_string_length(request, WRITE_FLAGS, &request_len);
    char *line, *text;
    json_object *answer;
    int err;

    if (!body) {
        errno = ENOMEM;
        return NULL;
    }
    line = malloc(request_len + 2);
    if (!line) {
        errno = ENOMEM;
        return NULL;
    }
    memcpy(line, body, request_len);
    line[request_len++] = '\n';
    text = exchange(socket_path, line, request_len, &text_len);
    err = errno;
    free(line);
    if (!text) {
        errno = err;
        return NULL;
    }
    answer = parse_answer(text, text_len);
    err = errno;
    free(text);
    errno = err;
    return answer;
}

json_object *control_ask_state(const char *state_dir, json_object *request)
{
    char *socket_path = control_socket_path(state_dir);
    json_object *answer;
    int err;

    if (!socket_path)
        return NULL;
    answer = control_ask(socket_path, request);
    err = errno;
    free(socket_path);
    errno = err;
    return answer;
}

/* ---------------------------------------------------------------------- */
/* writing requests */

json_object *control_request(const char *op)
{
    json_object *request = json_object_new_object();

    if (request && request_add(request, "op", json_object_new_string(op)) < 0) {
        json_object_put(request);
        return NULL;
    }
    return request;
}

int request_add(json_object *request, const char *key, json_object *value)
{
    if (!value)
        return -1;
    if (json_object_object_add(request, key, value) < 0) {
        json_object_put(value);
        return -1;
    }
    return 0;
}

json_object *request_seconds(double seconds)
{
    char text[64];

    snprintf(text, sizeof text, "%.3f", seconds);
    return json_object_new_double_s(seconds, text);
}

/* ---------------------------------------------------------------------- */
/* reading answers */

/* The member, 0 when absent or null. */
static int member(json_object *object, const char *key, json_type type, json_object **out)
{
    json_object *value = NULL;

    if (!json_object_object_get_ex(object, key, &value) || json_object_is_type(value, json_type_null))
        return 0;
    if (!json_object_is_type(value, type))
        return -1;
    *out = value;
    return 1;
}

int member_bool(json_object *object, const char *key, int *out)
{
    json_object *value;
    int found = member(object, key, json_type_boolean, &value);

    if (found == 1)
        *out = json_object_get_boolean(value) ? 1 : 0;
    return found;
}

int member_string(json_object *object, const char *key, const char **out)
{
    json_object *value;
    int found = member(object, key, json_type_string, &value);

    if (found != 1)
        return found;
    *out = json_object_get_string(value);
    /* A NUL byte would cut the string short in C: no path has one. */
    return strlen(*out) == (size_t)json_object_get_string_len(value) ? 1 : -1;
}

int member_unsigned(json_object *object, const char *key, unsigned long long *out)
{
    json_object *value;
    int found = member(object, key, json_type_int, &value);

    if (found != 1)
        return found;
    if (json_object_get_int64(value) < 0)
        return -1;
    *out = (unsigned long long)json_object_get_uint64(value);
    /* json-c reads any larger number as UINT64_MAX: refuse both. */
    return *out == UINT64_MAX ? -1 : 1;
}

int member_signed(json_object *object, const char *key, long long *out)
{
    json_object *value;
    int found = member(object, key, json_type_int, &value);

    if (found != 1)
        return found;
    *out = json_object_get_int64(value);
    /* json-c reads a number below INT64_MIN as INT64_MIN, and gives
     * INT64_MAX for one above it: refuse those. */
    if (*out == INT64_MIN || (*out == INT64_MAX && json_object_get_uint64(value) > INT64_MAX))
        return -1;
    return 1;
}

int member_object(json_object *object, const char *key, json_object **out)
{
    return member(object, key, json_type_object, out);
}

int member_array(json_object *object, const char *key, json_object **out)
{
    return member(object, key, json_type_array, out);
}

int answer_ok(json_object *answer, long long *code)
{
    int ok;

    if (member_bool(answer, "ok", &ok) != 1)
        return -1;
    if (!ok && member_signed(answer, "code", code) != 1)
        *code = -1;
    return ok;
}

char *path_in_app_view(const char *path)
{
    const char *app_root = getenv("SCOPEFS_MOUNT");
    char *joined;

    if (!app_root || app_root[0] != '/')
        return strdup(path);
    if (asprintf(&joined, "%s/%s", app_root, path) < 0)
        return NULL;
    return joined;
}
