// Plain aligned columns, as overtimectl prints tables and the scheduler answers them.

/// Renders rows as columns two spaces apart, the last column unpadded.
package enum TextTable {
    package static func render(_ rows: [[String]]) -> String {
        let columns = rows.map(\.count).max() ?? 0
        let widths = (0..<columns).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] + 2 - cell.count)
            }.joined()
        }.joined(separator: "\n")
    }
}
