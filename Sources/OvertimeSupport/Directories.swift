// Folders made the way `mkdir -p` makes them, for the spool and the schedule store.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Makes `path` and every missing parent (`mode` for those it makes; an existing one is
/// left as it is). Returns `nil`, or the `errno` of the `mkdir` that failed and its path.
package func makeDirectories(_ path: String, mode: mode_t) -> (errno: Int32, path: String)? {
    var prefix = path.hasPrefix("/") ? "/" : ""
    for component in path.split(separator: "/") {
        prefix += component
        if mkdir(prefix, mode) != 0, errno != EEXIST { return (errno, prefix) }
        prefix += "/"
    }
    return nil
}
