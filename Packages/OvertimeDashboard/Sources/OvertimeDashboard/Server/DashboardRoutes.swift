// The dashboard's routes: sign-in first, then pages read from the inspector, and actions
// that a form carrying the session's CSRF token confirms.

import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Overtime
import OvertimeScheduler

/// Who is asking: a signed-in browser (its session's CSRF token) or a program with a bearer token.
struct Viewer {
    let user: String
    let sessionID: String?
    let csrf: String?
}

struct DashboardRoutes: Sendable {
    let dashboard: Dashboard
    static let pageSize = 50

    var base: String { dashboard.configuration.mountPath }
    var sessionCookie: String { dashboard.sessionCookie }

    func add<Context: RequestContext>(to router: some RouterMethods<Context>) {
        // Every route answers only to the names the dashboard is known by.
        let router = HostScreen(router: router, routes: self)
        router.get("") { _, _ in HTTPAnswers.redirect(to: base + "/overview") }
        router.get("assets/dashboard.css") { _, _ in
            HTTPAnswers.asset(Assets.stylesheet, type: "text/css; charset=utf-8")
        }
        router.get("assets/live.js") { _, _ in
            HTTPAnswers.asset(Assets.liveScript, type: "text/javascript; charset=utf-8")
        }
        router.get("login") { request, _ in
            render("login", title: "Sign in", viewer: nil, LoginPage(failed: false))
        }
        router.post("login") { request, context in try await signIn(request, from: Self.client(of: context)) }
        router.post("logout") { request, _ in try await signOut(request) }
        router.get("events") { request, _ in
            guard viewer(request) != nil else { return HTTPAnswers.plain("sign in first", status: .unauthorized) }
            return dashboard.feed.response(to: request)
        }
        router.get("overview") { request, _ in
            try await page(request) { viewer, now in try await overview(viewer, now) }
        }
        router.get("requests") { request, _ in
            try await page(request) { viewer, now in try await requests(request, viewer, now) }
        }
        router.get("running") { request, _ in try await page(request) { viewer, now in try await running(viewer, now) }
        }
        router.get("history") { request, _ in
            try await page(request) { viewer, now in try await history(request, viewer, now) }
        }
        router.get("failed") { request, _ in
            try await page(request) { viewer, now in try await failed(request, viewer, now) }
        }
        router.get("instances") { request, _ in
            try await page(request) { viewer, now in try await instances(viewer, now) }
        }
        router.get("actions") { request, _ in try await page(request) { viewer, _ in await taken(viewer) } }
        router.get("request") { request, _ in
            try await page(request) { viewer, now in try await story(request, viewer, now) }
        }
        for action in ["run", "retry", "cancel"] {
            router.get(RouterPath("request/\(action)")) { request, _ in
                try await page(request) { viewer, now in try confirm(action, request, viewer, now) }
            }
            router.post(RouterPath("request/\(action)")) { request, _ in try await act(action, request) }
        }
        for action in ActionSubject.bulkActions.sorted() {
            router.get(RouterPath("bulk/\(action)")) { request, _ in
                try await page(request) { viewer, now in try confirm(action, request, viewer, now) }
            }
            router.post(RouterPath("bulk/\(action)")) { request, _ in try await act(action, request) }
        }
        router.get("instance/retire") { request, _ in
            try await page(request) { viewer, now in try confirm("retire", request, viewer, now) }
        }
        router.post("instance/retire") { request, _ in try await act("retire", request) }
        router.get("action") { request, _ in try await page(request) { viewer, _ in await outcome(request, viewer) } }
    }

    // MARK: Access

    func viewer(_ request: Request) -> Viewer? {
        if let authorization = request.headers[.authorization], authorization.hasPrefix("Bearer ") {
            let token = String(authorization.dropFirst("Bearer ".count))
            return dashboard.configuration.credentials.user(withToken: token).map {
                Viewer(user: $0, sessionID: nil, csrf: nil)
            }
        }
        guard let id = request.cookies[sessionCookie]?.value, let session = dashboard.sessions.session(id) else {
            return nil
        }
        return Viewer(user: session.user, sessionID: id, csrf: session.csrfToken)
    }

