import Foundation
import Glibc
import ProviderExtensions
import Testing

/// Start, cancel, stall, crash and restart (docs/PROVIDERS.md, "Life
/// cycle" and "Limits"; SPEC S41, S42): every wait ends, and a broken
/// extension is restarted with back-off or given up on. Timing-bound
/// checks run one at a time.
@Suite(.serialized) struct LifecycleTests {
    let fixture: Fixture

    init() throws {
        fixture = try Fixture()
    }

    @Test("a cancelled fetch throws cancelled (EINTR) at once; progress arrived meanwhile")
    func cancel() throws {
        let host = fixture.host(["python3", Paths.slowExtension])
        #expect(host.waitUntilRunning(timeout: 10))
        let progress = ProgressCount()
        let control = RequestControl { completed, _ in progress.add(completed) }
        // Timed from the cancel itself: a loaded machine may run the
        // cancelling block late, which says nothing of the host.
        let cancelledAt = Moment()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.4) {
            cancelledAt.mark()
            control.cancel()
        }
        let thrown = failure { try host.fetch("slow", version: nil, range: nil, control) }
        let took = cancelledAt.secondsSince
        #expect(thrown?.code == .cancelled && thrown?.errno == EINTR)
        #expect(took < 1.0, "thrown \(took) s after the cancel")
        #expect(progress.count > 0, "no $/progress reached onProgress")
        // The extension answered `cancelled`: nothing killed, still running.
        #expect(host.state.isRunning)
        #expect(!fixture.recorder.events.contains { if case .killed = $0 { return true } else { return false } })
        #expect(try FileManager.default.contentsOfDirectory(atPath: host.stagingDirectory).isEmpty)
    }

    @Test("$/progress is a sign of life: a 1.5 s fetch with progress outlives a 0.4 s stall limit")
    func progressResetsStall() throws {
        var tunables = ExtensionTunables.fast
        tunables.stallLimit = 0.4
        let host = fixture.host(["python3", Paths.slowExtension], tunables: tunables)
        #expect(host.waitUntilRunning(timeout: 10))
        let control = RequestControl()
        DispatchQueue.global().asyncAfter(deadline: .now() + 1.5) { control.cancel() }
        let thrown = failure { try host.fetch("slow", version: nil, range: nil, control) }
        #expect(thrown?.code == .cancelled, "\(String(describing: thrown))")
        #expect(thrown?.stalled == false)
    }

    @Test("a call cancelled before it is sent never reaches the extension")
    func cancelledBeforehand() throws {
        let host = fixture.host(["python3", Paths.slowExtension])
        #expect(host.waitUntilRunning(timeout: 10))
        let control = RequestControl()
        control.cancel()
        #expect(failure { try host.item("sleep:5", control) }?.code == .cancelled)
    }

    @Test("a stall: ETIMEDOUT within the stall limit, then the process is killed and restarted")
    func stall() throws {
        let host = fixture.hostile("stall")
        #expect(host.waitUntilRunning(timeout: 10))
        var thrown: ExtensionFailure?
        let took = seconds { thrown = failure { try host.item("stall", RequestControl()) } }
        #expect(thrown?.stalled == true && thrown?.errno == ETIMEDOUT)
        #expect(took >= 1.0 && took < 1.0 + 0.5, "ETIMEDOUT after \(took) s; the stall limit is 1 s")
        // killAfterCancel (0.5 s) later: killed, restarted, running again.
        #expect(fixture.recorder.wait { events in events.filter(\.isStarted).count == 2 })
        let events = fixture.recorder.events
        #expect(events.contains(.stalled(method: "item", seconds: 1)))
        #expect(events.contains { if case .killed = $0 { return true } else { return false } })
        #expect(events.contains(.exited(.signal(SIGKILL))))
        #expect(host.waitUntilRunning(timeout: 10))
        #expect(try host.item("fine", RequestControl()).id == "fine")
    }

    @Test("a crash loop: 5 exits within the window mark it failed; the owner's restart clears that")
    func crashLoop() throws {
        let healed = fixture.path("healed")
        let host = fixture.hostile("crash", options: ["healed": healed])
        #expect(fixture.recorder.wait { $0.contains { if case .failed = $0 { return true } else { return false } } })
        guard case .failed(let reason) = host.state else {
            Issue.record("state \(host.state)")
            return
        }
        #expect(reason.contains("5 exits"))
        let events = fixture.recorder.events
        #expect(events.filter { $0 == .exited(.code(3)) }.count == 5)
        let delays = events.compactMap { event -> Double? in
            if case .restarting(_, let delay, _) = event { return delay } else { return nil }
        }
        #expect(delays == [0.05, 0.1, 0.2, 0.4], "back-off doubling from 0.05 s, capped at 0.4 s")
        let refused = failure { try host.item("x", RequestControl()) }
        #expect(refused?.code == .unreachable && refused?.errno == EIO)

        FileManager.default.createFile(atPath: healed, contents: nil)
        host.restart()
        #expect(host.waitUntilRunning(timeout: 10))
        #expect(try host.item("x", RequestControl()).id == "x")
    }

    @Test("no answer to initialize: killed after the limit, restarted; calls meanwhile fail unreachable")
    func neverInitializes() throws {
        var tunables = ExtensionTunables.fast
        tunables.initializeTimeout = 0.3
        tunables.waitForRunning = 0.5
        let host = fixture.host(["python3", Paths.hostile("no_initialize")], tunables: tunables)
        var thrown: ExtensionFailure?
        let took = seconds { thrown = failure { try host.item("x", RequestControl()) } }
        #expect(thrown?.code == .unreachable)
        #expect(took >= 0.5 && took < 1.5, "waited \(took) s for a running extension; the limit is 0.5 s")
        #expect(
            fixture.recorder.wait {
                $0.filter { if case .killed = $0 { return true } else { return false } }.count >= 2
            })
        #expect(!host.state.isRunning)
        #expect(fixture.recorder.count(\.isStarted) == 0)
    }

    @Test(
        "unsupportedVersion, or a version it was not offered: failed at once, shut down cleanly",
        arguments: ["error", "1.3"])
    func otherVersion(answer: String) throws {
        let host = fixture.hostile("other_version", options: ["answer": answer])
        #expect(fixture.recorder.wait { $0.contains { if case .failed = $0 { return true } else { return false } } })
        guard case .failed(let reason) = host.state else {
            Issue.record("state \(host.state)")
            return
        }
        #expect(reason.contains(answer == "error" ? "I speak 2.0" : "it answered 1.3"), "\(reason)")
        // One try (a version does not change on restart), ended by `exit`.
        #expect(
            fixture.recorder.events.filter { if case .restarting = $0 { return true } else { return false } }.isEmpty)
        #expect(fixture.recorder.events.contains(.exited(.code(0))))
    }

    @Test("at most 16 requests in flight; the others wait their turn and are answered")
    func inFlightLimit() throws {
        let host = fixture.hostile("concurrency")
        #expect(host.waitUntilRunning(timeout: 10))
        let answered = ProgressCount()
        let group = DispatchGroup()
        for index in 0..<40 {
            group.enter()
            Thread {
                if (try? host.item("n\(index)", RequestControl())) != nil { answered.add(1) }
                group.leave()
            }.start()
        }
        #expect(group.wait(timeout: .now() + 20) == .success)
        #expect(answered.count == 40)
        let most = try host.item("max", RequestControl()).size
        #expect(most == 16, "the extension saw \(most) requests at once")
    }

    @Test("a host never started, or stopped, answers unreachable at once")
    func notStarted() throws {
        let host = fixture.host(["python3", Paths.slowExtension], start: false)
        var thrown: ExtensionFailure?
        let took = seconds { thrown = failure { try host.item("sleep:0", RequestControl()) } }
        #expect(thrown?.code == .unreachable && took < 0.1)
    }

    @Test("a command that does not exist: restarted with back-off, then failed")
    func missingCommand() throws {
        let host = fixture.host([fixture.path("no-such-extension")])
        #expect(fixture.recorder.wait { $0.contains { if case .failed = $0 { return true } else { return false } } })
        guard case .failed(let reason) = host.state else { return }
        #expect(reason.contains("no such executable"))
    }

    @Test("stop while a request is in flight: it ends (cancelled by the extension, or unreachable)")
    func stopDuringCall() throws {
        let host = fixture.host(["python3", Paths.slowExtension])
        #expect(host.waitUntilRunning(timeout: 10))
        let done = DispatchSemaphore(value: 0)
        let result = FailureBox()
        DispatchQueue.global().async {
            result.set(failure { try host.fetch("slow", version: nil, range: nil, RequestControl()) })
            done.signal()
        }
        usleep(200_000)
        let took = seconds { host.stop() }
        #expect(done.wait(timeout: .now() + 5) == .success)
        #expect([.cancelled, .unreachable].contains(result.value?.code))
        #expect(took < 3, "stop took \(took) s")
        #expect(host.state == .stopped)
    }

    @Test("changed and log notifications, and stderr, reach onChanged and the log")
    func notifications() throws {
        let host = fixture.host(["python3", Paths.slowExtension], start: false)
        let changed = ProgressCount()
        host.onChanged = { changed.add(1) }
        host.start()
        #expect(try host.item("announce", RequestControl()).id == "sleep:0")
        #expect(fixture.recorder.waitForLog(containing: "the store changed"))
        #expect(fixture.recorder.waitForLog(containing: "stray output that must not reach the daemon"))
        #expect(changed.count == 1)
    }
}

