// The dashboard's routes are added through this: each handler answers only a request whose
// Host header names this dashboard (an address, localhost, or an allowed name). Not a
// middleware: a dashboard mounted in an application must not screen the application's
// other routes.

import HTTPTypes
import Hummingbird

struct HostScreen<Methods: RouterMethods> {
    let router: Methods
    let routes: DashboardRoutes

    typealias Handler = @Sendable (Request, Methods.Context) async throws -> Response

    @discardableResult
    func get(_ path: RouterPath, use handler: @escaping Handler) -> Self {
        router.get(path) { [routes] request, context in
            try await routes.screened(request) { try await handler(request, context) }
        }
        return self
    }

    @discardableResult
    func post(_ path: RouterPath, use handler: @escaping Handler) -> Self {
        router.post(path) { [routes] request, context in
            try await routes.screened(request) { try await handler(request, context) }
        }
        return self
    }
}

extension DashboardRoutes {
    /// `answer`, unless the request names a host the dashboard does not answer to.
    func screened(_ request: Request, _ answer: () async throws -> Response) async throws -> Response {
        let authority = request.head.authority
        guard HostCheck.allows(authority, allowedHosts: dashboard.configuration.allowedHosts) else {
            dashboard.logger.notice(
                "dashboard request refused: its Host is not a name of this dashboard",
                metadata: ["host": "\(authority ?? "")"])
            return HTTPAnswers.plain(
                "this dashboard does not answer to the host name in this request; its operator can allow the name"
                    + " (--allowed-host, DashboardConfiguration.allowedHosts)",
                status: .init(code: 421, reasonPhrase: "Misdirected Request"))
        }
        return try await answer()
    }
}
