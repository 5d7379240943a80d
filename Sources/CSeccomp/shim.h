// libseccomp (Debian's libseccomp-dev): the sandbox's system-call filter is
// compiled by the library the kernel's own tools use, not by hand.
#include <seccomp.h>

// SCMP_ACT_ERRNO is a function-like macro, which Swift cannot import.
static inline uint32_t scopefs_scmp_act_errno(uint16_t error) { return SCMP_ACT_ERRNO(error); }
