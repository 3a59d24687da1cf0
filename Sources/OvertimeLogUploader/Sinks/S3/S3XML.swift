// The few XML documents S3 speaks, read and written as text: error answers, the upload ID
// of a new multipart upload, the list of unfinished ones, and the completion request.
// Element names are fixed and values are plain text, so no XML library is pulled in.

/// Reading and writing S3's XML documents.
enum S3XML {
    /// The text of the first `<name>…</name>` in `text`, entities decoded; nil when there
    /// is none or it is empty.
    static func value(of name: String, in text: Substring) -> String? {
        guard let element = elements(name, in: text).first else { return nil }
        let value = decoded(element)
        return value.isEmpty ? nil : value
    }

    /// The contents (entities still encoded) of every `<name>…</name>` in `text`, in order.
    static func elements(_ name: String, in text: Substring) -> [Substring] {
        let open = Array("<\(name)>".utf8)
        let close = Array("</\(name)>".utf8)
        let bytes = text.utf8
        var found: [Substring] = []
        var index = bytes.startIndex
        while let start = Self.index(of: open, in: bytes[index...]) {
            let contentStart = bytes.index(start, offsetBy: open.count)
            guard let end = Self.index(of: close, in: bytes[contentStart...]) else { break }
            found.append(Substring(bytes[contentStart..<end]))
            index = bytes.index(end, offsetBy: close.count)
        }
        return found
    }

    /// `text` with `&lt;` `&gt;` `&quot;` `&apos;` `&amp;` and numeric references decoded.
    static func decoded(_ text: Substring) -> String {
        guard text.contains("&") else { return String(text) }
        var result = ""
        var rest = text[...]
        while let ampersand = rest.firstIndex(of: "&") {
            result += rest[..<ampersand]
            guard let semicolon = rest[ampersand...].firstIndex(of: ";") else {
                rest = rest[ampersand...]
                break
            }
            let entity = rest[rest.index(after: ampersand)..<semicolon]
            let number =
                entity.hasPrefix("#x")
                ? UInt32(entity.dropFirst(2), radix: 16) : entity.hasPrefix("#") ? UInt32(entity.dropFirst()) : nil
            if let named = entities.first(where: { $0.name == entity }) {
                result.append(named.character)
            } else if let scalar = number.flatMap(Unicode.Scalar.init) {
                result.unicodeScalars.append(scalar)
            } else {
                result += rest[ampersand...semicolon]  // not an entity: kept as it is
            }
            rest = rest[rest.index(after: semicolon)...]
        }
        return result + rest
    }

    /// `text` escaped for an element's content.
    static func escaped(_ text: String) -> String {
        var result = ""
        for character in text {
            if let named = entities.first(where: { $0.character == character }) {
                result += "&" + named.name + ";"
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// XML's five named entities.
    private static let entities: [(name: Substring, character: Character)] = [
        ("lt", "<"), ("gt", ">"), ("quot", "\""), ("apos", "'"), ("amp", "&"),
    ]

    private static func index(of needle: [UInt8], in bytes: Substring.UTF8View.SubSequence) -> String.Index? {
        guard let first = needle.first else { return nil }
        var index = bytes.startIndex
        while let candidate = bytes[index...].firstIndex(of: first) {
            if bytes[candidate...].starts(with: needle) { return candidate }
            index = bytes.index(after: candidate)
        }
        return nil
    }
}
