// A child process for tests of behaviour that ends a process: `OvertimeTestHarness <scenario>`.
// Each scenario prints what a test checks; the tests start it and read its output and status.
import Logging
import Overtime
import OvertimeTesting

#if canImport(Glibc)
    import Glibc
#endif

func say(_ line: String) {
    print(line)
    fflush(nil)  // all streams; `stdout` is a C global Swift 6 will not touch
}

/// A grant never ended, with `.exitProcess(status: 42)`: the report comes first, then exit 42.
func exitPolicy() throws {
    let clock = ManualClock()
    var configuration = RuntimeConfiguration()
    configuration.backgroundBudget = .seconds(30)
    configuration.expirationLeadTime = .seconds(5)
    configuration.terminationPolicy = .exitProcess(status: 42)
    configuration.onTermination = { report in say("REPORT \(report)") }
    let runtime = try Runtime(configuration: configuration, clock: clock)
    runtime.start()
    _ = runtime.beginBackgroundTask(name: "never-ended") { say("EXPIRING") }
    runtime.requestBackground()
    clock.advance(by: .seconds(30))
    say("STILL RUNNING")  // must never be printed
}

/// An expiration handler that blocks the loop: the watchdog names it and exits 70.
func watchdog() throws {
    var configuration = RuntimeConfiguration()
    configuration.backgroundBudget = .milliseconds(600)
    configuration.expirationLeadTime = .milliseconds(300)
    configuration.watchdogTimeout = .milliseconds(300)
    let runtime = try Runtime(configuration: configuration)
    _ = runtime.beginBackgroundTask(name: "blocking") {
        say("HANDLER BLOCKS")
        sleep(30)
        say("HANDLER RETURNED")  // must never be printed
    }
    runtime.requestBackground()
    runtime.run()
    say("RUN RETURNED")  // must never be printed
}

LoggingSystem.bootstrap(StreamLogHandler.standardError)
switch CommandLine.arguments.dropFirst().first {
case "exit-policy": try exitPolicy()
case "watchdog": try watchdog()
default:
    say("usage: OvertimeTestHarness exit-policy|watchdog")
    exit(64)
}
