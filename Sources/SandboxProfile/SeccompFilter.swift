import CSeccomp
import CSystemShims
import CommandErrors
import Glibc

/// Every sandbox's system-call filter (SPEC S5, S41), for what bubblewrap's own
/// options leave open. Compiled with libseccomp and handed to bubblewrap
/// (`--seccomp FD`), which loads it just before it executes the app, after
/// its own namespace set-up. Everything not named here is allowed: the
/// sandbox's walls are its namespaces and its empty file system; this only
/// takes away the calls that reach through them. System calls of another
/// architecture's ABI (32-bit calls on x86-64) kill the process, libseccomp's
/// default for a foreign architecture.
public enum SeccompFilter {
    /// Calls that fail with EPERM. Most need a capability the sandbox does
    /// not hold anyway; they are here so that a capability gained in a nested
    /// user namespace gains nothing.
    public static let refused = [
        // Namespaces and mounts: a nested namespace is a way to new privileges.
        "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
        "fsmount", "fspick", "mount_setattr",
        // Kernel keyrings are not namespaced; perf and bpf read other processes.
        "keyctl", "add_key", "request_key", "perf_event_open", "bpf", "userfaultfd",
        // The kernel itself.
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "syslog", "uselib", "acct",
        "quotactl", "personality",
        // File handles bypass the path walk (and so the sandbox's file system).
        "open_by_handle_at",
        // io_uring's operations are not seen by seccomp.
        "io_uring_setup", "io_uring_enter", "io_uring_register",
    ]

    /// Terminal ioctls that type into, or take over, the terminal the sandbox
    /// shares with the owner's shell (TIOCSTI injects input that the shell
    /// would run after the app exits).
    public static let refusedIoctls: [UInt64] = [UInt64(scopefs_tiocsti), UInt64(scopefs_tioclinux)]

    /// clone() flags that make a namespace.
    public static let namespaceFlags: [UInt64] = withUnsafeBytes(of: scopefs_clone_namespace_flags) {
        $0.bindMemory(to: UInt.self).map(UInt64.init)
    }

    /// A pipe holding the compiled filter, whose read end the spawned
    /// bubblewrap inherits and reads to its end (`--seccomp FD`). A filter
    /// is a few hundred bytes, far below a pipe's size.
    public static func pipe() throws(CommandError) -> InheritedPipe {
        try InheritedPipe { descriptor throws(CommandError) in try export(to: descriptor) }
    }

    /// Writes the compiled filter (BPF) to `descriptor`.
    public static func export(to descriptor: Int32) throws(CommandError) {
        guard let context = seccomp_init(SCMP_ACT_ALLOW) else { throw failure("seccomp_init") }
        defer { seccomp_release(context) }
        let eperm = scopefs_scmp_act_errno(UInt16(EPERM))
        for name in refused {
            try add(context, eperm, name, [])
        }
        // clone3 passes its flags in memory seccomp cannot read: ENOSYS makes
        // libc fall back to clone, whose flags it can.
        try add(context, scopefs_scmp_act_errno(UInt16(ENOSYS)), "clone3", [])
        for flag in namespaceFlags {
            try add(
                context, eperm, "clone", [scmp_arg_cmp(arg: 0, op: SCMP_CMP_MASKED_EQ, datum_a: flag, datum_b: flag)])
        }
        for request in refusedIoctls {
            // The request argument is an int: compare its low 32 bits only.
            try add(
                context, eperm, "ioctl",
                [scmp_arg_cmp(arg: 1, op: SCMP_CMP_MASKED_EQ, datum_a: 0xFFFF_FFFF, datum_b: request)])
        }
        let result = seccomp_export_bpf(context, descriptor)
        guard result == 0 else { throw failure("seccomp_export_bpf", code: -result) }
    }

    private static func add(_ context: scmp_filter_ctx, _ action: UInt32, _ name: String, _ conditions: [scmp_arg_cmp])
        throws(CommandError)
    {
        let number = seccomp_syscall_resolve_name(name)
        // A call this architecture does not have needs no rule.
        guard number != __NR_SCMP_ERROR else { return }
        let result = conditions.withUnsafeBufferPointer {
            seccomp_rule_add_array(context, action, number, UInt32($0.count), $0.baseAddress)
        }
        guard result == 0 else { throw failure("a seccomp rule for \(name)", code: -result) }
    }

    private static func failure(_ what: String, code: Int32 = ENOMEM) -> CommandError {
        CommandError(
            .internalError,
            "cannot build the sandbox's system-call filter: \(what) failed: \(String(cString: strerror(code)))")
    }
}