    /// A form's post is the session's own: its CSRF token, and no other site's origin. A
    /// bearer token is never sent by a browser on its own, so it needs neither.
    func isOwnPost(_ request: Request, _ viewer: Viewer, form: [String: String]) -> Bool {
        guard let expected = viewer.csrf else { return viewer.sessionID == nil }
        guard let given = form["csrf"],
            DashboardCredentials.equalInConstantTime(Array(expected.utf8), Array(given.utf8))
        else { return false }
        if let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!], site == "cross-site" { return false }
        if let origin = request.headers[HTTPField.Name("Origin")!], origin != "null" {
            let host = request.head.authority ?? ""
            guard origin == "http://\(host)" || origin == "https://\(host)" else { return false }
        }
        return true
    }

    /// The peer's address, where the server tells it (the dashboard's own application does).
    static func client(of context: some RequestContext) -> String {
        (context as? any RemoteAddressRequestContext)?.remoteAddress.map { "\($0)" } ?? "unknown"
    }

    /// Whether the browser reached the dashboard over TLS, as a proxy in front says: its
    /// cookies are then sent over TLS only. (A client claiming it falsely only keeps its own
    /// cookie from being sent back in clear.)
    static func overTLS(_ request: Request) -> Bool {
        if let proto = request.headers[HTTPField.Name("X-Forwarded-Proto")!], proto.lowercased() == "https" {
            return true
        }
        return request.headers[HTTPField.Name("Forwarded")!]?.lowercased().contains("proto=https") ?? false
    }

    func signIn(_ request: Request, from client: String) async throws -> Response {
        let form = HTTPAnswers.form(try await request.body.collect(upTo: 8192))
        guard let user = dashboard.configuration.credentials.user(withToken: form["token"] ?? "") else {
            var metadata: Logger.Metadata = ["client": "\(client)"]
            if let forwarded = request.headers[HTTPField.Name("X-Forwarded-For")!] {
                metadata["forwarded-for"] = "\(forwarded)"
            }
            // Guessing is slow, for all clients together; a flood is refused at once.
            guard await dashboard.signInThrottle.waitForTurn() else {
                dashboard.logger.warning("dashboard sign-in refused: too many wrong tokens at once", metadata: metadata)
                return HTTPAnswers.plain(
                    "too many wrong sign-ins at once: try again in a few seconds", status: .tooManyRequests)
            }
            dashboard.logger.notice("dashboard sign-in refused: the token is not known", metadata: metadata)
            return render("login", title: "Sign in", viewer: nil, LoginPage(failed: true), status: .unauthorized)
        }
        let id = dashboard.sessions.open(for: user)
        dashboard.logger.info("dashboard sign-in", metadata: ["user": "\(user)", "client": "\(client)"])
        var response = HTTPAnswers.redirect(to: base + "/overview")
        response.setCookie(
            Cookie(
                name: sessionCookie, value: id, maxAge: Int(DashboardSessions.lifetime.components.seconds),
                path: base.isEmpty ? "/" : base, secure: Self.overTLS(request), httpOnly: true, sameSite: .strict))
        return response
    }

    func signOut(_ request: Request) async throws -> Response {
        let form = HTTPAnswers.form(try await request.body.collect(upTo: 8192))
        guard let viewer = viewer(request), isOwnPost(request, viewer, form: form) else {
            return HTTPAnswers.plain("refused: not signed in, or the form is not this session's", status: .forbidden)
        }
        if let id = viewer.sessionID { dashboard.sessions.close(id) }
        var response = HTTPAnswers.redirect(to: base + "/login")
        response.setCookie(
            Cookie(
                name: sessionCookie, value: "", maxAge: 0, path: base.isEmpty ? "/" : base,
                secure: Self.overTLS(request), sameSite: .strict))
        return response
    }

    // MARK: Pages

    /// A page for a signed-in viewer (else to sign-in), its data read from the inspector,
    /// whose reads are async (no thread of the server waits on them).
    func page(
        _ request: Request, _ make: (Viewer, WallClockInstant) async throws -> Response
    ) async throws -> Response {
        guard let viewer = viewer(request) else {
            if request.headers[.authorization] != nil {
                return HTTPAnswers.plain("unknown token", status: .unauthorized)
            }
            return HTTPAnswers.redirect(to: base + "/login")
        }
        // No identifier or tag holds a NUL (the scheduler refuses control characters), nor
        // any text PostgreSQL keeps: a filter with one is an address made by hand, said so,
        // not sent to the store (PostgreSQL's refusal would read as a schedule that cannot
        // be read).
        if let name = HTTPAnswers.query(of: request).sorted(by: { $0.key < $1.key }).first(where: {
            $0.value.unicodeScalars.contains("\u{0}")
        })?.key {
            return render(
                "message", title: "Bad request", viewer: viewer,
                MessagePage(
                    kind: "error", text: "\(name) holds a NUL character, which no identifier or tag can hold.",
                    back: nil),
                status: .badRequest)
        }
        let now = dashboard.now()
        let ownerProblem = await dashboard.ownerWatch.problem()
        do {
            return try await Self.$ownerProblem.withValue(ownerProblem) { try await make(viewer, now) }
        } catch let error as ScheduleStoreError {
            return render(
                "message", title: "The schedule cannot be read", viewer: viewer,
                MessagePage(kind: "error", text: error.message, back: nil), status: .serviceUnavailable)
        }
    }

    /// Why the schedule's owner does not answer, while a page is made (``page(_:_:)`` asks):
    /// the frame of every page made then says so.
    @TaskLocal static var ownerProblem: String?

    func render<Body>(
        _ template: String, title: String, viewer: Viewer?, _ body: Body, status: HTTPResponse.Status = .ok
    ) -> Response {
        let frame = Frame(
            site: dashboard.configuration.siteName, title: title, page: template, base: base,
            nav: viewer == nil
                ? [] : Frame.sections.map { .init(path: $0.path, label: $0.label, current: $0.path == "/" + template) },
            user: viewer?.user, csrf: viewer?.csrf, signedIn: viewer?.csrf != nil, readOnly: !canAct,
            readAt: Formatting.time(dashboard.now()), ownerProblem: viewer == nil ? nil : Self.ownerProblem)
        let html = dashboard.templates.render(Page(frame: frame, body: body), withTemplate: "page-" + template) ?? ""
        return HTTPAnswers.html(Formatting.showingDirectionControls(html), status: status)
    }

    var canAct: Bool { dashboard.configuration.actions != nil && !dashboard.configuration.readOnly }

    func overview(_ viewer: Viewer, _ now: WallClockInstant) async throws -> Response {
        let inspector = dashboard.inspector
        let overview = try await dashboard.overview.overview(now: now)
        let tiles = [
            OverviewTile(label: "waiting", count: overview.waiting, href: "/requests?state=pending", kind: "blocked"),
            OverviewTile(
                label: "of them retrying", count: overview.retrying, href: "/requests?state=pending", kind: "blocked"),
            OverviewTile(label: "running", count: overview.running, href: "/running", kind: "running"),
            OverviewTile(label: "failed for good", count: overview.failed, href: "/failed", kind: "failed"),
            OverviewTile(
                label: "cancelled", count: overview.cancelled, href: "/requests?state=cancelled", kind: "cancelled"),
            OverviewTile(
                label: "succeeded, kept", count: overview.succeeded, href: "/history?result=succeeded",
                kind: "succeeded"),
        ]
        let tags = overview.tags.prefix(Self.tagsShown).map {
            TagRow(
                tag: $0.tag, href: "/requests?state=pending&tag=\(Formatting.query($0.tag))", waiting: $0.waiting,
                running: $0.running)
        }
        let handlers = overview.handlers.map { load in
            HandlerRow(
                name: load.handler ?? "no handler registered",
                href: load.handler.map {
                    load.isPrefix
                        ? "/requests?state=pending&prefix=\(Formatting.query($0))"
                        : "/request?id=\(Formatting.query($0))"
                },
                kind: load.handler == nil ? "never runs until one is" : load.isPrefix ? "prefix" : "identifier",
                waiting: load.waiting, running: load.running, unserved: load.handler == nil)
        }
        let instances =
            inspector.isShared
            ? try await inspector.instances(now: now).map {
                InstanceHealth(
                    name: $0.name, health: $0.connections > 0 ? "connected" : "not connected",
                    down: $0.connections == 0,
                    claims: $0.claims, lastSeen: $0.lastSeen.map { Formatting.relative($0, from: now) } ?? "")
            } : []
        return render(
            "overview", title: "Overview", viewer: viewer,
            OverviewPage(
                tiles: tiles, chart: ActivityChart(overview.minutes),
                lateness: overview.lateness.map {
                    LatenessLine(
                        started: Formatting.count($0.started), median: Formatting.duration($0.median),
                        percentile99: Formatting.duration($0.percentile99))
                }, handlers: handlers, tags: Array(tags),
                hasTags: !tags.isEmpty,
                moreTags: overview.tags.count > Self.tagsShown ? overview.tags.count - Self.tagsShown : nil,
                // No row while requests wait or run: no program recorded its handlers.
                handlersRecorded: !overview.handlers.isEmpty || overview.waiting + overview.running == 0,
                fleet: inspector.isShared, instances: instances))
    }

    func requests(_ request: Request, _ viewer: Viewer, _ now: WallClockInstant) async throws -> Response {
        let query = HTTPAnswers.query(of: request)
        let state = query["state"].flatMap(RequestQuery.Selection.init(named:)) ?? .pending
        let prefix = query["prefix"] ?? ""
        let tag = query["tag"] ?? ""
        let search = query["q"] ?? ""
        // By submission, newest first unless asked otherwise; or by a column, in its own direction.
        let chosen = Self.listOrders.first { $0.name == query["order"] } ?? Self.listOrders[0]
        let (orderName, order, newestFirst) = (chosen.name, chosen.order, chosen.newestFirst)
        var selection = RequestQuery(selection: state, identifierPrefix: prefix, tag: tag, limit: Self.pageSize)
        selection.search = search
        selection.newestFirst = newestFirst
        selection.order = order
        let filters =
            "\(base)/requests?state=\(state)&prefix=\(Formatting.query(prefix))&tag=\(Formatting.query(tag))"
            + "&q=\(Formatting.query(search))&order="
        // Counted beside the page's read, on another of the inspector's connections.
        async let counting = dashboard.inspector.count(selection, upTo: Self.countedAtMost + 1)
        let (found, pager) = try await listPage(selection, request, now: now) { position in
            filters + orderName + position
        }
        // A count stops past countedAtMost; the overview's of a tag does not.
        var total = try await counting.map { Self.total($0) }
        if total == nil, let load = try await tagLoad(of: selection, now: now) {
            let tagged = state == .running ? load.running : load.waiting + load.running
            total = Self.exactly(tagged)
        }
        if total == nil, state == .failed, prefix.isEmpty, tag.isEmpty, search.isEmpty {
            total = Self.exactly(try await dashboard.overview.overview(now: now).failed)
        }
        total = total ?? Self.wholeList(found, pager).map { Self.total($0) }
        let states = ["pending", "running", "failed", "cancelled", "all"].map {
            Choice(value: $0, label: $0, selected: $0 == state.description)
        }
        let orders = Self.listOrders.map { Choice(value: $0.name, label: $0.label, selected: $0.name == orderName) }
        return render(
            "requests", title: "Requests", viewer: viewer,
            RequestsPage(
                states: states, orders: orders, sortedBy: SortedColumns(orderName, filters: filters), prefix: prefix,
                tag: tag, search: search, total: total,
                rows: found.map { RequestRow($0, now: now) },
                filtered: !prefix.isEmpty || !tag.isEmpty || !search.isEmpty,
                partial: found.count < Self.pageSize && pager.next != nil, pager: pager,
                tagActions: canAct && !tag.isEmpty
                    ? BulkLinks(what: "tagged \(tag)", query: ActionSubject("run-tag", ["tag": tag]).query) : nil))
    }

    /// The unfinished requests with `selection`'s tag as the overview counted them (once for
    /// every viewer until the schedule changes): the total of a tag's pending or running list,
    /// which the inspector could count only by reading each request. `nil` for a list with
    /// another filter, or of another state; a tag the overview does not know has none.
    func tagLoad(of selection: RequestQuery, now: WallClockInstant) async throws -> TagLoad? {
        guard let tag = selection.tag, selection.identifierPrefix == nil, selection.search == nil,
            selection.selection == .pending || selection.selection == .running
        else { return nil }
        let tags = try await dashboard.overview.overview(now: now).tags
        return tags.first { $0.tag == tag } ?? TagLoad(tag: tag, waiting: 0, running: 0)
    }

    /// The Failed page's total of `count` requests.
    static func failedTotal(_ count: Int) -> String { exactly(count) + " failed for good" }

    /// The most tags the overview lists (those with the most unfinished requests).
    static let tagsShown = 20

    /// The most requests a list counts for its total; past it, the total says "more than".
    static let countedAtMost = 1_000

    /// The number of requests in a list no count answers (a tag, a search, failed for good)
    /// when this page holds all of it: no page before it, none after.
    static func wholeList(_ found: [InspectedRequest], _ pager: Pager) -> Int? {
        pager.previous == nil && pager.next == nil ? found.count : nil
    }

    /// A list's total as its page says it, counted up to one more than ``countedAtMost``.
    static func total(_ counted: Int, of item: String = "request") -> String {
        counted > countedAtMost ? "More than \(Formatting.count(countedAtMost)) \(item)s" : exactly(counted, of: item)
    }

    /// `count` of `item`, as a total says it.
    static func exactly(_ count: Int, of item: String = "request") -> String {
        "\(Formatting.count(count)) \(item)\(count == 1 ? "" : "s")"
    }

    /// The orders a list offers, by their names in its address: by submission both ways (the
    /// first, the default), then the Requests page's columns, each in its own direction.
    static let listOrders: [(name: String, label: String, order: RequestQuery.Order, newestFirst: Bool)] = [
        ("newest", "newest first", .submitted, true), ("oldest", "oldest first", .submitted, false),
        ("next-run", "next run, soonest first", .nextRun, false),
        ("attempts", "attempt, highest first", .attempts, false),
        ("last-run", "last run, latest first", .lastRun, false),
    ]

    /// The choice of submission order, newest or oldest first (the Failed page's).
    static func orders(newestFirst: Bool) -> [Choice] {
        listOrders.prefix(2).map { Choice(value: $0.name, label: $0.label, selected: $0.newestFirst == newestFirst) }
    }

    /// The page of `selection` a list's link asks for — the first, the one after a position
    /// (`after`), the one before a position (`before`: read the other way from it and turned
    /// round), or the last (`end`: read the other way from the end) — and the links to the
    /// pages around it. `address` makes a link from its position parameter (`&after=…`).
    func listPage(
        _ selection: RequestQuery, _ request: Request, now: WallClockInstant, address: (String) -> String
    ) async throws -> (found: [InspectedRequest], pager: Pager) {
        let parameters = HTTPAnswers.query(of: request)
        let after = parameters["after"].flatMap { Int64($0) }
        let before = parameters["before"].flatMap { Int64($0) }
        // In an order by a column, a position comes with the value it was sorted by.
        let sorted = selection.order != .submitted
        let key = parameters["key"].flatMap { Int64($0) }
        let atEnd = parameters["end"] != nil
        let first = address("")
        let last = address("&end=1")
        func cursor(_ position: Int64, _ key: Int64?) -> String {
            sorted ? "\(position)&key=\(key ?? 0)" : "\(position)"
        }
        // One position further along: a read from it takes in the position itself. The
        // positions come from the address: one at the end of the range stays where it is.
        let step: Int64 = selection.newestFirst ? -1 : 1
        func along(_ position: Int64, _ step: Int64) -> Int64 {
            let (moved, overflow) = position.addingReportingOverflow(step)
            return overflow ? position : moved
        }
        if before != nil || atEnd {
            var query = selection
            query.newestFirst.toggle()
            query.after = before
            query.afterKey = key
            let page = try await dashboard.inspector.requests(query, now: now)
            let found = Array(page.requests.reversed())
            // Read the other way, its `next` says whether anything comes before this page.
            let earlier = page.next.map { next in
                address("&before=\(sorted ? cursor(next, page.nextKey) : "\(found.first?.position ?? next)")")
            }
            let later = before.map { before in
                address(
                    "&after=\(sorted ? cursor(along(before, -step), key) : "\(found.last?.position ?? before)")")
            }
            return (
                found,
                Pager(
                    first: earlier == nil ? nil : first, previous: earlier, next: later,
                    last: atEnd ? nil : last)
            )
        }
        var query = selection
        query.after = after
        query.afterKey = key
        let page = try await dashboard.inspector.requests(query, now: now)
        let earlier = after.map { after in
            address(
                "&before=\(sorted ? cursor(along(after, step), key) : "\(page.requests.first?.position ?? along(after, step))")"
            )
        }
        return (
            page.requests,
            Pager(
                first: after == nil ? nil : first, previous: earlier,
                next: page.next.map { address("&after=\(cursor($0, page.nextKey))") },
                last: page.next == nil ? nil : last)
        )
    }

    func running(_ viewer: Viewer, _ now: WallClockInstant) async throws -> Response {
        let found = try await dashboard.inspector.requests(RequestQuery(selection: .running, limit: 1000), now: now)
            .requests
        let rows = found.compactMap { inspected in inspected.running.map { runningRow(inspected, $0, now) } }
        return render("running", title: "Running", viewer: viewer, RunningPage(rows: rows))
    }

    func runningRow(_ inspected: InspectedRequest, _ run: RunningAttempt, _ now: WallClockInstant) -> RunningRow {
        let left = run.deadline - now
        return RunningRow(
            identifier: inspected.request.identifier, link: Formatting.query(inspected.request.identifier),
            runID: run.runID, attempt: run.attempt, started: Formatting.time(run.startedAt),
            startedRelative: Formatting.relative(run.startedAt, from: now),
            timeLeft: left > .zero ? Formatting.duration(left) : "none: past its deadline",
            holder: run.holder ?? "",
            progress: run.progress.map {
                RunningProgress(percent: Int(($0.fraction * 100).rounded(.down)), text: $0.description)
            })
    }

    func history(_ request: Request, _ viewer: Viewer, _ now: WallClockInstant) async throws -> Response {
        let query = HTTPAnswers.query(of: request)
        let prefix = query["prefix"] ?? ""
        let resultName = query["result"] ?? ""
        let result = Self.results.first { $0.description == resultName }
        let from = query["from"] ?? ""
        let until = query["until"] ?? ""
        func position(_ name: String) -> HistoryPosition? {
            let parts = (query[name] ?? "").split(separator: ":")
            guard parts.count == 2, let run = Int64(parts[0]), let attempt = Int(parts[1]) else { return nil }
            return HistoryPosition(runID: run, attempt: attempt)
        }
        // A page down from a position (`before`: the next, older), up from one (`after`: the
        // previous, newer), the last (`end`: up from the oldest), or the first.
        let search = query["q"] ?? ""
        var selection = HistoryQuery(
            identifierPrefix: prefix, result: result, startedFrom: Self.instant(from),
            startedBefore: Self.instant(until), before: position("before"), limit: Self.pageSize)
        selection.after = position("after")
        selection.fromOldest = query["end"] != nil
        selection.search = search
        // Counted beside the page's read, on another of the inspector's connections.
        async let counting = dashboard.inspector.count(selection, upTo: Self.countedAtMost + 1)
        let page = try await dashboard.inspector.historyPage(selection)
        let found = page.records
        let counted = try await counting
        func address(_ position: String) -> String {
            "\(base)/history?prefix=\(Formatting.query(prefix))&result=\(Formatting.query(resultName))"
                + "&from=\(Formatting.query(from))&until=\(Formatting.query(until))&q=\(Formatting.query(search))"
                + position
        }
        let pager = Pager(
            first: page.previous == nil ? nil : address(""),
            previous: page.previous.map { address("&after=\($0.runID):\($0.attempt)") },
            next: page.next.map { address("&before=\($0.runID):\($0.attempt)") },
            last: page.next == nil ? nil : address("&end=1"))
        // A search reads a bounded stretch: say where it stopped when the page is not full.
        let searchedTo: String? =
            if found.count == Self.pageSize {
                nil
            } else if selection.readsUp {
                page.previous.map {
                    "Searched the attempts up to run \($0.runID), attempt \($0.attempt): newer ones on the previous page."
                }
            } else {
                page.next.map {
                    "Searched the attempts back to run \($0.runID), attempt \($0.attempt): older ones on the next page."
                }
            }
        let choices =
            [Choice(value: "", label: "any", selected: result == nil)]
            + Self.results.map { Choice(value: $0.description, label: $0.description, selected: $0 == result) }
        return render(
            "history", title: "History", viewer: viewer,
            AttemptsPage(
                prefix: prefix, results: choices, from: from, until: until, search: search,
                total: counted.map { Self.total($0, of: "attempt") }, rows: found.map { AttemptRow($0, now: now) },
                filtered: !prefix.isEmpty || result != nil || !from.isEmpty || !until.isEmpty || !search.isEmpty,
                searchedTo: searchedTo, pager: pager))
    }

    static let results: [RunResult] = [
        .succeeded, .failed, .expired, .stopped, .terminated, .interrupted, .superseded,
    ]

    /// A `datetime-local` value read as UTC (`2026-11-27T09:30`, seconds optional).
    static func instant(_ text: String) -> WallClockInstant? {
        guard !text.isEmpty else { return nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        for format in ["yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) {
                return Formatting.instant(date)
            }
        }
        return nil
    }

    func failed(_ request: Request, _ viewer: Viewer, _ now: WallClockInstant) async throws -> Response {
        let query = HTTPAnswers.query(of: request)
        let newestFirst = query["order"] != "oldest"
        let prefix = query["prefix"] ?? ""
        let tag = query["tag"] ?? ""
        var selection = RequestQuery(selection: .failed, identifierPrefix: prefix, tag: tag, limit: Self.pageSize)
        selection.newestFirst = newestFirst
        // Counted beside the page's read, on another of the inspector's connections.
        async let counting = dashboard.inspector.count(selection, upTo: Self.countedAtMost + 1)
        let (found, pager) = try await listPage(selection, request, now: now) { position in
            "\(base)/failed?prefix=\(Formatting.query(prefix))&tag=\(Formatting.query(tag))"
                + "&order=\(newestFirst ? "newest" : "oldest")\(position)"
        }
        let bulk = ActionSubject("retry-failed", ["tag": tag, "prefix": prefix])
        // Unfiltered, the total is the overview's count (kept by the store as it writes, and
        // counted once for every viewer until the schedule changes); a prefix's or a tag's the
        // inspector counts by reading each candidate row, up to one more than countedAtMost.
        let total: String? =
            if prefix.isEmpty && tag.isEmpty {
                Self.failedTotal(try await dashboard.overview.overview(now: now).failed)
            } else {
                (try await counting ?? Self.wholeList(found, pager)).map { Self.total($0) + " failed for good" }
            }
        let newest = try await dashboard.inspector.newestAttempts(of: found.map(\.request.identifier))
        var rows: [FailedRow] = []
        for inspected in found {
            let last = newest[inspected.request.identifier]
            rows.append(
                FailedRow(
                    identifier: inspected.request.identifier, link: Formatting.query(inspected.request.identifier),
                    canRetry: canAct && inspected.stoppedBy == nil,
                    lastResult: last.map { "\($0.result) (run \($0.runID), attempt \($0.attempt))" } ?? "none ran",
                    ended: last?.endedAt.map { Formatting.relative($0, from: now) } ?? "",
                    stopReason: last?.stopReason ?? "", stoppedBy: inspected.stoppedBy ?? ""))
        }
        return render(
            "failed", title: "Failed", viewer: viewer,
            FailedPage(
                orders: Self.orders(newestFirst: newestFirst), prefix: prefix, tag: tag,
                total: total,
                rows: rows, pager: pager,
                retryAll: canAct && !rows.isEmpty
                    ? BulkLinks(what: bulk.tag == nil && bulk.prefix == nil ? "" : " \(bulk.name)", query: bulk.query)
                    : nil))
    }

    func instances(_ viewer: Viewer, _ now: WallClockInstant) async throws -> Response {
        let found = try await dashboard.inspector.instances(now: now)
        let single = !dashboard.inspector.isShared
        let rows = found.map {
            InstanceRow(
                name: $0.name, link: Formatting.query($0.name), requests: $0.requests, claims: $0.claims,
                claimsUntil: $0.claimsUntil.map { Formatting.relative($0, from: now) } ?? "",
                connections: $0.connections, lastSeen: $0.lastSeen.map { Formatting.relative($0, from: now) } ?? "",
                // Only an instance no process runs as, and that holds nothing, can be retired.
                canRetire: canAct && $0.connections == 0 && $0.claims == 0 && $0.requests > 0)
        }
        return render(
            "instances", title: "Instances", viewer: viewer,
            InstancesPage(single: single, rows: rows, canAct: canAct && !single))
    }

    func taken(_ viewer: Viewer) async -> Response {
        let rows = dashboard.actionLog.newestFirst.map(actionRow)
        var recorded: [RecordedActionRow] = []
        var recordedError: String?
        do {
            recorded = try await dashboard.inspector.operatorActions(limit: ActionLog.kept).map {
                RecordedActionRow(
                    at: Formatting.time($0.at), by: $0.by, action: $0.action, subject: $0.subject, count: $0.count,
                    outcome: $0.outcome)
            }
        } catch {
            recordedError = "The scheduler's record could not be read: \(error.message)"
        }
        return render(
            "actions", title: "Actions", viewer: viewer,
            ActionsPage(rows: rows, recorded: recorded, recordedError: recordedError))
    }

    func actionRow(_ record: ActionRecord) -> ActionRow {
        ActionRow(
            at: Formatting.time(Formatting.instant(record.at)),
            user: record.user, action: record.action, identifier: record.identifier,
            href: Self.subjectPath(record.action, record.identifier, base: base),
            outcome: (record.succeeded ? "" : "refused: ") + record.answer)
    }

    func story(_ request: Request, _ viewer: Viewer, _ now: WallClockInstant) async throws -> Response {
        let identifier = HTTPAnswers.query(of: request)["id"] ?? ""
        guard let inspected = try await dashboard.inspector.request(identifier, now: now) else {
            return render(
                "message", title: "No such request", viewer: viewer,
                MessagePage(
                    kind: "error", text: "No request has the identifier \(identifier).", back: base + "/requests"),
                status: .notFound)
        }
        var itsOwn = HistoryQuery(limit: 200)
        itsOwn.identifier = identifier
        let attempts = try await dashboard.inspector.history(itsOwn)
        let submitted = inspected.request
        let nextRun = inspected.waitingFor.flatMap(RequestRow.time(of:))
        let facts = StoryFacts(
            state: inspected.state.description, waitsFor: inspected.waitingFor.map { RequestRow.explain($0, now: now) },
            next: nextRun.map(Formatting.time), nextRelative: nextRun.map { RequestRow.relative($0, now: now) },
            running: inspected.running.map { runningRow(inspected, $0, now) },
            repeats: submitted.repetition?.description ?? "once",
            requirements: submitted.requirements.isEmpty
                ? nil : submitted.requirements.map(\.description).sorted().joined(separator: ", "),
            prerequisites: submitted.prerequisites.isEmpty
                ? nil : submitted.prerequisites.sorted().joined(separator: ", "),
            tags: submitted.tags.isEmpty ? nil : submitted.tags.sorted().joined(separator: ", "),
            submitted: Formatting.time(inspected.submittedAt), cancelled: inspected.cancelledAt.map(Formatting.time),
            stoppedBy: inspected.stoppedBy,
            retry: "\(submitted.retry.maximumAttempts) attempt\(submitted.retry.maximumAttempts == 1 ? "" : "s"), "
                + "\(submitted.retry.backoff) backoff from "
                + Formatting.duration(submitted.retry.initialDelay),
            maximumDuration: Formatting.duration(submitted.maximumDuration), input: Formatting.bytes(submitted.input))
        let pending = !inspected.state.isFinished
        let retriable = inspected.state == .failed && inspected.stoppedBy == nil
        let taken = dashboard.actionLog.newestFirst.filter {
            $0.identifier == identifier && $0.action != "retire" && !ActionSubject.bulkActions.contains($0.action)
        }
        .map(actionRow)
        return render(
            "story", title: identifier, viewer: viewer,
            StoryPage(
                request: facts, link: Formatting.query(identifier), canAct: canAct && (pending || retriable),
                canRun: pending && inspected.state != .running, canCancel: pending, canRetry: retriable,
                actionsOff: canAct || !(pending || retriable) ? nil : actionsOffReason,
                attempts: attempts.map { AttemptRow($0, now: now) }, taken: taken, hasTaken: !taken.isEmpty))
    }

    var actionsOffReason: String {
        dashboard.configuration.readOnly
            ? "This dashboard is read-only."
            : "Actions are off: the dashboard was started without the daemon's control socket."
    }

    // MARK: Actions

    func confirm(_ action: String, _ request: Request, _ viewer: Viewer, _ now: WallClockInstant) throws -> Response {
        let subject = ActionSubject(action, HTTPAnswers.query(of: request))
        guard canAct else {
            return render(
                "message", title: "Not allowed", viewer: viewer,
                MessagePage(kind: "error", text: actionsOffReason, back: nil), status: .forbidden)
        }
        let back = Self.subjectPath(action, subject.identifier, base: base)
        let (title, question, button) = Self.wording(action, subject.name)
        if let missing = subject.missing(for: action) {
            return render(
                "message", title: title, viewer: viewer, MessagePage(kind: "error", text: missing, back: back),
                status: .badRequest)
        }
        let ticket = viewer.sessionID.map {
            dashboard.tickets.issue(for: .init(sessionID: $0, action: action, subject: subject.query))
        }
        return render(
            "confirm", title: title, viewer: viewer,
            ConfirmPage(
                question: question, action: Self.actionPath(action, subject, base: base), ticket: ticket,
                button: button, buttonClass: ["cancel", "retire", "cancel-tag"].contains(action) ? "danger" : "",
                back: back))
    }

    /// Where an action's confirmation is read (GET) and its form posted (POST).
    static func actionPath(_ action: String, _ subject: ActionSubject, base: String) -> String {
        let path =
            action == "retire" ? "instance/retire" : subject.isBulk ? "bulk/\(action)" : "request/\(action)"
        return "\(base)/\(path)?\(subject.query)"
    }

    /// The page of what an action was done to: the instances for a retired instance, the
    /// list a bulk action was asked from, else the request's story.
    static func subjectPath(_ action: String, _ identifier: String, base: String) -> String {
        switch action {
        case "retire": "\(base)/instances"
        case "retry-failed": "\(base)/failed"
        case "run-tag", "cancel-tag": "\(base)/requests?state=all"
        default: "\(base)/request?id=\(Formatting.query(identifier))"
        }
    }

    /// An action's page title, the question its confirmation asks, and its button, for the
    /// subject named `identifier` (``ActionSubject/name``).
    static func wording(_ action: String, _ identifier: String) -> (String, String, String) {
        switch action {
        case "run-tag":
            (
                "Run a tag now",
                "Start a run now of every pending request \(identifier), whatever their plans and requirements say?"
                    + " Those running or waiting on a prerequisite are passed over.", "Run them now"
            )
        case "cancel-tag":
            (
                "Cancel a tag",
                "Cancel every pending request \(identifier)? No run of them starts any more, and runs in progress are"
                    + " told to stop.", "Cancel them"
            )
        case "retry-failed":
            (
                "Retry what failed",
                "Submit again every request that failed for good"
                    + (identifier == "every request" ? "" : " \(identifier)")
                    + "? Each becomes due now, with every attempt its retry policy allows.", "Retry them"
            )
        case "run":
            ("Run now", "Start a run of \(identifier) now, whatever its plan and requirements say?", "Run it now")
        case "retire":
            (
                "Retire an instance",
                "Retire instance \(identifier) for good? Its own requests are removed from the fleet's schedule (its"
                    + " history stays); refused while a process runs under its name.", "Retire it"
            )
        case "retry":
            (
                "Retry",
                "Submit \(identifier) again? It failed for good; it becomes due now, with every attempt its "
                    + "retry policy allows.", "Retry it"
            )
        default:
            (
                "Cancel", "Cancel \(identifier)? No run of it starts any more, and a run in progress is told to stop.",
                "Cancel it"
            )
        }
    }

    /// Acts on a confirmed form. A browser's form carries its confirmation's ticket: its
    /// first post acts, and every post of it is sent to the outcome's own page (post, then
    /// redirect, then get), which a reload or the live script reads again without acting. A
    /// program with a bearer token has no confirmation page: its post acts and is answered.
    func act(_ action: String, _ request: Request) async throws -> Response {
        let form = HTTPAnswers.form(try await request.body.collect(upTo: 8192))
        guard let viewer = viewer(request) else {
            return HTTPAnswers.plain("refused: sign in first", status: .unauthorized)
        }
        guard isOwnPost(request, viewer, form: form) else {
            dashboard.logger.warning(
                "dashboard action refused: no valid CSRF token",
                metadata: ["user": "\(viewer.user)", "action": "\(action)"])
            return HTTPAnswers.plain("refused: the form is not this session's (CSRF check)", status: .forbidden)
        }
        guard canAct, let actions = dashboard.configuration.actions else {
            return HTTPAnswers.plain("refused: \(actionsOffReason)", status: .forbidden)
        }
        let subject = ActionSubject(action, HTTPAnswers.query(of: request))
        if let missing = subject.missing(for: action) {
            return HTTPAnswers.plain("refused: \(missing)", status: .badRequest)
        }
        let perform: @Sendable () async -> ActionOutcome = { [dashboard] in
            await Self.perform(action, on: subject, by: viewer.user, through: actions, dashboard: dashboard)
        }
        guard let sessionID = viewer.sessionID else { return outcomePage(await perform(), viewer) }
        let ticket = form["ticket"] ?? ""
        let purpose = ActionTickets.Purpose(sessionID: sessionID, action: action, subject: subject.query)
        guard await dashboard.tickets.use(ticket, for: purpose, perform: perform) != nil else {
            return render(
                "message", title: Self.wording(action, subject.name).0, viewer: viewer,
                MessagePage(
                    kind: "error",
                    text: "Not done: this form's confirmation is not known (it is from before the dashboard "
                        + "restarted, from another session, or too old). Confirm again.",
                    back: Self.actionPath(action, subject, base: base)),
                status: .conflict)
        }
        return HTTPAnswers.redirect(to: "\(base)/action?ticket=\(Formatting.query(ticket))")
    }

    /// The page of what a ticket's action did: the same whenever it is read.
    func outcome(_ request: Request, _ viewer: Viewer) async -> Response {
        let ticket = HTTPAnswers.query(of: request)["ticket"] ?? ""
        guard let sessionID = viewer.sessionID,
            let (_, outcome) = await dashboard.tickets.outcome(of: ticket, sessionID: sessionID)
        else {
            return render(
                "message", title: "No such action", viewer: viewer,
                MessagePage(
                    kind: "error", text: "No action of this session has that address; the actions page lists them all.",
                    back: base + "/actions"),
                status: .notFound)
        }
        return outcomePage(outcome, viewer)
    }

    func outcomePage(_ outcome: ActionOutcome, _ viewer: Viewer) -> Response {
        let record = outcome.record
        let text =
            (record.succeeded ? "Done: " : "Refused: ") + record.answer + (outcome.logFailure.map { " (\($0))" } ?? "")
        return render(
            "message", title: Self.wording(record.action, record.identifier).0, viewer: viewer,
            MessagePage(
                kind: record.succeeded ? "done" : "error", text: text,
                back: Self.subjectPath(record.action, record.identifier, base: base)),
            status: record.succeeded ? .ok : .conflict)
    }

    /// Does `action` through the schedule's owner and records who did it, done or refused.
    static func perform(
        _ action: String, on subject: ActionSubject, by user: String, through actions: any ScheduleActions,
        dashboard: Dashboard
    ) async -> ActionOutcome {
        let outcome: Result<String, ScheduleActionError>
        let identifier = subject.name
        do throws(ScheduleActionError) {
            switch action {
            case "run": outcome = .success(try await actions.runNow(identifier, by: user))
            case "retry": outcome = .success(try await actions.retry(identifier, by: user))
            case "retire": outcome = .success(try await actions.retireInstance(identifier, by: user))
            case "run-tag": outcome = .success(try await actions.runNow(tag: subject.tag ?? "", by: user))
            case "cancel-tag": outcome = .success(try await actions.cancel(tag: subject.tag ?? "", by: user))
            case "retry-failed":
                outcome = .success(try await actions.retryFailed(tag: subject.tag, prefix: subject.prefix, by: user))
            default: outcome = .success(try await actions.cancel(identifier, by: user))
            }
        } catch {
            outcome = .failure(error)
        }
        let (succeeded, answer) =
            switch outcome {
            case .success(let text): (true, text)
            case .failure(let error): (false, error.message)
            }
        let record = ActionRecord(
            at: Date(), user: user, action: action, identifier: identifier, succeeded: succeeded, answer: answer)
        let logFailure = dashboard.actionLog.record(record)
        dashboard.logger.notice(
            "dashboard action",
            metadata: [
                "user": "\(user)", "action": "\(action)", "identifier": "\(identifier)", "succeeded": "\(succeeded)",
                "answer": "\(answer)",
            ])
        return ActionOutcome(record: record, logFailure: logFailure)
    }
}
