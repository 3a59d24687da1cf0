import Foundation

/// Process `pid`'s open descriptors as `3=socket:[…]`, in the order of their numbers, from
/// `/proc/<pid>/fd`. A descriptor closed between the listing and the reading of its link
/// stays counted, as `N=?`.
package func descriptorTargets(of pid: pid_t) throws -> [String] {
    let folder = "/proc/\(pid)/fd"
    return try FileManager.default.contentsOfDirectory(atPath: folder)
        .sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }
        .map { number in
            number + "=" + ((try? FileManager.default.destinationOfSymbolicLink(atPath: folder + "/" + number)) ?? "?")
        }
}
