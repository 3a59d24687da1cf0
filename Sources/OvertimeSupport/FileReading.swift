// Whole small files and folder listings, read with the system's calls (no Foundation:
// embedding programs should not load it for this).

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A system call that failed: its name and `errno`.
package struct SystemCallFailure: Error, Sendable {
    package let operation: String
    package let errno: Int32
}

/// Every byte of the file at `path`.
package func readWholeFile(_ path: String) -> Result<[UInt8], SystemCallFailure> {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return .failure(SystemCallFailure(operation: "open", errno: errno)) }
    defer { close(fd) }
    // Sized by fstat and read in place: a segment is read once, with no growing copies.
    var info = stat()
    let expected = fstat(fd, &info) == 0 ? max(Int(info.st_size), 0) : 0
    var result = [UInt8](repeating: 0, count: expected + (1 << 12))
    var filled = 0
    while true {
        if filled == result.count { result += [UInt8](repeating: 0, count: result.count) }
        let count = result.withUnsafeMutableBytes { buffer in
            read(fd, buffer.baseAddress! + filled, buffer.count - filled)
        }
        if count < 0 {
            if errno == EINTR { continue }
            return .failure(SystemCallFailure(operation: "read", errno: errno))
        }
        if count == 0 {
            result.removeSubrange(filled...)
            return .success(result)
        }
        filled += count
    }
}

/// The names in the folder at `path` (without `.` and `..`), sorted.
package func listDirectory(_ path: String) -> Result<[String], SystemCallFailure> {
    guard let handle = opendir(path) else { return .failure(SystemCallFailure(operation: "opendir", errno: errno)) }
    defer { closedir(handle) }
    var names: [String] = []
    while let entry = readdir(handle) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return .success(names.sorted())
}
