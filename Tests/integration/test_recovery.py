"""A daemon that dies leaves a dead mountpoint; mounting again recovers it.
SPEC S34."""

from scopefs_harness import ALPHA, LOCAL, REPORT_BYTES, mount_count

READ_HEAD = "start_accessing(sys.argv[1])\nemit(outcome(lambda: read_bytes(sys.argv[1])[:16].hex()))"


def test_mount_recovers_after_daemon_sigkill(env):
    """SPEC S34: after `kill -9` of the daemon the mountpoint reports
    "Transport endpoint is not connected" (ENOTCONN); `scopefs mount` on the
    same mountpoint recovers it (exit 0, a single live mount), reads work
    again, and a normal unmount follows (teardown)."""
    env.grant(ALPHA, f"{LOCAL}:docs/report.txt")
    env.mount()
    target = env.prov(ALPHA, LOCAL, "docs/report.txt")
    assert env.app_json(ALPHA, READ_HEAD, target) == {"ok": REPORT_BYTES[:16].hex()}

    env.kill_daemon()
    dead = env.host_json("emit(listing(sys.argv[1]))", env.mnt)
    assert dead == "ENOTCONN"  # stat of the root may still be answered from the attr cache

    env.mount()
    assert mount_count(env.mnt) == 1, "the new mount was stacked on the dead one"
    assert env.app_json(ALPHA, READ_HEAD, target) == {"ok": REPORT_BYTES[:16].hex()}


def test_mount_helper_for_fstab(env):
    """SPEC S1, S34: mount-scripts/mount.scopefs (what mount(8) runs for
    type `scopefs` in fstab) maps `-o scopes=lenient,open-files=keep` onto
    `scopefs mount` and mounts; the daemon reports those options."""
    import json

    from scopefs_harness import REPO_ROOT, mountinfo_entries, run_bounded, scopefs_bin

    helper = REPO_ROOT / "mount-scripts" / "mount.scopefs"
    environment = dict(env.base_env, SCOPEFS_BIN=str(scopefs_bin()))
    p = run_bounded(
        [str(helper), str(env.state), str(env.mnt), "-o", "rw,scopes=lenient,open-files=keep"],
        30,
        environment,
        what="mount.scopefs",
    )
    env.mounted = True
    assert p.returncode == 0, p.stderr
    assert any(mp == str(env.mnt) and fs == "fuse.scopefs" for mp, fs in mountinfo_entries())
    env._record_daemon()
    daemon = json.loads(env.cli("status", "--json").stdout)["daemon"]
    assert (daemon["scopes"], daemon["openFiles"]) == ("lenient", "keep")
    bad = run_bounded([str(helper), str(env.state)], 30, environment, what="mount.scopefs usage")
    assert bad.returncode == 64 and "usage" in bad.stderr


def test_mount_helper_takes_every_mount_option_and_rejects_unknown_ones(env):
    """docs/CLI.md, "mount.scopefs": every `scopefs mount` option has an -o
    spelling (open_files=, scopes=, scope_budget=, allow_other, timeout=,
    log=), mount(8)'s and systemd's generic options are ignored, and an
    unknown option (a typo such as `scope=lenient`) is an error, exit 64,
    naming it, with nothing mounted; `-f` (fake) checks and mounts nothing."""
    import json

    from scopefs_harness import REPO_ROOT, mount_count, run_bounded, scopefs_bin

    helper = REPO_ROOT / "mount-scripts" / "mount.scopefs"
    environment = dict(env.base_env, SCOPEFS_BIN=str(scopefs_bin()))

    def helper_run(*args):
        return run_bounded([str(helper), str(env.state), str(env.mnt), *args], 30, environment, what="mount.scopefs")

    for typo in ("scope=lenient", "open_file=keep", "ro"):
        bad = helper_run("-o", f"rw,{typo},nofail")
        assert bad.returncode == 64 and f"'{typo}'" in bad.stderr, bad
        assert mount_count(env.mnt) == 0, f"-o {typo} mounted anyway"
    fake = helper_run("-f", "-o", "scopes=lenient")
    assert fake.returncode == 0 and mount_count(env.mnt) == 0, fake

    p = helper_run(
        "-n",
        "-o",
        "defaults,rw,noauto,nofail,_netdev,x-systemd.automount,x-systemd.mount-timeout=30,"
        "open_files=keep,scopes=lenient,scope_budget=7,allow_other,timeout=25,log=file",
        "-t",
        "scopefs",
    )
    env.mounted = bool(mount_count(env.mnt))
    assert p.returncode == 0, p.stderr
    env._record_daemon()
    daemon = json.loads(env.cli("status", "--json").stdout)["daemon"]
    assert (daemon["scopes"], daemon["openFiles"], daemon["scopeBudget"]) == ("lenient", "keep", 7), daemon
    with open("/proc/self/mountinfo", errors="surrogateescape") as mountinfo:
        line = next(line for line in mountinfo if f" {env.mnt} " in line)
    assert "allow_other" in line.split(" - ")[1], line
    assert (env.state / "daemon.log").exists(), "log=file did not reach `scopefs mount`"
