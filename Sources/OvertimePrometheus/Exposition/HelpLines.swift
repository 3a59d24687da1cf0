// Puts a `# HELP` line before each family swift-prometheus emits without one.

/// Adds help lines to an exposition: before each `# TYPE NAME …` line whose family has no
/// `# HELP` line yet, the help `help(NAME)` gives, when it gives one.
func addingHelpLines(to exposition: [UInt8], help: (Substring) -> String?) -> [UInt8] {
    var result: [UInt8] = []
    result.reserveCapacity(exposition.count + exposition.count / 4)
    let typePrefix = Array("# TYPE ".utf8)
    var previousWasHelp = false
    for line in exposition.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast(
        exposition.last == UInt8(ascii: "\n") ? 1 : 0)
    {
        if line.starts(with: typePrefix), !previousWasHelp {
            let rest = line.dropFirst(typePrefix.count)
            let name = Substring(decoding: rest.prefix { $0 != UInt8(ascii: " ") }, as: UTF8.self)
            if let text = help(name) {
                result += Array("# HELP \(name) \(escapedHelp(text))\n".utf8)
            }
        }
        previousWasHelp = line.starts(with: Array("# HELP ".utf8))
        result += line
        result.append(UInt8(ascii: "\n"))
    }
    return result
}

/// Help text as the text format wants it: backslashes and line feeds escaped.
func escapedHelp(_ text: String) -> String {
    var escaped = ""
    for character in text {
        switch character {
        case "\\": escaped += "\\\\"
        case "\n": escaped += "\\n"
        default: escaped.append(character)
        }
    }
    return escaped
}
