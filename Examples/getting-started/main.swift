// Getting started: a daemon that keeps a sample of its load every second in memory and,
// when SIGTERM sends it to the background, writes the samples to a file inside a grant of
// background time — finished well before the service manager's SIGKILL.
import Glibc
import Overtime

var configuration = RuntimeConfiguration()
configuration.backgroundBudget = .seconds(20)  // under systemd's TimeoutStopSec=30
let runtime = try Runtime(configuration: configuration)
let path = CommandLine.arguments.dropFirst().first ?? "samples.txt"
let samples = Samples()

// Every second on the loop thread, until the runtime terminates.
func sampleEverySecond() {
    _ = runtime.schedule(after: .seconds(1)) {
        samples.add("\(runtime.clock.wallClockNow) load \(loadAverage())")
        sampleEverySecond()
    }
}
sampleEverySecond()

// SIGTERM (or SIGINT): the runtime enters the background, emits didEnterBackground, and
// terminates once no grant is open — or at the budget's end.
let token = runtime.observe { event in
    guard event == .didEnterBackground else { return }
    let id = runtime.beginBackgroundTask(name: "write-samples") {
        print("expiring: 5 s left; a real daemon stops here and keeps its state")
    }
    runtime.execute {  // after the observers, still on the loop thread
        let written = samples.write(to: path)
        print("wrote \(written) samples to \(path)")
        runtime.endBackgroundTask(id)
    }
}
runtime.run()  // until terminated
withExtendedLifetime(token) {}

/// The samples, touched only on the runtime's loop thread (timers, observers and
/// `execute` all run there), so a lock would guard nothing.
final class Samples: @unchecked Sendable {
    private var lines: [String] = []

    func add(_ line: String) { lines.append(line) }

    /// Appends the samples to the file at `path` and puts them on disk; returns how many.
    func write(to path: String) -> Int {
        guard let file = fopen(path, "a") else { return 0 }
        for line in lines { fputs(line + "\n", file) }
        fflush(file)
        fsync(fileno(file))
        fclose(file)
        defer { lines.removeAll() }
        return lines.count
    }
}

/// The one-minute load average.
func loadAverage() -> Double {
    var load = [0.0]
    return getloadavg(&load, 1) == 1 ? load[0] : 0
}
