// What each page model answers to a template's `{{key}}`: its stored properties by name.
// Without these, Mustache finds a key by reflection, which looks at every field of the
// model (demangling each one's type) for every key it renders: 79 % of a page's time on
// the fleet's requests page. Debug builds check each answer against reflection's.

import Mustache

/// A model whose fields the templates read by name.
protocol TemplateModel: MustacheParent {
    /// The field named `name`, or `nil` (none, or an optional without a value): the
    /// template then looks in the enclosing models.
    func field(named name: String) -> Any?
}

extension TemplateModel {
    func child(named name: String) -> Any? {
        let found = field(named: name)
        assert(
            found.map { String(describing: $0) } == Self.reflected(self, name).map { String(describing: $0) },
            "\(Self.self).field(named: \"\(name)\") and reflection disagree")
        return found
    }

    /// The value reflection finds for the field `name`, an optional unwrapped (as Mustache's
    /// own lookup).
    private static func reflected(_ model: Self, _ name: String) -> Any? {
        guard let value = Mirror(reflecting: model).children.first(where: { $0.label == name })?.value else {
            return nil
        }
        let mirror = Mirror(reflecting: value)
        return mirror.displayStyle == .optional ? mirror.children.first?.value : value
    }
}

/// A page whose template reads nothing but its rows.
protocol RowsTemplateModel: TemplateModel {
    associatedtype Row
    /// The page's rows.
    var rows: [Row] { get }
}

extension RowsTemplateModel {
    func field(named name: String) -> Any? {
        name == "rows" ? rows : nil
    }
}

extension Frame: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "site": self.site
        case "title": self.title
        case "page": self.page
        case "base": self.base
        case "nav": self.nav
        case "user": self.user
        case "csrf": self.csrf
        case "signedIn": self.signedIn
        case "readOnly": self.readOnly
        case "readAt": self.readAt
        case "ownerProblem": self.ownerProblem
        default: nil
        }
    }
}

extension Frame.NavigationItem: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "path": self.path
        case "label": self.label
        case "current": self.current
        default: nil
        }
    }
}

extension Choice: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "value": self.value
        case "label": self.label
        case "selected": self.selected
        default: nil
        }
    }
}

extension RequestRow: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "identifier": self.identifier
        case "link": self.link
        case "state": self.state
        case "next": self.next
        case "nextRelative": self.nextRelative
        case "waitsFor": self.waitsFor
        case "attempt": self.attempt
        case "lastRun": self.lastRun
        case "lastRunRelative": self.lastRunRelative
        case "tags": self.tags
        default: nil
        }
    }
}

extension RequestsPage: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "states": self.states
        case "orders": self.orders
        case "sortedBy": self.sortedBy
        case "prefix": self.prefix
        case "tag": self.tag
        case "search": self.search
        case "total": self.total
        case "rows": self.rows
        case "filtered": self.filtered
        case "partial": self.partial
        case "pager": self.pager
        case "tagActions": self.tagActions
        default: nil
        }
    }
}

extension SortedColumns: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "nextRun": self.nextRun
        case "attempt": self.attempt
        case "lastRun": self.lastRun
        default: nil
        }
    }
}

extension ColumnSort: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "link": self.link
        case "ariaSort": self.ariaSort
        default: nil
        }
    }
}

extension Pager: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "first": self.first
        case "previous": self.previous
        case "next": self.next
        case "last": self.last
        case "any": self.any
        default: nil
        }
    }
}

extension RunningRow: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "identifier": self.identifier
        case "link": self.link
        case "runID": self.runID
        case "attempt": self.attempt
        case "started": self.started
        case "startedRelative": self.startedRelative
        case "timeLeft": self.timeLeft
        case "holder": self.holder
        case "progress": self.progress
        default: nil
        }
    }
}

extension RunningProgress: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "percent": self.percent
        case "text": self.text
        default: nil
        }
    }
}

extension RunningPage: RowsTemplateModel {}

extension AttemptRow: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "identifier": self.identifier
        case "link": self.link
        case "runID": self.runID
        case "attempt": self.attempt
        case "started": self.started
        case "startedRelative": self.startedRelative
        case "took": self.took
        case "result": self.result
        case "stopReason": self.stopReason
        case "output": self.output
        default: nil
        }
    }
}

extension AttemptsPage: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "prefix": self.prefix
        case "results": self.results
        case "from": self.from
        case "until": self.until
        case "search": self.search
        case "total": self.total
        case "rows": self.rows
        case "filtered": self.filtered
        case "searchedTo": self.searchedTo
        case "pager": self.pager
        default: nil
        }
    }
}

extension FailedRow: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "identifier": self.identifier
        case "link": self.link
        case "canRetry": self.canRetry
        case "lastResult": self.lastResult
        case "ended": self.ended
        case "stopReason": self.stopReason
        case "stoppedBy": self.stoppedBy
        default: nil
        }
    }
}