/// The extension's stderr in the daemon's log (docs/PROVIDERS.md,
/// "Transport"): lines cut at 4 KiB, at most 50 a second by default.
@Suite struct StderrTests {
    @Test("a 10,000-byte stderr line is cut at 4 KiB; a burst of 2,000 lines is mostly dropped, and said so")
    func stderr() throws {
        let fixture = try Fixture()
        let host = fixture.hostile("noisy_stderr")
        #expect(host.waitUntilRunning(timeout: 10))
        #expect(try host.item("noise", RequestControl()).id == "noise")
        #expect(
            fixture.recorder.wait {
                $0.contains { if case .logLinesDropped = $0 { return true } else { return false } }
            })
        let lines = fixture.recorder.logLines
        let long = try #require(lines.first { $0.hasPrefix("LLLL") })
        #expect(long == String(repeating: "L", count: 4096) + " [cut]")
        let noise = lines.filter { $0.hasPrefix("noise ") }.count
        #expect(noise > 0 && noise < 200, "\(noise) of 2,000 lines reached the log")
        #expect(lines.contains { $0.contains("lines of the extension's stderr dropped") })
    }
}

/// When something happened, set on one thread and read on another.
final class Moment: @unchecked Sendable {
    private let lock = NSLock()
    private var date: Date?
    func mark() { lock.withLock { date = Date() } }
    /// Seconds since `mark`; infinity before it.
    var secondsSince: Double { lock.withLock { date.map { Date().timeIntervalSince($0) } ?? .infinity } }
}

final class ProgressCount: @unchecked Sendable {
    private let lock = NSLock()
    private var total: Int64 = 0
    private var calls = 0
    func add(_ value: Int64) {
        lock.withLock {
            total += value
            calls += 1
        }
    }
    var count: Int { lock.withLock { calls } }
}

final class FailureBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: ExtensionFailure?
    func set(_ value: ExtensionFailure?) { lock.withLock { stored = value } }
    var value: ExtensionFailure? { lock.withLock { stored } }
}
