// What a dashboard action is done to, as its address says: one request or instance, or the
// requests a bulk action selects by tag and identifier prefix.

/// The subject of an action, read from its address's query: `id` for an action on one
/// request or instance; `tag` (and `prefix`, for a retry of what failed) for a bulk action.
struct ActionSubject: Sendable, Equatable {
    /// The actions on many requests at once.
    static let bulkActions: Set<String> = ["run-tag", "cancel-tag", "retry-failed"]

    /// The request or instance; empty for a bulk action.
    let identifier: String
    /// A bulk action's tag, when given.
    let tag: String?
    /// A retry of what failed: the identifiers' prefix, when given.
    let prefix: String?
    let isBulk: Bool

    /// The subject of `action` the query `parameters` names (an empty field is no filter).
    init(_ action: String, _ parameters: [String: String]) {
        isBulk = Self.bulkActions.contains(action)
        func given(_ name: String) -> String? { parameters[name].flatMap { $0.isEmpty ? nil : $0 } }
        identifier = isBulk ? "" : parameters["id"] ?? ""
        tag = isBulk ? given("tag") : nil
        prefix = action == "retry-failed" ? given("prefix") : nil
    }

    /// The query of its addresses: `id=…`, or `tag=…&prefix=…`.
    var query: String {
        guard isBulk else { return "id=\(Formatting.query(identifier))" }
        return [tag.map { "tag=\(Formatting.query($0))" }, prefix.map { "prefix=\(Formatting.query($0))" }]
            .compactMap { $0 }.joined(separator: "&")
    }

    /// As pages and records name it: the identifier, or what a bulk action selects
    /// (`tagged nightly`, `whose identifiers begin with report.`, `every request`).
    var name: String {
        guard isBulk else { return identifier }
        let parts = [tag.map { "tagged \($0)" }, prefix.map { "whose identifiers begin with \($0)" }].compactMap { $0 }
        return parts.isEmpty ? "every request" : parts.joined(separator: " and ")
    }

    /// Why the action cannot be asked for: a tag action without its tag.
    func missing(for action: String) -> String? {
        action.hasSuffix("-tag") && tag == nil ? "Give the tag whose requests to act on." : nil
    }
}
