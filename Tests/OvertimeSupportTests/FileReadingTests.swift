import Foundation
import OvertimeSupport
import Testing

/// Whole files read with the system's calls: every byte, whatever the size says.
@Suite("Reading whole files")
struct FileReadingTests {
    private func file(_ bytes: [UInt8]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("read-\(UUID().uuidString)").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(arguments: [0, 1, 4095, 4096, 65_537, 1 << 20])
    func everyByteOfAFileOfAnySize(size: Int) throws {
        // A pattern that does not repeat within the largest size tells misplaced bytes apart.
        // Not one random byte at a time (a system call each), nor a generic `map`: under
        // ThreadSanitizer each step of one takes the Swift runtime's lock, and a mebibyte of
        // them held one of the test runner's shared threads for 20 s and more.
        var bytes = [UInt8](repeating: 0, count: size)
        var index = 0
        while index < size {
            bytes[index] = UInt8(truncatingIfNeeded: (index &* 2_654_435_761) >> 13)
            index += 1
        }
        let path = try file(bytes)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try readWholeFile(path).get() == bytes)
    }

    /// A file whose size says nothing (the kernel's under /proc are 0 bytes long to
    /// `fstat`, and so is a FIFO) is read to its end all the same.
    @Test func aFileLongerThanItsSizeSaysIsReadToItsEnd() throws {
        let status = String(decoding: try readWholeFile("/proc/self/status").get(), as: UTF8.self)
        #expect(status.hasPrefix("Name:") && status.contains("\nVmRSS:"), "\(status)")

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fifo-\(UUID().uuidString)").path
        #expect(mkfifo(path, 0o600) == 0)
        defer { unlink(path) }
        let written = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let writer = Thread {
            let fd = open(path, O_WRONLY)
            var offset = 0
            while offset < written.count {
                let count = written[offset...].withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
                if count <= 0 { break }
                offset += count
            }
            close(fd)
        }
        writer.start()
        #expect(try readWholeFile(path).get() == written, "past the first byte and many chunks")
    }

    @Test func whatCannotBeReadIsAFailureNamingTheCall() {
        guard case .failure(let missing) = readWholeFile("/nonexistent/\(UUID().uuidString)") else {
            Issue.record("a missing file was read")
            return
        }
        #expect(missing.operation == "open" && missing.errno == ENOENT)
        guard case .failure(let folder) = readWholeFile("/tmp") else {
            Issue.record("a folder was read")
            return
        }
        #expect(folder.operation == "read" && folder.errno == EISDIR)
    }
}
