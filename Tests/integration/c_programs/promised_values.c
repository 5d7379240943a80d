/* A document browser's look at one document in C (issue 53, SPEC S50),
 * for test_thumbnails.py: its promised values (no scope, no download), then
 * a preview saved as the saving app does (in scope), read back, and a
 * value that is not a PNG refused. One line per step:
 *
 *   before NAME SIZE STATE STATUS FIRST-4-BYTES-OF-PREVIEW|none DATED
 *   saved HEX-OF-PREVIEW-READ-BACK
 *   not-a-png ERRNO-NAME
 *   folder IS_FOLDER PREVIEW|none
 *
 *   promised_values DOCUMENT FOLDER PREVIEW-HEX
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scopefs.h>

static void print_hex(const unsigned char *bytes, size_t length)
{
    for (size_t i = 0; i < length; i++) printf("%02x", bytes[i]);
}

static unsigned char *from_hex(const char *hex, size_t *length)
{
    size_t n = strlen(hex) / 2;
    unsigned char *bytes = malloc(n ? n : 1);
    for (size_t i = 0; bytes && i < n; i++) sscanf(hex + 2 * i, "%2hhx", &bytes[i]);
    *length = n;
    return bytes;
}

static int fail(const char *what, const char *path)
{
    fprintf(stderr, "%s %s: %s\n", what, path, strerror(errno));
    return 1;
}

int main(int argc, char **argv)
{
    struct scopefs_promised_values values;
    size_t length, read_length;
    unsigned char *preview, *read_back;

    if (argc != 4) {
        fprintf(stderr, "usage: promised_values DOCUMENT FOLDER PREVIEW-HEX\n");
        return 64;
    }
    if (scopefs_promised_item_values(argv[1], &values) < 0) return fail("promised values of", argv[1]);
    printf("before %s %lld %s %s ", values.name, values.size, values.state, values.downloading_status);
    if (values.thumbnail) print_hex(values.thumbnail, values.thumbnail_length < 4 ? values.thumbnail_length : 4);
    else printf("none");
    printf(" %d\n", values.modified_seconds > 0);
    scopefs_promised_values_free(&values);

    preview = from_hex(argv[3], &length);
    if (scopefs_start_accessing(argv[1]) < 0) return fail("start accessing", argv[1]);
    if (scopefs_set_thumbnail(argv[1], preview, length) < 0) return fail("saving the preview of", argv[1]);
    if (!(read_back = scopefs_thumbnail(argv[1], &read_length))) return fail("reading the preview of", argv[1]);
    printf("saved ");
    print_hex(read_back, read_length);
    printf("\n");
    errno = 0;
    printf("not-a-png %s\n",
           scopefs_set_thumbnail(argv[1], (const unsigned char *)"GIF89a", 6) < 0 && errno == EINVAL ? "EINVAL"
                                                                                                     : "accepted");
    scopefs_stop_accessing(argv[1]);
    free(preview);
    free(read_back);

    if (scopefs_promised_item_values(argv[2], &values) < 0) return fail("promised values of", argv[2]);
    printf("folder %d %s\n", values.is_folder, values.thumbnail ? "preview" : "none");
    scopefs_promised_values_free(&values);
    return 0;
}