extension FailedPage: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "orders": self.orders
        case "prefix": self.prefix
        case "tag": self.tag
        case "total": self.total
        case "rows": self.rows
        case "pager": self.pager
        case "retryAll": self.retryAll
        default: nil
        }
    }
}

extension BulkLinks: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "what": self.what
        case "query": self.query
        default: nil
        }
    }
}

extension InstanceRow: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "name": self.name
        case "link": self.link
        case "requests": self.requests
        case "claims": self.claims
        case "claimsUntil": self.claimsUntil
        case "connections": self.connections
        case "lastSeen": self.lastSeen
        case "canRetire": self.canRetire
        default: nil
        }
    }
}

extension InstancesPage: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "single": self.single
        case "rows": self.rows
        case "canAct": self.canAct
        default: nil
        }
    }
}

extension StoryFacts: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "state": self.state
        case "waitsFor": self.waitsFor
        case "next": self.next
        case "nextRelative": self.nextRelative
        case "running": self.running
        case "repeats": self.repeats
        case "requirements": self.requirements
        case "prerequisites": self.prerequisites
        case "tags": self.tags
        case "submitted": self.submitted
        case "cancelled": self.cancelled
        case "stoppedBy": self.stoppedBy
        case "retry": self.retry
        case "maximumDuration": self.maximumDuration
        case "input": self.input
        default: nil
        }
    }
}

extension StoryPage: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "request": self.request
        case "link": self.link
        case "canAct": self.canAct
        case "canRun": self.canRun
        case "canCancel": self.canCancel
        case "canRetry": self.canRetry
        case "actionsOff": self.actionsOff
        case "attempts": self.attempts
        case "taken": self.taken
        case "hasTaken": self.hasTaken
        default: nil
        }
    }
}

extension ConfirmPage: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "question": self.question
        case "action": self.action
        case "ticket": self.ticket
        case "button": self.button
        case "buttonClass": self.buttonClass
        case "back": self.back
        default: nil
        }
    }
}

extension MessagePage: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "kind": self.kind
        case "text": self.text
        case "back": self.back
        default: nil
        }
    }
}

extension ActionRow: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "at": self.at
        case "user": self.user
        case "action": self.action
        case "identifier": self.identifier
        case "href": self.href
        case "outcome": self.outcome
        default: nil
        }
    }
}

extension ActionsPage: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "rows": self.rows
        case "recorded": self.recorded
        case "recordedError": self.recordedError
        default: nil
        }
    }
}

extension RecordedActionRow: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "at": self.at
        case "by": self.by
        case "action": self.action
        case "subject": self.subject
        case "count": self.count
        case "outcome": self.outcome
        default: nil
        }
    }
}

extension LoginPage: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "failed": self.failed
        default: nil
        }
    }
}

extension Page: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "frame": self.frame
        case "body": self.body
        default: nil
        }
    }
}

extension OverviewTile: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "label": self.label
        case "count": self.count
        case "href": self.href
        case "kind": self.kind
        default: nil
        }
    }
}

extension HandlerRow: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "name": self.name
        case "href": self.href
        case "kind": self.kind
        case "waiting": self.waiting
        case "running": self.running
        case "unserved": self.unserved
        default: nil
        }
    }
}

extension LatenessLine: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "started": self.started
        case "median": self.median
        case "percentile99": self.percentile99
        default: nil
        }
    }
}

extension TagRow: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "tag": self.tag
        case "href": self.href
        case "waiting": self.waiting
        case "running": self.running
        default: nil
        }
    }
}

extension InstanceHealth: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "name": self.name
        case "health": self.health
        case "down": self.down
        case "claims": self.claims
        case "lastSeen": self.lastSeen
        default: nil
        }
    }
}

extension ActivityChart: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "bars": self.bars
        case "width": self.width
        case "height": self.height
        case "plotHeight": self.plotHeight
        case "top": self.top
        case "ended": self.ended
        case "failed": self.failed
        case "summary": self.summary
        default: nil
        }
    }
}

extension ActivityChart.Bar: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "x": self.x
        case "width": self.width
        case "endedY": self.endedY
        case "endedHeight": self.endedHeight
        case "failedY": self.failedY
        case "failedHeight": self.failedHeight
        case "title": self.title
        default: nil
        }
    }
}

extension OverviewPage: TemplateModel {
    func field(named name: String) -> Any? {
        switch name {
        case "tiles": self.tiles
        case "chart": self.chart
        case "lateness": self.lateness
        case "handlers": self.handlers
        case "tags": self.tags
        case "hasTags": self.hasTags
        case "moreTags": self.moreTags
        case "handlersRecorded": self.handlersRecorded
        case "fleet": self.fleet
        case "instances": self.instances
        default: nil
        }
    }
}
