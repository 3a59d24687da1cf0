/// Where a spool keeps its files: on disk (what programs use) or on a volume in memory
/// (for tests: see ``InMemorySpoolVolume``).
public struct SpoolStorage: Sendable {
    let files: SpoolFiles

    /// Files on disk, each write made durable as ``SpoolConfiguration/durability`` says.
    public static var disk: SpoolStorage { SpoolStorage(files: .disk) }

    /// Files on `volume`, in memory: nothing survives the process.
    public static func memory(_ volume: InMemorySpoolVolume) -> SpoolStorage {
        SpoolStorage(files: SpoolFiles(system: volume))
    }
}
