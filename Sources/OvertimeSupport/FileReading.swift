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

    package init(operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }
}

/// Every byte of the file at `path`.
package func readWholeFile(_ path: String) -> Result<[UInt8], SystemCallFailure> {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return .failure(SystemCallFailure(operation: "open", errno: errno)) }
    defer { close(fd) }
    // Sized by fstat and read in place, without zero-filling first: a segment is read
    // once per upload, with no growing copies. One byte more than the size tells a file
    // that grew since; the rest is then read in chunks.
    var info = stat()
    let expected = fstat(fd, &info) == 0 ? max(Int(info.st_size), 0) : 0
    var failure: Int32?
    var result = [UInt8](unsafeUninitializedCapacity: expected + 1) { buffer, initialized in
        initialized = 0
        while initialized < buffer.count {
            let count = read(fd, buffer.baseAddress! + initialized, buffer.count - initialized)
            if count < 0, errno == EINTR { continue }
            if count < 0 { failure = errno }
            if count <= 0 { return }
            initialized += count
        }
    }
    if let failure { return .failure(SystemCallFailure(operation: "read", errno: failure)) }
    guard result.count > expected else { return .success(result) }
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if count < 0, errno == EINTR { continue }
        if count < 0 { return .failure(SystemCallFailure(operation: "read", errno: errno)) }
        if count == 0 { return .success(result) }
        result += chunk[..<count]
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
