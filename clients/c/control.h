/*
 * control.h — the daemon's control socket as the C library's parts share it
 * (internal: not installed, nothing here is exported).
 *
 * Every request but the scope counters is one JSON line to
 * STATE/control.sock, answered by one JSON line (docs/API.md). Requests are
 * built and answers read with json-c; this file adds what the protocol
 * needs on top: where the socket is, the exchange, the "\udcXX" bytes of
 * paths (SPEC S33a), and strict readers of an answer's members, so that a
 * broken or hostile answer is EPROTO and never a crash.
 */
#ifndef SCOPEFS_CONTROL_H
#define SCOPEFS_CONTROL_H

#include <json-c/json.h>

#define SCOPEFS_EXPORT __attribute__((visibility("default")))

/* The socket of the daemon that serves `state_dir` (NULL: found like the
 * CLI finds it, see scopefs_bookmark_resolve() in scopefs.h). malloc'ed;
 * NULL with errno set. */
char *control_socket_path(const char *state_dir);

/*
 * Sends `request` as one line and reads the one-line answer. Returns the
 * answer, a JSON object (release it with json_object_put), or NULL with
 * errno set: ECONNREFUSED when no daemon listens (whatever connect(2)
 * said), EPROTO when the answer is not one JSON object on one line of at
 * most 1 MiB nested at most 32 deep, ENOMEM, or the errno of send/recv.
 */
json_object *control_ask(const char *socket_path, json_object *request);

/* control_ask() on the socket of `state_dir`. */
json_object *control_ask_state(const char *state_dir, json_object *request);

/* A new request object {"op": op}; NULL when out of memory. */
json_object *control_request(const char *op);

/* Adds a member to a request; -1 when out of memory (the value is freed). */
int request_add(json_object *request, const char *key, json_object *value);

/* A number written with three decimals ("waitSeconds": 1.500), as the
 * requests have always been written. */
json_object *request_seconds(double seconds);

/*
 * Strict readers of one member of an answer object. Each returns 1 when the
 * member is there with the right type, 0 when it is absent or null, -1 when
 * it has another type (the caller answers EPROTO). Strings are json-c's
 * (valid while the answer lives) and never hold a NUL byte (-1 if they do).
 */
int member_bool(json_object *object, const char *key, int *out);
int member_string(json_object *object, const char *key, const char **out);
int member_unsigned(json_object *object, const char *key, unsigned long long *out); /* an integer >= 0 */
int member_signed(json_object *object, const char *key, long long *out);            /* an integer */
int member_object(json_object *object, const char *key, json_object **out);
int member_array(json_object *object, const char *key, json_object **out);

/*
 * Whether the answer says {"ok": true}: 1; 0 when it says false, with *code
 * set to its "code" (the CLI's exit codes, docs/API.md), or to -1 when it
 * has none; -1 when "ok" is missing or not a boolean (EPROTO).
 */
int answer_ok(json_object *answer, long long *code);

/* A path of an answer in the calling app's view: inside `scopefs run`,
 * $SCOPEFS_MOUNT is the app's view of the mount (MOUNT/APP or the sandbox's
 * path) and answers' paths are relative to it. malloc'ed; NULL: ENOMEM. */
char *path_in_app_view(const char *path);

#endif /* SCOPEFS_CONTROL_H */
