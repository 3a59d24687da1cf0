import Foundation

/// A fresh folder under the system's temporary directory, removed by `remove()`.
package struct TemporaryDirectory {
    package let path: String

    package init(_ prefix: String = "overtime") {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    package func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    package func files(in folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path + "/" + folder)) ?? []).sorted()
    }
}
