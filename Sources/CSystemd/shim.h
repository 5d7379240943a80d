// libsystemd (Debian's libsystemd-dev): the journal's native protocol
// (sd_journal_sendv) and the service manager's readiness protocol
// (sd_notify). Both are no-ops, returning an error, where systemd is absent.
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
