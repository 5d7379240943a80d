// zlib (Debian's zlib1g-dev): the CRC-32 of the PNG chunks ScopeFS adds to
// the previews it writes into the owner's freedesktop cache (SPEC S50).
#include <zlib.h>
