/// The sequence numbers failed batches gave back, and how far each appender's numbers moved.
///
/// A failed batch's numbers go to the lines after it (the stream has no gap that looks like
/// loss): the lines then waiting for the next batch are renumbered down. An appender's
/// numbers move by what was given back between its append and the moment its batch went to
/// the writer — not by what was given back before it appended (its numbers were drawn after
/// that), nor after (its batch's numbers were fixed then). So the shift is counted per
/// appender, from a mark taken at its append, not per batch: two appenders of one batch, one
/// before a give-back and one after, moved by different amounts.
struct SequenceGiveBacks {
    /// How many numbers failed batches have given back since the spool opened.
    private(set) var total: UInt64 = 0
    /// By ticket: ``total`` when its batch went to the writer (or failed before it could).
    private var whenIssued: [UInt64: UInt64] = [:]

    /// What an appender keeps from its append, to learn its shift once its batch is done.
    var mark: UInt64 { total }

    /// A failed batch gave back `count` numbers; the lines waiting were renumbered down.
    mutating func giveBack(_ count: UInt64) {
        total += count
    }

    /// The batch of `ticket` went to the writer: its lines' numbers are fixed from now on.
    mutating func issue(_ ticket: UInt64) {
        whenIssued[ticket] = total
    }

    /// How far the numbers of an appender of `ticket` that took `mark` moved down.
    func shift(ticket: UInt64, since mark: UInt64) -> UInt64 {
        (whenIssued[ticket] ?? total) - mark
    }

    /// Every appender of `ticket` has read its outcome.
    mutating func release(_ ticket: UInt64) {
        whenIssued[ticket] = nil
    }
}
