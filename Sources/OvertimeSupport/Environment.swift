// The process's environment variables, read without Foundation.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The value of the environment variable `name`, or `nil` when it is not set.
package func environmentValue(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
}
